//! The load report: what a run measured, as figures, a readable summary and JSON (the HTML page is
//! in `load::html`). Latencies are HDR-histogram percentiles in milliseconds.

use super::scenario::Scenario;
pub use super::series::Memory;
use super::series::Sample;
use crate::model::ModelStatsSnapshot;
use serde::Serialize;
use std::collections::BTreeMap;
use std::fmt::Write;

/// A threshold judged against a run (see [`thresholds`](super::thresholds)).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ThresholdResult {
    /// As written.
    pub threshold: String,
    /// The metric's value (ms for durations, a percentage for shares); `None` when the run did
    /// not measure it (a node that never ran: the threshold fails).
    pub value: Option<f64>,
    /// The bound in the same unit as `value`.
    pub bound: f64,
    /// Whether it held.
    pub passed: bool,
}

/// Percentiles of a set of samples (milliseconds).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Distribution {
    /// Samples.
    pub count: usize,
    /// Mean.
    pub mean: f64,
    /// Median.
    pub p50: f64,
    /// 90th percentile.
    pub p90: f64,
    /// 99th percentile.
    pub p99: f64,
    /// Largest.
    pub max: f64,
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

/// One entry of the mix: its conversations' outcomes and latency.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GraphFigures {
    /// Started.
    pub started: usize,
    /// Finished.
    pub completed: usize,
    /// Failed.
    pub failed: usize,
    /// Abandoned by their person.
    pub abandoned: usize,
    /// Left paused.
    pub interrupted_left: usize,
    /// Cut off when the run stopped.
    pub cut_off: usize,
    /// Latency from the due time, less think time, ms.
    pub conversation_latency_ms: Distribution,
}

/// Arrivals that started after they were due.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Lateness {
    /// Arrivals that started more than `late_after_ms` after they were due.
    pub late: usize,
    /// The tolerance, ms.
    pub late_after_ms: f64,
    /// How late every arrival started, ms.
    pub lateness_ms: Distribution,
}

/// What the simulated people did.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct PeopleFigures {
    /// Interrupts answered after a think time (or pause).
    pub answers: usize,
    /// Think time (and long pauses) before each answer, ms.
    pub think_ms: Distribution,
    /// Conversations whose person paused long before answering.
    pub paused: usize,
    /// Conversations their person abandoned (cancelled mid-run).
    pub abandoned: usize,
}

/// The execute phase of the conversations that ran plan steps (`--graph research`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StepsReport {
    /// Conversations that executed steps.
    pub conversations: usize,
    /// Steps executed per conversation.
    pub steps: Distribution,
    /// Execute-phase makespan per conversation, ms.
    pub makespan_ms: Distribution,
    /// Critical path (longest dependency chain of step times), ms.
    pub critical_path_ms: Distribution,
    /// Sum of step times, ms.
    pub sum_ms: Distribution,
    /// What superstep waves would take with the same step times, ms.
    pub waves_ms: Distribution,
    /// Median over conversations of makespan / critical path (1 = as fast as dependencies allow).
    pub makespan_over_critical_p50: f64,
    /// Median of sum / makespan (what parallel steps buy over running them one by one).
    pub sum_over_makespan_p50: f64,
    /// Median of waves / makespan (what dependency-driven steps buy over superstep barriers).
    pub waves_over_makespan_p50: f64,
}

/// Runs over HTTP as the client saw them: streaming latencies (`--stream-mode`) and each run's
/// end-to-end time, from its due time (the conversation's due time for its first run, the moment
/// the person's answer was ready for a resume), ms.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct StreamReport {
    /// Runs (a conversation's first and each resume).
    pub runs: u64,
    /// Of them, streamed (`runs/stream`).
    pub streamed_runs: u64,
    /// Events of the graphs' output streamed (not the protocol's `metadata`).
    pub events: u64,
    /// Tokens streamed (`messages` chunks).
    pub tokens: u64,
    /// Per run: time to the first event.
    pub ttfe_ms: Distribution,
    /// Per run: time to the first token (runs that streamed one).
    pub ttft_ms: Distribution,
    /// Inter-token latency: between consecutive tokens of a run.
    pub itl_ms: Distribution,
    /// Between consecutive events of a run.
    pub event_gap_ms: Distribution,
    /// Per run: end to end.
    pub run_ms: Distribution,
    /// Per conversation: its first event, from its due time less think time.
    pub conversation_ttfe_ms: Distribution,
    /// Per conversation: its first token, from its due time less think time.
    pub conversation_ttft_ms: Distribution,
}

/// How an engine loaded threads during a run (`Engine::thread_loads`): a paused thread resumed
/// in the process that paused it uses the state it kept and reads only the head checkpoint and its
/// writes; any other load reads the thread's chain from storage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ThreadLoadCounts {
    /// Loads that used a kept paused state.
    pub from_memory: u64,
    /// Loads that read the chain from storage.
    pub from_storage: u64,
}

impl ThreadLoadCounts {
    /// The loads between two readings of `Engine::thread_loads`.
    pub fn between(
        before: planwright::runtime::ThreadLoads,
        after: planwright::runtime::ThreadLoads,
    ) -> Self {
        Self {
            from_memory: after.from_memory.saturating_sub(before.from_memory),
            from_storage: after.from_storage.saturating_sub(before.from_storage),
        }
    }
}

/// Everything a load run measured.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LoadReport {
    /// The graph (or the mix, `research 70% + acquire 30%`).
    pub graph: String,
    /// The scenario.
    pub scenario: Option<Scenario>,
    /// Conversations the scenario meant to start.
    pub conversations: usize,
    /// Conversations started.
    pub started: usize,
    /// Arrivals dropped because `--max-in-flight` conversations were running
    /// (`--drop-when-full`, and every step of `load sweep`).
    pub dropped: usize,
    /// At most this many at once (closed loop: the concurrency; open: `--max-in-flight`).
    pub concurrency: usize,
    /// Conversations that finished.
    pub completed: usize,
    /// Conversations that failed (errors by kind in `errors`).
    pub failed: usize,
    /// Conversations their simulated person abandoned (cancelled).
    pub abandoned: usize,
    /// Conversations left paused (an interrupt nobody answered).
    pub interrupted_left: usize,
    /// Conversations still running when the run stopped (early stop, or the grace period ran
    /// out), cancelled.
    pub cut_off: usize,
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
    /// divided by node executions (in-process runs).
    pub overhead_us_per_node: f64,
    /// Median over conversations of (wall time − time in model-calling nodes) / node executions,
    /// µs: under load this includes waiting for the CPU behind other conversations.
    pub non_model_wall_us_per_node: f64,
    /// Per-conversation latency from when it was due to start to its end, less the simulated
    /// person's think time and pauses, ms.
    pub conversation_latency_ms: Distribution,
    /// Per entry of the mix (by graph name).
    pub graphs: BTreeMap<String, GraphFigures>,
    /// Late arrivals.
    pub lateness: Lateness,
    /// Simulated people.
    pub people: PeopleFigures,
    /// Execute-phase makespan against critical path, sum and waves.
    pub steps: Option<StepsReport>,
    /// Runs over HTTP (`--assistant`): streaming latencies and end-to-end per run.
    pub stream: Option<StreamReport>,
    /// Per node.
    pub nodes: BTreeMap<String, NodeFigures>,
    /// Failures by kind.
    pub errors: BTreeMap<String, usize>,
    /// Model calls, errors by kind and tokens, per call kind.
    pub model: Vec<ModelStatsSnapshot>,
    /// With `--target`: each replica's share of the conversations and requests, and the
    /// requests that failed over away from it.
    pub replicas: Vec<super::replicas::ReplicaShare>,
    /// Requests that failed over to another replica.
    pub failovers: u64,
    /// Checkpoint records written.
    pub checkpoint_records: u64,
    /// Checkpoint bytes written.
    pub checkpoint_bytes: u64,
    /// How threads were loaded for resumes and reads (in-process runs; `None` against a server).
    pub thread_loads: Option<ThreadLoadCounts>,
    /// Peak resident memory, KiB.
    pub peak_rss_kb: u64,
    /// Resident memory before the run, KiB.
    pub baseline_rss_kb: u64,
    /// Memory slope over the run.
    pub memory: Option<Memory>,
    /// Each threshold with its value.
    pub thresholds: Vec<ThresholdResult>,
    /// Why the run stopped before the scenario ended.
    pub stopped_early: Option<String>,
    /// The person interrupted the run (Ctrl-C): what was measured up to then.
    pub interrupted: bool,
    /// One sample per second.
    pub series: Vec<Sample>,
    /// With `--coordinator`: each worker's share, and the workers that died.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub workers: Vec<WorkerShare>,
}

impl LoadReport {
    /// True when every threshold held.
    pub fn thresholds_passed(&self) -> bool {
        self.thresholds.iter().all(|t| t.passed)
    }

    /// A readable summary.
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        let kind = self.scenario.as_ref().map_or("closed", |s| s.kind());
        if self.interrupted {
            let _ = writeln!(
                t,
                "INTERRUPTED (Ctrl-C): the figures below cover the run until then"
            );
        }
        let _ = writeln!(
            t,
            "{} ({kind}): {} of {} conversations started (≤ {} at once) in {:.1} s — {} completed, {} failed, {} abandoned, {} left paused, {} cut off; {} interrupts answered",
            self.graph, self.started, self.conversations, self.concurrency, self.wall_ms / 1000.0,
            self.completed, self.failed, self.abandoned, self.interrupted_left, self.cut_off, self.resumes
        );
        for w in &self.workers {
            let _ = writeln!(
                t,
                "  worker {}: {} started, {} ended, p50 {:.1} ms, p99 {:.1} ms, CPU {:.0} ms ({:.0} µs per conversation){}{}",
                w.url,
                w.started,
                w.latency_ms.count,
                w.latency_ms.p50,
                w.latency_ms.p99,
                w.cpu_ms,
                w.cpu_us_per_conversation,
                if w.respread_to_it > 0 {
                    format!(", took {} re-spread arrivals", w.respread_to_it)
                } else {
                    String::new()
                },
                match &w.died {
                    Some(why) => format!(" — DIED: {why}"),
                    None => String::new(),
                }
            );
        }
        if self.node_executions == 0 && !self.replicas.is_empty() {
            // A server that does not count node executions: the client's figures only.
            let _ = writeln!(t, "  {:.2} conversations/s", self.conversations_per_sec);
        } else {
            let _ = writeln!(
                t,
                "  {:.2} conversations/s, {:.0} node executions/s, runtime overhead {:.1} µs CPU per node execution (median non-model wall per node {:.0} µs)",
                self.conversations_per_sec, self.node_execs_per_sec, self.overhead_us_per_node, self.non_model_wall_us_per_node
            );
        }
        let c = &self.conversation_latency_ms;
        let _ = writeln!(
            t,
            "  conversation latency from due time, ms: p50 {:.1}  p90 {:.1}  p99 {:.1}  max {:.1}",
            c.p50, c.p90, c.p99, c.max
        );
        if self.graphs.len() > 1 {
            for (name, g) in &self.graphs {
                let _ = writeln!(
                    t,
                    "    {name}: {} started, {} completed, {} failed, {} abandoned; latency ms p50 {:.1}  p99 {:.1}",
                    g.started, g.completed, g.failed, g.abandoned,
                    g.conversation_latency_ms.p50, g.conversation_latency_ms.p99
                );
            }
        }
        let l = &self.lateness;
        let _ = writeln!(
            t,
            "  late arrivals (> {:.0} ms): {} of {}; lateness ms p50 {:.1}  p99 {:.1}  max {:.1}",
            l.late_after_ms,
            l.late,
            self.started,
            l.lateness_ms.p50,
            l.lateness_ms.p99,
            l.lateness_ms.max
        );
        if let Some(s) = &self.stream {
            let _ = writeln!(
                t,
                "  runs: {} ({} streamed; {} events, {} tokens), ms from due time:",
                s.runs, s.streamed_runs, s.events, s.tokens
            );
            for (name, d) in [
                ("time to first event", &s.ttfe_ms),
                ("time to first token", &s.ttft_ms),
                ("inter-token latency", &s.itl_ms),
                ("between events", &s.event_gap_ms),
                ("run end to end", &s.run_ms),
                ("conversation first event", &s.conversation_ttfe_ms),
                ("conversation first token", &s.conversation_ttft_ms),
            ] {
                if d.count > 0 {
                    let _ = writeln!(
                        t,
                        "    {name:<25} p50 {:.2}  p90 {:.2}  p99 {:.2}  max {:.2}  ({})",
                        d.p50, d.p90, d.p99, d.max, d.count
                    );
                }
            }
        }
        if self.dropped > 0 {
            let _ = writeln!(
                t,
                "  dropped arrivals ({} in flight, the most allowed): {}",
                self.concurrency, self.dropped
            );
        }
        let p = &self.people;
        if p.answers > 0 || p.abandoned > 0 || p.paused > 0 {
            let _ = writeln!(
                t,
                "  people: {} answers after think time p50 {:.0} ms p99 {:.0} ms; {} paused long; {} abandoned",
                p.answers, p.think_ms.p50, p.think_ms.p99, p.paused, p.abandoned
            );
        }
        if let Some(s) = &self.steps {
            let _ = writeln!(
                t,
                "  execute phase ({} conversations), ms p50/p99: makespan {:.0}/{:.0}  critical path {:.0}/{:.0}  sum of steps {:.0}/{:.0}  waves {:.0}/{:.0}",
                s.conversations, s.makespan_ms.p50, s.makespan_ms.p99, s.critical_path_ms.p50,
                s.critical_path_ms.p99, s.sum_ms.p50, s.sum_ms.p99, s.waves_ms.p50, s.waves_ms.p99
            );
            let _ = writeln!(
                t,
                "    median makespan/critical {:.2}, sum/makespan {:.2}, waves/makespan {:.2}",
                s.makespan_over_critical_p50, s.sum_over_makespan_p50, s.waves_over_makespan_p50
            );
        }
        if !self.nodes.is_empty() {
            let _ = writeln!(
                t,
                "  {:<22} {:>8} {:>9} {:>9} {:>9} {:>9} {:>11} {:>11}",
                "node", "execs", "p50 ms", "p90 ms", "p99 ms", "max ms", "queue p99", "wait/work"
            );
        }
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
                n.queue.p99,
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
        let ended = (self.completed + self.failed).max(1) as f64;
        if !self.model.is_empty() {
            let tokens: u64 = self
                .model
                .iter()
                .map(|m| m.prompt_tokens + m.completion_tokens)
                .sum();
            let _ = writeln!(
                t,
                "  model tokens per conversation: {:.0}",
                tokens as f64 / ended
            );
        }
        if self.replicas.len() > 1 || self.failovers > 0 {
            let _ = writeln!(t, "  replicas ({} failovers):", self.failovers);
            for r in &self.replicas {
                let _ = writeln!(
                    t,
                    "    {}: {} conversations started, {} requests answered, {} failed over away",
                    r.url, r.conversations, r.requests, r.failovers
                );
            }
        }
        let _ = writeln!(
            t,
            "  checkpoints: {} records, {} bytes ({:.0} per conversation); peak RSS {} KiB (baseline {} KiB)",
            self.checkpoint_records,
            self.checkpoint_bytes,
            self.checkpoint_bytes as f64 / ended,
            self.peak_rss_kb,
            self.baseline_rss_kb
        );
        if let Some(l) = &self.thread_loads {
            let _ = writeln!(
                t,
                "  thread loads: {} from a kept paused state, {} read from storage",
                l.from_memory, l.from_storage
            );
        }
        if let Some(m) = &self.memory {
            if m.too_short {
                let _ = writeln!(
                    t,
                    "  memory slope: too short to judge ({} samples over {:.0} s; a slope needs at least {} samples over {:.0} s)",
                    m.samples,
                    m.span_s,
                    super::series::MIN_SLOPE_SAMPLES,
                    super::series::MIN_SLOPE_SPAN_S
                );
            } else {
                let server = m
                    .server_slope_kib_per_min
                    .map(|s| format!(", server {s:.1} KiB/min"))
                    .unwrap_or_default();
                let _ = writeln!(
                    t,
                    "  memory slope {:.1} KiB/min{server} over {} samples (limit {:.0}){}",
                    m.slope_kib_per_min,
                    m.samples,
                    m.limit_kib_per_min,
                    if m.flagged {
                        " — ABOVE THE LIMIT"
                    } else {
                        ""
                    }
                );
            }
        }
        if !self.errors.is_empty() {
            let _ = writeln!(t, "  errors: {:?}", self.errors);
        }
        for th in &self.thresholds {
            let _ = writeln!(
                t,
                "  threshold {:<40} {} (value {})",
                th.threshold,
                if th.passed { "passed" } else { "CROSSED" },
                th.value
                    .map_or("not measured".to_string(), |v| format!("{v:.3}"))
            );
        }
        if let Some(why) = &self.stopped_early {
            let _ = writeln!(t, "  stopped early: {why}");
        }
        t
    }
}

/// One worker's share in the coordinator's report.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WorkerShare {
    /// Its URL.
    pub url: String,
    /// Conversations its share meant to start (before any re-spread).
    pub share: usize,
    /// Conversations it started (as of its last sample).
    pub started: usize,
    /// Conversations it finished.
    pub completed: usize,
    /// Conversations that failed on it.
    pub failed: usize,
    /// Its latency histogram alone (`count`: conversations that ended on it).
    pub latency_ms: Distribution,
    /// Samples received.
    pub samples: u64,
    /// The worker process's CPU time (user + system, `/proc/self/stat`) during its share, ms.
    pub cpu_ms: f64,
    /// That CPU time per conversation that ended on it, µs: the load tester's own cost.
    pub cpu_us_per_conversation: f64,
    /// Arrivals of dead workers re-spread to it.
    pub respread_to_it: usize,
    /// Why it counts as dead (`None`: it finished its share).
    pub died: Option<String>,
}
