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
//!
//! The supervisor tells [`RunStorage`] what happened — a task finished or paused, a superstep
//! ended, the run ended — and it alone decides, by the durability, what is stored and how.

use super::counters::CheckpointCounters;
use super::persist;
use super::saved::SavedThread;
use super::writer::{AsyncWriter, Receipt, WriterMsg};
use crate::checkpoint::body_codec::Dictionary;
use crate::checkpoint::{CheckpointRecord, CheckpointSource, Checkpointer, Pause, TaskWrite};
use crate::events::{Interrupt, RunStatus};
use crate::graph::{CompiledGraph, Route};
use crate::ids::{CheckpointId, ThreadId};
use crate::runtime::error::RunError;
use crate::runtime::machine::superstep::{self, TaskSpec};
use crate::runtime::run::Durability;
use crate::state::State;
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

/// Where a run's writes go: its engine's storage and its thread.
pub(crate) struct Place<'a> {
    /// The engine's storage.
    pub storage: &'a Storage,
    /// The run's thread.
    pub thread: &'a ThreadId,
    /// Whether other runs are going beside this one (asked only where group commit could apply).
    pub others_running: &'a (dyn Fn() -> bool + Sync),
}

/// A task that finished with an update, as [`RunStorage::task_updated`] takes it.
pub(crate) struct FinishedTask<'a, U> {
    /// The task.
    pub task: &'a TaskSpec,
    /// Its update.
    pub update: &'a U,
    /// Where its command said to go, for a command node.
    pub goto: Option<&'a Route>,
    /// Its superstep has other tasks.
    pub parallel: bool,
    /// It is the last of its superstep's tasks to finish.
    pub completes_step: bool,
}

/// Where a run ended, as [`RunStorage::close`] takes it.
pub(crate) struct RunEnd<'a, U> {
    /// The pause it ended on, if it paused before a superstep.
    pub pauses: &'a [Interrupt],
    /// The node that ran last.
    pub last_node: Option<&'a str>,
    /// The pending superstep's updates so far, by task.
    pub updates: &'a [Option<U>],
    /// The pending superstep's interrupts, by task.
    pub interrupts: &'a [Option<Interrupt>],
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

    /// Whether each superstep is stored (a checkpointer, and a durability other than `exit`).
    pub fn stores_each_step(&self, st: &Storage) -> bool {
        st.checkpointer.is_some() && self.durability != Durability::Exit
    }

    /// A task finished with an update, at the thread's checkpoint `head`. In a parallel superstep
    /// stored each step, the update (and its command's goto) is saved as a task write, so a crash
    /// does not run the task again — except by the task that completes the superstep: the
    /// checkpoint written next holds its update, as it does for a superstep of one task.
    pub async fn task_updated<U: serde::Serialize>(
        &mut self,
        at: &Place<'_>,
        head: Option<CheckpointId>,
        done: FinishedTask<'_, U>,
        dict: Option<&'static Dictionary>,
    ) -> Result<(), RunError> {
        if !done.parallel || done.completes_step || !self.stores_each_step(at.storage) {
            return Ok(());
        }
        let json = persist::update_json(done.update)?;
        let mut writes = vec![persist::update_write_json(done.task, &json)];
        if let Some(g) = done.goto {
            writes.push(persist::goto_write(done.task, g)?);
        }
        self.save_updates(at, head, writes, dict).await
    }

    /// A task paused at `interrupt`, at the thread's checkpoint `head`: when each superstep is
    /// stored, the pause is saved, with what the task memoised before it (`memos`), so a resume
    /// in this process or another does not redo it.
    pub async fn task_paused(
        &mut self,
        at: &Place<'_>,
        head: Option<CheckpointId>,
        task: &TaskSpec,
        interrupt: &Interrupt,
        memos: &[(String, serde_json::Value)],
    ) -> Result<(), RunError> {
        if !self.stores_each_step(at.storage) {
            return Ok(());
        }
        let mut writes = persist::memo_writes(task, memos)?;
        writes.push(persist::interrupt_write(task, interrupt)?);
        self.save_writes(at, head, writes).await
    }

    /// The JSON of a finished superstep's delta (its updates, serialised) when each superstep is
    /// stored.
    pub fn step_delta<U: serde::Serialize>(
        &self,
        st: &Storage,
        updates: &[U],
    ) -> Result<Option<Vec<u8>>, RunError> {
        if !self.stores_each_step(st) {
            return Ok(None);
        }
        Ok(Some(crate::json::to_vec(updates)?))
    }

    /// A superstep ended: `finished` ran, `delta` is [`Self::step_delta`]'s, `next` the tasks
    /// that run next and `waiting` the deferred ones. When each superstep is stored, its
    /// checkpoint is stored (with `pause`) and what its tasks saved is settled; otherwise the
    /// thread's head only moves on in memory.
    #[allow(clippy::too_many_arguments)]
    pub async fn store_step<S: State>(
        &mut self,
        at: &Place<'_>,
        graph: &CompiledGraph<S>,
        saved: &mut SavedThread<S>,
        finished: &[TaskSpec],
        delta: Option<Vec<u8>>,
        (next, waiting): (&[TaskSpec], &[TaskSpec]),
        pause: Option<&Pause>,
    ) -> Result<(), RunError> {
        if !self.stores_each_step(at.storage) {
            saved.head = Some(CheckpointId(saved.head.map_or(1, |h| h.0 + 1)));
            return Ok(());
        }
        let rec = persist::step_record(
            graph,
            at.thread,
            saved,
            CheckpointSource::Loop,
            finished.iter().map(|t| t.node_name()).collect(),
            delta,
            &superstep::stored_next(next, waiting),
            serde_json::Value::Null,
            pause.cloned(),
        )?;
        self.put_record(at, rec).await?;
        self.settle().await
    }

    /// The run ends with `result`: what its tasks saved is settled ([`Self::settle`]) and, for a
    /// run that ended well, what its durability leaves for its end is stored
    /// ([`Self::store_end`]). Returns the run's result: a failure to store fails a run that
    /// ended well; a run that failed already keeps its own error (the other is only logged).
    pub async fn close<S: State>(
        &mut self,
        at: &Place<'_>,
        graph: &CompiledGraph<S>,
        saved: &mut SavedThread<S>,
        result: Result<RunStatus, RunError>,
        end: RunEnd<'_, Box<S::Update>>,
    ) -> Result<RunStatus, RunError> {
        let settled = self.settle().await;
        match (result, settled) {
            (Ok(status), Ok(())) => (self.store_end(at, graph, saved, status, end))
                .await
                .map(|_| status),
            (Ok(_), Err(e)) => Err(e),
            (Err(e), settled) => {
                if let Err(lost) = settled {
                    // The run already failed with `e`; this one is only reported.
                    tracing::warn!(error = %lost, "a task update of a failed run was not stored");
                }
                Err(e)
            }
        }
    }

    /// What a run's durability leaves for its end with `status`. `async` waits for what was
    /// queued; `exit` stores the run's position (with its pause) and, when it paused, the pending
    /// superstep's writes; `sync` has stored everything already.
    async fn store_end<S: State>(
        &mut self,
        at: &Place<'_>,
        graph: &CompiledGraph<S>,
        saved: &mut SavedThread<S>,
        status: RunStatus,
        end: RunEnd<'_, Box<S::Update>>,
    ) -> Result<(), RunError> {
        let Some(cp) = at.storage.checkpointer.clone() else {
            return Ok(());
        };
        match self.durability {
            Durability::Sync => {}
            Durability::Async => self.flush(at.storage, at.thread).await?,
            Durability::Exit => {
                if self.persisted_head != saved.head {
                    saved.head = self.persisted_head;
                    // The pause goes with the only checkpoint this run stores, or a reload would
                    // find the thread paused with nothing pending.
                    let pause = saved.paused_before.then(|| Pause {
                        at: saved.pause_at,
                        interrupts: end.pauses.to_vec(),
                    });
                    let tasks = saved.stored_tasks();
                    let rec = persist::step_record(
                        graph,
                        at.thread,
                        saved,
                        CheckpointSource::Loop,
                        end.last_node
                            .map(|n| vec![n.to_string()])
                            .unwrap_or_default(),
                        None,
                        &tasks,
                        serde_json::Value::Null,
                        pause,
                    )?;
                    self.put_final(at.storage, rec).await?;
                }
                if status == RunStatus::Interrupted {
                    let mut writes = Vec::new();
                    for (i, t) in saved.tasks.iter().enumerate() {
                        if let Some(Some(u)) = end.updates.get(i) {
                            writes.push(persist::update_write(graph, t, u)?);
                            if let Some(Some(g)) = saved.gotos.get(i) {
                                writes.push(persist::goto_write(t, g)?);
                            }
                        }
                        if let Some(Some(int)) = end.interrupts.get(i) {
                            writes.push(persist::interrupt_write(t, int)?);
                        }
                    }
                    if let (false, Some(head)) = (writes.is_empty(), saved.head) {
                        cp.put_writes(at.thread, head, writes).await?;
                    }
                }
            }
        }
        Ok(())
    }

    /// The checkpoint task writes go to (the head), counting the writes, when there is storage.
    fn write_head(st: &Storage, head: Option<CheckpointId>) -> Option<CheckpointId> {
        let head = head.filter(|_| st.checkpointer.is_some())?;
        st.counters.writes.fetch_add(1, Ordering::Relaxed);
        Some(head)
    }

    /// Saves task writes (interrupts, memos) at `head`.
    async fn save_writes(
        &mut self,
        at: &Place<'_>,
        head: Option<CheckpointId>,
        writes: Vec<TaskWrite>,
    ) -> Result<(), RunError> {
        let Some(head) = Self::write_head(at.storage, head) else {
            return Ok(());
        };
        match (&at.storage.writer, self.durability) {
            (Some(w), Durability::Async) => {
                w.send(WriterMsg::Writes(at.thread.clone(), head, writes, None))
            }
            _ => {
                at.storage
                    .writes_and_wait(at.thread, head, writes, at.others_running)
                    .await
            }
        }
    }

    /// Saves a finished task's update (its payload still JSON) at `head`. Under group commit the
    /// run does not wait: the update is queued ahead of the superstep's checkpoint, which holds
    /// it too, so waiting would only hold the superstep back by a commit per task; its answer is
    /// read in [`Self::settle`].
    async fn save_updates(
        &mut self,
        at: &Place<'_>,
        head: Option<CheckpointId>,
        writes: Vec<TaskWrite>,
        dict: Option<&'static Dictionary>,
    ) -> Result<(), RunError> {
        let Some(head) = Self::write_head(at.storage, head) else {
            return Ok(());
        };
        match (&at.storage.writer, self.durability) {
            (Some(w), Durability::Async) => w.send(WriterMsg::Updates(
                at.thread.clone(),
                head,
                writes,
                dict,
                None,
            )),
            _ => {
                let receipt = at
                    .storage
                    .updates_behind(at.thread, head, writes, dict, at.others_running)
                    .await?;
                self.pending.extend(receipt);
                Ok(())
            }
        }
    }

    /// Stores a superstep's checkpoint: queued under `async`, committed before the run goes on
    /// otherwise (with other runs' records when group commit pays).
    async fn put_record(
        &mut self,
        at: &Place<'_>,
        record: CheckpointRecord,
    ) -> Result<(), RunError> {
        let st = at.storage;
        if st.checkpointer.is_none() {
            return Ok(());
        }
        st.counters.record(record.stored_bytes());
        self.persisted_head = Some(record.id);
        match (&st.writer, self.durability) {
            (Some(w), Durability::Async) => w.send(WriterMsg::Put(record)),
            _ => st.put_and_wait(record, at.others_running).await,
        }
    }

    /// Stores the run's closing checkpoint (`exit` durability) straight to the checkpointer.
    async fn put_final(&mut self, st: &Storage, record: CheckpointRecord) -> Result<(), RunError> {
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
    async fn flush(&self, st: &Storage, thread: &ThreadId) -> Result<(), RunError> {
        match (&st.writer, self.durability) {
            (Some(w), Durability::Async) => w.flush(thread).await,
            _ => Ok(()),
        }
    }
}
