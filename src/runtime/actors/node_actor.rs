//! Node actors: one kameo actor per node of a compiled graph, shared by every conversation.
//!
//! A node actor only runs nodes. Synchronous nodes run inline (no task spawn: the fast path for
//! trivial nodes). Async nodes run as tokio tasks under the node's concurrency limit; while the
//! limit is reached the actor stops draining its bounded mailbox, so a slow node shows up as
//! queueing on that node and as backpressure on the supervisors feeding it — never as a stalled
//! process.
//!
//! Results go back through a [`TaskReply`], which sends into the supervisor's unbounded mailbox and
//! therefore never waits: node actors never block on supervisors, which is half of the
//! deadlock-freedom argument in `docs/architecture.md`. If a node panics, the reply's `Drop` still
//! reports the panic to the conversation, and the actor is restarted by its kameo supervisor with
//! its mailbox intact.

use super::stats::NodeStats;
use crate::graph::CompiledGraph;
use crate::ids::NodeId;
use crate::node::{NodeBody, NodeContext, NodeError};
use crate::state::State;
use futures::FutureExt;
use kameo::actor::{Actor, ActorRef};
use kameo::message::{Context, Message};
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::Semaphore;
use tokio::time::Instant;
use tracing::Instrument;

/// What a finished attempt reports to its supervisor. The update is boxed: it goes through the
/// supervisor's mailbox, its handler's future and the superstep's bookkeeping, and a state's
/// update is as big as the state (an `Option` per channel: 648 bytes for the research planner's),
/// which each of those moves copied and each handler future reserved room for.
pub(crate) struct TaskDone<S: State> {
    pub index: u32,
    pub attempt: u32,
    pub result: Result<Box<S::Update>, NodeError>,
    pub queued: Duration,
    pub ran: Duration,
}

/// Where a task's result goes. Sending never blocks; dropping it unsent (a panic unwinding
/// through the node) reports [`NodeError::Panicked`].
pub(crate) struct TaskReply<S: State> {
    pub tx: Option<Box<dyn FnOnce(TaskDone<S>) + Send>>,
    pub index: u32,
    pub attempt: u32,
}

impl<S: State> TaskReply<S> {
    fn send(mut self, result: Result<S::Update, NodeError>, queued: Duration, ran: Duration) {
        if let Some(tx) = self.tx.take() {
            tx(TaskDone {
                index: self.index,
                attempt: self.attempt,
                result: result.map(Box::new),
                queued,
                ran,
            });
        }
    }
}

impl<S: State> Drop for TaskReply<S> {
    fn drop(&mut self) {
        if let Some(tx) = self.tx.take() {
            tx(TaskDone {
                index: self.index,
                attempt: self.attempt,
                result: Err(NodeError::Panicked("the node panicked".into())),
                queued: Duration::ZERO,
                ran: Duration::ZERO,
            });
        }
    }
}

/// One attempt of one task, sent to a node actor.
pub(crate) struct RunTask<S: State> {
    pub state: Arc<S>,
    pub ctx: NodeContext,
    pub enqueued: Instant,
    pub reply: TaskReply<S>,
}

/// Asks a node actor to restart itself after an async task of it panicked.
pub(crate) struct Restart(pub String);

/// The error a node actor stops with so that its supervisor restarts it.
#[derive(Debug, Clone, thiserror::Error)]
#[error("node task panicked: {0}")]
pub(crate) struct NodePanicked(pub String);

/// The actor running one node for every conversation of a graph.
pub(crate) struct NodeActor<S: State> {
    graph: CompiledGraph<S>,
    node: NodeId,
    limit: Arc<Semaphore>,
    stats: Arc<NodeStats>,
}

/// Arguments of a node actor (cloned on restart; the semaphore and stats survive restarts).
#[derive(Clone)]
pub(crate) struct NodeActorArgs<S: State> {
    pub graph: CompiledGraph<S>,
    pub node: NodeId,
    pub limit: Arc<Semaphore>,
    pub stats: Arc<NodeStats>,
}

impl<S: State> Actor for NodeActor<S> {
    type Args = NodeActorArgs<S>;
    type Error = kameo::error::Infallible;

    fn name() -> &'static str {
        "NodeActor"
    }

    async fn on_start(args: Self::Args, _: ActorRef<Self>) -> Result<Self, Self::Error> {
        Ok(Self {
            graph: args.graph,
            node: args.node,
            limit: args.limit,
            stats: args.stats,
        })
    }
}

pub(crate) fn panic_message(p: &(dyn std::any::Any + Send)) -> String {
    p.downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| p.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "non-string panic payload".into())
}

impl<S: State> Message<RunTask<S>> for NodeActor<S> {
    type Reply = ();

    async fn handle(&mut self, msg: RunTask<S>, ctx: &mut Context<Self, Self::Reply>) {
        self.stats.dequeued();
        let node = self.graph.node(self.node);
        let RunTask {
            state,
            ctx: node_ctx,
            enqueued,
            reply,
        } = msg;
        match &node.body {
            NodeBody::Sync(f) => {
                let start = Instant::now();
                self.stats.started();
                // A panic unwinds through here: `reply` reports it, kameo restarts this actor.
                let result = if node_ctx.is_cancelled() {
                    Err(NodeError::Cancelled)
                } else {
                    node_ctx.task_span().in_scope(|| f(&state, &node_ctx))
                };
                let ran = start.elapsed();
                let queued = start.saturating_duration_since(enqueued);
                self.stats.finished(
                    queued.as_micros() as u64,
                    ran.as_micros() as u64,
                    result.is_err(),
                    false,
                );
                reply.send(result, queued, ran);
            }
            NodeBody::Async(n) => {
                let Ok(permit) = self.limit.clone().acquire_owned().await else {
                    reply.send(
                        Err(NodeError::Fatal("node concurrency limiter closed".into())),
                        Duration::ZERO,
                        Duration::ZERO,
                    );
                    return;
                };
                let start = Instant::now();
                self.stats.started();
                let queued = start.saturating_duration_since(enqueued);
                let span = node_ctx.task_span();
                let fut = n.run(state, node_ctx.clone()).instrument(span);
                let timeout = node.options.timeout;
                let stats = self.stats.clone();
                let me = ctx.actor_ref().clone();
                tokio::spawn(async move {
                    let guarded = async move {
                        tokio::select! {
                            biased;
                            _ = node_ctx.cancelled() => Err(NodeError::Cancelled),
                            r = async {
                                match timeout {
                                    Some(d) => tokio::time::timeout(d, fut).await.unwrap_or(Err(NodeError::Timeout(d))),
                                    None => fut.await,
                                }
                            } => r,
                        }
                    };
                    let (result, panicked) = match AssertUnwindSafe(guarded).catch_unwind().await {
                        Ok(r) => (r, false),
                        Err(p) => {
                            let m = panic_message(&*p);
                            let _ = me.tell(Restart(m.clone())).try_send();
                            (Err(NodeError::Panicked(m)), true)
                        }
                    };
                    drop(permit);
                    let ran = start.elapsed();
                    stats.finished(
                        queued.as_micros() as u64,
                        ran.as_micros() as u64,
                        result.is_err(),
                        panicked,
                    );
                    reply.send(result, queued, ran);
                });
            }
        }
    }
}

impl<S: State> Message<Restart> for NodeActor<S> {
    type Reply = Result<(), NodePanicked>;

    async fn handle(&mut self, msg: Restart, _: &mut Context<Self, Self::Reply>) -> Self::Reply {
        Err(NodePanicked(msg.0))
    }
}
