//! The simulated database, and each process's connection to it.
//!
//! [`SimDb`] holds the memory backends — [`MemoryCheckpointer`], [`MemoryRuns`],
//! [`MemoryRunEvents`] — and what a database shared by replicas adds to them, as the PostgreSQL
//! backends keep it: leases with fencing tokens on run records (`RunStore::claim`, `renew`,
//! `expired`…), a fence per thread that refuses writes from a process holding an older token
//! (`Checkpointer::fence`), and a run log that only the lease holder appends to. It also keeps
//! the journal of every commit, which the invariants read.
//!
//! A process reaches it only through [`ProcCheckpointer`], [`ProcRuns`] and [`ProcEvents`]:
//! the runtime's own traits, with every call passing the process's [`Link`] (faults, crash,
//! partition).

use super::link::{Link, Step};
use super::tool::Tool;
use crate::checkpoint::{
    BatchItem, CheckpointError, CheckpointMetadata, CheckpointRecord, Checkpointer, EffectJournal,
    MemoryCheckpointer, TaskWrite, ThreadSummary, WriteKind,
};
use crate::ids::{CheckpointId, TaskId, ThreadId};
use crate::runs::events::LogWatch;
use crate::runs::{
    Claim, MemoryRunEvents, MemoryRuns, RunChange, RunEventLog, RunRecord, RunRecordStatus,
    RunStore, RunStoreError, StreamEvent,
};
use async_trait::async_trait;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};

/// A run's lease.
#[derive(Clone, Debug)]
struct Lease {
    owner: String,
    until: u64,
    released: bool,
    cancel: bool,
}

/// One commit the database accepted, as the invariants see it.
#[derive(Clone, Debug)]
pub(crate) enum Commit {
    Checkpoint {
        thread: String,
        id: u64,
        parent: Option<u64>,
        by: String,
        claim: u64,
    },
    Write {
        thread: String,
        checkpoint: u64,
        task: TaskId,
        kind: WriteKind,
        by: String,
        claim: u64,
    },
}

#[derive(Default)]
struct Extra {
    leases: BTreeMap<String, Lease>,
    next_token: u64,
    fences: BTreeMap<String, u64>,
    journal: Vec<Commit>,
    cancelled: BTreeSet<String>,
    /// Transitions that changed a cancelled run (each is a violation).
    after_cancel: Vec<String>,
}

/// The database of one seed: it outlives every process.
#[derive(Default)]
pub(crate) struct SimDb {
    pub checkpoints: Arc<MemoryCheckpointer>,
    pub runs: MemoryRuns,
    pub events: MemoryRunEvents,
    extra: Mutex<Extra>,
}

impl SimDb {
    fn extra(&self) -> MutexGuard<'_, Extra> {
        self.extra.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(crate) fn journal(&self) -> Vec<Commit> {
        self.extra().journal.clone()
    }

    pub(crate) fn after_cancel(&self) -> Vec<String> {
        self.extra().after_cancel.clone()
    }

    pub(crate) fn cancelled(&self) -> BTreeSet<String> {
        self.extra().cancelled.clone()
    }

    /// A client's cancel (through any replica): the record becomes `interrupted` at once, and
    /// the process holding the run sees the request at its next renewal.
    pub(crate) async fn cancel(&self, run_id: &str, at: u64) -> bool {
        let done = self
            .runs
            .transition(
                run_id,
                &[RunRecordStatus::Pending, RunRecordStatus::Running],
                RunRecordStatus::Interrupted,
                RunChange::at(at).error("cancelled"),
            )
            .await
            .unwrap_or(false);
        if done {
            let mut x = self.extra();
            x.cancelled.insert(run_id.to_string());
            if let Some(l) = x.leases.get_mut(run_id) {
                l.cancel = true;
            }
        }
        done
    }

    fn fence_check(&self, link: &Link, thread: &ThreadId) -> Result<(), CheckpointError> {
        let mine = link
            .fences
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(thread.as_str())
            .copied();
        let Some(mine) = mine else { return Ok(()) };
        match self.extra().fences.get(thread.as_str()) {
            Some(f) if *f > mine => Err(CheckpointError::Fenced {
                thread: thread.clone(),
                token: mine,
            }),
            _ => Ok(()),
        }
    }

    fn claim_of(link: &Link, thread: &str) -> u64 {
        link.claims
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(thread)
            .copied()
            .unwrap_or(0)
    }

    async fn store_record(&self, link: &Link, r: CheckpointRecord) -> Result<(), CheckpointError> {
        self.fence_check(link, &r.thread_id)?;
        let (thread, id, parent) = (r.thread_id.as_str().to_string(), r.id.0, r.parent);
        self.checkpoints.put(r).await?;
        let claim = Self::claim_of(link, &thread);
        self.extra().journal.push(Commit::Checkpoint {
            thread,
            id,
            parent: parent.map(|p| p.0),
            by: link.name.clone(),
            claim,
        });
        Ok(())
    }

    async fn store_writes(
        &self,
        link: &Link,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        writes: Vec<TaskWrite>,
    ) -> Result<(), CheckpointError> {
        self.fence_check(link, thread)?;
        let seen: Vec<(TaskId, WriteKind)> = writes.iter().map(|w| (w.task, w.kind)).collect();
        self.checkpoints
            .put_writes(thread, checkpoint, writes)
            .await?;
        let claim = Self::claim_of(link, thread.as_str());
        let mut x = self.extra();
        for (task, kind) in seen {
            x.journal.push(Commit::Write {
                thread: thread.as_str().to_string(),
                checkpoint: checkpoint.0,
                task,
                kind,
                by: link.name.clone(),
                claim,
            });
        }
        Ok(())
    }
}

fn cp_err(why: String) -> CheckpointError {
    CheckpointError::backend_msg(format!("sim: {why}"))
}

fn run_err(op: &'static str, why: String) -> RunStoreError {
    RunStoreError::Backend {
        op,
        source: why.into(),
    }
}

/// A process's checkpointer: the database's, through the process's link. Its effect journal
/// is the memory checkpointer's underneath, through the same link; each lookup and each journal
/// write that commits or fails is told to the world's tool, whose books judge the calls made
/// again (`tool.rs`, the window rule).
pub(crate) struct ProcCheckpointer {
    pub db: Arc<SimDb>,
    pub link: Arc<Link>,
    pub tool: Arc<Tool>,
}

/// Runs `$body` (an expression awaiting the database) between the link's enter and leave.
macro_rules! gated {
    ($self:ident, $op:literal, $writes:expr, $err:expr, $body:expr) => {{
        let step: Step = $self.link.enter($op, $writes).await.map_err($err)?;
        let out = $body;
        $self.link.leave($op, step).await.map_err($err)?;
        out
    }};
}

impl ProcCheckpointer {
    /// Several items in one statement: one enter and one leave for all of them.
    async fn many<T>(
        &self,
        op: &'static str,
        items: Vec<T>,
        each: impl AsyncStore<T>,
    ) -> Vec<Result<(), CheckpointError>> {
        let n = items.len();
        let step = match self.link.enter(op, true).await {
            Ok(s) => s,
            Err(why) => return (0..n).map(|_| Err(cp_err(why.clone()))).collect(),
        };
        let mut out = Vec::with_capacity(n);
        for item in items {
            out.push(each.store(self, item).await);
        }
        match self.link.leave(op, step).await {
            Ok(()) => out,
            Err(why) => (0..n).map(|_| Err(cp_err(why.clone()))).collect(),
        }
    }
}

/// How [`ProcCheckpointer::many`] stores one item.
trait AsyncStore<T> {
    async fn store(&self, cp: &ProcCheckpointer, item: T) -> Result<(), CheckpointError>;
}

struct Records;
impl AsyncStore<CheckpointRecord> for Records {
    async fn store(
        &self,
        cp: &ProcCheckpointer,
        r: CheckpointRecord,
    ) -> Result<(), CheckpointError> {
        cp.db.store_record(&cp.link, r).await
    }
}

struct Writes;
impl AsyncStore<(ThreadId, CheckpointId, Vec<TaskWrite>)> for Writes {
    async fn store(
        &self,
        cp: &ProcCheckpointer,
        (t, c, w): (ThreadId, CheckpointId, Vec<TaskWrite>),
    ) -> Result<(), CheckpointError> {
        cp.db.store_writes(&cp.link, &t, c, w).await
    }
}

struct Items;
impl AsyncStore<BatchItem> for Items {
    async fn store(&self, cp: &ProcCheckpointer, item: BatchItem) -> Result<(), CheckpointError> {
        match item {
            BatchItem::Record(r) => cp.db.store_record(&cp.link, r).await,
            BatchItem::Writes(t, c, w) => cp.db.store_writes(&cp.link, &t, c, w).await,
        }
    }
}

#[async_trait]
impl EffectJournal for ProcCheckpointer {
    async fn effect_get(
        &self,
        thread: &ThreadId,
        key: &str,
    ) -> Result<Option<Vec<u8>>, CheckpointError> {
        gated!(self, "effect_get", false, cp_err, {
            let found = self.db.checkpoints.effect_get(thread, key).await;
            self.tool.looked_up(&self.link.name, key);
            found
        })
    }

    async fn effect_put(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        key: &str,
        value: Vec<u8>,
    ) -> Result<Vec<u8>, CheckpointError> {
        let step = match self.link.enter("effect_put", true).await {
            Ok(step) => step,
            Err(why) => {
                self.tool.put_failed(&self.link.name, key);
                return Err(cp_err(why));
            }
        };
        let stored = self
            .db
            .checkpoints
            .effect_put(thread, checkpoint, key, value)
            .await;
        match &stored {
            Ok(_) => self.tool.journaled(&self.link.name, key),
            Err(_) => self.tool.put_failed(&self.link.name, key),
        }
        self.link.leave("effect_put", step).await.map_err(cp_err)?;
        stored
    }
}

#[async_trait]
impl Checkpointer for ProcCheckpointer {
    fn effect_journal(&self) -> Option<&dyn EffectJournal> {
        Some(self)
    }

    fn backend_name(&self) -> &'static str {
        "sim"
    }

    async fn put(&self, record: CheckpointRecord) -> Result<(), CheckpointError> {
        gated!(self, "put", true, cp_err, {
            self.db.store_record(&self.link, record).await
        })
    }

    async fn put_many(&self, records: Vec<CheckpointRecord>) -> Vec<Result<(), CheckpointError>> {
        self.many("put_many", records, Records).await
    }

    async fn put_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        writes: Vec<TaskWrite>,
    ) -> Result<(), CheckpointError> {
        gated!(self, "put_writes", true, cp_err, {
            self.db
                .store_writes(&self.link, thread, checkpoint, writes)
                .await
        })
    }

    async fn put_writes_many(
        &self,
        batch: Vec<(ThreadId, CheckpointId, Vec<TaskWrite>)>,
    ) -> Vec<Result<(), CheckpointError>> {
        self.many("put_writes_many", batch, Writes).await
    }

    async fn put_batch(&self, items: Vec<BatchItem>) -> Vec<Result<(), CheckpointError>> {
        self.many("put_batch", items, Items).await
    }

    async fn get_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
    ) -> Result<Vec<TaskWrite>, CheckpointError> {
        gated!(self, "get_writes", false, cp_err, {
            self.db.checkpoints.get_writes(thread, checkpoint).await
        })
    }

    async fn head(&self, thread: &ThreadId) -> Result<Option<CheckpointId>, CheckpointError> {
        gated!(self, "head", false, cp_err, {
            self.db.checkpoints.head(thread).await
        })
    }

    async fn head_with_writes(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<(CheckpointRecord, Vec<TaskWrite>)>, CheckpointError> {
        gated!(self, "head_with_writes", false, cp_err, {
            self.db.checkpoints.head_with_writes(thread).await
        })
    }

    async fn get(
        &self,
        thread: &ThreadId,
        id: CheckpointId,
    ) -> Result<CheckpointRecord, CheckpointError> {
        gated!(self, "get", false, cp_err, {
            self.db.checkpoints.get(thread, id).await
        })
    }

    async fn load_chain(
        &self,
        thread: &ThreadId,
        id: Option<CheckpointId>,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        gated!(self, "load_chain", false, cp_err, {
            self.db.checkpoints.load_chain(thread, id).await
        })
    }

    async fn list(
        &self,
        thread: &ThreadId,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<(CheckpointId, Option<CheckpointId>, CheckpointMetadata)>, CheckpointError>
    {
        gated!(self, "list", false, cp_err, {
            self.db.checkpoints.list(thread, before, limit).await
        })
    }

    async fn list_threads(
        &self,
        prefix: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<ThreadSummary>, CheckpointError> {
        gated!(self, "list_threads", false, cp_err, {
            self.db
                .checkpoints
                .list_threads(prefix, limit, offset)
                .await
        })
    }

    async fn set_thread_metadata(
        &self,
        thread: &ThreadId,
        metadata: serde_json::Value,
    ) -> Result<(), CheckpointError> {
        gated!(self, "set_thread_metadata", true, cp_err, {
            self.db
                .checkpoints
                .set_thread_metadata(thread, metadata)
                .await
        })
    }

    async fn create_thread(
        &self,
        thread: &ThreadId,
        metadata: serde_json::Value,
    ) -> Result<bool, CheckpointError> {
        gated!(self, "create_thread", true, cp_err, {
            self.db.checkpoints.create_thread(thread, metadata).await
        })
    }

    async fn replace_thread_metadata(
        &self,
        thread: &ThreadId,
        expected: &serde_json::Value,
        metadata: serde_json::Value,
    ) -> Result<bool, CheckpointError> {
        gated!(self, "replace_thread_metadata", true, cp_err, {
            self.db
                .checkpoints
                .replace_thread_metadata(thread, expected, metadata)
                .await
        })
    }

    async fn thread_metadata(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        gated!(self, "thread_metadata", false, cp_err, {
            self.db.checkpoints.thread_metadata(thread).await
        })
    }

    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), CheckpointError> {
        gated!(self, "delete_thread", true, cp_err, {
            self.db.checkpoints.delete_thread(thread).await
        })
    }

    async fn trim(
        &self,
        thread: &ThreadId,
        keep_from: CheckpointId,
    ) -> Result<u64, CheckpointError> {
        gated!(self, "trim", true, cp_err, {
            self.db.checkpoints.trim(thread, keep_from).await
        })
    }

    async fn rewind(
        &self,
        thread: &ThreadId,
        to: Option<CheckpointId>,
        writes: Vec<TaskWrite>,
    ) -> Result<u64, CheckpointError> {
        gated!(self, "rewind", true, cp_err, {
            self.db.checkpoints.rewind(thread, to, writes).await
        })
    }

    async fn fence(&self, thread: &ThreadId, token: u64) -> Result<bool, CheckpointError> {
        gated!(self, "fence", true, cp_err, {
            let mut x = self.db.extra();
            let f = x.fences.entry(thread.as_str().to_string()).or_default();
            if *f >= token {
                Ok(false)
            } else {
                *f = token;
                drop(x);
                self.link
                    .fences
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(thread.as_str().to_string(), token);
                Ok(true)
            }
        })
    }

    async fn prune(
        &self,
        thread: &ThreadId,
        keep_from: CheckpointId,
        snapshot: Vec<u8>,
    ) -> Result<(), CheckpointError> {
        gated!(self, "prune", true, cp_err, {
            self.db.checkpoints.prune(thread, keep_from, snapshot).await
        })
    }
}

/// A process's run store: the database's records and leases, through the process's link.
pub(crate) struct ProcRuns {
    pub db: Arc<SimDb>,
    pub link: Arc<Link>,
}

#[async_trait]
impl RunStore for ProcRuns {
    fn backend_name(&self) -> &'static str {
        "sim"
    }

    async fn insert(&self, record: RunRecord) -> Result<RunRecord, RunStoreError> {
        gated!(self, "insert", true, |w| run_err("insert", w), {
            self.db.runs.insert(record).await
        })
    }

    async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, RunStoreError> {
        gated!(self, "get run", false, |w| run_err("get", w), {
            self.db.runs.get(run_id).await
        })
    }

    async fn list_thread(
        &self,
        thread_id: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<RunRecord>, RunStoreError> {
        gated!(self, "list_thread", false, |w| run_err("list", w), {
            self.db.runs.list_thread(thread_id, limit, offset).await
        })
    }

    async fn unfinished(&self, limit: usize) -> Result<Vec<RunRecord>, RunStoreError> {
        gated!(self, "unfinished", false, |w| run_err("unfinished", w), {
            self.db.runs.unfinished(limit).await
        })
    }

    async fn transition(
        &self,
        run_id: &str,
        from: &[RunRecordStatus],
        to: RunRecordStatus,
        change: RunChange,
    ) -> Result<bool, RunStoreError> {
        gated!(self, "transition", true, |w| run_err("transition", w), {
            let done = self.db.runs.transition(run_id, from, to, change).await;
            if matches!(done, Ok(true)) {
                self.link
                    .chaos
                    .note(format!("{} {run_id} -> {to}", self.link.name));
                let mut x = self.db.extra();
                if x.cancelled.contains(run_id) {
                    x.after_cancel
                        .push(format!("{run_id} became {to} after its cancel"));
                }
            }
            done
        })
    }

    async fn delete(&self, run_id: &str) -> Result<bool, RunStoreError> {
        gated!(self, "delete run", true, |w| run_err("delete", w), {
            self.db.runs.delete(run_id).await
        })
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<u64, RunStoreError> {
        gated!(self, "delete runs", true, |w| run_err("delete", w), {
            self.db.runs.delete_thread(thread_id).await
        })
    }

    async fn sweep(
        &self,
        prefix: &str,
        ended_before: Option<u64>,
        keep: Option<usize>,
        batch: usize,
    ) -> Result<u64, RunStoreError> {
        gated!(self, "sweep", true, |w| run_err("sweep", w), {
            self.db.runs.sweep(prefix, ended_before, keep, batch).await
        })
    }

    fn leases(&self) -> bool {
        true
    }

    async fn claim(
        &self,
        run_id: &str,
        owner: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Claim, RunStoreError> {
        gated!(self, "claim", true, |w| run_err("claim", w), {
            let rec = self.db.runs.get(run_id).await?;
            let mut x = self.db.extra();
            Ok(match rec {
                None => Claim::Missing,
                Some(r) if r.status.is_ended() => Claim::Ended(r.status),
                Some(r) => match x.leases.get(run_id) {
                    Some(l) if l.owner != owner && !l.released && l.until > now_ms => Claim::Held {
                        owner: l.owner.clone(),
                    },
                    _ => {
                        x.next_token += 1;
                        let token = x.next_token;
                        x.leases.insert(
                            run_id.to_string(),
                            Lease {
                                owner: owner.to_string(),
                                until: now_ms + ttl_ms,
                                released: false,
                                cancel: false,
                            },
                        );
                        Claim::Granted {
                            token,
                            status: r.status,
                        }
                    }
                },
            })
        })
    }

    async fn renew(
        &self,
        owner: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Vec<(String, bool)>, RunStoreError> {
        gated!(self, "renew", true, |w| run_err("renew", w), {
            let unfinished: BTreeSet<String> = self
                .db
                .runs
                .unfinished(usize::MAX)
                .await?
                .into_iter()
                .map(|r| r.run_id)
                .collect();
            let mut x = self.db.extra();
            let mut held = Vec::new();
            for (id, l) in x.leases.iter_mut() {
                if l.owner == owner && !l.released && unfinished.contains(id) {
                    l.until = now_ms + ttl_ms;
                    held.push((id.clone(), l.cancel));
                }
            }
            Ok(held)
        })
    }

    async fn lease_holder(&self, run_id: &str) -> Result<Option<String>, RunStoreError> {
        gated!(
            self,
            "lease_holder",
            false,
            |w| run_err("lease_holder", w),
            {
                Ok(self
                    .db
                    .extra()
                    .leases
                    .get(run_id)
                    .filter(|l| !l.released)
                    .map(|l| l.owner.clone()))
            }
        )
    }

    async fn request_cancel(&self, run_id: &str) -> Result<bool, RunStoreError> {
        gated!(self, "request_cancel", true, |w| run_err("cancel", w), {
            let running = matches!(
                self.db.runs.get(run_id).await?,
                Some(r) if r.status == RunRecordStatus::Running
            );
            if let Some(l) = self.db.extra().leases.get_mut(run_id) {
                l.cancel |= running;
            }
            Ok(running)
        })
    }

    async fn release(&self, run_id: &str, owner: &str) -> Result<(), RunStoreError> {
        gated!(self, "release", true, |w| run_err("release", w), {
            if let Some(l) = self.db.extra().leases.get_mut(run_id) {
                if l.owner == owner {
                    l.released = true;
                }
            }
            Ok(())
        })
    }

    async fn release_all(&self, owner: &str) -> Result<(), RunStoreError> {
        gated!(self, "release_all", true, |w| run_err("release", w), {
            for l in self.db.extra().leases.values_mut() {
                if l.owner == owner {
                    l.released = true;
                }
            }
            Ok(())
        })
    }

    async fn expired(
        &self,
        now_ms: u64,
        grace_ms: u64,
        limit: usize,
    ) -> Result<Vec<RunRecord>, RunStoreError> {
        gated!(self, "expired", false, |w| run_err("expired", w), {
            let unfinished = self.db.runs.unfinished(usize::MAX).await?;
            let x = self.db.extra();
            Ok(unfinished
                .into_iter()
                .filter(|r| match x.leases.get(&r.run_id) {
                    Some(l) => l.released || l.until < now_ms,
                    None => r.updated_at + grace_ms < now_ms,
                })
                .take(limit)
                .collect())
        })
    }
}

/// A process's run event log: the database's, through the process's link; only the lease
/// holder of a run appends to its log.
pub(crate) struct ProcEvents {
    pub db: Arc<SimDb>,
    pub link: Arc<Link>,
}

#[async_trait]
impl RunEventLog for ProcEvents {
    fn backend_name(&self) -> &'static str {
        "sim"
    }

    async fn append(
        &self,
        run_id: &str,
        writer: Option<&str>,
        after: u64,
        events: Vec<(String, String)>,
    ) -> Result<u64, RunStoreError> {
        gated!(self, "append", true, |w| run_err("append", w), {
            let holder = self.db.extra().leases.get(run_id).map(|l| l.owner.clone());
            match writer {
                Some(w) if holder.as_deref() != Some(w) => Err(RunStoreError::AppendRefused {
                    run_id: run_id.to_string(),
                    reason: format!("{w} does not hold the run's lease"),
                }),
                _ => self.db.events.append(run_id, writer, after, events).await,
            }
        })
    }

    async fn last_seq(&self, run_id: &str) -> Result<u64, RunStoreError> {
        gated!(self, "last_seq", false, |w| run_err("last_seq", w), {
            self.db.events.last_seq(run_id).await
        })
    }

    async fn read(
        &self,
        run_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StreamEvent>, RunStoreError> {
        gated!(self, "read", false, |w| run_err("read", w), {
            self.db.events.read(run_id, after, limit).await
        })
    }

    fn watch(&self, run_id: &str) -> LogWatch {
        self.db.events.watch(run_id)
    }

    async fn request_stream(&self, run_id: &str) -> Result<(), RunStoreError> {
        self.db.events.request_stream(run_id).await
    }

    fn watch_requests(&self, run_id: &str) -> LogWatch {
        self.db.events.watch_requests(run_id)
    }
}
