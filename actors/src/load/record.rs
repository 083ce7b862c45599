//! The tally a run keeps while it runs: outcomes, HDR histograms of conversation latency (from
//! the due time), lateness, per-node work and mailbox wait, people's think times and the execute
//! phase, plus the current second's figures for the series. Drivers report into it; the sampler
//! and the report read it.

use super::hist::Hist;
use super::report::{
    GraphFigures, Lateness, LoadReport, NodeFigures, PeopleFigures, StepsReport, StreamReport,
};
use super::steps::StepFigures;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;
use std::time::Duration;

/// An arrival counts as late when it starts more than this after it was due (timers and the
/// scheduler jitter by a millisecond or two on a busy machine).
pub const LATE_AFTER: Duration = Duration::from_millis(10);

/// How a conversation ended.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome {
    /// It finished.
    Completed,
    /// It failed (why).
    Failed(String),
    /// Its person abandoned it (it was cancelled).
    Abandoned,
    /// It paused on an interrupt nobody answers.
    LeftPaused,
    /// The run stopped while it was running (it was cancelled).
    CutOff,
}

/// What a driver reports when a conversation ends.
#[derive(Clone, Debug, PartialEq)]
pub struct Ended {
    /// How it ended.
    pub outcome: Outcome,
    /// Interrupts answered.
    pub resumes: usize,
    /// Time its person spent thinking and pausing (not the system's).
    pub people_time: Duration,
    /// Its execute phase, when it ran plan steps.
    pub steps: Option<StepFigures>,
    /// (wall − model-node time) / node executions, µs, when the driver knows it.
    pub non_model_us_per_node: Option<f64>,
}

impl Ended {
    /// An ending with nothing else to say.
    pub fn new(outcome: Outcome) -> Self {
        Ended {
            outcome,
            resumes: 0,
            people_time: Duration::ZERO,
            steps: None,
            non_model_us_per_node: None,
        }
    }
}

/// What one run of a conversation over HTTP measured on the client. Times count from the run's
/// due time: the conversation's due time for its first run, the moment the person's answer was
/// ready for a resume.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunTimes {
    /// It streamed (`runs/stream`); otherwise it waited and only `end_to_end` is known.
    pub streamed: bool,
    /// To the first event of the graph's output (not the protocol's `metadata`).
    pub first_event: Option<Duration>,
    /// To the first token: a `messages` chunk.
    pub first_token: Option<Duration>,
    /// Between consecutive tokens (inter-token latency).
    pub token_gaps: Vec<Duration>,
    /// Between consecutive events.
    pub event_gaps: Vec<Duration>,
    /// Events of the graph's output.
    pub events: u64,
    /// Tokens.
    pub tokens: u64,
    /// To the run's end (the stream closed, or `runs/wait` answered).
    pub end_to_end: Duration,
}

/// Streaming latencies of every run and conversation, in histograms.
#[derive(Default)]
struct StreamHists {
    runs: u64,
    streamed: u64,
    events: u64,
    tokens: u64,
    ttfe: Hist,
    ttft: Hist,
    itl: Hist,
    gap: Hist,
    run: Hist,
    conversation_ttfe: Hist,
    conversation_ttft: Hist,
}

#[derive(Default)]
struct NodeHists {
    work: Hist,
    queue: Hist,
    work_us: u64,
    queue_us: u64,
}

/// One second's figures (reset by the sampler; the histogram is reset in place, not reallocated
/// every second).
#[derive(Clone, Default)]
pub struct Second {
    /// Started.
    pub started: u64,
    /// Ended (any outcome).
    pub ended: u64,
    /// Failed.
    pub failed: u64,
    /// Abandoned.
    pub abandoned: u64,
    /// Late arrivals.
    pub late: u64,
    /// Node executions.
    pub node_executions: u64,
    /// Latency of those that ended.
    pub latency: Hist,
}

/// One second's figures as the sampler reads them.
#[derive(Clone, Debug, Default)]
pub struct SecondFigures {
    /// Started.
    pub started: u64,
    /// Ended (any outcome).
    pub ended: u64,
    /// Failed.
    pub failed: u64,
    /// Abandoned.
    pub abandoned: u64,
    /// Late arrivals.
    pub late: u64,
    /// Node executions.
    pub node_executions: u64,
    /// Latency percentiles of those that ended.
    pub latency: super::report::Distribution,
}

#[derive(Default)]
struct GraphTally {
    started: usize,
    completed: usize,
    failed: usize,
    abandoned: usize,
    left_paused: usize,
    cut_off: usize,
    latency: Hist,
}

#[derive(Default)]
struct Tally {
    graphs: BTreeMap<String, GraphTally>,
    started: usize,
    completed: usize,
    failed: usize,
    abandoned: usize,
    left_paused: usize,
    cut_off: usize,
    resumes: usize,
    errors: BTreeMap<String, usize>,
    latency: Hist,
    lateness: Hist,
    late: usize,
    think: Hist,
    answers: usize,
    paused: usize,
    nodes: BTreeMap<String, NodeHists>,
    node_executions: u64,
    steps: StepHists,
    non_model: Hist,
    stream: StreamHists,
    second: Second,
}

/// The shared tally.
#[derive(Default)]
pub struct Recorder {
    tally: Mutex<Tally>,
    in_flight: AtomicUsize,
}

impl std::fmt::Debug for Recorder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Recorder")
            .field("in_flight", &self.in_flight())
            .finish_non_exhaustive()
    }
}

/// The run's figures so far, as a worker sends them to its coordinator every second.
#[derive(Clone, Debug, Default)]
pub struct Cumulative {
    /// Started.
    pub started: usize,
    /// Finished.
    pub completed: usize,
    /// Failed.
    pub failed: usize,
    /// Abandoned.
    pub abandoned: usize,
    /// Left paused.
    pub left_paused: usize,
    /// Cut off.
    pub cut_off: usize,
    /// Interrupts answered.
    pub resumes: usize,
    /// Late arrivals.
    pub late: usize,
    /// Node executions counted here.
    pub node_executions: u64,
    /// Failures by kind.
    pub errors: BTreeMap<String, usize>,
    /// Conversation latency.
    pub latency: Hist,
    /// Lateness.
    pub lateness: Hist,
}

/// Keeps a conversation counted as in flight until dropped.
pub struct InFlight<'a>(&'a Recorder);

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::Relaxed);
    }
}

impl Recorder {
    fn tally(&self) -> std::sync::MutexGuard<'_, Tally> {
        self.tally.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// A conversation of `graph` (the mix entry's name) started `lateness` after it was due.
    pub fn started(&self, graph: &str, lateness: Duration) -> InFlight<'_> {
        self.in_flight.fetch_add(1, Ordering::Relaxed);
        let mut t = self.tally();
        t.started += 1;
        graph_tally(&mut t.graphs, graph).started += 1;
        t.second.started += 1;
        t.lateness.record(lateness);
        if lateness > LATE_AFTER {
            t.late += 1;
            t.second.late += 1;
        }
        InFlight(self)
    }

    /// Conversations in flight.
    pub fn in_flight(&self) -> usize {
        self.in_flight.load(Ordering::Relaxed)
    }

    /// A node execution finished.
    pub fn node_finished(&self, node: &str, work_us: u64, queue_us: u64) {
        let mut t = self.tally();
        t.node_executions += 1;
        t.second.node_executions += 1;
        let n = match t.nodes.get_mut(node) {
            Some(n) => n,
            None => t.nodes.entry(node.to_string()).or_default(),
        };
        n.work.record_us(work_us);
        n.queue.record_us(queue_us);
        n.work_us += work_us;
        n.queue_us += queue_us;
    }

    /// A person waited `d` before answering (think time, or a long pause).
    pub fn answered_after(&self, d: Duration, paused: bool) {
        let mut t = self.tally();
        t.answers += 1;
        t.think.record(d);
        if paused {
            t.paused += 1;
        }
    }

    /// A conversation of `graph` ended `since_due` after it was due.
    pub fn ended(&self, graph: &str, since_due: Duration, e: Ended) {
        let latency = since_due.saturating_sub(e.people_time);
        let mut t = self.tally();
        let g = graph_tally(&mut t.graphs, graph);
        g.latency.record(latency);
        match &e.outcome {
            Outcome::Completed => g.completed += 1,
            Outcome::LeftPaused => g.left_paused += 1,
            Outcome::CutOff => g.cut_off += 1,
            Outcome::Abandoned => g.abandoned += 1,
            Outcome::Failed(_) => g.failed += 1,
        }
        t.resumes += e.resumes;
        t.latency.record(latency);
        t.second.ended += 1;
        t.second.latency.record(latency);
        if let Some(s) = e.steps.filter(|s| s.steps > 0) {
            t.steps.record(&s);
        }
        if let Some(v) = e.non_model_us_per_node {
            t.non_model.record_us(v.max(0.0) as u64);
        }
        match e.outcome {
            Outcome::Completed => t.completed += 1,
            Outcome::LeftPaused => t.left_paused += 1,
            Outcome::CutOff => t.cut_off += 1,
            Outcome::Abandoned => {
                t.abandoned += 1;
                t.second.abandoned += 1;
            }
            Outcome::Failed(why) => {
                t.failed += 1;
                t.second.failed += 1;
                let kind: String = why.chars().take(80).collect();
                *t.errors.entry(kind).or_default() += 1;
            }
        }
    }

    /// A run over HTTP ended; `conversation_first_event` / `_token` are the conversation's first
    /// event and token when this run had them (from the conversation's due time, less its
    /// person's time).
    pub fn run_ended(
        &self,
        r: &RunTimes,
        conversation_first_event: Option<Duration>,
        conversation_first_token: Option<Duration>,
    ) {
        let mut t = self.tally();
        let s = &mut t.stream;
        s.runs += 1;
        s.run.record(r.end_to_end);
        if !r.streamed {
            return;
        }
        s.streamed += 1;
        s.events += r.events;
        s.tokens += r.tokens;
        if let Some(d) = r.first_event {
            s.ttfe.record(d);
        }
        if let Some(d) = r.first_token {
            s.ttft.record(d);
        }
        for d in &r.token_gaps {
            s.itl.record(*d);
        }
        for d in &r.event_gaps {
            s.gap.record(*d);
        }
        if let Some(d) = conversation_first_event {
            s.conversation_ttfe.record(d);
        }
        if let Some(d) = conversation_first_token {
            s.conversation_ttft.record(d);
        }
    }

    /// The current second's figures, reset.
    pub fn take_second(&self) -> SecondFigures {
        let mut t = self.tally();
        let s = &mut t.second;
        let out = SecondFigures {
            started: s.started,
            ended: s.ended,
            failed: s.failed,
            abandoned: s.abandoned,
            late: s.late,
            node_executions: s.node_executions,
            latency: s.latency.distribution(),
        };
        (
            s.started,
            s.ended,
            s.failed,
            s.abandoned,
            s.late,
            s.node_executions,
        ) = (0, 0, 0, 0, 0, 0);
        s.latency.reset();
        out
    }

    /// The counters and the latency and lateness histograms so far.
    pub fn cumulative(&self) -> Cumulative {
        let t = self.tally();
        Cumulative {
            started: t.started,
            completed: t.completed,
            failed: t.failed,
            abandoned: t.abandoned,
            left_paused: t.left_paused,
            cut_off: t.cut_off,
            resumes: t.resumes,
            late: t.late,
            node_executions: t.node_executions,
            errors: t.errors.clone(),
            latency: t.latency.clone(),
            lateness: t.lateness.clone(),
        }
    }

    /// Node executions so far.
    pub fn node_executions(&self) -> u64 {
        self.tally().node_executions
    }

    /// The report's tallied figures (the caller adds scenario, timing, memory and the rest).
    pub fn fill(&self, r: &mut LoadReport) {
        let t = self.tally();
        r.started = t.started;
        r.completed = t.completed;
        r.failed = t.failed;
        r.abandoned = t.abandoned;
        r.interrupted_left = t.left_paused;
        r.cut_off = t.cut_off;
        r.resumes = t.resumes;
        r.errors = t.errors.clone();
        r.conversation_latency_ms = t.latency.distribution();
        r.lateness = Lateness {
            late: t.late,
            late_after_ms: LATE_AFTER.as_secs_f64() * 1000.0,
            lateness_ms: t.lateness.distribution(),
        };
        r.people = PeopleFigures {
            answers: t.answers,
            think_ms: t.think.distribution(),
            paused: t.paused,
            abandoned: t.abandoned,
        };
        r.node_executions = r.node_executions.max(t.node_executions);
        r.nodes = t
            .nodes
            .iter()
            .map(|(name, n)| {
                let (work, queue) = (n.work.distribution(), n.queue.distribution());
                let fig = NodeFigures {
                    executions: n.work.len(),
                    p50_ms: work.p50,
                    p99_ms: work.p99,
                    queue_p99_ms: queue.p99,
                    work,
                    queue,
                    work_total_ms: n.work_us as f64 / 1000.0,
                    queue_total_ms: n.queue_us as f64 / 1000.0,
                };
                (name.clone(), fig)
            })
            .collect();
        r.graphs = t
            .graphs
            .iter()
            .map(|(name, g)| {
                let fig = GraphFigures {
                    started: g.started,
                    completed: g.completed,
                    failed: g.failed,
                    abandoned: g.abandoned,
                    interrupted_left: g.left_paused,
                    cut_off: g.cut_off,
                    conversation_latency_ms: g.latency.distribution(),
                };
                (name.clone(), fig)
            })
            .collect();
        r.non_model_wall_us_per_node = if t.non_model.is_empty() {
            0.0
        } else {
            t.non_model.quantile_ms(0.5) * 1000.0
        };
        r.steps = (!t.steps.conversations.is_empty()).then(|| t.steps.report());
        let s = &t.stream;
        r.stream = (s.runs > 0).then(|| StreamReport {
            runs: s.runs,
            streamed_runs: s.streamed,
            events: s.events,
            tokens: s.tokens,
            ttfe_ms: s.ttfe.distribution(),
            ttft_ms: s.ttft.distribution(),
            itl_ms: s.itl.distribution(),
            event_gap_ms: s.gap.distribution(),
            run_ms: s.run.distribution(),
            conversation_ttfe_ms: s.conversation_ttfe.distribution(),
            conversation_ttft_ms: s.conversation_ttft.distribution(),
        });
        drop(t);
    }
}

fn graph_tally<'a>(
    graphs: &'a mut BTreeMap<String, GraphTally>,
    graph: &str,
) -> &'a mut GraphTally {
    if !graphs.contains_key(graph) {
        graphs.insert(graph.to_string(), GraphTally::default());
    }
    graphs
        .get_mut(graph)
        .unwrap_or_else(|| unreachable!("inserted above"))
}

/// The execute-phase figures of every conversation, in histograms (constant memory however long
/// the run): times in ms recorded as µs; counts and ratios scaled by 1000.
#[derive(Default)]
struct StepHists {
    conversations: Hist,
    makespan: Hist,
    critical: Hist,
    sum: Hist,
    waves: Hist,
    makespan_over_critical: Hist,
    sum_over_makespan: Hist,
    waves_over_makespan: Hist,
}

impl StepHists {
    fn record(&mut self, s: &StepFigures) {
        let ms = |v: f64| (v.max(0.0) * 1000.0) as u64;
        self.conversations.record_us(s.steps as u64 * 1000);
        self.makespan.record_us(ms(s.makespan_ms));
        self.critical.record_us(ms(s.critical_path_ms));
        self.sum.record_us(ms(s.sum_ms));
        self.waves.record_us(ms(s.waves_ms));
        let ratio = |a: f64, b: f64| (b > 0.0).then(|| ((a / b) * 1000.0) as u64);
        if let Some(v) = ratio(s.makespan_ms, s.critical_path_ms) {
            self.makespan_over_critical.record_us(v);
        }
        if let Some(v) = ratio(s.sum_ms, s.makespan_ms) {
            self.sum_over_makespan.record_us(v);
        }
        if let Some(v) = ratio(s.waves_ms, s.makespan_ms) {
            self.waves_over_makespan.record_us(v);
        }
    }

    fn report(&self) -> StepsReport {
        // A ratio of 1.25 was recorded as 1250 "µs": its median in "ms" is the ratio.
        let median = |h: &Hist| h.quantile_ms(0.5);
        StepsReport {
            conversations: self.conversations.len() as usize,
            steps: self.conversations.distribution(),
            makespan_ms: self.makespan.distribution(),
            critical_path_ms: self.critical.distribution(),
            sum_ms: self.sum.distribution(),
            waves_ms: self.waves.distribution(),
            makespan_over_critical_p50: median(&self.makespan_over_critical),
            sum_over_makespan_p50: median(&self.sum_over_makespan),
            waves_over_makespan_p50: median(&self.waves_over_makespan),
        }
    }
}
