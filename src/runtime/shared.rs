//! What every supervisor of an engine shares: the graph, the node actors, storage, the registry
//! of active runs, and counters. Also the public types runs are described with.

use super::error::RunError;
use super::node_actor::NodeActor;
use super::persist::Durability;
use super::saved::SavedThread;
use super::stats::NodeStats;
use super::writer::{AsyncWriter, WriterMsg};
use crate::checkpoint::Checkpointer;
use crate::context::RunContext;
use crate::events::{Interrupt, RunEvent, RunStatus};
use crate::graph::CompiledGraph;
use crate::ids::{RunId, ThreadId};
use crate::state::State;
use dashmap::DashMap;
use kameo::actor::ActorRef;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot, watch};
use tokio_util::sync::CancellationToken;

/// What to do when a run is started on a thread that already has one running.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BusyPolicy {
    /// Fail with [`Refusal::ThreadBusy`](crate::Refusal::ThreadBusy).
    #[default]
    Reject,
    /// Wait until the running one ends, then start.
    Enqueue,
}

/// Per-run options.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Reject or queue when the thread is busy.
    pub on_busy: BusyPolicy,
    /// Stream events to the run handle.
    pub stream_events: bool,
    /// With `stream_events`, leave out [`RunEvent::StateUpdated`](crate::RunEvent::StateUpdated):
    /// each superstep's updates as JSON, built only for listeners that want them (a load driver
    /// that counts nodes does not, and building them serialised every update a second time).
    pub without_state_updates: bool,
    /// With `stream_events`, each [`RunEvent::StateUpdated`](crate::RunEvent::StateUpdated)
    /// carries the state after its superstep (see [`RunOptions::with_values`]).
    pub stream_values: bool,
    /// With `stream_events`, build and send events only while this switch is on (see
    /// [`RunOptions::events_while`]).
    pub events_switch: Option<crate::events::EventSwitch>,
    /// The caller knows the thread has never been stored (see [`RunOptions::new_thread`]).
    pub new_thread: bool,
    /// Override the engine's durability for this run.
    pub durability: Option<Durability>,
    /// Nodes to pause before, in addition to the graph's `interrupt_before`.
    pub interrupt_before: Vec<String>,
    /// Nodes to pause after, in addition to the graph's `interrupt_after`.
    pub interrupt_after: Vec<String>,
    /// Supersteps this run may make before failing with `RunError::StepLimit` (default: the
    /// graph's `step_limit`).
    pub step_limit: Option<u64>,
    /// The run's context (see [`RunContext`]); never checkpointed.
    pub context: Option<RunContext>,
}

impl RunOptions {
    /// Options that stream events.
    pub fn streaming() -> Self {
        Self {
            stream_events: true,
            ..Self::default()
        }
    }

    /// Streams every event but [`RunEvent::StateUpdated`](crate::RunEvent::StateUpdated) (see
    /// [`RunOptions::without_state_updates`]).
    pub fn without_state_updates(mut self) -> Self {
        self.without_state_updates = true;
        self
    }

    /// Each streamed [`RunEvent::StateUpdated`](crate::RunEvent::StateUpdated) carries the
    /// thread's state after its superstep, as JSON: what a stream of `values` sends, which a
    /// reader cannot look up later (by then the run may be supersteps further on).
    pub fn with_values(mut self) -> Self {
        self.stream_values = true;
        self
    }

    /// Streams events only while `switch` is on: the caller turns it on and off as the run goes
    /// (a server following a run only while a client watches it). While it is off nothing is
    /// built; the receiver still closes when the run ends. Implies `stream_events`.
    pub fn events_while(mut self, switch: crate::events::EventSwitch) -> Self {
        self.stream_events = true;
        self.events_switch = Some(switch);
        self
    }

    /// Queue behind a running run instead of failing.
    pub fn enqueue(mut self) -> Self {
        self.on_busy = BusyPolicy::Enqueue;
        self
    }

    /// Says the thread has never been stored, so a run with input does not look it up first (a
    /// read per new conversation, ~3 % of a research load's CPU). Nothing can fork: the run's
    /// first checkpoint is stored only if the thread has none, so for a thread that exists after
    /// all the run fails with [`CheckpointError::Conflict`](crate::checkpoint::CheckpointError::Conflict)
    /// before it writes anything. Honoured with `sync` durability only, where the run waits for
    /// that first checkpoint before it goes on; with `async` or `exit`, and for resumes and
    /// continues, the thread is loaded as always. Servers that create a thread and start its
    /// first run at once, and load drivers with fresh thread ids, use it.
    pub fn new_thread(mut self) -> Self {
        self.new_thread = true;
        self
    }

    /// Sets the durability of this run.
    pub fn durability(mut self, d: Durability) -> Self {
        self.durability = Some(d);
        self
    }

    /// Pauses this run before `nodes` run (as well as where the graph says). A name the graph
    /// does not have is refused when the run starts ([`Refusal::UnknownNode`](crate::Refusal::UnknownNode)).
    pub fn interrupt_before<I: IntoIterator<Item = N>, N: Into<String>>(
        mut self,
        nodes: I,
    ) -> Self {
        self.interrupt_before
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// Pauses this run after `nodes` run (as well as where the graph says).
    pub fn interrupt_after<I: IntoIterator<Item = N>, N: Into<String>>(mut self, nodes: I) -> Self {
        self.interrupt_after
            .extend(nodes.into_iter().map(Into::into));
        self
    }

    /// Limits this run to `steps` supersteps (in place of the graph's `step_limit`); 0 is refused
    /// when the run starts.
    pub fn step_limit(mut self, steps: u64) -> Self {
        self.step_limit = Some(steps);
        self
    }

    /// Gives this run a context: nodes read it with
    /// [`NodeContext::context`](crate::NodeContext::context). It is never checkpointed, so a run
    /// that resumes or continues a thread passes its own.
    pub fn context<C: Send + Sync + 'static>(mut self, value: C) -> Self {
        self.context = Some(RunContext::new(value));
        self
    }
}

/// How a run ended, with the state it left.
#[derive(Clone, Debug)]
pub struct RunOutcome<S: State> {
    /// The run.
    pub run_id: RunId,
    /// Its thread.
    pub thread_id: ThreadId,
    /// Finished, interrupted, cancelled or suspended (failures are `Err`).
    pub status: RunStatus,
    /// The state when the run ended (for an interrupted run: before the paused superstep).
    pub state: Arc<S>,
    /// Pending interrupts (non-empty when `status` is `Interrupted`).
    pub interrupts: Vec<Interrupt>,
    /// Supersteps this run completed.
    pub steps: u64,
    /// Node attempts this run made.
    pub node_executions: u64,
}

/// A started run: its events and its outcome.
pub struct RunHandle<S: State> {
    /// The run.
    pub run_id: RunId,
    /// Events, when the run was started with `stream_events`.
    pub events: Option<mpsc::UnboundedReceiver<RunEvent>>,
    pub(crate) outcome: oneshot::Receiver<Result<RunOutcome<S>, RunError>>,
}

impl<S: State> RunHandle<S> {
    /// Waits for the run to end.
    pub async fn wait(self) -> Result<RunOutcome<S>, RunError> {
        self.outcome
            .await
            .map_err(|_| RunError::Internal("supervisor stopped without an outcome".into()))?
    }
}

/// Counters of checkpoint traffic.
#[derive(Debug, Default)]
pub struct CheckpointCounters {
    /// Checkpoint records stored.
    pub records: AtomicU64,
    /// Bytes of those records.
    pub bytes: AtomicU64,
    /// Task-write batches stored.
    pub writes: AtomicU64,
}

impl CheckpointCounters {
    pub(crate) fn record(&self, bytes: usize) {
        self.records.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}

pub(crate) struct ActiveRun<S: State> {
    pub run_id: RunId,
    pub cancel: CancellationToken,
    pub supervisor: Option<ActorRef<super::supervisor::Supervisor<S>>>,
    pub ended: watch::Sender<bool>,
}

/// A migration hook: given the state stored by a graph with another fingerprint (and that
/// fingerprint), returns the state to start a fresh run from, or refuses with a reason.
pub type MigrationHook<S> = Arc<dyn Fn(S, &str) -> Result<S, String> + Send + Sync>;

pub(crate) struct Shared<S: State> {
    pub graph: CompiledGraph<S>,
    pub nodes: Vec<ActorRef<NodeActor<S>>>,
    pub stats: Vec<Arc<NodeStats>>,
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
    pub durability: Durability,
    pub writer: Option<AsyncWriter>,
    pub registry: DashMap<ThreadId, ActiveRun<S>>,
    pub ephemeral: DashMap<ThreadId, SavedThread<S>>,
    /// Paused threads' states kept for their resume ([`super::paused`]).
    pub paused: super::paused::PausedThreads<S>,
    pub counters: CheckpointCounters,
    pub migration: Option<MigrationHook<S>>,
    pub shutting_down: AtomicBool,
    pub total_node_executions: AtomicU64,
    pub store: Option<Arc<dyn crate::store::Store>>,
}

impl<S: State> Shared<S> {
    /// Whether a write the caller waits for joins the writer's next transaction (group commit)
    /// rather than going straight to storage: when the backend gains from it and other runs are
    /// going; alone, the hop to the writer's thread would only add latency.
    fn group_commit(&self, cp: &dyn Checkpointer) -> bool {
        cp.prefers_group_commit() && self.registry.len() > 1
    }

    /// Stores `record` and waits for its commit (counting it is the caller's).
    pub async fn put_and_wait(
        &self,
        record: crate::checkpoint::CheckpointRecord,
    ) -> Result<(), RunError> {
        match (&self.checkpointer, &self.writer) {
            (Some(cp), Some(w)) if self.group_commit(&**cp) => w.put_and_wait(record).await,
            (Some(cp), _) => Ok(cp.put(record).await?),
            (None, _) => Ok(()),
        }
    }

    /// Stores task writes at `head` and waits for their commit.
    pub async fn writes_and_wait(
        &self,
        thread: &ThreadId,
        head: crate::ids::CheckpointId,
        writes: Vec<crate::checkpoint::TaskWrite>,
    ) -> Result<(), RunError> {
        match (&self.checkpointer, &self.writer) {
            (Some(cp), Some(w)) if self.group_commit(&**cp) => {
                w.writes_and_wait(thread.clone(), head, writes).await
            }
            (Some(cp), _) => Ok(cp.put_writes(thread, head, writes).await?),
            (None, _) => Ok(()),
        }
    }

    /// Saves parallel tasks' updates at `head` (their `Update` payloads still JSON) without making
    /// the run wait for their commit, where group commit applies: they join the writer's queue,
    /// ahead of the superstep's checkpoint, and the returned receiver answers for them (a batch
    /// that holds that checkpoint as well stores the checkpoint alone: [`super::superseded`]).
    /// Alone, they go straight to storage and are waited for, as other writes are.
    pub async fn updates_behind(
        &self,
        thread: &ThreadId,
        head: crate::ids::CheckpointId,
        mut writes: Vec<crate::checkpoint::TaskWrite>,
    ) -> Result<Option<super::writer::Receipt>, RunError> {
        let dict = self.graph.body_dictionary();
        match (&self.checkpointer, &self.writer) {
            (Some(cp), Some(w)) if self.group_commit(&**cp) => {
                let (tx, rx) = tokio::sync::oneshot::channel();
                w.send(WriterMsg::Updates(
                    thread.clone(),
                    head,
                    writes,
                    dict,
                    Some(tx),
                ))?;
                Ok(Some(rx))
            }
            (Some(cp), _) => {
                super::persist::encode_updates(&mut writes, dict);
                cp.put_writes(thread, head, writes).await?;
                Ok(None)
            }
            (None, _) => Ok(None),
        }
    }

    /// Removes a run from the registry and wakes whoever queued behind it.
    pub fn release(&self, thread: &ThreadId, run_id: RunId) {
        if let Some((_, run)) = self.registry.remove_if(thread, |_, r| r.run_id == run_id) {
            let _ = run.ended.send(true);
        }
    }
}
