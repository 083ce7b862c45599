//! What every supervisor of an engine shares: the graph, the node actors, storage, the registry
//! of active runs, and counters.

use super::node_actor::NodeActor;
use super::stats::NodeStats;
use crate::checkpoint::Checkpointer;
use crate::graph::CompiledGraph;
use crate::ids::{RunId, ThreadId};
use crate::runtime::error::RunError;
use crate::runtime::run::MigrationHook;
use crate::runtime::storage::{
    self, AsyncWriter, CheckpointCounters, Durability, SavedThread, WriterMsg,
};
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
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
    pub durability: Durability,
    pub writer: Option<AsyncWriter>,
    pub registry: DashMap<ThreadId, ActiveRun>,
    pub ephemeral: DashMap<ThreadId, SavedThread<S>>,
    /// Paused threads' states kept for their resume ([`storage::paused`](crate::runtime::storage::paused)).
    pub paused: storage::PausedThreads<S>,
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
    /// that holds that checkpoint as well stores the checkpoint alone: [`superseded`](crate::runtime::storage::superseded)).
    /// Alone, they go straight to storage and are waited for, as other writes are.
    pub async fn updates_behind(
        &self,
        thread: &ThreadId,
        head: crate::ids::CheckpointId,
        mut writes: Vec<crate::checkpoint::TaskWrite>,
    ) -> Result<Option<storage::Receipt>, RunError> {
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
                storage::persist::encode_updates(&mut writes, dict);
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
