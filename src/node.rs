//! Nodes: the units of work of a graph, and what they can see and do while they run.
//!
//! A node reads the state (as it stood at the start of its superstep, plus, for a dependency-driven
//! task, the updates of the tasks it depends on) and returns an update. It never mutates shared
//! state: the supervisor merges updates. A node can be an async function, a plain synchronous
//! function (run inline on its node actor: the fast path for trivial nodes that do no I/O), or any
//! type implementing [`Node`].

use crate::context::RunContext;
use crate::events::{EventSink, RunEvent};
use crate::ids::TaskId;
use crate::state::State;
use crate::store::Store;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// The boxed future an async node returns.
pub type NodeFuture<U> = Pin<Box<dyn Future<Output = Result<U, NodeError>> + Send + 'static>>;

/// Why a node did not return an update.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum NodeError {
    /// The node paused the run, asking for input; the payload is shown to whoever resumes it.
    /// Displayed without its payload, which the run's interrupt carries: a node-finished event
    /// or a log line would otherwise hold a whole review payload (a research plan, ~1 KB of
    /// JSON formatted on every pause).
    #[error("interrupted (its payload is the run's interrupt)")]
    Interrupt(serde_json::Value),
    /// A failure worth retrying (a transient I/O or model error).
    #[error("{0}")]
    Retryable(String),
    /// A failure that retrying will not fix.
    #[error("{0}")]
    Fatal(String),
    /// The node ran longer than its timeout.
    #[error("timed out after {0:?}")]
    Timeout(std::time::Duration),
    /// The node panicked; its actor was restarted.
    #[error("panicked: {0}")]
    Panicked(String),
    /// The run was cancelled while the node ran.
    #[error("cancelled")]
    Cancelled,
}

impl NodeError {
    /// A retryable failure from any displayable error.
    pub fn retryable(e: impl std::fmt::Display) -> Self {
        Self::Retryable(e.to_string())
    }

    /// A fatal failure from any displayable error.
    pub fn fatal(e: impl std::fmt::Display) -> Self {
        Self::Fatal(e.to_string())
    }
}

/// What a running task knows besides the state: its identity, input, resume value, and channels to
/// the outside (events, cancellation).
#[derive(Clone)]
pub struct NodeContext {
    pub(crate) task: TaskId,
    pub(crate) node: Arc<str>,
    pub(crate) attempt: u32,
    pub(crate) input: Option<Arc<serde_json::Value>>,
    /// Answers to this task's `interrupt` calls so far, in call order, and the calls this
    /// attempt made (`None` for a task never paused: its first call pauses, nothing to count).
    pub(crate) answers: Option<Arc<Answers>>,
    pub(crate) events: EventSink,
    pub(crate) cancel: CancellationToken,
    /// The run's `tracing` span: node spans are its children.
    pub(crate) span: tracing::Span,
    /// Results memoised by this task, from earlier attempts and from this one (and what its
    /// effects need of the task: `crate::effect`).
    pub(crate) memos: Arc<Memos>,
    /// The run's thread and effect journal (`None` for a detached context).
    pub(crate) effects: Option<Arc<crate::effect::EffectScope>>,
    /// The run's context (`RunOptions::context`).
    pub(crate) context: Option<RunContext>,
    /// The engine's store (`EngineBuilder::store`).
    pub(crate) store: Option<Arc<dyn Store>>,
    /// What command and subgraph nodes' tasks carry besides (`None` for other nodes: one
    /// pointer in every context, nothing allocated).
    pub(crate) special: Option<Arc<SpecialTask>>,
}

/// What a task of a command node or a subgraph node needs that other tasks do not.
#[derive(Debug, Default)]
pub(crate) struct SpecialTask {
    /// Where a command node's task leaves its `Command::goto` for the supervisor to route by.
    pub goto: std::sync::Mutex<Option<crate::graph::Route>>,
    /// A subgraph task's child thread (see `runtime::subgraph`).
    pub child_thread: Option<crate::ids::ThreadId>,
}

/// The answers a task's `interrupt` calls get, and how many calls the attempt made.
#[derive(Debug, Default)]
pub(crate) struct Answers {
    pub given: Vec<serde_json::Value>,
    pub calls: std::sync::atomic::AtomicUsize,
}

impl Answers {
    /// `None` when there are none (the common case costs no allocation).
    pub fn new(given: Vec<serde_json::Value>) -> Option<Arc<Self>> {
        (!given.is_empty()).then(|| {
            Arc::new(Self {
                given,
                calls: Default::default(),
            })
        })
    }
}

/// What a task memoised with [`NodeContext::memo`]: results saved by earlier attempts of the same
/// task (before an interrupt, a retry, or a crash), and the ones this attempt computed.
#[derive(Debug, Default)]
pub(crate) struct Memos {
    pub saved: std::collections::BTreeMap<String, serde_json::Value>,
    pub fresh: std::sync::Mutex<Vec<(String, serde_json::Value)>>,
    /// The checkpoint the task started from (a part of its effects' keys).
    pub head: Option<crate::ids::CheckpointId>,
    /// The node opted out of journaling its effects (`NodeOptions::repeat_effects`).
    pub repeat_effects: bool,
    /// The effect calls of this attempt, by name.
    pub effect_calls: crate::effect::EffectCalls,
}

impl Memos {
    /// Takes the results this attempt computed.
    pub fn take_fresh(&self) -> Vec<(String, serde_json::Value)> {
        std::mem::take(&mut *self.fresh.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

impl NodeContext {
    /// A context for calling a node directly (tests, or composing nodes inside another node).
    pub fn detached(node: &str) -> Self {
        Self {
            task: TaskId { step: 0, index: 0 },
            node: Arc::from(node),
            attempt: 1,
            input: None,
            answers: None,
            events: EventSink::disabled(),
            cancel: CancellationToken::new(),
            span: tracing::Span::none(),
            memos: Arc::default(),
            effects: None,
            context: None,
            store: None,
            special: None,
        }
    }

    /// The same detached context carrying a run context (as `RunOptions::context` gives one).
    pub fn with_context<C: Send + Sync + 'static>(mut self, value: C) -> Self {
        self.context = Some(RunContext::new(value));
        self
    }

    /// The same detached context with a store (as `EngineBuilder::store` gives one).
    pub fn with_store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// The same detached context carrying a fan-out input.
    pub fn with_input(mut self, input: serde_json::Value) -> Self {
        self.input = Some(Arc::new(input));
        self
    }

    /// The same detached context carrying a resume value (the answer to its first `interrupt`).
    pub fn with_resume(self, value: serde_json::Value) -> Self {
        self.with_answers(vec![value])
    }

    /// The same detached context carrying answers to its first `interrupt` calls, in order.
    pub fn with_answers(mut self, answers: Vec<serde_json::Value>) -> Self {
        self.answers = Answers::new(answers);
        self
    }

    /// Leaves a command node's `goto` for the supervisor (a detached context drops it).
    pub(crate) fn set_goto(&self, goto: Option<crate::graph::Route>) {
        if let Some(special) = &self.special {
            *special.goto.lock().unwrap_or_else(|p| p.into_inner()) = goto;
        }
    }

    /// A `tracing` span for this task, a child of its run's span.
    pub(crate) fn task_span(&self) -> tracing::Span {
        tracing::info_span!(parent: &self.span, "node", node = %self.node, task = %self.task, attempt = self.attempt)
    }

    /// This task's id (stable across a crash and resume).
    pub fn task_id(&self) -> TaskId {
        self.task
    }

    /// The node being run.
    pub fn node(&self) -> &str {
        &self.node
    }

    /// 1 for the first attempt, then 2, 3, ... under a retry policy.
    pub fn attempt(&self) -> u32 {
        self.attempt
    }

    /// The input of a fan-out task (`Send`), or `None` for a task triggered by an edge.
    pub fn input(&self) -> Option<&serde_json::Value> {
        self.input.as_deref()
    }

    /// Pauses the run with `payload`; when the run is resumed, the node runs again from its start
    /// and this call returns the resume value instead. Calls are counted per task, as LangGraph's
    /// `interrupt()` does: a node that asks again after its first answer (a loop asking until the
    /// answer is valid) pauses at its second call with the first already answered, and so on —
    /// the `n`-th call returns the `n`-th answer. Use it with `?`:
    /// `let answer = ctx.interrupt(json!({"question": q}))?;`. Wrap work that must not be redone
    /// on resume in [`NodeContext::memo`], and external calls in [`NodeContext::effect`] (see
    /// `docs/interrupts.md`).
    pub fn interrupt(&self, payload: serde_json::Value) -> Result<serde_json::Value, NodeError> {
        let Some(a) = &self.answers else {
            return Err(NodeError::Interrupt(payload));
        };
        let call = a.calls.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        match a.given.get(call) {
            Some(value) => Ok(value.clone()),
            None => Err(NodeError::Interrupt(payload)),
        }
    }

    /// Runs `work` once per task: its result is saved with the task's writes when the task
    /// pauses (or fails and is retried), and a later attempt of the same task (after a resume, a
    /// retry, or a crash and continue) gets the saved result instead of running `work` again.
    /// Keys must be unique within the node. The result must round-trip through JSON.
    ///
    /// A memo is not durable until the task's writes are: a crash between `work` and the
    /// task's commit runs `work` again. For an external call that must happen once (an email,
    /// a payment, a paid completion), use [`NodeContext::effect`], journaled before it returns.
    pub async fn memo<T, F, Fut>(&self, key: &str, work: F) -> Result<T, NodeError>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<T, NodeError>>,
    {
        if let Some(v) = self.memo_lookup(key)? {
            return Ok(v);
        }
        let value = work().await?;
        self.memo_record(key, &value)?;
        Ok(value)
    }

    /// [`NodeContext::memo`] for synchronous work.
    pub fn memo_sync<T, F>(&self, key: &str, work: F) -> Result<T, NodeError>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Result<T, NodeError>,
    {
        if let Some(v) = self.memo_lookup(key)? {
            return Ok(v);
        }
        let value = work()?;
        self.memo_record(key, &value)?;
        Ok(value)
    }

    pub(crate) fn memo_lookup<T: serde::de::DeserializeOwned>(
        &self,
        key: &str,
    ) -> Result<Option<T>, NodeError> {
        let fresh = self.memos.fresh.lock().unwrap_or_else(|p| p.into_inner());
        let found = fresh
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v)
            .or_else(|| self.memos.saved.get(key));
        found
            .map(|v| {
                serde_json::from_value(v.clone()).map_err(|e| {
                    NodeError::Fatal(format!(
                        "memo `{key}` of `{}` does not decode: {e}",
                        self.node
                    ))
                })
            })
            .transpose()
    }

    pub(crate) fn memo_record<T: serde::Serialize>(
        &self,
        key: &str,
        value: &T,
    ) -> Result<(), NodeError> {
        let v = serde_json::to_value(value).map_err(|e| {
            NodeError::Fatal(format!(
                "memo `{key}` of `{}` does not encode: {e}",
                self.node
            ))
        })?;
        self.memos
            .fresh
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((key.to_string(), v));
        Ok(())
    }

    /// The run's context, if the run was given one of type `C` (`RunOptions::context`). It is
    /// never checkpointed: after a resume it is the resuming run's.
    pub fn context<C: Send + Sync + 'static>(&self) -> Option<&C> {
        self.context.as_ref().and_then(RunContext::get::<C>)
    }

    /// [`NodeContext::context`], or a fatal error naming the type a node needs and did not get.
    pub fn require_context<C: Send + Sync + 'static>(&self) -> Result<&C, NodeError> {
        self.context::<C>().ok_or_else(|| {
            NodeError::Fatal(format!(
                "node `{}` needs a run context of type `{}` (RunOptions::context)",
                self.node,
                std::any::type_name::<C>()
            ))
        })
    }

    /// The engine's store: memory shared across threads (see [`crate::store`]). A fatal error
    /// when the engine has none, so a node that needs it says so.
    pub fn store(&self) -> Result<&Arc<dyn Store>, NodeError> {
        self.store.as_ref().ok_or_else(|| {
            NodeError::Fatal(format!(
                "node `{}` needs a store; give the engine one with EngineBuilder::store",
                self.node
            ))
        })
    }

    /// The latest resume value, if this task is being re-run after an interrupt.
    pub fn resume_value(&self) -> Option<&serde_json::Value> {
        self.answers.as_ref().and_then(|a| a.given.last())
    }

    /// Emits a custom event into the run's event stream.
    pub fn emit(&self, payload: serde_json::Value) {
        self.events.emit(|| RunEvent::Custom {
            node: String::from(&*self.node),
            task: self.task,
            payload,
        });
    }

    /// Streams a chunk of a message — typically a model's answer as its tokens arrive — as a
    /// [`RunEvent::Message`]. Chunks of one message share `message_id`. Free when the run does
    /// not stream events (nothing is built); chunks are events, not state: the node still
    /// returns the whole answer in its update.
    pub fn stream_chunk(&self, message_id: &str, chunk: &str) {
        self.events.emit(|| RunEvent::Message {
            node: String::from(&*self.node),
            task: self.task,
            message_id: message_id.to_string(),
            chunk: chunk.to_string(),
        });
    }

    /// True when the run streams events (so chunks are worth producing).
    pub fn is_streaming(&self) -> bool {
        self.events.is_enabled()
    }

    /// True once the run has been cancelled; long nodes should check it.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves when the run is cancelled.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }
}

/// A node implemented as a type. Closures are adapted by the graph builder.
pub trait Node<S: State>: Send + Sync + 'static {
    /// Runs the node on a snapshot of the state.
    fn run(&self, state: Arc<S>, ctx: NodeContext) -> NodeFuture<S::Update>;
}

type SyncFn<S> = dyn Fn(&S, &NodeContext) -> Result<<S as State>::Update, NodeError> + Send + Sync;

/// How a node runs: inline on its actor (sync) or as a task under the node's concurrency limit.
pub enum NodeBody<S: State> {
    /// A synchronous function: runs inline on the node actor, no task spawn. Must not block.
    Sync(Arc<SyncFn<S>>),
    /// An async node: spawned as a task, bounded by the node's concurrency limit.
    Async(Arc<dyn Node<S>>),
}

impl<S: State> Clone for NodeBody<S> {
    fn clone(&self) -> Self {
        match self {
            Self::Sync(f) => Self::Sync(f.clone()),
            Self::Async(n) => Self::Async(n.clone()),
        }
    }
}

/// Adapts an async closure into a [`Node`].
pub struct FnNode<F>(pub F);

impl<S, F, Fut> Node<S> for FnNode<F>
where
    S: State,
    F: Fn(Arc<S>, NodeContext) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = Result<S::Update, NodeError>> + Send + 'static,
{
    fn run(&self, state: Arc<S>, ctx: NodeContext) -> NodeFuture<S::Update> {
        Box::pin((self.0)(state, ctx))
    }
}

#[cfg(test)]
mod tests {
    use super::NodeError;

    /// An interrupt's payload (a whole plan, for the research planner's review) is the run's
    /// interrupt to show; the error's text, which events and logs carry, leaves it out.
    #[test]
    fn an_interrupt_displays_without_its_payload() {
        let e = NodeError::Interrupt(serde_json::json!({"plan": vec!["a long plan"; 50]}));
        let text = e.to_string();
        assert!(text.starts_with("interrupted"), "{text}");
        assert!(!text.contains("long plan"), "{text}");
    }
}
