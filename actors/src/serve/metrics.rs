//! `GET /metrics`: Prometheus text — runs by status, per-node executions, work and mailbox wait
//! and mailbox depth, checkpoint writes.

use super::AppState;
use axum::extract::State;
use axum::http::header;
use axum::response::IntoResponse;
use std::fmt::Write;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

/// Runs by how they ended.
#[derive(Debug, Default)]
pub struct RunCounters {
    /// Finished.
    pub finished: AtomicU64,
    /// Paused on an interrupt.
    pub interrupted: AtomicU64,
    /// Failed (or rejected by the engine).
    pub failed: AtomicU64,
}

impl RunCounters {
    /// Counts one run.
    pub fn count(&self, status: &str) {
        let c = match status {
            "interrupted" => &self.interrupted,
            "failed" | "error" | "aborted" => &self.failed,
            _ => &self.finished,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }
}

/// The metrics page.
pub async fn render(State(state): State<Arc<AppState>>) -> impl IntoResponse {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "# HELP planwright_runs_total Runs by final status.\n# TYPE planwright_runs_total counter"
    );
    for (status, c) in [
        ("finished", &state.runs.finished),
        ("interrupted", &state.runs.interrupted),
        ("failed", &state.runs.failed),
    ] {
        let _ = writeln!(
            t,
            "planwright_runs_total{{status=\"{status}\"}} {}",
            c.load(Ordering::Relaxed)
        );
    }
    if let Some(r) = &state.replica {
        let _ = writeln!(
            t,
            "# HELP planwright_replica_runs_held Runs this replica holds a lease on and executes.\n# TYPE planwright_replica_runs_held gauge\nplanwright_replica_runs_held{{owner=\"{}\"}} {}",
            r.owner,
            super::live_runs::local_runs(&state).len()
        );
        let _ = writeln!(
            t,
            "# HELP planwright_replica_runs_taken_over_total Runs taken over from replicas that were gone.\n# TYPE planwright_replica_runs_taken_over_total counter\nplanwright_replica_runs_taken_over_total{{owner=\"{}\"}} {}",
            r.owner,
            r.taken_over.load(Ordering::Relaxed)
        );
        let _ = writeln!(
            t,
            "# HELP planwright_replica_runs_claimed_total Run leases claimed (runs started, continued or taken over here).\n# TYPE planwright_replica_runs_claimed_total counter\nplanwright_replica_runs_claimed_total{{owner=\"{}\"}} {}",
            r.owner,
            r.claimed.load(Ordering::Relaxed)
        );
    }
    let _ = writeln!(t, "# TYPE planwright_node_executions_total counter");
    let _ = writeln!(t, "# TYPE planwright_node_work_seconds_total counter");
    let _ = writeln!(t, "# TYPE planwright_node_queue_seconds_total counter");
    let _ = writeln!(t, "# TYPE planwright_node_mailbox_depth gauge");
    let graphs: Vec<(&str, _)> = state
        .assistants
        .all()
        .iter()
        .map(|a| (a.id(), a.node_stats()))
        .collect();
    for (graph, n) in graphs
        .iter()
        .flat_map(|(g, list)| list.iter().map(move |n| (g, n)))
    {
        let l = format!("graph=\"{graph}\",node=\"{}\"", n.node);
        let _ = writeln!(
            t,
            "planwright_node_executions_total{{{l}}} {}",
            n.executions
        );
        let _ = writeln!(
            t,
            "planwright_node_work_seconds_total{{{l}}} {:.6}",
            n.work_us as f64 / 1e6
        );
        let _ = writeln!(
            t,
            "planwright_node_queue_seconds_total{{{l}}} {:.6}",
            n.queue_us as f64 / 1e6
        );
        let _ = writeln!(
            t,
            "planwright_node_mailbox_depth{{{l}}} {}",
            n.mailbox_depth
        );
    }
    let (records, bytes, writes) = state.assistants.all().iter().fold((0, 0, 0), |s, a| {
        let c = a.checkpoint_counters();
        (s.0 + c.0, s.1 + c.1, s.2 + c.2)
    });
    let _ = writeln!(t, "# TYPE planwright_checkpoint_records_total counter\nplanwright_checkpoint_records_total {records}");
    let _ = writeln!(t, "# TYPE planwright_checkpoint_bytes_total counter\nplanwright_checkpoint_bytes_total {bytes}");
    let _ = writeln!(t, "# TYPE planwright_checkpoint_task_writes_total counter\nplanwright_checkpoint_task_writes_total {writes}");
    // The process, under the names Prometheus' client libraries use, so a load test (or any
    // scraper) sees memory and CPU beside the runs.
    if let Some((rss, cpu)) = process_usage() {
        let _ = writeln!(
            t,
            "# TYPE process_resident_memory_bytes gauge\nprocess_resident_memory_bytes {rss}"
        );
        let _ = writeln!(
            t,
            "# TYPE process_cpu_seconds_total counter\nprocess_cpu_seconds_total {cpu:.2}"
        );
    }
    ([(header::CONTENT_TYPE, "text/plain; version=0.0.4")], t)
}

/// Resident memory (bytes) and CPU time (seconds) of this process, from `/proc` (Linux).
fn process_usage() -> Option<(u64, f64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let rss_kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))?
        .split_whitespace()
        .next()?
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which may hold spaces): utime and stime are 14 and 15.
    let rest = stat.rsplit_once(')')?.1;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f.get(11)?.parse::<f64>().ok()? + f.get(12)?.parse::<f64>().ok()?;
    // The kernel's USER_HZ is 100 on every Linux this runs on.
    Some((rss_kb * 1024, ticks / 100.0))
}
