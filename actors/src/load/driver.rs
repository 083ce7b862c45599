//! The in-process driver for any graph: each conversation is a run of an [`Engine`] — started,
//! its interrupts answered by the simulated person (after a think time, or a long pause), maybe
//! abandoned (cancelled) — and its event stream tallied: per-node work and mailbox wait, time in
//! model-calling nodes, and, when the workload names its plan steps, the execute phase's step
//! times for the makespan/critical-path analysis.
//!
//! [`run`] is the closed loop (N conversations, C at a time); for the other
//! scenarios, and mixes of graphs, wrap workloads in [`EngineConversations`] and call
//! [`super::run_scenario`].

use super::record::{Ended, Outcome};
use super::report::LoadReport;
use super::scenario::Scenario;
use super::schedule::{
    self, sleep_until, stopped, BoxFut, Conv, Conversations, Entry, Options, Probe, Totals,
};
use super::steps::{self, StepRun};
use super::LoadError;
use planwright::runtime::Resume;
use planwright::{Engine, Interrupt, RunEvent, RunOptions, RunStatus, TaskId, ThreadId};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;
use std::time::Duration;
use tokio::time::Instant;

/// How a workload answers an interrupt of conversation `i` (`None`: leave the thread paused).
pub type Answer = Arc<dyn Fn(usize, &[Interrupt]) -> Option<Resume> + Send + Sync>;

/// The step id in a step task's custom event.
pub type StepIdOf = Arc<dyn Fn(&serde_json::Value) -> Option<String> + Send + Sync>;

/// The plan's dependencies by step id, from a conversation's final state.
pub type DepsOf<S> = Arc<dyn Fn(&S) -> BTreeMap<String, Vec<String>> + Send + Sync>;

/// Which nodes are a plan's steps, so the report can set the execute phase's makespan against
/// its critical path.
pub struct StepsSpec<S> {
    /// Each execution of this node starts a new batch of steps (`select_next_step`).
    pub select_node: String,
    /// The node that runs one step per task (`execute_step`).
    pub step_node: String,
    /// The step's id from a custom event its task emits (`{"step_started": id}`).
    pub step_id: StepIdOf,
    /// The plan's dependencies by step id, from the conversation's final state.
    pub deps: DepsOf<S>,
}

/// What a load run is told about the graph and its conversations.
pub struct Workload<S: planwright::State> {
    /// A name for the report.
    pub graph: String,
    /// Conversations to run ([`run`]'s closed loop).
    pub conversations: usize,
    /// At most this many at once ([`run`]'s closed loop).
    pub concurrency: usize,
    /// Thread id prefix (unique per load run when threads are stored).
    pub thread_prefix: String,
    /// The input of conversation `i`.
    pub input: Arc<dyn Fn(usize) -> S::Update + Send + Sync>,
    /// The answer to an interrupt of conversation `i` (`None`: leave the thread paused).
    pub answer: Answer,
    /// Nodes whose time is model time (excluded from the runtime's overhead).
    pub model_nodes: HashSet<String>,
    /// Called after each finished conversation.
    pub on_done: Arc<dyn Fn() + Send + Sync>,
    /// The plan's steps, for the execute-phase analysis (`None`: no such analysis).
    pub steps: Option<StepsSpec<S>>,
}

/// Runs the workload as a closed loop (`conversations`, at most `concurrency` at once) and
/// measures it.
pub async fn run<S: planwright::State>(
    engine: &Engine<S>,
    w: Workload<S>,
) -> Result<LoadReport, LoadError> {
    let scenario = Scenario::Closed {
        conversations: w.conversations,
        concurrency: w.concurrency,
    };
    let entry = Entry {
        weight: 1,
        conversations: EngineConversations::new(engine.clone(), w),
    };
    schedule::run(Options::new(scenario), vec![entry]).await
}

/// An engine's conversations, for [`super::run_scenario`].
pub struct EngineConversations<S: planwright::State> {
    engine: Engine<S>,
    w: Workload<S>,
    checkpoints0: (u64, u64),
    loads0: planwright::runtime::ThreadLoads,
}

impl<S: planwright::State> EngineConversations<S> {
    /// The conversations of `w` on `engine`.
    pub fn new(engine: Engine<S>, w: Workload<S>) -> Arc<Self> {
        let (records, bytes, _) = engine.checkpoint_counters();
        Arc::new(EngineConversations {
            w,
            checkpoints0: (records, bytes),
            loads0: engine.thread_loads(),
            engine,
        })
    }
}

#[derive(Default)]
struct Progress {
    resumes: usize,
    people_time: Duration,
    model_us: f64,
    executions: u64,
    batch: usize,
    started: BTreeMap<TaskId, (Instant, usize)>,
    step_ids: BTreeMap<TaskId, String>,
    step_runs: BTreeMap<TaskId, StepRun>,
}

impl<S: planwright::State> EngineConversations<S> {
    async fn body(
        &self,
        thread: &ThreadId,
        c: &mut Conv,
        p: &mut Progress,
        t0: Instant,
        last: &mut Option<Arc<S>>,
    ) -> Outcome {
        let w = &self.w;
        let mut handle = self
            .engine
            .start(
                thread.clone(),
                (w.input)(c.i),
                // Thread ids carry the load run's own tag: each conversation's thread is new, so
                // it is not looked up (one that exists after all fails, unharmed).
                RunOptions::streaming().without_state_updates().new_thread(),
            )
            .await;
        loop {
            let mut h = match handle {
                Ok(h) => h,
                Err(e) => return Outcome::Failed(e.to_string()),
            };
            if let Some(mut rx) = h.events.take() {
                while let Some(ev) = rx.recv().await {
                    self.event(ev, c, p, t0);
                }
            }
            let out = match h.wait().await {
                Ok(out) => out,
                Err(e) => return Outcome::Failed(e.to_string()),
            };
            *last = Some(out.state.clone());
            match out.status {
                RunStatus::Interrupted => {
                    let paused = c.person.pauses_for.is_some() && p.resumes == 0;
                    let wait = c.person.before_answer();
                    let Some(resume) = (w.answer)(c.i, &out.interrupts) else {
                        return Outcome::LeftPaused;
                    };
                    c.recorder.answered_after(wait, paused);
                    if !wait.is_zero() {
                        p.people_time += wait;
                        tokio::time::sleep(wait).await;
                    }
                    p.resumes += 1;
                    handle = self
                        .engine
                        .start_resume(
                            thread.clone(),
                            resume,
                            RunOptions::streaming().without_state_updates(),
                        )
                        .await;
                }
                RunStatus::Finished => return Outcome::Completed,
                other => return Outcome::Failed(format!("{other:?}")),
            }
        }
    }

    fn event(&self, ev: RunEvent, c: &Conv, p: &mut Progress, t0: Instant) {
        let spec = self.w.steps.as_ref();
        match ev {
            RunEvent::NodeStarted { node, task, .. } => {
                if let Some(s) = spec {
                    if node == s.select_node {
                        p.batch += 1;
                    } else if node == s.step_node {
                        p.started.insert(task, (Instant::now(), p.batch));
                    }
                }
            }
            RunEvent::Custom {
                node,
                task,
                payload,
            } => {
                if let Some(s) = spec.filter(|s| s.step_node == node) {
                    if let Some(id) = (s.step_id)(&payload) {
                        p.step_ids.insert(task, id);
                    }
                }
            }
            RunEvent::NodeFinished {
                node,
                task,
                duration_us,
                queued_us,
                ..
            } => {
                p.executions += 1;
                if self.w.model_nodes.contains(&node) {
                    p.model_us += duration_us as f64;
                }
                c.recorder.node_finished(&node, duration_us, queued_us);
                if spec.is_some_and(|s| s.step_node == node) {
                    if let (Some(id), Some((at, batch))) =
                        (p.step_ids.get(&task), p.started.get(&task))
                    {
                        p.step_runs.insert(
                            task,
                            StepRun {
                                id: id.clone(),
                                batch: *batch,
                                start: at.saturating_duration_since(t0),
                                time: Duration::from_micros(duration_us),
                            },
                        );
                    }
                }
            }
            _ => {}
        }
    }
}

impl<S: planwright::State> Conversations for EngineConversations<S> {
    fn name(&self) -> String {
        self.w.graph.clone()
    }

    fn run(self: Arc<Self>, mut c: Conv) -> BoxFut<Ended> {
        Box::pin(async move {
            let thread = ThreadId::new(format!("{}-{}", self.w.thread_prefix, c.i));
            let t0 = Instant::now();
            let leaves_at = c.person.leaves_after.map(|d| t0 + d);
            let mut stop = c.stop.clone();
            let mut p = Progress::default();
            let mut last = None;
            let outcome = tokio::select! {
                o = self.body(&thread, &mut c, &mut p, t0, &mut last) => o,
                _ = sleep_until(leaves_at) => {
                    self.engine.cancel(&thread);
                    Outcome::Abandoned
                }
                _ = stopped(&mut stop) => {
                    self.engine.cancel(&thread);
                    Outcome::CutOff
                }
            };
            let wall_us = t0.elapsed().as_secs_f64() * 1e6 - p.people_time.as_secs_f64() * 1e6;
            let steps = match (&self.w.steps, &last) {
                (Some(spec), Some(state)) if !p.step_runs.is_empty() => {
                    let runs: Vec<StepRun> = p.step_runs.into_values().collect();
                    Some(steps::analyse(&runs, &(spec.deps)(state)))
                }
                _ => None,
            };
            (self.w.on_done)();
            Ended {
                outcome,
                resumes: p.resumes,
                people_time: p.people_time,
                steps,
                non_model_us_per_node: (p.executions > 0)
                    .then(|| (wall_us - p.model_us).max(0.0) / p.executions as f64),
            }
        })
    }

    fn probe(self: Arc<Self>) -> BoxFut<Probe> {
        Box::pin(async move {
            Probe {
                mailboxes: self
                    .engine
                    .node_stats()
                    .into_iter()
                    .map(|n| (n.node, n.mailbox_depth))
                    .collect(),
                ..Probe::default()
            }
        })
    }

    fn finish(self: Arc<Self>) -> BoxFut<Totals> {
        let (records, bytes, _) = self.engine.checkpoint_counters();
        let t = Totals {
            checkpoint_records: records.saturating_sub(self.checkpoints0.0),
            checkpoint_bytes: bytes.saturating_sub(self.checkpoints0.1),
            thread_loads: Some(super::report::ThreadLoadCounts::between(
                self.loads0,
                self.engine.thread_loads(),
            )),
            remote_node_executions: None,
            replicas: Vec::new(),
        };
        Box::pin(async move { t })
    }
}
