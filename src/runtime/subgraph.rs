//! Subgraphs: a compiled graph run as one node of another (`StateGraph::add_subgraph`).
//!
//! This module is what an engine knows of the subgraphs it runs, whatever their state types: the
//! handle it attaches and asks (`SubgraphHandle`), the child threads' names, and the state it
//! shows. The subgraph node itself, which runs a child engine, is the engine's
//! (`engine::subgraph_node`); the graph carries it without knowing its type
//! (`graph::SubgraphPart`), so `graph/` does not import the runtime.
//!
//! The child graph runs on an engine of its own — its own node actors, shared by every parent
//! conversation, so a slow child node queues on that node and nowhere else — built when the
//! parent's engine is built, with the parent's checkpointer, store and durability. Each parent
//! task that runs the subgraph gets a **child thread** in the parent thread's namespace,
//! `{parent}|{node}:{checkpoint}.{index}` (the parent checkpoint its superstep runs from and the
//! task's index: a replay after time travel gets a fresh child thread). `|` is a character the
//! server refuses in thread ids, so a child thread can never be confused with a user's.
//!
//! **Interrupts** inside the child pause the parent: the subgraph node raises the child's
//! interrupt as its own (`NodeContext::interrupt`), and the answer the parent is resumed with is
//! passed to the child's resume. Which child pause each answer belongs to is memoised with the
//! pause (`NodeContext::memo`, saved atomically with the interrupt), so a crash between the
//! child's resume and the parent's next pause never feeds an answer to the wrong question. With
//! several child interrupts pending at once, the parent's interrupt value is
//! `{"interrupts": [{"id", "node", "value"}, …]}` and the answer must be an object keyed by those
//! ids.
//!
//! **Events** of the child run are forwarded to the parent's stream as
//! [`RunEvent::Subgraph`](crate::RunEvent::Subgraph) with the child thread's namespace. **State:** `Engine::subgraph_states`
//! shows the child threads of a thread's pending subgraph tasks. Cancelling the parent run
//! cancels the child run.

use super::error::RunError;
use super::storage::Durability;
use crate::checkpoint::Checkpointer;
use crate::events::Interrupt;
use crate::graph::SubgraphPart;
use crate::ids::{CheckpointId, ThreadId};
use async_trait::async_trait;
use std::sync::Arc;

/// What a parent engine gives its subgraphs' engines.
#[derive(Clone)]
pub(crate) struct Services {
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
    pub store: Option<Arc<dyn crate::store::Store>>,
    pub durability: Durability,
}

/// A child thread's state as the parent shows it (type-erased: the child's state as JSON).
#[derive(Clone, Debug, PartialEq)]
pub struct SubgraphState {
    /// The subgraph node of the parent.
    pub node: String,
    /// The child thread (`{parent}|{node}:{checkpoint}.{index}`).
    pub thread: ThreadId,
    /// The child's state.
    pub values: serde_json::Value,
    /// The child's pending nodes.
    pub next: Vec<String>,
    /// The child's pending interrupts.
    pub interrupts: Vec<Interrupt>,
    /// The child thread's head checkpoint.
    pub checkpoint: Option<CheckpointId>,
}

/// The parent engine's handle on a subgraph node, whatever the child's state type.
#[async_trait]
pub(crate) trait SubgraphHandle: Send + Sync {
    /// Builds the child engine with the parent engine's services (once; later calls do nothing).
    async fn attach(&self, services: Services);
    /// The child thread's state, `None` when it does not exist.
    async fn state(&self, node: &str, thread: &ThreadId)
        -> Result<Option<SubgraphState>, RunError>;
    /// Shuts the child engine down (see `Engine::shutdown`).
    async fn shutdown(&self);
}

/// The child thread of parent task `index` of the superstep running from `checkpoint`.
pub(crate) fn child_thread(
    parent: &ThreadId,
    node: &str,
    checkpoint: Option<CheckpointId>,
    index: u32,
) -> ThreadId {
    ThreadId::new(format!(
        "{parent}|{node}:{}.{index}",
        checkpoint.map_or(0, |c| c.0)
    ))
}

/// The handle in a graph's subgraph part (the engine's subgraph node puts it there).
pub(crate) fn handle(part: &SubgraphPart) -> Option<&Arc<dyn SubgraphHandle>> {
    part.downcast_ref::<Arc<dyn SubgraphHandle>>()
}

/// The part a graph carries for a subgraph node with handle `handle`.
pub(crate) fn part(handle: Arc<dyn SubgraphHandle>) -> SubgraphPart {
    Arc::new(handle)
}
