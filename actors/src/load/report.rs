//! The load report: figures, a readable summary, JSON, and a self-contained HTML page with inline
//! SVG charts (per-node latency distribution, throughput over time) — no scripts, no CDN.

use crate::bench::measure::percentile;
use crate::model::ModelStatsSnapshot;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Percentiles of a set of samples (milliseconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    /// Samples.
    pub count: usize,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
}

/// Percentiles of `samples`.
pub fn distribution(samples: &mut [f64]) -> Distribution {
    Distribution {
        count: samples.len(),
        p50: percentile(samples, 50.0),
        p90: percentile(samples, 90.0),
        p99: percentile(samples, 99.0),
        max: percentile(samples, 100.0),
    }
}

/// One node's figures.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct NodeFigures {
    /// Executions.
    pub executions: u64,
    /// Median work time, ms.
    pub p50_ms: f64,
    /// 99th percentile work time, ms.
    pub p99_ms: f64,
    /// 99th percentile time waiting in the node's mailbox (and for a concurrency permit), ms.
    pub queue_p99_ms: f64,
    /// Work time distribution, ms.
    pub work: Distribution,
    /// Mailbox wait distribution, ms.
    pub queue: Distribution,
    /// Total work, ms.
    pub work_total_ms: f64,
    /// Total mailbox wait, ms.
    pub queue_total_ms: f64,
}

/// Everything a load run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LoadReport {
    /// The graph.
    pub graph: String,
    /// Conversations started.
    pub conversations: usize,
    /// At most this many at once.
    pub concurrency: usize,
    /// Conversations that finished.
    pub completed: usize,
    /// Conversations that failed (errors by kind in `errors`).
    pub failed: usize,
    /// Conversations left paused (an interrupt nobody answered).
    pub interrupted_left: usize,
    /// Interrupts answered under load.
    pub resumes: usize,
    /// Wall time, ms.
    pub wall_ms: f64,
    /// Conversations ended per second.
    pub conversations_per_sec: f64,
    /// Node executions.
    pub node_executions: u64,
    /// Node executions per second.
    pub node_execs_per_sec: f64,
    /// The runtime's own cost per node execution, µs: the process's CPU time during the run
    /// divided by node executions. Model latency costs no CPU, so this is the time per node
    /// execution not spent in the model (tools and the simulator's offline answers included).
    pub overhead_us_per_node: f64,
    /// Median over conversations of (wall time − time in model-calling nodes) / node executions,
    /// µs: under load this includes waiting for the CPU behind other conversations.
    pub non_model_wall_us_per_node: f64,
    /// Per-conversation latency (start to end, resumes included), ms.
    pub conversation_latency_ms: Distribution,
    /// Per node.
    pub nodes: BTreeMap<String, NodeFigures>,
    /// Failures by kind.
    pub errors: BTreeMap<String, usize>,
    /// Model calls, errors by kind and tokens, per call kind.
    pub model: Vec<ModelStatsSnapshot>,
    /// Checkpoint records written.
    pub checkpoint_records: u64,
    /// Checkpoint bytes written.
    pub checkpoint_bytes: u64,
    /// Peak resident memory, KiB.
    pub peak_rss_kb: u64,
    /// Resident memory before the run, KiB.
    pub baseline_rss_kb: u64,
    /// Node executions finished in each second of the run.
    pub throughput: Vec<(u64, u64)>,
}

impl LoadReport {
    /// A readable summary.
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{}: {} conversations (≤ {} at once) in {:.1} s — {} completed, {} failed, {} left paused, {} interrupts answered",
            self.graph, self.conversations, self.concurrency, self.wall_ms / 1000.0, self.completed, self.failed, self.interrupted_left, self.resumes
        );
        let _ = writeln!(
            t,
            "  {:.1} conversations/s, {:.0} node executions/s, runtime overhead {:.1} µs CPU per node execution (median non-model wall per node {:.0} µs)",
            self.conversations_per_sec, self.node_execs_per_sec, self.overhead_us_per_node, self.non_model_wall_us_per_node
        );
        let c = &self.conversation_latency_ms;
        let _ = writeln!(
            t,
            "  conversation latency ms: p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
            c.p50, c.p90, c.p99, c.max
        );
        let _ = writeln!(
            t,
            "  {:<22} {:>8} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11}",
            "node", "execs", "p50 ms", "p90 ms", "p99 ms", "max ms", "queue p99", "wait/work"
        );
        for (name, n) in &self.nodes {
            let ratio = if n.work_total_ms > 0.0 {
                n.queue_total_ms / n.work_total_ms
            } else {
                0.0
            };
            let _ = writeln!(
                t,
                "  {:<22} {:>8} {:>9.2} {:>9.2} {:>9.2} {:>9.2} {:>11.2} {:>11.2}",
                name,
                n.executions,
                n.work.p50,
                n.work.p90,
                n.work.p99,
                n.work.max,
                n.queue_p99_ms,
                ratio
            );
        }
        for m in &self.model {
            let _ = writeln!(
                t,
                "  model {}: {} calls, errors {:?}, tokens {} in / {} out",
                m.call, m.calls, m.errors, m.prompt_tokens, m.completion_tokens
            );
        }
        let _ = writeln!(
            t,
            "  checkpoints: {} records, {} bytes; peak RSS {} KiB (baseline {} KiB)",
            self.checkpoint_records, self.checkpoint_bytes, self.peak_rss_kb, self.baseline_rss_kb
        );
        if !self.errors.is_empty() {
            let _ = writeln!(t, "  errors: {:?}", self.errors);
        }
        t
    }

    /// A self-contained HTML page with the figures and two charts.
    pub fn to_html(&self) -> String {
        let json = serde_json::to_string_pretty(self).unwrap_or_default();
        format!(
            "<!doctype html><html><head><meta charset=\"utf-8\"><title>Planwright load report: {graph}</title>\
             <style>body{{font-family:sans-serif;margin:2em;max-width:70em}}table{{border-collapse:collapse}}\
             td,th{{border:1px solid #ccc;padding:.2em .6em;text-align:right}}th:first-child,td:first-child{{text-align:left}}</style>\
             </head><body><h1>Load report: {graph}</h1><pre>{summary}</pre>\
             <h2>Latency per node (ms; bar = p50, whisker = p99)</h2>{latency}\
             <h2>Throughput over time (node executions per second)</h2>{throughput}\
             <h2>Raw figures</h2><details><summary>JSON</summary><pre>{json}</pre></details></body></html>",
            graph = escape(&self.graph),
            summary = escape(&self.to_text()),
            latency = self.latency_svg(),
            throughput = self.throughput_svg(),
            json = escape(&json),
        )
    }

    fn latency_svg(&self) -> String {
        let rows: Vec<(&String, &NodeFigures)> = self.nodes.iter().collect();
        let max = rows
            .iter()
            .map(|(_, n)| n.work.p99)
            .fold(0.0f64, f64::max)
            .max(1e-6);
        let (w, row_h) = (700.0, 22.0);
        let mut svg = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">",
            w + 200.0,
            row_h * rows.len() as f64 + 10.0
        );
        for (i, (name, n)) in rows.iter().enumerate() {
            let y = i as f64 * row_h + 5.0;
            let p50 = n.work.p50 / max * w;
            let p99 = n.work.p99 / max * w;
            let _ = write!(
                svg,
                "<text x=\"0\" y=\"{ty}\" font-size=\"12\">{name}</text>\
                 <rect x=\"180\" y=\"{y}\" width=\"{p50:.1}\" height=\"14\" fill=\"#4a7\"/>\
                 <line x1=\"{a:.1}\" x2=\"{b:.1}\" y1=\"{m}\" y2=\"{m}\" stroke=\"#333\"/>\
                 <text x=\"{t:.1}\" y=\"{ty}\" font-size=\"11\">{p50v:.2} / {p99v:.2}</text>",
                ty = y + 12.0,
                name = escape(name),
                a = 180.0 + p50,
                b = 180.0 + p99,
                m = y + 7.0,
                t = 185.0 + p99,
                p50v = n.work.p50,
                p99v = n.work.p99,
            );
        }
        svg.push_str("</svg>");
        svg
    }

    fn throughput_svg(&self) -> String {
        let (w, h) = (800.0, 200.0);
        let max_y = self
            .throughput
            .iter()
            .map(|(_, n)| *n)
            .max()
            .unwrap_or(1)
            .max(1) as f64;
        let max_x = self.throughput.last().map(|(s, _)| *s).unwrap_or(1).max(1) as f64;
        let points: Vec<String> = self
            .throughput
            .iter()
            .map(|(s, n)| {
                format!(
                    "{:.1},{:.1}",
                    20.0 + *s as f64 / max_x * w,
                    h - *n as f64 / max_y * (h - 20.0)
                )
            })
            .collect();
        format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">\
             <polyline fill=\"none\" stroke=\"#36c\" stroke-width=\"2\" points=\"{}\"/>\
             <text x=\"22\" y=\"12\" font-size=\"11\">{:.0}/s</text>\
             <text x=\"{}\" y=\"{}\" font-size=\"11\">{} s</text></svg>",
            w + 40.0,
            h + 10.0,
            points.join(" "),
            max_y,
            w - 10.0,
            h + 8.0,
            max_x
        )
    }
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}
