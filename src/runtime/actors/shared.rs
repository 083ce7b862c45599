//! What every supervisor of an engine shares: the graph, the node actors, storage, the registry
//! of active runs, and counters.

use super::node_actor::NodeActor;
use super::stats::NodeStats;
use crate::graph::CompiledGraph;
use crate::ids::{RunId, ThreadId};
use crate::runtime::run::MigrationHook;
use crate::runtime::storage::{self, Durability, SavedThread, Storage};
use crate::state::State;
use dashmap::DashMap;
use kameo::actor::ActorRef;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::Arc;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// What the engine tells a running run's supervisor. The supervisor implements it, so the
/// registry of runs does not name the supervisor's type (which names this module).
pub(crate) trait RunControl: Send + Sync {
    /// Cancels the run.
    fn cancel(&self);
    /// Stops the run at its next superstep boundary (engine shutdown).
    fn drain(&self);
}

/// A run in the registry: one per thread with a run going or queued.
pub(crate) struct ActiveRun {
    pub run_id: RunId,
    pub cancel: CancellationToken,
    /// Its supervisor, once it is spawned.
    pub supervisor: Option<Box<dyn RunControl>>,
    pub ended: watch::Sender<bool>,
}

pub(crate) struct Shared<S: State> {
    pub graph: CompiledGraph<S>,
    pub nodes: Vec<ActorRef<NodeActor<S>>>,
    pub stats: Vec<Arc<NodeStats>>,
    /// The checkpointer and the writer in front of it.
    pub storage: Storage,
    pub durability: Durability,
    pub registry: DashMap<ThreadId, ActiveRun>,
    pub ephemeral: DashMap<ThreadId, SavedThread<S>>,
    /// Paused threads' states kept for their resume ([`storage::paused`](crate::runtime::storage::paused)).
    pub paused: storage::PausedThreads<S>,
    pub migration: Option<MigrationHook<S>>,
    pub shutting_down: AtomicBool,
    pub total_node_executions: AtomicU64,
    pub store: Option<Arc<dyn crate::store::Store>>,
}

impl<S: State> Shared<S> {
    /// Whether other runs are going beside the caller's (group commit pays only then).
    pub fn others_running(&self) -> bool {
        self.registry.len() > 1
    }

    /// Removes a run from the registry and wakes whoever queued behind it.
    pub fn release(&self, thread: &ThreadId, run_id: RunId) {
        if let Some((_, run)) = self.registry.remove_if(thread, |_, r| r.run_id == run_id) {
            let _ = run.ended.send(true);
        }
    }
}
