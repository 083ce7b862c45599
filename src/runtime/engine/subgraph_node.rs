//! The subgraph node: runs a child graph on an engine of its own, as one task of the parent
//! (see [`subgraph`](crate::runtime::subgraph) for the rules it keeps).

use super::Engine;
use crate::events::{Interrupt, RunEvent, RunStatus};
use crate::graph::{CompiledGraph, StateGraph};
use crate::ids::ThreadId;
use crate::node::{Node, NodeBody, NodeContext, NodeError, NodeFuture};
use crate::runtime::error::RunError;
use crate::runtime::run::{Resume, RunHandle, RunOptions};
use crate::runtime::subgraph::{self, Services, SubgraphHandle, SubgraphState};
use crate::state::State;
use async_trait::async_trait;
use std::sync::{Arc, OnceLock};

impl<S: State> StateGraph<S> {
    /// Adds a compiled graph over state `C` as node `name` (a **subgraph**): `input` maps the
    /// parent's state to the child's input, `output` the child's final state to the parent's
    /// update. The child runs on its own engine (built with this graph's engine, sharing its
    /// checkpointer and store) in a child thread under the parent thread; its interrupts pause the
    /// parent and the parent's resume answers them; its events stream as
    /// `RunEvent::Subgraph`; `Engine::subgraph_states` shows it. See `docs/graph-api.md`.
    pub fn add_subgraph<C: State>(
        self,
        name: &str,
        graph: CompiledGraph<C>,
        input: impl Fn(&S) -> C::Update + Send + Sync + 'static,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
    ) -> Self {
        let node = Arc::new(SubgraphNode::new(graph, input, output));
        self.push_subgraph(name, NodeBody::Async(node.clone()), subgraph::part(node))
    }
}

type InputFn<S, C> = dyn Fn(&S) -> <C as State>::Update + Send + Sync;
type OutputFn<S, C> = dyn Fn(&C) -> <S as State>::Update + Send + Sync;

/// A subgraph as a node of a parent over state `S`; the child's state is `C`.
pub(crate) struct SubgraphNode<S: State, C: State> {
    graph: CompiledGraph<C>,
    input: Arc<InputFn<S, C>>,
    output: Arc<OutputFn<S, C>>,
    engine: OnceLock<Engine<C>>,
}

impl<S: State, C: State> SubgraphNode<S, C> {
    pub fn new(
        graph: CompiledGraph<C>,
        input: impl Fn(&S) -> C::Update + Send + Sync + 'static,
        output: impl Fn(&C) -> S::Update + Send + Sync + 'static,
    ) -> Self {
        Self {
            graph,
            input: Arc::new(input),
            output: Arc::new(output),
            engine: OnceLock::new(),
        }
    }
}

#[async_trait]
impl<S: State, C: State> SubgraphHandle for SubgraphNode<S, C> {
    async fn attach(&self, services: Services) {
        if self.engine.get().is_some() {
            return;
        }
        let mut b = Engine::builder(self.graph.clone())
            .maybe_checkpointer(services.checkpointer)
            .durability(services.durability);
        if let Some(store) = services.store {
            b = b.store(store);
        }
        let _ = self.engine.set(b.build().await);
    }

    async fn state(
        &self,
        node: &str,
        thread: &ThreadId,
    ) -> Result<Option<SubgraphState>, RunError> {
        let Some(engine) = self.engine.get() else {
            return Ok(None);
        };
        Ok(match engine.get_state(thread).await? {
            None => None,
            Some(st) => Some(SubgraphState {
                node: node.to_string(),
                thread: thread.clone(),
                values: serde_json::to_value(&*st.values)?,
                next: st.next,
                interrupts: st.interrupts,
                checkpoint: st.checkpoint,
            }),
        })
    }

    async fn shutdown(&self) {
        if let Some(e) = self.engine.get() {
            e.shutdown().await;
        }
    }
}

/// Where the child run stands.
enum Child<C: State> {
    Done(Arc<C>),
    Paused(Vec<Interrupt>),
}

impl<S: State, C: State> Node<S> for SubgraphNode<S, C> {
    fn run(&self, state: Arc<S>, ctx: NodeContext) -> NodeFuture<S::Update> {
        let engine = self.engine.get().cloned();
        let input = self.input.clone();
        let output = self.output.clone();
        Box::pin(async move {
            let engine = engine.ok_or_else(|| {
                NodeError::Fatal("subgraph used outside an engine (not attached)".into())
            })?;
            let thread = ctx
                .special
                .as_ref()
                .and_then(|s| s.child_thread.clone())
                .ok_or_else(|| NodeError::Fatal("subgraph task has no child thread".into()))?;
            let run = ChildRun {
                engine: &engine,
                thread: &thread,
                ctx: &ctx,
            };
            let mut child = match engine.get_state(&thread).await.map_err(run.error())? {
                None => {
                    let h = engine
                        .start(thread.clone(), input(&state), run.opts())
                        .await;
                    run.drive(h).await?
                }
                Some(st) if !st.interrupts.is_empty() => Child::Paused(st.interrupts),
                // The parent stopped while the child ran (a crash, a shutdown): go on.
                Some(st) if !st.next.is_empty() => {
                    let h = engine.start_continue(thread.clone(), run.opts()).await;
                    run.drive(h).await?
                }
                Some(st) => Child::Done(st.values),
            };
            let mut call = 0usize;
            loop {
                let pending = match child {
                    Child::Done(values) => return Ok(output(&values)),
                    Child::Paused(pending) => pending,
                };
                let ids: Vec<String> = pending.iter().map(|i| i.id.0.clone()).collect();
                // Which child pause this call of the parent's interrupt answers (saved with it).
                let asked: Vec<String> =
                    ctx.memo_sync(&format!("subgraph-pause-{call}"), || Ok(ids.clone()))?;
                call += 1;
                let answer = ctx.interrupt(question(&pending))?;
                if asked != ids {
                    // An answer the child already took before the parent stopped: skip it.
                    child = Child::Paused(pending);
                    continue;
                }
                let resume = if pending.len() == 1 {
                    Resume::Value(answer)
                } else {
                    Resume::ById(
                        serde_json::from_value(answer).map_err(|e| {
                            NodeError::Fatal(format!(
                                "the subgraph has {} questions pending: answer with an object keyed by their ids ({e})",
                                pending.len()
                            ))
                        })?,
                    )
                };
                let h = engine
                    .start_resume(thread.clone(), resume, run.opts())
                    .await;
                child = run.drive(h).await?;
            }
        })
    }
}

/// What the parent's interrupt shows for the child's pending interrupts.
fn question(pending: &[Interrupt]) -> serde_json::Value {
    match pending {
        [one] => one.value.clone(),
        many => serde_json::json!({ "interrupts": many }),
    }
}

/// One parent task's dealings with its child thread.
struct ChildRun<'a, C: State> {
    engine: &'a Engine<C>,
    thread: &'a ThreadId,
    ctx: &'a NodeContext,
}

impl<C: State> ChildRun<'_, C> {
    fn opts(&self) -> RunOptions {
        let switch = self.ctx.events.switch().cloned();
        RunOptions {
            // A parent whose events are switched off now may switch them on while the child runs.
            stream_events: self.ctx.events.is_enabled() || switch.is_some(),
            without_state_updates: !self.ctx.events.listens_for_state_updates(),
            events_switch: switch,
            context: self.ctx.context.clone(),
            ..RunOptions::default()
        }
    }

    fn error(&self) -> impl Fn(RunError) -> NodeError + '_ {
        move |e| match e {
            RunError::Cancelled => NodeError::Cancelled,
            e => NodeError::Fatal(format!("subgraph thread `{}`: {e}", self.thread)),
        }
    }

    /// Waits for a child run, forwarding its events under the child's namespace and passing
    /// the parent's cancellation on.
    async fn drive(&self, started: Result<RunHandle<C>, RunError>) -> Result<Child<C>, NodeError> {
        let mut handle = started.map_err(self.error())?;
        let mut events = handle.events.take();
        let namespace = namespace(self.thread);
        let forward = |inner: RunEvent| {
            self.ctx.events.emit(|| RunEvent::Subgraph {
                namespace: namespace.clone(),
                inner: Box::new(inner),
            })
        };
        let wait = handle.wait();
        tokio::pin!(wait);
        let mut cancelled = false;
        let outcome = loop {
            tokio::select! {
                out = &mut wait => break out,
                Some(e) = next_event(&mut events) => forward(e),
                _ = self.ctx.cancel.cancelled(), if !cancelled => {
                    cancelled = true;
                    self.engine.cancel(self.thread);
                }
            }
        };
        // Events sent before the outcome are all in the channel by now: forward the rest, in order.
        if let Some(rx) = &mut events {
            while let Ok(e) = rx.try_recv() {
                forward(e);
            }
        }
        let outcome = outcome.map_err(self.error())?;
        match outcome.status {
            RunStatus::Finished => Ok(Child::Done(outcome.state)),
            RunStatus::Interrupted => Ok(Child::Paused(outcome.interrupts)),
            RunStatus::Cancelled => Err(NodeError::Cancelled),
            RunStatus::Suspended => Err(NodeError::Retryable(format!(
                "subgraph thread `{}` was suspended by a shutdown",
                self.thread
            ))),
            RunStatus::Failed => Err(NodeError::Fatal(format!(
                "subgraph thread `{}` failed",
                self.thread
            ))),
        }
    }
}

/// The next event of a child run, or never when it streams none.
async fn next_event(
    events: &mut Option<tokio::sync::mpsc::UnboundedReceiver<RunEvent>>,
) -> Option<RunEvent> {
    match events {
        Some(rx) => rx.recv().await,
        None => std::future::pending().await,
    }
}

/// The namespace a child thread's events carry: its id after the parent's (`node:checkpoint.index`).
fn namespace(thread: &ThreadId) -> String {
    let id = thread.as_str();
    id.rsplit_once('|').map_or(id, |(_, ns)| ns).to_string()
}
