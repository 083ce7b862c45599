//! Where a run's checkpoints and task writes go under its durability mode, decided in one place.
//!
//! An engine's [`Storage`] is its checkpointer with the checkpoint writer in front of it. A run's
//! [`RunStorage`] sends each write by the run's [`Durability`]:
//! - `sync`: committed before the run goes on — in the writer's next group commit when other runs
//!   are going and the backend gains from it, else straight to the checkpointer. A parallel
//!   superstep's task updates are the exception: under group commit they are queued without
//!   waiting, ahead of the superstep's checkpoint that holds them too, and their answers are read
//!   once that checkpoint is stored ([`RunStorage::settle`]).
//! - `async`: queued to the writer, in order; the run waits only when it ends
//!   ([`RunStorage::flush`]).
//! - `exit`: nothing per superstep; the run's position is stored when it ends or pauses.

use super::counters::CheckpointCounters;
use super::persist;
use super::writer::{AsyncWriter, Receipt, WriterMsg};
use crate::checkpoint::body_codec::Dictionary;
use crate::checkpoint::{CheckpointRecord, Checkpointer, TaskWrite};
use crate::ids::{CheckpointId, ThreadId};
use crate::runtime::error::RunError;
use crate::runtime::run::Durability;
use std::sync::atomic::Ordering;
use std::sync::Arc;

/// An engine's storage: its checkpointer (none for an engine that keeps threads in memory), the
/// checkpoint writer in front of it, and the counters of what was written.
pub(crate) struct Storage {
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
    pub writer: Option<AsyncWriter>,
    pub counters: CheckpointCounters,
}

impl Storage {
    /// Whether a write the caller waits for joins the writer's next transaction (group commit)
    /// rather than going straight to storage: when the backend gains from it and other runs are
    /// going; alone, the hop to the writer's thread would only add latency.
    /// `others_running` is asked only for a backend that gains from group commit (counting the
    /// runs going is not free).
    fn group_commit(cp: &dyn Checkpointer, others_running: impl FnOnce() -> bool) -> bool {
        cp.prefers_group_commit() && others_running()
    }

    /// Stores `record` and waits for its commit (counting it is the caller's).
    pub async fn put_and_wait(
        &self,
        record: CheckpointRecord,
        others_running: impl FnOnce() -> bool,
    ) -> Result<(), RunError> {
        match (&self.checkpointer, &self.writer) {
            (Some(cp), Some(w)) if Self::group_commit(&**cp, others_running) => {
                w.put_and_wait(record).await
            }
            (Some(cp), _) => Ok(cp.put(record).await?),
            (None, _) => Ok(()),
        }
    }

    /// Stores task writes at `head` and waits for their commit.
    pub async fn writes_and_wait(
        &self,
        thread: &ThreadId,
        head: CheckpointId,
        writes: Vec<TaskWrite>,
        others_running: impl FnOnce() -> bool,
    ) -> Result<(), RunError> {
        match (&self.checkpointer, &self.writer) {
            (Some(cp), Some(w)) if Self::group_commit(&**cp, others_running) => {
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
    async fn updates_behind(
        &self,
        thread: &ThreadId,
        head: CheckpointId,
        mut writes: Vec<TaskWrite>,
        dict: Option<&'static Dictionary>,
        others_running: impl FnOnce() -> bool,
    ) -> Result<Option<Receipt>, RunError> {
        match (&self.checkpointer, &self.writer) {
            (Some(cp), Some(w)) if Self::group_commit(&**cp, others_running) => {
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
                persist::encode_updates(&mut writes, dict);
                cp.put_writes(thread, head, writes).await?;
                Ok(None)
            }
            (None, _) => Ok(None),
        }
    }
}

/// One run's way to its engine's [`Storage`] under the run's durability.
pub(crate) struct RunStorage {
    durability: Durability,
    /// The newest checkpoint this run stored, or the head it started from.
    persisted_head: Option<CheckpointId>,
    /// Answers for task updates sent to the writer without waiting, read by [`Self::settle`].
    pending: Vec<Receipt>,
}

impl RunStorage {
    /// A run with `durability` whose thread's stored head is `persisted_head`.
    pub fn new(durability: Durability, persisted_head: Option<CheckpointId>) -> Self {
        Self {
            durability,
            persisted_head,
            pending: Vec::new(),
        }
    }

    /// The run's durability.
    pub fn durability(&self) -> Durability {
        self.durability
    }

    /// The newest checkpoint this run stored (or the head it started from).
    pub fn persisted_head(&self) -> Option<CheckpointId> {
        self.persisted_head
    }

    /// Whether each superstep is stored (a checkpointer, and a durability other than `exit`).
    pub fn stores_each_step(&self, st: &Storage) -> bool {
        st.checkpointer.is_some() && self.durability != Durability::Exit
    }

    /// The checkpoint task writes go to (the head), counting the writes, when there is storage.
    fn write_head(st: &Storage, head: Option<CheckpointId>) -> Option<CheckpointId> {
        let head = head.filter(|_| st.checkpointer.is_some())?;
        st.counters.writes.fetch_add(1, Ordering::Relaxed);
        Some(head)
    }

    /// Saves task writes (interrupts, memos) at `head`.
    pub async fn save_writes(
        &mut self,
        st: &Storage,
        others_running: impl FnOnce() -> bool,
        thread: &ThreadId,
        head: Option<CheckpointId>,
        writes: Vec<TaskWrite>,
    ) -> Result<(), RunError> {
        let Some(head) = Self::write_head(st, head) else {
            return Ok(());
        };
        match (&st.writer, self.durability) {
            (Some(w), Durability::Async) => {
                w.send(WriterMsg::Writes(thread.clone(), head, writes, None))
            }
            _ => {
                st.writes_and_wait(thread, head, writes, others_running)
                    .await
            }
        }
    }

    /// Saves a finished task's update (its payload still JSON) at `head`. Under group commit the
    /// run does not wait: the update is queued ahead of the superstep's checkpoint, which holds
    /// it too, so waiting would only hold the superstep back by a commit per task; its answer is
    /// read in [`Self::settle`].
    pub async fn save_updates(
        &mut self,
        st: &Storage,
        others_running: impl FnOnce() -> bool,
        thread: &ThreadId,
        head: Option<CheckpointId>,
        writes: Vec<TaskWrite>,
        dict: Option<&'static Dictionary>,
    ) -> Result<(), RunError> {
        let Some(head) = Self::write_head(st, head) else {
            return Ok(());
        };
        match (&st.writer, self.durability) {
            (Some(w), Durability::Async) => {
                w.send(WriterMsg::Updates(thread.clone(), head, writes, dict, None))
            }
            _ => {
                let receipt = st
                    .updates_behind(thread, head, writes, dict, others_running)
                    .await?;
                self.pending.extend(receipt);
                Ok(())
            }
        }
    }

    /// Stores a superstep's checkpoint: queued under `async`, committed before the run goes on
    /// otherwise (with other runs' records when group commit pays).
    pub async fn put_record(
        &mut self,
        st: &Storage,
        others_running: impl FnOnce() -> bool,
        record: CheckpointRecord,
    ) -> Result<(), RunError> {
        if st.checkpointer.is_none() {
            return Ok(());
        }
        st.counters.record(record.stored_bytes());
        self.persisted_head = Some(record.id);
        match (&st.writer, self.durability) {
            (Some(w), Durability::Async) => w.send(WriterMsg::Put(record)),
            _ => st.put_and_wait(record, others_running).await,
        }
    }

    /// Stores the run's closing checkpoint (`exit` durability) straight to the checkpointer.
    pub async fn put_final(
        &mut self,
        st: &Storage,
        record: CheckpointRecord,
    ) -> Result<(), RunError> {
        let Some(cp) = &st.checkpointer else {
            return Ok(());
        };
        st.counters.record(record.stored_bytes());
        self.persisted_head = Some(record.id);
        Ok(cp.put(record).await?)
    }

    /// Reads the answers for the task updates sent without waiting: the first failure, if any.
    /// Called once the superstep's checkpoint is stored (by then the writer, which stores each
    /// thread's items in order, has answered them) and when the run ends, so a run never reports
    /// an end or a pause before what its tasks saved is stored.
    pub async fn settle(&mut self) -> Result<(), RunError> {
        let mut first = Ok(());
        for receipt in self.pending.drain(..) {
            let r = match receipt.await {
                Ok(r) => r.map_err(RunError::from),
                Err(_) => Err(RunError::Internal("checkpoint writer stopped".into())),
            };
            if first.is_ok() {
                first = r;
            }
        }
        first
    }

    /// Waits for what the run queued (`async` durability) to be stored.
    pub async fn flush(&self, st: &Storage, thread: &ThreadId) -> Result<(), RunError> {
        match (&st.writer, self.durability) {
            (Some(w), Durability::Async) => w.flush(thread).await,
            _ => Ok(()),
        }
    }
}
