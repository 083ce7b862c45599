//! Durable thread storage: the [`Checkpointer`] trait and what it stores.
//!
//! A thread is a chain of checkpoints, one per superstep. A checkpoint's body is either a full
//! **snapshot** of the state or a **delta**: the updates its superstep applied, in task order, on top
//! of the parent's state. Reducers are deterministic, so replaying deltas onto the nearest earlier
//! snapshot rebuilds any checkpoint exactly. The runtime writes a snapshot every few steps (or when
//! the deltas since the last one outweigh it), so storage grows linearly with the steps of a thread
//! instead of quadratically, as a full copy per step does when a list field keeps growing.
//!
//! Storage is deliberately dumb: bodies are opaque JSON bytes, so backends know nothing of graph
//! types. What a backend must guarantee:
//! - [`Checkpointer::put`] is a conditional write: it succeeds only if the record's parent is the
//!   thread's current head (or the thread is new and the parent is `None`). This is what keeps two
//!   writers, in one process or in two, from forking a thread's chain.
//! - [`Checkpointer::put_writes`] saves a finished task's writes as they happen, idempotently, so a
//!   crash mid-superstep does not redo the parallel tasks that had finished.
//! - [`Checkpointer::prune`] rebases and deletes in one transaction: no reader ever sees a chain
//!   whose oldest delta has lost its snapshot.

pub mod body_codec;
#[cfg(any(feature = "sqlite", feature = "postgres"))]
mod codec;
pub mod integrity;
mod journal;
mod memory;
pub mod migrate;
mod pools;
#[cfg(feature = "postgres")]
pub mod postgres;
pub mod retention;
#[cfg(feature = "sqlite")]
mod sqlite;
mod url;

pub use integrity::IntegrityProblem;
pub use journal::EffectJournal;
pub use memory::MemoryCheckpointer;
pub use pools::PgPools;
#[cfg(feature = "postgres")]
pub use postgres::PostgresCheckpointer;
pub use retention::{spawn_sweeper, sweep, Retention, SweepReport, Sweeper};
#[cfg(feature = "sqlite")]
pub(crate) use sqlite::prepare_dir as sqlite_prepare_dir;
#[cfg(feature = "sqlite")]
pub(crate) use sqlite::side_connection as sqlite_side_connection;
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteCheckpointer;
pub use url::{backend, connect, connect_in, Backend};

use crate::ids::{CheckpointId, TaskId, ThreadId};
use async_trait::async_trait;
use serde::{Deserialize, Serialize};

/// Whether a checkpoint body is a full state or the updates of one superstep.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BodyKind {
    /// `body` is the whole state, serialised as JSON.
    Snapshot,
    /// `body` is a JSON array of the superstep's updates, in task order, to apply to the parent.
    Delta,
}

/// Where a checkpoint came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointSource {
    /// The run's input, before any node ran.
    Input,
    /// The end of a superstep.
    Loop,
    /// `update_state`: written as if a named node had written it.
    Update,
    /// The first checkpoint of a thread forked from another thread's checkpoint.
    Fork,
    /// Time travel on the same thread: the state and pending tasks of an earlier checkpoint
    /// (named by `extra.branched_from`), written as the thread's new head (`Engine::branch`).
    Branch,
}

impl CheckpointSource {
    fn loop_() -> Self {
        Self::Loop
    }

    fn is_loop(&self) -> bool {
        *self == Self::Loop
    }
}

/// What a checkpoint says about itself, besides the state.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckpointMetadata {
    /// Supersteps run on this thread so far (the input checkpoint is step 0).
    pub step: u64,
    /// Where the checkpoint came from. Stored only when it is not `loop` (most checkpoints are).
    #[serde(
        default = "CheckpointSource::loop_",
        skip_serializing_if = "CheckpointSource::is_loop"
    )]
    pub source: CheckpointSource,
    /// The nodes whose updates the checkpoint holds, in task order.
    pub nodes: Vec<String>,
    /// Wall-clock creation time, milliseconds since the Unix epoch.
    pub created_at_ms: u64,
    /// Free-form extras (fork origin, run id, ...); not stored when there are none.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub extra: serde_json::Value,
    /// The pause the run made at this checkpoint, if it paused before the next tasks ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<Pause>,
}

/// A pause recorded with a checkpoint: the run stopped before the checkpoint's next tasks ran,
/// because a node asks to pause before it runs or after its predecessor ran.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pause {
    /// Which rule made it.
    pub at: PauseAt,
    /// What is pending (one per paused node).
    pub interrupts: Vec<crate::events::Interrupt>,
}

/// Which rule made a [`Pause`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PauseAt {
    /// `interrupt_before`: before a node runs.
    #[default]
    Before,
    /// `interrupt_after`: after a node ran, before the next superstep.
    After,
}

/// One stored checkpoint.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckpointRecord {
    /// The thread the checkpoint belongs to.
    pub thread_id: ThreadId,
    /// The checkpoint's id: its parent's id plus one (1 for a thread's first checkpoint).
    pub id: CheckpointId,
    /// The checkpoint this one follows; `None` for a thread's first.
    pub parent: Option<CheckpointId>,
    /// Fingerprint of the compiled graph that wrote it (see `CompiledGraph::fingerprint`).
    pub graph_fingerprint: String,
    /// Snapshot or delta.
    pub kind: BodyKind,
    /// JSON bytes: the state (snapshot) or an array of updates (delta).
    pub body: Vec<u8>,
    /// JSON bytes: the tasks to run next (empty array when the run ended).
    pub next_tasks: Vec<u8>,
    /// Step, source, nodes, timestamps.
    pub metadata: CheckpointMetadata,
}

impl CheckpointRecord {
    /// Bytes this record occupies in storage, counting body, next tasks and metadata.
    pub fn stored_bytes(&self) -> usize {
        /// Counts what is written, keeping none of it.
        struct Count(usize);
        impl std::io::Write for Count {
            fn write(&mut self, b: &[u8]) -> std::io::Result<usize> {
                self.0 += b.len();
                Ok(b.len())
            }
            fn flush(&mut self) -> std::io::Result<()> {
                Ok(())
            }
        }
        let mut meta = Count(0);
        let meta = serde_json::to_writer(&mut meta, &self.metadata).map_or(0, |()| meta.0);
        self.body.len() + self.next_tasks.len() + meta
    }
}

/// What kind of write a task saved.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WriteKind {
    /// The task finished; the payload is its update.
    Update,
    /// The task paused; the payload is the interrupt (id and value).
    Interrupt,
    /// The task failed for good; the payload is the error message.
    Error,
    /// A memoised result inside a task (`NodeContext::memo`), keyed by `key`.
    Memo,
    /// A resume value addressed to the task.
    Resume,
    /// Where a command node's finished task said to go next (`Command::goto`); saved beside
    /// its update.
    Goto,
}

impl WriteKind {
    /// Every kind.
    pub const ALL: [WriteKind; 6] = [
        Self::Update,
        Self::Interrupt,
        Self::Error,
        Self::Memo,
        Self::Resume,
        Self::Goto,
    ];

    /// The kind as stored (`update`, `interrupt`, `error`, `memo`, `resume`, `goto`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Update => "update",
            Self::Interrupt => "interrupt",
            Self::Error => "error",
            Self::Memo => "memo",
            Self::Resume => "resume",
            Self::Goto => "goto",
        }
    }

    /// Parses [`as_str`](Self::as_str)'s form.
    pub fn from_name(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|k| k.as_str() == s)
    }
}

/// A write saved by a task of the superstep that runs from checkpoint `checkpoint`.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskWrite {
    /// The task.
    pub task: TaskId,
    /// The node the task ran.
    pub node: String,
    /// What was written.
    pub kind: WriteKind,
    /// Distinguishes several writes of one kind by one task (memo keys); empty otherwise.
    pub key: String,
    /// JSON bytes.
    pub payload: Vec<u8>,
}

/// One item of a batch the engine's writer stores in order ([`Checkpointer::put_batch`]).
#[derive(Clone, Debug, PartialEq)]
pub enum BatchItem {
    /// A checkpoint, stored on [`Checkpointer::put`]'s condition.
    Record(CheckpointRecord),
    /// Task writes for the superstep running from a checkpoint ([`Checkpointer::put_writes`]).
    Writes(ThreadId, CheckpointId, Vec<TaskWrite>),
}

/// [`Checkpointer::put_batch`]'s default: [`Checkpointer::put_many`] and
/// [`Checkpointer::put_writes_many`] for each run of consecutive items of one kind, results in
/// order. Public so that a wrapping checkpointer can count or check batches and still store them
/// the default way.
pub async fn put_batch_by_kind<C: Checkpointer + ?Sized>(
    cp: &C,
    items: Vec<BatchItem>,
) -> Vec<Result<(), CheckpointError>> {
    let mut out = Vec::with_capacity(items.len());
    let mut items = items.into_iter().peekable();
    while let Some(first) = items.next() {
        match first {
            BatchItem::Record(r) => {
                let mut records = vec![r];
                while let Some(BatchItem::Record(_)) = items.peek() {
                    if let Some(BatchItem::Record(r)) = items.next() {
                        records.push(r);
                    }
                }
                out.extend(cp.put_many(records).await);
            }
            BatchItem::Writes(t, c, w) => {
                let mut group = vec![(t, c, w)];
                while let Some(BatchItem::Writes(..)) = items.peek() {
                    if let Some(BatchItem::Writes(t, c, w)) = items.next() {
                        group.push((t, c, w));
                    }
                }
                out.extend(cp.put_writes_many(group).await);
            }
        }
    }
    out
}

/// A small record of `thread` for the crate's unit tests (body `b{id}`, fingerprint `fp`).
#[cfg(test)]
pub(crate) fn test_record(
    thread: &ThreadId,
    id: u64,
    parent: Option<u64>,
    kind: BodyKind,
) -> CheckpointRecord {
    CheckpointRecord {
        thread_id: thread.clone(),
        id: CheckpointId(id),
        parent: parent.map(CheckpointId),
        graph_fingerprint: "fp".into(),
        kind,
        body: format!("b{id}").into_bytes(),
        next_tasks: b"[]".to_vec(),
        metadata: CheckpointMetadata {
            step: id,
            source: CheckpointSource::Loop,
            nodes: vec![],
            created_at_ms: 1,
            extra: serde_json::Value::Null,
            pause: None,
        },
    }
}

/// A thread as listed by [`Checkpointer::list_threads`]: one with checkpoints, or one with
/// metadata and no checkpoint yet (a thread created and never run).
#[derive(Clone, Debug, PartialEq)]
pub struct ThreadSummary {
    /// The thread.
    pub thread_id: ThreadId,
    /// Its newest checkpoint (`None`: the thread has metadata and no checkpoint).
    pub head: Option<CheckpointId>,
    /// The head's metadata (`None` without a head).
    pub head_metadata: Option<CheckpointMetadata>,
    /// Metadata set with [`Checkpointer::set_thread_metadata`] (`null` when never set).
    pub metadata: serde_json::Value,
}

/// Errors from checkpoint storage.
#[derive(Debug, thiserror::Error)]
pub enum CheckpointError {
    /// The writer's fencing token is stale: another process took the thread over
    /// ([`Checkpointer::fence`]); nothing was written.
    #[error("thread `{thread}` was taken over by another process: fencing token {token} is stale")]
    Fenced {
        /// The thread.
        thread: ThreadId,
        /// The stale token.
        token: u64,
    },
    /// The conditional write failed: another writer moved the thread's head.
    #[error(
        "thread `{thread}` was written concurrently: expected head {expected:?}, found {found:?}"
    )]
    Conflict {
        /// The thread.
        thread: ThreadId,
        /// The parent the writer built on.
        expected: Option<CheckpointId>,
        /// The head actually stored.
        found: Option<CheckpointId>,
    },
    /// No such thread or checkpoint.
    #[error("no checkpoint {checkpoint:?} on thread `{thread}`")]
    NotFound {
        /// The thread.
        thread: ThreadId,
        /// The checkpoint asked for (`None`: the thread itself).
        checkpoint: Option<CheckpointId>,
    },
    /// The connection string names no backend this build knows, or is malformed.
    #[error("bad checkpoint URL `{url}`: {reason}")]
    BadUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// Stored data could not be decoded.
    #[error("corrupt checkpoint data on thread `{thread}`: {reason}")]
    Corrupt {
        /// The thread.
        thread: ThreadId,
        /// What could not be decoded.
        reason: String,
    },
    /// A stored checkpoint failed its integrity check: its checksum does not match its contents,
    /// or its chain has a gap (a parent that is missing or does not link). Never a silent default.
    #[error("checkpoint {checkpoint} of thread `{thread}` failed its integrity check: {problem}")]
    Integrity {
        /// The thread.
        thread: ThreadId,
        /// The checkpoint that failed.
        checkpoint: CheckpointId,
        /// What is wrong.
        problem: IntegrityProblem,
    },
    /// The database reported an error. `code` is the SQLSTATE (PostgreSQL) or the extended result
    /// code (SQLite); `message` carries the server's message and detail; `source` is the driver's
    /// error.
    #[error("{backend} error{}: {message}", code.as_ref().map(|c| format!(" {c}")).unwrap_or_default())]
    Database {
        /// `postgres` or `sqlite`.
        backend: &'static str,
        /// SQLSTATE or SQLite result code, when the server gave one.
        code: Option<String>,
        /// What failed: the operation, the server's message, its detail and hint.
        message: String,
        /// The driver's error.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// The database stayed unreachable for the whole retry budget (`retry_for` in the URL).
    #[error(
        "{backend} unreachable: gave up after {attempts} attempts over {waited_ms} ms: {last}"
    )]
    Unavailable {
        /// `postgres`.
        backend: &'static str,
        /// Attempts made.
        attempts: u32,
        /// Time spent waiting and retrying, in milliseconds.
        waited_ms: u64,
        /// The last error.
        #[source]
        last: Box<CheckpointError>,
    },
    /// The backend failed (I/O, a task that did not finish, a limit): what failed, and the error
    /// that made it fail when there is one. Logs print the whole chain
    /// ([`ErrorChain`](crate::ErrorChain)).
    #[error(
        "checkpoint backend error: {context}{}",
        source.as_ref().map(|s| format!(": {s}")).unwrap_or_default()
    )]
    Backend {
        /// What failed, or what was being done when it failed.
        context: String,
        /// The error that made it fail, when there is one.
        #[source]
        source: Option<Box<dyn std::error::Error + Send + Sync>>,
    },
}

impl CheckpointError {
    /// A [`Backend`](Self::Backend) failure: `context` says what failed, `source` why.
    pub fn backend(
        context: impl Into<String>,
        source: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Backend {
            context: context.into(),
            source: Some(source.into()),
        }
    }

    /// A [`Backend`](Self::Backend) failure that no other error caused (a limit, a broken
    /// promise of the backend).
    pub fn backend_msg(context: impl Into<String>) -> Self {
        Self::Backend {
            context: context.into(),
            source: None,
        }
    }
}

/// Durable storage for thread checkpoints and task writes. See the module docs for the guarantees.
#[async_trait]
pub trait Checkpointer: Send + Sync + 'static {
    /// A short name for reports (`memory`, `sqlite`, `postgres`).
    fn backend_name(&self) -> &'static str;

    /// Stores `record` if its parent is the thread's current head; otherwise
    /// [`CheckpointError::Conflict`]. Writing the first checkpoint of a thread that already exists
    /// is a conflict too.
    async fn put(&self, record: CheckpointRecord) -> Result<(), CheckpointError>;

    /// Stores several records, possibly of different threads, with the same per-record condition,
    /// in as few transactions as the backend can. Results come back in input order.
    async fn put_many(&self, records: Vec<CheckpointRecord>) -> Vec<Result<(), CheckpointError>> {
        let mut out = Vec::with_capacity(records.len());
        for record in records {
            out.push(self.put(record).await);
        }
        out
    }

    /// Saves task writes for the superstep running from `checkpoint`. Idempotent: saving a write
    /// with the same (task, kind, key) again replaces it.
    async fn put_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        writes: Vec<TaskWrite>,
    ) -> Result<(), CheckpointError>;

    /// [`put_writes`](Self::put_writes) for several (thread, checkpoint) pairs at once, one result
    /// each, in order. Backends that can store them in one transaction do (SQLite): the
    /// engine's writer hands over every task write queued together, so the parallel tasks of
    /// many conversations finishing at once cost one commit, not one each. The default stores
    /// them one by one.
    async fn put_writes_many(
        &self,
        batch: Vec<(ThreadId, CheckpointId, Vec<TaskWrite>)>,
    ) -> Vec<Result<(), CheckpointError>> {
        let mut out = Vec::with_capacity(batch.len());
        for (thread, checkpoint, writes) in batch {
            out.push(self.put_writes(&thread, checkpoint, writes).await);
        }
        out
    }

    /// Stores records and task writes, of any threads, in the given order: one result each, in
    /// order; an item that fails (a conflict, say) stores nothing and does not stop the others.
    /// The engine's writer hands over everything queued at once, so the checkpoints and the
    /// parallel tasks' writes of many conversations cost one commit, not one per kind of item.
    /// SQLite stores the whole batch in one transaction; the default calls
    /// [`put_many`](Self::put_many) and [`put_writes_many`](Self::put_writes_many) for each run
    /// of consecutive items of one kind.
    async fn put_batch(&self, items: Vec<BatchItem>) -> Vec<Result<(), CheckpointError>> {
        put_batch_by_kind(self, items).await
    }

    /// The writes saved for the superstep running from `checkpoint`, ordered by task then key.
    async fn get_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
    ) -> Result<Vec<TaskWrite>, CheckpointError>;

    /// The thread's newest checkpoint id, or `None` if the thread has none.
    async fn head(&self, thread: &ThreadId) -> Result<Option<CheckpointId>, CheckpointError>;

    /// The thread's head checkpoint and the writes saved for the superstep running from it
    /// ([`Checkpointer::get_writes`]), or `None` if the thread has none: what resuming a paused
    /// thread reads. Backends read both at once where they can (SQLite: one read transaction;
    /// PostgreSQL: one connection, the writes keyed by the head's id); the default asks
    /// [`Checkpointer::head`], [`Checkpointer::get`] and [`Checkpointer::get_writes`] in turn.
    async fn head_with_writes(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<(CheckpointRecord, Vec<TaskWrite>)>, CheckpointError> {
        let Some(id) = self.head(thread).await? else {
            return Ok(None);
        };
        let head = match self.get(thread, id).await {
            Ok(head) => head,
            // Deleted between the two reads: the thread has no head now.
            Err(CheckpointError::NotFound { .. }) => return Ok(None),
            Err(e) => return Err(e),
        };
        let writes = self.get_writes(thread, id).await?;
        Ok(Some((head, writes)))
    }

    /// One checkpoint.
    async fn get(
        &self,
        thread: &ThreadId,
        id: CheckpointId,
    ) -> Result<CheckpointRecord, CheckpointError>;

    /// The records needed to rebuild checkpoint `id` (the head when `None`): the nearest snapshot at
    /// or before it, then every checkpoint after that snapshot up to `id`, oldest first. Empty when
    /// the thread does not exist.
    async fn load_chain(
        &self,
        thread: &ThreadId,
        id: Option<CheckpointId>,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError>;

    /// Metadata of a thread's checkpoints, newest first, at most `limit`, only those older than
    /// `before` when given.
    async fn list(
        &self,
        thread: &ThreadId,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<(CheckpointId, Option<CheckpointId>, CheckpointMetadata)>, CheckpointError>;

    /// Threads whose id starts with `prefix`, ordered by id, at most `limit`, skipping `offset`:
    /// those with checkpoints and those with metadata ([`Checkpointer::set_thread_metadata`],
    /// [`Checkpointer::create_thread`]) and no checkpoint yet.
    async fn list_threads(
        &self,
        prefix: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<ThreadSummary>, CheckpointError>;

    /// Sets free-form metadata on a thread (creating a thread entry with no checkpoints if needed).
    async fn set_thread_metadata(
        &self,
        thread: &ThreadId,
        metadata: serde_json::Value,
    ) -> Result<(), CheckpointError>;

    /// Creates thread `thread` holding `metadata` when no thread of that id exists (no entry and
    /// no checkpoints), and says whether it did. The check and the write are one atomic step: of
    /// two concurrent creators of one id exactly one gets `true`, so the first creator owns the
    /// thread and a second cannot overwrite its record (what `POST /threads` relies on).
    async fn create_thread(
        &self,
        thread: &ThreadId,
        metadata: serde_json::Value,
    ) -> Result<bool, CheckpointError>;

    /// Replaces thread `thread`'s metadata with `metadata` only while it still equals `expected`
    /// (as JSON values), and says whether it did. The comparison and the write are one atomic
    /// step, and a thread without metadata (unknown, deleted, or holding checkpoints only) is
    /// never written: a read-modify-write of a thread's record through this cannot bring back a
    /// deleted thread, lose a concurrent change, or give a record another owner created since
    /// the read (what the server's updates of its thread records rely on).
    async fn replace_thread_metadata(
        &self,
        thread: &ThreadId,
        expected: &serde_json::Value,
        metadata: serde_json::Value,
    ) -> Result<bool, CheckpointError>;

    /// The metadata set on a thread (`None` if the thread is unknown).
    async fn thread_metadata(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<serde_json::Value>, CheckpointError>;

    /// Deletes a thread, its checkpoints, writes, effect journal entries and metadata. Deleting an
    /// unknown thread is not an error.
    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), CheckpointError>;

    /// In one transaction: deletes every checkpoint (and its writes) older than the nearest
    /// snapshot at or before `keep_from`, so the thread keeps at least the checkpoints from
    /// `keep_from` on and every kept chain still starts at a snapshot (effect journal entries of
    /// tasks that started from a deleted checkpoint go too). Returns how many checkpoints were
    /// deleted. Used by [`retention`].
    async fn trim(
        &self,
        thread: &ThreadId,
        keep_from: CheckpointId,
    ) -> Result<u64, CheckpointError>;

    /// In one transaction: deletes every checkpoint of the thread newer than `to` (every one
    /// when `None`) with their writes, and replaces the writes saved for the superstep running
    /// from `to` with `writes`, so the thread is exactly where it was when its head was `to` with
    /// those pending writes. Effect journal entries of tasks that started from a deleted
    /// checkpoint go with it; those of tasks that started from `to` stay (their calls happened,
    /// and the tasks run again from `to` are the same tasks). Returns how many checkpoints were
    /// deleted. A run's rollback uses it (`to` and `writes` taken when the run started); other
    /// threads are untouched.
    async fn rewind(
        &self,
        thread: &ThreadId,
        to: Option<CheckpointId>,
        writes: Vec<TaskWrite>,
    ) -> Result<u64, CheckpointError>;

    /// Takes the thread over with fencing `token` (from a run's lease,
    /// [`RunStore::claim`](crate::runs::RunStore::claim)): from now on the database refuses this
    /// thread's checkpoints and task writes from any process holding a smaller token
    /// ([`CheckpointError::Fenced`]), and this checkpointer writes the thread with `token`.
    /// Returns false, changing nothing, when a token at least as large was given already (this
    /// process lost the race). Backends that only one process writes keep no fences: true.
    async fn fence(&self, _thread: &ThreadId, _token: u64) -> Result<bool, CheckpointError> {
        Ok(true)
    }

    /// Whether `sync` runs going together should commit their checkpoints in shared batches
    /// (`put_many`) rather than each on its own. True where one batch costs less than its records
    /// one by one: SQLite (one writer at a time, one `fsync` per commit) and PostgreSQL (a batch of
    /// distinct threads is one multi-row statement; measured: docs/performance-history.md).
    fn prefers_group_commit(&self) -> bool {
        false
    }

    /// How many `put_many` batches the engine's writer may have in flight at once (on threads
    /// disjoint from each other). 1 where writes take turns anyway (SQLite's one writer); more
    /// where the server works on several at a time (PostgreSQL: one backend per connection, so a
    /// second batch uses a second core while the first waits for its commit to reach the disk).
    fn max_concurrent_batches(&self) -> usize {
        1
    }

    /// A cheap round trip to the store: `Ok` when it can serve requests now. Readiness probes
    /// (`/ok`) call it; it does not retry.
    async fn ping(&self) -> Result<(), CheckpointError> {
        Ok(())
    }

    /// In one transaction: replaces checkpoint `keep_from`'s body with `snapshot` (kind Snapshot),
    /// then deletes every older checkpoint of the thread, their writes and the effect journal
    /// entries of tasks that started from them.
    async fn prune(
        &self,
        thread: &ThreadId,
        keep_from: CheckpointId,
        snapshot: Vec<u8>,
    ) -> Result<(), CheckpointError>;

    /// The effect journal in the same database ([`EffectJournal`]), if this backend keeps one.
    /// `None` (the default): effects of tasks are kept like memos, with the task's writes.
    fn effect_journal(&self) -> Option<&dyn EffectJournal> {
        None
    }
}
