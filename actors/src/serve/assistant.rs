//! The seam between the server and a graph: an [`Assistant`] is anything the Agent Server API can
//! run threads on. The server holds assistants as `Arc<dyn Assistant>` and never names a graph's
//! state type; [`GraphAssistant`] makes any compiled graph one, its state going in and out as
//! JSON through serde, shaped by a [`GraphIo`] (the default, [`PlainIo`], is the state's own
//! serde form). The two planners are assistants like any other (`serve::planners`).
//!
//! Why a trait object and not a generic server: one server serves several graphs of different
//! state types side by side, and a thread is routed to its assistant by id at run time.

use async_trait::async_trait;
use planwright::runtime::{NodeStatsSnapshot, RunHandle, ThreadState};
use planwright::{
    CheckpointId, CompiledGraph, Engine, Interrupt, Resume, RunError, RunEvent, RunId, RunOptions,
    RunOutcome, RunStatus, State, ThreadId,
};
use serde_json::{json, Value};
use std::any::Any;
use std::sync::Arc;
use tokio::sync::mpsc;

/// A run's start, checked by its assistant before anything is recorded ([`Assistant::check`]):
/// the graph's own input or resume value, opaque to the server.
pub struct Checked(Box<dyn Any + Send>);

/// What a request answers a paused thread with (`RunBody::resume` reads it from a request).
#[derive(Clone, Debug, PartialEq)]
pub enum ResumeAsk {
    /// One value for the pending interrupt (or pause).
    Value(Value),
    /// Values by interrupt id.
    ById(std::collections::BTreeMap<String, Value>),
    /// No value: the pending superstep goes on, and a node that asked asks again
    /// ([`planwright::Resume::NoAnswer`]).
    NoAnswer,
}

/// What a run asks of a thread.
#[derive(Clone, Debug)]
pub enum Start {
    /// New input, merged into the thread's state.
    Input(Value),
    /// An answer to the thread's pending interrupts (`command: {"resume": …}`, or a
    /// `RemoteGraph` node's re-run).
    Resume(ResumeAsk),
}

/// A thread's current position, as the API shows it.
#[derive(Clone, Debug)]
pub struct ThreadView {
    /// The values (the assistant's JSON form of the state).
    pub values: Value,
    /// Nodes to run next.
    pub next: Vec<String>,
    /// Pending interrupts.
    pub interrupts: Vec<Interrupt>,
    /// The newest checkpoint.
    pub checkpoint: Option<CheckpointId>,
    /// Supersteps so far.
    pub step: u64,
    /// The graph ended in failure (its own notion: the research planner's `failed`, the field
    /// planner's `aborted`); the thread's status is then `error`.
    pub failed: bool,
}

/// How a run ended: its status and its values (`__interrupt__` included when paused).
#[derive(Clone, Debug)]
pub struct Outcome {
    /// Finished, interrupted, cancelled or suspended.
    pub status: RunStatus,
    /// The values.
    pub values: Value,
}

/// Why an edit of a thread's state (`POST /threads/{id}/state`) was refused.
#[derive(Debug, thiserror::Error)]
pub enum EditError {
    /// The values are not an update of the graph's state.
    #[error("{0}")]
    Values(String),
    /// The engine refused (unknown node or thread, busy thread, storage).
    #[error(transparent)]
    Run(#[from] RunError),
}

/// A started run of some assistant.
#[async_trait]
pub trait AssistantRun: Send {
    /// The run.
    fn run_id(&self) -> RunId;
    /// The run's events, when it streams them (once).
    fn take_events(&mut self) -> Option<mpsc::UnboundedReceiver<RunEvent>>;
    /// Waits for the run to end.
    async fn wait(self: Box<Self>) -> Result<Outcome, RunError>;
}

/// A graph the server can run threads on. Object safe: the server keeps `Arc<dyn Assistant>`.
/// Implement it through [`GraphAssistant`] unless the graph is not a Planwright [`Engine`].
#[async_trait]
pub trait Assistant: Send + Sync + 'static {
    /// Its `assistant_id` (also its `graph_id` and name).
    fn id(&self) -> &str;
    /// One line for `/assistants/{id}` and the studio.
    fn description(&self) -> &str;
    /// The graph, as `/assistants/{id}/graph` shows it.
    fn graph_json(&self) -> Value;
    /// JSON Schemas of the input, output, state, config and context, as
    /// `/assistants/{id}/schemas` shows them.
    fn schemas(&self) -> Value;
    /// The names of the graph's nodes (checked against `interrupt_before`/`as_node`).
    fn node_names(&self) -> Vec<String>;
    /// Checks a run's input or resume value for `thread`; a refusal names the problem.
    fn check(&self, thread: &ThreadId, start: Start) -> Result<Checked, String>;
    /// Checks values written by `POST /threads/{id}/state` as an update of the state.
    fn check_update(&self, values: Value) -> Result<Checked, String>;
    /// False when a thread whose graph has finished refuses new input (the field planner keeps
    /// its result: new input needs a new thread).
    fn takes_input_when_finished(&self) -> bool {
        true
    }
    /// Starts a checked run on `thread`; `replace` abandons an unfinished superstep (after a
    /// cancel or a time-travel branch) instead of refusing.
    async fn start(
        &self,
        thread: ThreadId,
        start: Checked,
        replace: bool,
        opts: RunOptions,
    ) -> Result<Box<dyn AssistantRun>, RunError>;
    /// Writes a checked update to a paused `thread` and resumes it with a checked resume
    /// (`command: {"update", "resume"}`): [`Engine::start_resume_updated`].
    async fn start_updated(
        &self,
        thread: ThreadId,
        update: Checked,
        resume: Checked,
        opts: RunOptions,
    ) -> Result<Box<dyn AssistantRun>, RunError>;
    /// Continues `thread` from its newest checkpoint (a run with no input).
    async fn start_continue(
        &self,
        thread: ThreadId,
        opts: RunOptions,
    ) -> Result<Box<dyn AssistantRun>, RunError>;
    /// The thread's position (`None`: nothing stored yet).
    async fn view(&self, thread: &ThreadId) -> Result<Option<ThreadView>, RunError>;
    /// The values of a state the engine streamed as JSON ([`RunEvent::StateUpdated`]), as
    /// [`Assistant::view`] shows them.
    fn values_of(&self, thread: &ThreadId, state: Value) -> serde_json::Result<Value>;
    /// The thread as it stood at one of its checkpoints.
    async fn view_at(&self, thread: &ThreadId, id: CheckpointId) -> Result<ThreadView, RunError>;
    /// The values at one checkpoint of the thread.
    async fn values_at(&self, thread: &ThreadId, id: CheckpointId) -> Result<Value, RunError> {
        Ok(self.view_at(thread, id).await?.values)
    }
    /// Writes checked values to an idle thread as node `as_node` would (default: the node that
    /// wrote last, else the first node); returns the new checkpoint.
    async fn update_state(
        &self,
        thread: &ThreadId,
        update: Checked,
        as_node: &str,
    ) -> Result<CheckpointId, EditError>;
    /// Writes checked values (or nothing) to an idle thread and makes `goto` the nodes that run
    /// next (a run's `command: {"update", "goto"}`); returns the new checkpoint.
    async fn update_goto(
        &self,
        thread: &ThreadId,
        update: Option<Checked>,
        goto: &[String],
    ) -> Result<CheckpointId, EditError>;
    /// True while the thread has a run in progress.
    fn is_running(&self, thread: &ThreadId) -> bool;
    /// Waits until the thread has no run going.
    async fn wait_idle(&self, thread: &ThreadId);
    /// Cancels the thread's run, if any.
    fn cancel(&self, thread: &ThreadId);
    /// Takes the thread back to checkpoint `at` (time travel on the same thread).
    async fn branch(&self, thread: &ThreadId, at: CheckpointId) -> Result<CheckpointId, RunError>;
    /// Copies the thread at `at` into `into`.
    async fn fork(
        &self,
        thread: &ThreadId,
        at: CheckpointId,
        into: &ThreadId,
    ) -> Result<CheckpointId, RunError>;
    /// Deletes the thread and everything stored for it.
    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), RunError>;
    /// Keeps only the thread's newest `keep` checkpoints (at least one; the oldest kept holds
    /// the whole state), deleting the older ones and their writes.
    async fn prune(&self, thread: &ThreadId, keep: usize) -> Result<(), RunError>;
    /// Each node's statistics now.
    fn node_stats(&self) -> Vec<NodeStatsSnapshot>;
    /// Runs in progress.
    fn active_runs(&self) -> usize;
    /// The engine's checkpoint counters (puts, batches, bytes).
    fn checkpoint_counters(&self) -> (u64, u64, u64);
    /// Stops every run at its next superstep boundary, checkpointed.
    async fn shutdown(&self);
}

/// How a graph's state meets JSON: run input, resume values, the values shown for a thread and a
/// run's result. Every method has a default over the state's serde form ([`PlainIo`]).
pub trait GraphIo<S: State>: Send + Sync + 'static {
    /// A run's input as the graph's first update.
    fn input(&self, _thread: &ThreadId, input: Value) -> Result<S::Update, String> {
        serde_json::from_value(input).map_err(|e| format!("malformed input: {e}"))
    }
    /// A resume value as the graph's nodes read it.
    fn resume(&self, value: Value) -> Result<Value, String> {
        Ok(value)
    }
    /// Values written by `POST /threads/{id}/state`, as an update.
    fn update(&self, values: Value) -> Result<S::Update, String> {
        serde_json::from_value(values).map_err(|e| format!("malformed values: {e}"))
    }
    /// The values shown for the thread; `pending` is the first pending interrupt's value.
    fn values(&self, _thread: &ThreadId, state: &S, _pending: Option<&Value>) -> Value {
        serde_json::to_value(state).unwrap_or(Value::Null)
    }
    /// A run's result (`__interrupt__` is added by the server when it paused).
    fn run_values(&self, out: &RunOutcome<S>) -> Value {
        let pending = out.interrupts.first().map(|i| &i.value);
        self.values(&out.thread_id, &out.state, pending)
    }
    /// True when the state says the graph ended in failure.
    fn failed(&self, _state: &S) -> bool {
        false
    }
    /// False when a finished thread refuses new input.
    fn takes_input_when_finished(&self) -> bool {
        true
    }
    /// JSON Schemas of the input, output, state, config and context (default: objects naming
    /// the state's fields).
    fn schemas(&self) -> Value {
        let fields: serde_json::Map<String, Value> = S::field_names()
            .iter()
            .map(|f| (f.to_string(), json!({})))
            .collect();
        let state = json!({"type": "object", "properties": fields});
        json!({
            "input_schema": state, "output_schema": state, "state_schema": state,
            "config_schema": {"type": "object", "properties": {}},
            "context_schema": {"type": "object", "properties": {}},
        })
    }
}

/// The state's own serde form in and out.
#[derive(Clone, Copy, Debug, Default)]
pub struct PlainIo;

impl<S: State> GraphIo<S> for PlainIo {}

/// Any compiled graph as an assistant: an [`Engine`] and the [`GraphIo`] that shapes its JSON.
pub struct GraphAssistant<S: State, I: GraphIo<S> = PlainIo> {
    id: String,
    description: String,
    engine: Engine<S>,
    io: Arc<I>,
}

impl<S: State> GraphAssistant<S, PlainIo> {
    /// The engine's graph as assistant `id`, its state as its serde form.
    pub fn new(id: impl Into<String>, engine: Engine<S>) -> Self {
        Self::with_io(id, engine, PlainIo)
    }
}

impl<S: State, I: GraphIo<S>> GraphAssistant<S, I> {
    /// The engine's graph as assistant `id`, its JSON shaped by `io`.
    pub fn with_io(id: impl Into<String>, engine: Engine<S>, io: I) -> Self {
        let id = id.into();
        Self {
            description: format!("graph `{id}`"),
            id,
            engine,
            io: Arc::new(io),
        }
    }

    /// Sets the one-line description.
    pub fn describe(mut self, description: impl Into<String>) -> Self {
        self.description = description.into();
        self
    }

    /// The engine.
    pub fn engine(&self) -> &Engine<S> {
        &self.engine
    }
}

/// What [`GraphAssistant::check`] hands to [`GraphAssistant::start`].
enum TypedStart<S: State> {
    Input(S::Update),
    Resume(Resume),
}

struct GraphRun<S: State, I: GraphIo<S>> {
    handle: RunHandle<S>,
    io: Arc<I>,
}

#[async_trait]
impl<S: State, I: GraphIo<S>> AssistantRun for GraphRun<S, I> {
    fn run_id(&self) -> RunId {
        self.handle.run_id
    }

    fn take_events(&mut self) -> Option<mpsc::UnboundedReceiver<RunEvent>> {
        self.handle.events.take()
    }

    async fn wait(self: Box<Self>) -> Result<Outcome, RunError> {
        let out = self.handle.wait().await?;
        let mut values = self.io.run_values(&out);
        if out.status == RunStatus::Interrupted && values.is_object() {
            values["__interrupt__"] = interrupts_json(&out.interrupts);
        }
        Ok(Outcome {
            status: out.status,
            values,
        })
    }
}

/// Interrupts as the API writes them: `[{"value", "id"}]`.
pub fn interrupts_json(list: &[Interrupt]) -> Value {
    list.iter()
        .map(|i| json!({"value": i.value, "id": i.id.0}))
        .collect()
}

/// The names of a compiled graph's nodes.
pub fn node_names<S: State>(graph: &CompiledGraph<S>) -> Vec<String> {
    graph.nodes().iter().map(|n| n.name.to_string()).collect()
}

/// A [`Checked`] made by another assistant: a bug of the caller, refused rather than run.
fn foreign_check(id: &str) -> RunError {
    RunError::Serde(format!(
        "assistant `{id}` was handed a run checked by another assistant"
    ))
}

impl<S: State, I: GraphIo<S>> GraphAssistant<S, I> {
    fn view_of(&self, thread: &ThreadId, s: ThreadState<S>) -> ThreadView {
        let pending = s.interrupts.first().map(|i| &i.value);
        ThreadView {
            values: self.io.values(thread, &s.values, pending),
            failed: self.io.failed(&s.values),
            next: s.next,
            interrupts: s.interrupts,
            checkpoint: s.checkpoint,
            step: s.step,
        }
    }

    fn boxed(&self, handle: RunHandle<S>) -> Box<dyn AssistantRun> {
        Box::new(GraphRun {
            handle,
            io: self.io.clone(),
        })
    }
}

#[async_trait]
impl<S: State, I: GraphIo<S>> Assistant for GraphAssistant<S, I> {
    fn id(&self) -> &str {
        &self.id
    }

    fn description(&self) -> &str {
        &self.description
    }

    fn graph_json(&self) -> Value {
        super::graph_shape::graph_json(self.engine.graph())
    }

    fn schemas(&self) -> Value {
        self.io.schemas()
    }

    fn node_names(&self) -> Vec<String> {
        node_names(self.engine.graph())
    }

    fn check(&self, thread: &ThreadId, start: Start) -> Result<Checked, String> {
        let typed: TypedStart<S> = match start {
            Start::Input(v) => TypedStart::Input(self.io.input(thread, v)?),
            Start::Resume(ResumeAsk::Value(v)) => {
                TypedStart::Resume(Resume::Value(self.io.resume(v)?))
            }
            Start::Resume(ResumeAsk::ById(map)) => TypedStart::Resume(Resume::ById(
                map.into_iter()
                    .map(|(id, v)| Ok((id, self.io.resume(v)?)))
                    .collect::<Result<_, String>>()?,
            )),
            Start::Resume(ResumeAsk::NoAnswer) => TypedStart::Resume(Resume::NoAnswer),
        };
        Ok(Checked(Box::new(typed)))
    }

    fn check_update(&self, values: Value) -> Result<Checked, String> {
        Ok(Checked(Box::new(self.io.update(values)?)))
    }

    fn takes_input_when_finished(&self) -> bool {
        self.io.takes_input_when_finished()
    }

    async fn start(
        &self,
        thread: ThreadId,
        start: Checked,
        replace: bool,
        opts: RunOptions,
    ) -> Result<Box<dyn AssistantRun>, RunError> {
        let Ok(start) = start.0.downcast::<TypedStart<S>>() else {
            return Err(foreign_check(&self.id));
        };
        let handle = match *start {
            TypedStart::Input(update) if replace => {
                self.engine.start_replacing(thread, update, opts).await?
            }
            TypedStart::Input(update) => self.engine.start(thread, update, opts).await?,
            TypedStart::Resume(r) => self.engine.start_resume(thread, r, opts).await?,
        };
        Ok(self.boxed(handle))
    }

    async fn start_updated(
        &self,
        thread: ThreadId,
        update: Checked,
        resume: Checked,
        opts: RunOptions,
    ) -> Result<Box<dyn AssistantRun>, RunError> {
        let (Ok(update), Ok(resume)) = (
            update.0.downcast::<S::Update>(),
            resume.0.downcast::<TypedStart<S>>(),
        ) else {
            return Err(foreign_check(&self.id));
        };
        let TypedStart::Resume(r) = *resume else {
            return Err(RunError::Serde(
                "a command's update goes with a resume, not with input".into(),
            ));
        };
        let handle = self
            .engine
            .start_resume_updated(thread, *update, r, opts)
            .await?;
        Ok(self.boxed(handle))
    }

    async fn start_continue(
        &self,
        thread: ThreadId,
        opts: RunOptions,
    ) -> Result<Box<dyn AssistantRun>, RunError> {
        let handle = self.engine.start_continue(thread, opts).await?;
        Ok(self.boxed(handle))
    }

    async fn view(&self, thread: &ThreadId) -> Result<Option<ThreadView>, RunError> {
        Ok(self
            .engine
            .get_state(thread)
            .await?
            .map(|s| self.view_of(thread, s)))
    }

    fn values_of(&self, thread: &ThreadId, state: Value) -> serde_json::Result<Value> {
        let s: S = serde_json::from_value(state)?;
        Ok(self.io.values(thread, &s, None))
    }

    async fn view_at(&self, thread: &ThreadId, id: CheckpointId) -> Result<ThreadView, RunError> {
        let s = self.engine.thread_state_at(thread, id).await?;
        Ok(self.view_of(thread, s))
    }

    async fn update_state(
        &self,
        thread: &ThreadId,
        update: Checked,
        as_node: &str,
    ) -> Result<CheckpointId, EditError> {
        let Ok(update) = update.0.downcast::<S::Update>() else {
            return Err(foreign_check(&self.id).into());
        };
        Ok(self.engine.update_state(thread, *update, as_node).await?)
    }

    async fn update_goto(
        &self,
        thread: &ThreadId,
        update: Option<Checked>,
        goto: &[String],
    ) -> Result<CheckpointId, EditError> {
        let update = match update {
            None => S::Update::default(),
            Some(c) => match c.0.downcast::<S::Update>() {
                Ok(u) => *u,
                Err(_) => return Err(foreign_check(&self.id).into()),
            },
        };
        Ok(self.engine.update_state_goto(thread, update, goto).await?)
    }

    fn is_running(&self, thread: &ThreadId) -> bool {
        self.engine.is_running(thread)
    }

    async fn wait_idle(&self, thread: &ThreadId) {
        self.engine.wait_idle(thread).await
    }

    fn cancel(&self, thread: &ThreadId) {
        self.engine.cancel(thread);
    }

    async fn branch(&self, thread: &ThreadId, at: CheckpointId) -> Result<CheckpointId, RunError> {
        self.engine.branch(thread, at).await
    }

    async fn fork(
        &self,
        thread: &ThreadId,
        at: CheckpointId,
        into: &ThreadId,
    ) -> Result<CheckpointId, RunError> {
        self.engine.fork(thread, at, into).await
    }

    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), RunError> {
        self.engine.delete_thread(thread).await
    }

    async fn prune(&self, thread: &ThreadId, keep: usize) -> Result<(), RunError> {
        self.engine.prune(thread, keep).await
    }

    fn node_stats(&self) -> Vec<NodeStatsSnapshot> {
        self.engine.node_stats()
    }

    fn active_runs(&self) -> usize {
        self.engine.active_runs()
    }

    fn checkpoint_counters(&self) -> (u64, u64, u64) {
        self.engine.checkpoint_counters()
    }

    async fn shutdown(&self) {
        self.engine.shutdown().await
    }
}
