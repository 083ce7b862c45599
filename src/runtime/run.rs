//! The public types a caller starts, follows and resumes runs with: a run's options, how it
//! resumes, its handle and its outcome, and a thread's state and history as the engine shows them.
//! They are plain data, apart from the engine that acts on them.

use super::error::RunError;
use crate::checkpoint::CheckpointMetadata;
use crate::context::RunContext;
use crate::events::{Interrupt, RunEvent, RunStatus};
use crate::ids::{CheckpointId, RunId, ThreadId};
use crate::state::State;
use std::collections::BTreeMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

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

/// When checkpoints are written.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Durability {
    /// Each superstep's checkpoint is stored before the next superstep starts.
    #[default]
    Sync,
    /// Checkpoints are stored in the background, in order; the run waits for them when it ends.
    Async,
    /// Only the final (or paused) checkpoint is stored, when the run ends or pauses.
    Exit,
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

/// A migration hook: given the state stored by a graph with another fingerprint (and that
/// fingerprint), returns the state to start a fresh run from, or refuses with a reason.
pub type MigrationHook<S> = Arc<dyn Fn(S, &str) -> Result<S, String> + Send + Sync>;

/// A resume value: one value for the single pending interrupt, or one per interrupt id.
#[derive(Clone, Debug, PartialEq)]
pub enum Resume {
    /// The value for the only pending interrupt (or for every pending pause before/after a node).
    Value(serde_json::Value),
    /// Values by interrupt id; every pending interrupt needs one.
    ById(BTreeMap<String, serde_json::Value>),
    /// No value (LangGraph resuming a subgraph it has no answer for): a pause before or after a
    /// node is consumed; a task paused inside a node runs again from its start and, its
    /// question still unanswered, pauses there again.
    NoAnswer,
}

/// A thread's state as seen from outside.
#[derive(Clone, Debug)]
pub struct ThreadState<S: State> {
    /// The state at the head checkpoint.
    pub values: Arc<S>,
    /// The head checkpoint (`None` for an ephemeral engine's thread).
    pub checkpoint: Option<CheckpointId>,
    /// Nodes of the pending superstep (empty: idle).
    pub next: Vec<String>,
    /// Pending interrupts.
    pub interrupts: Vec<Interrupt>,
    /// Supersteps run on the thread.
    pub step: u64,
}

/// One entry of a thread's history.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointInfo {
    /// The checkpoint.
    pub id: CheckpointId,
    /// Its parent.
    pub parent: Option<CheckpointId>,
    /// Its metadata.
    pub metadata: CheckpointMetadata,
}
