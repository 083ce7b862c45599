//! The SQLite file checkpointer (`sqlite:PATH`): the embedded default.
//!
//! rusqlite is synchronous, and in the shared mode another process may hold the file's lock for
//! seconds (`busy_timeout` is 10 s): a call that waited for it on a tokio worker would stall every
//! task of that worker meanwhile. So no call ever waits for a lock on a worker. In the shared mode
//! a call first runs inline, if the connection is free and SQLite's lock can be taken at once
//! (busy timeout 0): then it is a WAL append without fsync, tens of microseconds, like CPU work.
//! When the lock is held (by another process, by the WAL thread's truncating checkpoint, or by
//! another task of this process whose call is waiting), the call goes to tokio's blocking pool
//! and waits there, with the full busy timeout. With `?inline=0` every call goes to the pool. With
//! `?locking=exclusive` no other process can take the lock, and calls run inline. The costs of
//! each are measured in `docs/PERFORMANCE.md`.
//!
//! The file is in WAL mode with `synchronous=NORMAL`: a committed transaction survives the process
//! being killed (the crash-recovery tests SIGKILL writers), and only an OS crash or power loss may
//! roll back the last transactions — never corrupt the file. The WAL is kept bounded and truncated
//! on a clean close ([`open`]). Every write is one `BEGIN IMMEDIATE` transaction, so several
//! processes sharing a file are serialised by SQLite's lock and the conditional head update keeps
//! one writer per thread. `put_many` stores a whole batch in one transaction. Every checkpoint
//! carries a checksum ([`integrity`](super::integrity)), verified on load with its parent links.

mod exit;
mod numbers;
mod open;

pub use open::SqliteOptions;
pub(crate) use open::{prepare_dir, side_connection};

use super::codec::{
    id_from_sql, id_to_sql, kind_str, metadata_json, parse_kind, parse_metadata, parse_value,
    parse_write_kind, write_kind_str,
};
use super::integrity::{link_chain, verify_checksum, ChecksumInput, ChecksumScheme};
use super::{
    BatchItem, BodyKind, CheckpointError, CheckpointMetadata, CheckpointRecord, Checkpointer,
    EffectJournal, TaskWrite, ThreadSummary,
};
use crate::ids::{CheckpointId, TaskId, ThreadId};
use async_trait::async_trait;
use numbers::{Numbering, ThreadNumbers};
use rusqlite::{params, Connection, OptionalExtension, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::time::Duration;

/// Checkpoints in a SQLite file.
pub struct SqliteCheckpointer {
    conn: Arc<Mutex<Connection>>,
    path: PathBuf,
    /// Calls run inline (exclusive lock) instead of on the blocking pool.
    inline: bool,
    /// Shared mode without the inline first attempt (`?inline=0`): every call on the pool.
    offload_only: bool,
    /// Dropping it stops the background WAL checkpointer.
    stop_checkpointer: Option<mpsc::Sender<()>>,
    /// Set by the WAL thread when the log has passed its limit: the next call truncates it.
    wal_over_limit: Arc<AtomicBool>,
    /// The log file and its limit: calls look at its size themselves every
    /// [`WAL_LOOK_EVERY`] calls, so the bound holds even when the WAL thread gets no CPU.
    wal: (PathBuf, u64),
    calls: std::sync::atomic::AtomicU64,
    /// Calls that may wait for the connection on the blocking pool at once; the rest wait here,
    /// as tasks. Without it, 500 conversations reading while the writer commits parked ~300
    /// blocking-pool threads on the connection's mutex (each one a thread, its stack and
    /// allocator caches, and a futex wake to hand the lock on).
    offload_slots: tokio::sync::Semaphore,
    /// The thread numbers the batch writer has seen committed ([`numbers`]).
    numbers: Arc<Mutex<ThreadNumbers>>,
}

/// Blocking-pool threads that may wait for the connection at once (one runs, one is next).
const OFFLOAD_SLOTS: usize = 2;

/// Calls between two looks at the WAL's size by the writing side.
const WAL_LOOK_EVERY: u64 = 32;

/// A rusqlite error as a [`CheckpointError::Database`], keeping its source and result code.
pub(super) fn be(e: rusqlite::Error) -> CheckpointError {
    let code = e
        .sqlite_error()
        .map(|c| format!("{:?} ({})", c.code, c.extended_code));
    CheckpointError::Database {
        backend: "sqlite",
        code,
        message: e.to_string(),
        source: Box::new(e),
    }
}

impl SqliteCheckpointer {
    /// Opens (creating if needed) the database at `path`, applies pending migrations, and starts
    /// its background WAL checkpointer. Other processes may open the same file.
    pub fn open(path: impl AsRef<Path>) -> Result<Self, CheckpointError> {
        Self::open_with_options(path, SqliteOptions::default())
    }

    /// Like [`SqliteCheckpointer::open`]; with `exclusive`, this process holds the file's lock
    /// for as long as it is open (`PRAGMA locking_mode=EXCLUSIVE`): no other process can use the
    /// file meanwhile, every transaction saves two `fcntl` lock calls, and calls run inline.
    /// URL form: `sqlite:PATH?locking=exclusive`.
    pub fn open_with(path: impl AsRef<Path>, exclusive: bool) -> Result<Self, CheckpointError> {
        Self::open_with_options(
            path,
            SqliteOptions {
                exclusive,
                ..SqliteOptions::default()
            },
        )
    }

    /// Opens with every URL option (`locking`, `adopt`, `wal_limit`; see `SqliteOptions`).
    pub fn open_with_options(
        path: impl AsRef<Path>,
        opts: SqliteOptions,
    ) -> Result<Self, CheckpointError> {
        let path = path.as_ref().to_path_buf();
        let conn = open::open_connection(&path, &opts)?;
        let wal_over_limit = Arc::new(AtomicBool::new(false));
        let stop_checkpointer = if opts.exclusive {
            None
        } else {
            Some(open::spawn_wal_checkpointer(
                &path,
                opts.wal_limit,
                wal_over_limit.clone(),
            )?)
        };
        let conn = Arc::new(Mutex::new(conn));
        exit::register(&conn, &path, opts.exclusive);
        let wal = (open::wal_path(&path), opts.wal_limit);
        Ok(Self {
            conn,
            path,
            inline: opts.exclusive,
            offload_only: !opts.inline_first,
            stop_checkpointer,
            wal_over_limit,
            wal,
            calls: std::sync::atomic::AtomicU64::new(0),
            offload_slots: tokio::sync::Semaphore::new(OFFLOAD_SLOTS),
            numbers: Arc::default(),
        })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Runs `f` on the connection without ever making a tokio worker wait for a lock (see the
    /// module docs). With the exclusive lock, inline. In the shared mode, first inline if the
    /// connection is free and SQLite's lock can be taken at once (busy timeout 0); when another
    /// task or process holds it, on tokio's blocking pool with the 10 s busy timeout. A busy
    /// attempt has done nothing (`BEGIN IMMEDIATE` failed, or its transaction rolled back), so
    /// running `f` again is safe.
    async fn call<T: Send + 'static>(
        &self,
        f: impl Fn(&mut Connection) -> Result<T, CheckpointError> + Send + Sync + 'static,
    ) -> Result<T, CheckpointError> {
        if self.inline {
            let mut conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
            return f(&mut conn);
        }
        if self.stop_checkpointer.is_some()
            && self.calls.fetch_add(1, Ordering::Relaxed) % WAL_LOOK_EVERY == WAL_LOOK_EVERY - 1
            && std::fs::metadata(&self.wal.0).is_ok_and(|m| m.len() > self.wal.1)
        {
            self.wal_over_limit.store(true, Ordering::Relaxed);
        }
        if self.wal_over_limit.swap(false, Ordering::Relaxed) {
            // The log passed its limit: this call, on the blocking pool, restarts it after `f` (the
            // next commit writes it from the start; `journal_size_limit` cuts the file back).
            return self
                .offload(move |c| {
                    let r = f(c);
                    if let Err(e) = c.query_row("PRAGMA wal_checkpoint(RESTART)", [], |_| Ok(())) {
                        tracing::warn!(error = %e, "sqlite WAL not restarted");
                    }
                    r
                })
                .await;
        }
        if self.offload_only {
            return self.offload(f).await;
        }
        let first = match self.conn.try_lock() {
            Ok(mut conn) => {
                conn.busy_timeout(Duration::ZERO).map_err(be)?;
                let r = f(&mut conn);
                conn.busy_timeout(BUSY_TIMEOUT).map_err(be)?;
                Some(r)
            }
            Err(std::sync::TryLockError::Poisoned(p)) => {
                let conn = p.into_inner();
                conn.busy_timeout(BUSY_TIMEOUT).map_err(be)?;
                None
            }
            Err(std::sync::TryLockError::WouldBlock) => None,
        };
        match first {
            Some(Err(e)) if is_busy(&e) => self.offload(f).await,
            Some(r) => r,
            None => self.offload(f).await,
        }
    }

    /// Runs `f` on tokio's blocking pool, waiting for the connection and SQLite's lock there.
    async fn offload<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Connection) -> Result<T, CheckpointError> + Send + 'static,
    ) -> Result<T, CheckpointError> {
        let _slot = self
            .offload_slots
            .acquire()
            .await
            .map_err(|e| CheckpointError::backend("sqlite offload closed", e))?;
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut conn = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut conn)
        })
        .await
        .map_err(|e| CheckpointError::backend("sqlite task did not finish", e))?
    }
}

/// The results of a batch call: each item's own, or, when the transaction as a whole failed
/// (begin or commit), that failure for every one of the `n` items.
fn one_result_each(
    n: usize,
    r: Result<Vec<Result<(), CheckpointError>>, CheckpointError>,
) -> Vec<Result<(), CheckpointError>> {
    match r {
        Ok(results) => results,
        Err(e) => (0..n)
            .map(|_| {
                Err(CheckpointError::backend_msg(
                    crate::ErrorChain(&e).to_string(),
                ))
            })
            .collect(),
    }
}

/// How long a call on the blocking pool waits for another connection's lock.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// Whether an error is SQLite's "the lock is held" (`SQLITE_BUSY`, `SQLITE_LOCKED`).
fn is_busy(e: &CheckpointError) -> bool {
    let CheckpointError::Database { source, .. } = e else {
        return false;
    };
    source
        .downcast_ref::<rusqlite::Error>()
        .and_then(rusqlite::Error::sqlite_error_code)
        .is_some_and(|c| {
            matches!(
                c,
                rusqlite::ErrorCode::DatabaseBusy | rusqlite::ErrorCode::DatabaseLocked
            )
        })
}

impl Drop for SqliteCheckpointer {
    /// A clean close folds the whole WAL back into the database file and empties it, so the file
    /// alone holds every committed checkpoint.
    fn drop(&mut self) {
        drop(self.stop_checkpointer.take());
        let conn = self.conn.lock().unwrap_or_else(|p| p.into_inner());
        if let Err(e) = exit::truncate_wal(&conn, Duration::from_secs(1)) {
            tracing::warn!(error = %e, path = %self.path.display(), "sqlite WAL not truncated on close");
        }
    }
}

/// Inserts one checkpoint row (`?1` thread id, `?2` id, `?3` parent, `?4` fingerprint, `?5` kind,
/// `?6` body, `?7` next tasks, `?8` metadata, `?9` checksum, `?10` thread number).
const INSERT_CHECKPOINT_SQL: &str =
    "INSERT INTO checkpoints (thread_id, id, parent, fingerprint, kind, body, next_tasks, metadata, checksum, thread_no)
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)";

/// The conditional write of one record inside an open transaction: stores `r` with `insert`
/// ([`INSERT_CHECKPOINT_SQL`], prepared once for a whole batch: taking it from the statement cache
/// and returning it for every record was ~1 % of a research load) after checking that its parent
/// is its thread's head.
fn put_in(
    tx: &Connection,
    insert: &mut rusqlite::Statement<'_>,
    r: &CheckpointRecord,
    numbers: &mut Numbering<'_>,
) -> Result<(), CheckpointError> {
    let t = r.thread_id.as_str();
    let no = numbers.of(tx, t)?;
    let head = numbers.head(tx, no)?;
    let found = head.map(|h| id_from_sql(&r.thread_id, h)).transpose()?;
    if found != r.parent || r.parent.is_some_and(|p| p >= r.id) {
        return Err(CheckpointError::Conflict {
            thread: r.thread_id.clone(),
            expected: r.parent,
            found,
        });
    }
    let metadata = metadata_json(&r.metadata)?;
    let sum = ChecksumInput::of(r, &metadata).sum(SCHEME);
    insert
        .execute(params![
            t,
            id_to_sql(r.id)?,
            r.parent.map(id_to_sql).transpose()?,
            r.graph_fingerprint,
            kind_str(r.kind),
            r.body,
            r.next_tasks,
            metadata,
            sum,
            no,
        ])
        .map_err(be)?;
    numbers.stored_head(no, id_to_sql(r.id)?);
    Ok(())
}

/// The checksums this backend writes (schema version 5 on; older rows keep SHA-256 and verify).
const SCHEME: ChecksumScheme = ChecksumScheme::Xxh3;

/// The condition selecting a thread's rows of `checkpoints` or `writes` by its number, `?1` being
/// the thread's id (a literal, for `concat!` into statements; [`BY_THREAD`] for `format!`).
macro_rules! by_thread {
    () => {
        "thread_no = (SELECT no FROM thread_numbers WHERE thread_id = ?1)"
    };
}

/// A thread's head: its newest checkpoint (NULL when it has none). The key index makes it one
/// index probe (after the thread's number); keeping no separate head column means a checkpoint
/// write touches one table besides the numbers, and those only on a thread's first write.
const HEAD_SQL: &str = concat!("SELECT MAX(id) FROM checkpoints WHERE ", by_thread!());

/// The columns [`record_from_row`] reads, in its order (a literal, for `concat!`;
/// [`RECORD_COLUMNS`] for `format!`).
macro_rules! record_columns {
    () => {
        "id, parent, fingerprint, kind, body, next_tasks, metadata, checksum"
    };
}

/// A thread's head record (`?1` is the thread's id): the key index's last entry for the thread.
const HEAD_RECORD_SQL: &str = concat!(
    "SELECT ",
    record_columns!(),
    " FROM checkpoints WHERE ",
    by_thread!(),
    " ORDER BY id DESC LIMIT 1"
);

/// Selects a thread's rows by its number (`?1` is the thread's id): the key index is
/// `(thread_no, id)`, see [`numbers::thread_no`].
const BY_THREAD: &str = by_thread!();

const RECORD_COLUMNS: &str = record_columns!();

fn record_from_row(
    thread: &ThreadId,
    row: &rusqlite::Row<'_>,
) -> Result<CheckpointRecord, CheckpointError> {
    let id: i64 = row.get(0).map_err(be)?;
    let parent: Option<i64> = row.get(1).map_err(be)?;
    let kind: String = row.get(3).map_err(be)?;
    let meta: String = row.get(6).map_err(be)?;
    let stored: Option<String> = row.get(7).map_err(be)?;
    let r = CheckpointRecord {
        thread_id: thread.clone(),
        id: id_from_sql(thread, id)?,
        parent: parent.map(|p| id_from_sql(thread, p)).transpose()?,
        graph_fingerprint: row.get(2).map_err(be)?,
        kind: parse_kind(thread, &kind)?,
        body: row.get(4).map_err(be)?,
        next_tasks: row.get(5).map_err(be)?,
        metadata: parse_metadata(thread, &meta)?,
    };
    verify_checksum(
        thread,
        r.id,
        stored.as_deref(),
        &ChecksumInput::of(&r, &meta),
    )?;
    Ok(r)
}

/// The writes saved at checkpoint `cp` of `thread`, ordered by task then key.
fn writes_at(
    conn: &Connection,
    thread: &ThreadId,
    cp: i64,
) -> Result<Vec<TaskWrite>, CheckpointError> {
    let mut stmt = conn
        .prepare_cached(concat!(
            "SELECT task_step, task_index, node, kind, key, payload FROM writes
             WHERE ",
            by_thread!(),
            " AND checkpoint = ?2
             ORDER BY task_step, task_index, key, kind"
        ))
        .map_err(be)?;
    let mut rows = stmt.query(params![thread.as_str(), cp]).map_err(be)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(be)? {
        let step: i64 = row.get(0).map_err(be)?;
        let kind: String = row.get(3).map_err(be)?;
        out.push(TaskWrite {
            task: TaskId {
                step: step as u64,
                index: row.get(1).map_err(be)?,
            },
            node: row.get(2).map_err(be)?,
            kind: parse_write_kind(thread, &kind)?,
            key: row.get(4).map_err(be)?,
            payload: row.get(5).map_err(be)?,
        });
    }
    Ok(out)
}

fn query_records(
    conn: &Connection,
    thread: &ThreadId,
    sql: &str,
    args: impl rusqlite::Params,
) -> Result<Vec<CheckpointRecord>, CheckpointError> {
    let mut stmt = conn.prepare_cached(sql).map_err(be)?;
    let mut rows = stmt.query(args).map_err(be)?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(be)? {
        out.push(record_from_row(thread, row)?);
    }
    Ok(out)
}

#[async_trait]
impl EffectJournal for SqliteCheckpointer {
    async fn effect_get(
        &self,
        thread: &ThreadId,
        key: &str,
    ) -> Result<Option<Vec<u8>>, CheckpointError> {
        let (thread, key) = (thread.clone(), key.to_string());
        self.call(move |c| {
            c.prepare_cached("SELECT value FROM effects WHERE thread_id = ?1 AND key = ?2")
                .map_err(be)?
                .query_row(params![thread.as_str(), key], |r| r.get(0))
                .optional()
                .map_err(be)
        })
        .await
    }

    /// One `BEGIN IMMEDIATE` transaction: the insert, and the stored value read back only when
    /// another was there first.
    async fn effect_put(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        key: &str,
        value: Vec<u8>,
    ) -> Result<Vec<u8>, CheckpointError> {
        let (thread, key) = (thread.clone(), key.to_string());
        let cp = id_to_sql(checkpoint)?;
        let value = Arc::new(value);
        self.call(move |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(be)?;
            let added = tx
                .prepare_cached(
                    "INSERT OR IGNORE INTO effects (thread_id, key, checkpoint, value)
                     VALUES (?1, ?2, ?3, ?4)",
                )
                .map_err(be)?
                .execute(params![thread.as_str(), key, cp, &value[..]])
                .map_err(be)?;
            let stored = if added == 1 {
                value.to_vec()
            } else {
                tx.prepare_cached("SELECT value FROM effects WHERE thread_id = ?1 AND key = ?2")
                    .map_err(be)?
                    .query_row(params![thread.as_str(), key], |r| r.get(0))
                    .map_err(be)?
            };
            tx.commit().map_err(be)?;
            Ok(stored)
        })
        .await
    }
}

#[async_trait]
impl Checkpointer for SqliteCheckpointer {
    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    fn effect_journal(&self) -> Option<&dyn EffectJournal> {
        Some(self)
    }

    async fn put(&self, record: CheckpointRecord) -> Result<(), CheckpointError> {
        self.call(move |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(be)?;
            {
                let mut insert = tx.prepare_cached(INSERT_CHECKPOINT_SQL).map_err(be)?;
                put_in(&tx, &mut insert, &record, &mut Numbering::uncached())?;
            }
            tx.commit().map_err(be)
        })
        .await
    }

    async fn put_many(&self, records: Vec<CheckpointRecord>) -> Vec<Result<(), CheckpointError>> {
        self.put_batch(records.into_iter().map(BatchItem::Record).collect())
            .await
    }

    async fn put_batch(&self, items: Vec<BatchItem>) -> Vec<Result<(), CheckpointError>> {
        let n = items.len();
        let known = self.numbers.clone();
        let r = self
            .call(move |c| {
                let tx = c
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(be)?;
                let mut known = known.lock().unwrap_or_else(|p| p.into_inner());
                known.sync(&tx)?;
                let mut numbers = known.numbering();
                let mut results = Vec::with_capacity(items.len());
                {
                    let mut insert = tx.prepare_cached(INSERT_CHECKPOINT_SQL).map_err(be)?;
                    for item in &items {
                        let mark = numbers.mark();
                        let result = match item {
                            // A conflicting record writes nothing (the check precedes its one
                            // insert), so the others of the batch can commit together.
                            BatchItem::Record(r) => put_in(&tx, &mut insert, r, &mut numbers),
                            // Several rows: each pair in a savepoint of its own, so one that
                            // fails leaves nothing half written and the others still commit.
                            BatchItem::Writes(thread, cp, writes) => in_savepoint(&tx, || {
                                let cp = id_to_sql(*cp)?;
                                insert_writes(&tx, thread.as_str(), cp, writes, &mut numbers)
                            })?,
                        };
                        if result.is_err() {
                            numbers.undo_to(mark);
                        }
                        results.push(result);
                    }
                }
                tx.commit().map_err(be)?;
                let learned = numbers.learned();
                known.remember(learned, c.total_changes());
                Ok(results)
            })
            .await;
        one_result_each(n, r)
    }

    async fn put_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        writes: Vec<TaskWrite>,
    ) -> Result<(), CheckpointError> {
        let thread = thread.clone();
        let cp = id_to_sql(checkpoint)?;
        self.call(move |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(be)?;
            insert_writes(
                &tx,
                thread.as_str(),
                cp,
                &writes,
                &mut Numbering::uncached(),
            )?;
            tx.commit().map_err(be)
        })
        .await
    }

    async fn put_writes_many(
        &self,
        batch: Vec<(ThreadId, CheckpointId, Vec<TaskWrite>)>,
    ) -> Vec<Result<(), CheckpointError>> {
        self.put_batch(
            batch
                .into_iter()
                .map(|(t, c, w)| BatchItem::Writes(t, c, w))
                .collect(),
        )
        .await
    }

    async fn get_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
    ) -> Result<Vec<TaskWrite>, CheckpointError> {
        let thread = thread.clone();
        let cp = id_to_sql(checkpoint)?;
        self.call(move |c| writes_at(c, &thread, cp)).await
    }

    async fn head_with_writes(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<(CheckpointRecord, Vec<TaskWrite>)>, CheckpointError> {
        let thread = thread.clone();
        self.call(move |c| {
            // One read transaction: no write lands between the head and its writes.
            let tx = c.transaction().map_err(be)?;
            let Some(head) = query_records(&tx, &thread, HEAD_RECORD_SQL, [thread.as_str()])?.pop()
            else {
                return Ok(None);
            };
            let writes = writes_at(&tx, &thread, id_to_sql(head.id)?)?;
            tx.commit().map_err(be)?;
            Ok(Some((head, writes)))
        })
        .await
    }

    async fn head(&self, thread: &ThreadId) -> Result<Option<CheckpointId>, CheckpointError> {
        let thread = thread.clone();
        self.call(move |c| {
            let head: Option<Option<i64>> = c
                .prepare_cached(HEAD_SQL)
                .map_err(be)?
                .query_row([thread.as_str()], |r| r.get(0))
                .optional()
                .map_err(be)?;
            head.flatten().map(|h| id_from_sql(&thread, h)).transpose()
        })
        .await
    }

    async fn get(
        &self,
        thread: &ThreadId,
        id: CheckpointId,
    ) -> Result<CheckpointRecord, CheckpointError> {
        let thread = thread.clone();
        let sql_id = id_to_sql(id)?;
        self.call(move |c| {
            let sql =
                format!("SELECT {RECORD_COLUMNS} FROM checkpoints WHERE {BY_THREAD} AND id = ?2");
            query_records(c, &thread, &sql, params![thread.as_str(), sql_id])?
                .pop()
                .ok_or(CheckpointError::NotFound {
                    thread: thread.clone(),
                    checkpoint: Some(id),
                })
        })
        .await
    }

    async fn load_chain(
        &self,
        thread: &ThreadId,
        id: Option<CheckpointId>,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        let thread = thread.clone();
        let id = id.map(id_to_sql).transpose()?;
        self.call(move |c| {
            // One pass from the target down to the newest snapshot at or below it: each row is
            // read once (finding the snapshot first read every row of the thread for its kind,
            // then the chain was read again; resumes under load spent 2 % of their CPU there).
            let sql = format!(
                "SELECT {RECORD_COLUMNS} FROM checkpoints
                 WHERE {BY_THREAD} AND id <= ?2 ORDER BY id DESC"
            );
            let mut stmt = c.prepare_cached(&sql).map_err(be)?;
            let mut rows = stmt
                .query(params![thread.as_str(), id.unwrap_or(i64::MAX)])
                .map_err(be)?;
            let mut records: Vec<CheckpointRecord> = Vec::new();
            while let Some(row) = rows.next().map_err(be)? {
                if records.is_empty() {
                    let first: i64 = row.get(0).map_err(be)?;
                    if id.is_some_and(|i| i != first) {
                        break;
                    }
                }
                let r = record_from_row(&thread, row)?;
                let snapshot = r.kind == BodyKind::Snapshot;
                records.push(r);
                if snapshot {
                    break;
                }
            }
            let Some(target) = records.first().map(|r| r.id) else {
                return match id {
                    Some(i) => Err(CheckpointError::NotFound {
                        thread: thread.clone(),
                        checkpoint: Some(CheckpointId(i as u64)),
                    }),
                    None => Ok(Vec::new()),
                };
            };
            records.reverse();
            link_chain(&thread, target, records)
        })
        .await
    }

    async fn list(
        &self,
        thread: &ThreadId,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<(CheckpointId, Option<CheckpointId>, CheckpointMetadata)>, CheckpointError>
    {
        let thread = thread.clone();
        let before = before.map(id_to_sql).transpose()?.unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        self.call(move |c| {
            let mut stmt = c
                .prepare_cached(concat!(
                    "SELECT id, parent, metadata FROM checkpoints
                     WHERE ",
                    by_thread!(),
                    " AND id < ?2 ORDER BY id DESC LIMIT ?3"
                ))
                .map_err(be)?;
            let mut rows = stmt
                .query(params![thread.as_str(), before, limit])
                .map_err(be)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(be)? {
                let id: i64 = row.get(0).map_err(be)?;
                let parent: Option<i64> = row.get(1).map_err(be)?;
                let meta: String = row.get(2).map_err(be)?;
                out.push((
                    id_from_sql(&thread, id)?,
                    parent.map(|p| id_from_sql(&thread, p)).transpose()?,
                    parse_metadata(&thread, &meta)?,
                ));
            }
            Ok(out)
        })
        .await
    }

    async fn list_threads(
        &self,
        prefix: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<ThreadSummary>, CheckpointError> {
        let prefix = prefix.to_string();
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        self.call(move |c| {
            let mut stmt = c
                .prepare_cached(
                    "WITH heads AS (
                         SELECT thread_id, no, head FROM (
                             SELECT n.thread_id, n.no,
                                 (SELECT MAX(id) FROM checkpoints c WHERE c.thread_no = n.no) AS head
                             FROM thread_numbers n
                             WHERE substr(n.thread_id, 1, length(?1)) = ?1)
                         WHERE head IS NOT NULL),
                     page AS (
                         SELECT thread_id FROM heads
                         UNION
                         SELECT thread_id FROM threads
                         WHERE substr(thread_id, 1, length(?1)) = ?1 AND metadata IS NOT NULL
                         ORDER BY thread_id LIMIT ?2 OFFSET ?3)
                     SELECT p.thread_id, h.head, t.metadata, c.metadata FROM page p
                     LEFT JOIN heads h ON h.thread_id = p.thread_id
                     LEFT JOIN checkpoints c ON c.thread_no = h.no AND c.id = h.head
                     LEFT JOIN threads t ON t.thread_id = p.thread_id
                     ORDER BY p.thread_id",
                )
                .map_err(be)?;
            let mut rows = stmt.query(params![prefix, limit, offset]).map_err(be)?;
            let mut out = Vec::new();
            while let Some(row) = rows.next().map_err(be)? {
                let thread = ThreadId::new(row.get::<_, String>(0).map_err(be)?);
                let head: Option<i64> = row.get(1).map_err(be)?;
                let meta: Option<String> = row.get(2).map_err(be)?;
                let head_meta: Option<String> = row.get(3).map_err(be)?;
                out.push(ThreadSummary {
                    head: head.map(|h| id_from_sql(&thread, h)).transpose()?,
                    head_metadata: head_meta
                        .map(|m| parse_metadata(&thread, &m))
                        .transpose()?,
                    metadata: parse_value(&thread, meta.as_deref())?,
                    thread_id: thread,
                });
            }
            Ok(out)
        })
        .await
    }

    async fn set_thread_metadata(
        &self,
        thread: &ThreadId,
        metadata: serde_json::Value,
    ) -> Result<(), CheckpointError> {
        let thread = thread.clone();
        let text = metadata.to_string();
        self.call(move |c| {
            c.execute(
                "INSERT INTO threads (thread_id, metadata) VALUES (?1, ?2)
                 ON CONFLICT (thread_id) DO UPDATE SET metadata = excluded.metadata",
                params![thread.as_str(), text],
            )
            .map_err(be)?;
            Ok(())
        })
        .await
    }

    async fn create_thread(
        &self,
        thread: &ThreadId,
        metadata: serde_json::Value,
    ) -> Result<bool, CheckpointError> {
        let thread = thread.clone();
        let text = metadata.to_string();
        self.call(move |c| {
            // IMMEDIATE: the check for checkpoints and the insert hold the write lock together,
            // against other connections and other processes on the file.
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(be)?;
            let head: Option<i64> = tx
                .prepare_cached(HEAD_SQL)
                .map_err(be)?
                .query_row([thread.as_str()], |r| r.get(0))
                .map_err(be)?;
            if head.is_some() {
                return Ok(false);
            }
            let inserted = tx
                .execute(
                    "INSERT INTO threads (thread_id, metadata) VALUES (?1, ?2)
                     ON CONFLICT (thread_id) DO NOTHING",
                    params![thread.as_str(), text],
                )
                .map_err(be)?;
            tx.commit().map_err(be)?;
            Ok(inserted == 1)
        })
        .await
    }

    async fn replace_thread_metadata(
        &self,
        thread: &ThreadId,
        expected: &serde_json::Value,
        metadata: serde_json::Value,
    ) -> Result<bool, CheckpointError> {
        let thread = thread.clone();
        let expected = expected.clone();
        let text = metadata.to_string();
        self.call(move |c| {
            // IMMEDIATE: the read and the write hold the write lock together, against other
            // connections and other processes on the file. Compared as JSON values, not text.
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(be)?;
            let now: Option<Option<String>> = tx
                .query_row(
                    "SELECT metadata FROM threads WHERE thread_id = ?1",
                    [thread.as_str()],
                    |r| r.get(0),
                )
                .optional()
                .map_err(be)?;
            let Some(Some(now)) = now else {
                return Ok(false);
            };
            if parse_value(&thread, Some(&now))? != expected {
                return Ok(false);
            }
            tx.execute(
                "UPDATE threads SET metadata = ?2 WHERE thread_id = ?1",
                params![thread.as_str(), text],
            )
            .map_err(be)?;
            tx.commit().map_err(be)?;
            Ok(true)
        })
        .await
    }

    async fn thread_metadata(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        let thread = thread.clone();
        self.call(move |c| {
            let row: Option<Option<String>> = c
                .query_row(
                    "SELECT metadata FROM threads WHERE thread_id = ?1",
                    [thread.as_str()],
                    |r| r.get(0),
                )
                .optional()
                .map_err(be)?;
            if let Some(m) = row {
                return parse_value(&thread, m.as_deref()).map(Some);
            }
            // A thread with checkpoints but no metadata exists, with `null` metadata.
            let head: Option<i64> = c
                .prepare_cached(HEAD_SQL)
                .map_err(be)?
                .query_row([thread.as_str()], |r| r.get(0))
                .map_err(be)?;
            Ok(head.map(|_| serde_json::Value::Null))
        })
        .await
    }

    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), CheckpointError> {
        let thread = thread.clone();
        let known = self.numbers.clone();
        self.call(move |c| {
            // Forgotten first: whether or not the delete commits, a lookup finds the truth.
            known
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .forget(thread.as_str());
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(be)?;
            for sql in [
                concat!("DELETE FROM writes WHERE ", by_thread!()),
                concat!("DELETE FROM checkpoints WHERE ", by_thread!()),
                "DELETE FROM threads WHERE thread_id = ?1",
                "DELETE FROM thread_numbers WHERE thread_id = ?1",
                "DELETE FROM effects WHERE thread_id = ?1",
            ] {
                tx.execute(sql, [thread.as_str()]).map_err(be)?;
            }
            tx.commit().map_err(be)
        })
        .await
    }

    async fn prune(
        &self,
        thread: &ThreadId,
        keep_from: CheckpointId,
        snapshot: Vec<u8>,
    ) -> Result<(), CheckpointError> {
        let thread = thread.clone();
        let keep = id_to_sql(keep_from)?;
        self.call(move |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(be)?;
            let t = thread.as_str();
            let row = tx
                .query_row(
                    concat!(
                        "SELECT parent, fingerprint, next_tasks, metadata FROM checkpoints
                     WHERE ",
                        by_thread!(),
                        " AND id = ?2"
                    ),
                    params![t, keep],
                    |r| {
                        Ok((
                            r.get::<_, Option<i64>>(0)?,
                            r.get::<_, String>(1)?,
                            r.get::<_, Vec<u8>>(2)?,
                            r.get::<_, String>(3)?,
                        ))
                    },
                )
                .optional()
                .map_err(be)?;
            let Some((parent, fingerprint, next_tasks, meta)) = row else {
                return Err(CheckpointError::NotFound {
                    thread: thread.clone(),
                    checkpoint: Some(keep_from),
                });
            };
            let sum = ChecksumInput {
                id: keep_from,
                parent: parent.map(|p| id_from_sql(&thread, p)).transpose()?,
                fingerprint: &fingerprint,
                kind: BodyKind::Snapshot,
                body: &snapshot,
                next_tasks: &next_tasks,
                metadata_json: meta.as_bytes(),
            }
            .sum(SCHEME);
            tx.execute(
                concat!(
                    "UPDATE checkpoints SET kind = 'snapshot', body = ?3, checksum = ?4
                 WHERE ",
                    by_thread!(),
                    " AND id = ?2"
                ),
                params![t, keep, snapshot, sum],
            )
            .map_err(be)?;
            tx.execute(
                concat!(
                    "DELETE FROM checkpoints WHERE ",
                    by_thread!(),
                    " AND id < ?2"
                ),
                params![t, keep],
            )
            .map_err(be)?;
            tx.execute(
                concat!(
                    "DELETE FROM writes WHERE ",
                    by_thread!(),
                    " AND checkpoint < ?2"
                ),
                params![t, keep],
            )
            .map_err(be)?;
            tx.execute(
                "DELETE FROM effects WHERE thread_id = ?1 AND checkpoint < ?2",
                params![t, keep],
            )
            .map_err(be)?;
            tx.commit().map_err(be)
        })
        .await
    }

    async fn trim(
        &self,
        thread: &ThreadId,
        keep_from: CheckpointId,
    ) -> Result<u64, CheckpointError> {
        let thread = thread.clone();
        let keep = id_to_sql(keep_from)?;
        self.call(move |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(be)?;
            let t = thread.as_str();
            let snapshot: Option<i64> = tx
                .query_row(
                    concat!(
                        "SELECT MAX(id) FROM checkpoints
                     WHERE ",
                        by_thread!(),
                        " AND id <= ?2 AND kind = 'snapshot'"
                    ),
                    params![t, keep],
                    |r| r.get(0),
                )
                .map_err(be)?;
            let Some(snapshot) = snapshot else {
                return Ok(0);
            };
            let n = tx
                .execute(
                    concat!(
                        "DELETE FROM checkpoints WHERE ",
                        by_thread!(),
                        " AND id < ?2"
                    ),
                    params![t, snapshot],
                )
                .map_err(be)?;
            tx.execute(
                concat!(
                    "DELETE FROM writes WHERE ",
                    by_thread!(),
                    " AND checkpoint < ?2"
                ),
                params![t, snapshot],
            )
            .map_err(be)?;
            tx.execute(
                "DELETE FROM effects WHERE thread_id = ?1 AND checkpoint < ?2",
                params![t, snapshot],
            )
            .map_err(be)?;
            tx.commit().map_err(be)?;
            Ok(n as u64)
        })
        .await
    }

    async fn rewind(
        &self,
        thread: &ThreadId,
        to: Option<CheckpointId>,
        writes: Vec<TaskWrite>,
    ) -> Result<u64, CheckpointError> {
        let thread = thread.clone();
        // Everything above `to`; with no `to`, everything (ids are non-negative).
        let (cut, at) = match to {
            Some(to) => (id_to_sql(to)?, Some(id_to_sql(to)?)),
            None => (-1, None),
        };
        self.call(move |c| {
            let tx = c
                .transaction_with_behavior(TransactionBehavior::Immediate)
                .map_err(be)?;
            let t = thread.as_str();
            let n = tx
                .execute(
                    concat!(
                        "DELETE FROM checkpoints WHERE ",
                        by_thread!(),
                        " AND id > ?2"
                    ),
                    params![t, cut],
                )
                .map_err(be)?;
            tx.execute(
                concat!(
                    "DELETE FROM writes WHERE ",
                    by_thread!(),
                    " AND checkpoint >= ?2"
                ),
                params![t, at.unwrap_or(cut)],
            )
            .map_err(be)?;
            tx.execute(
                "DELETE FROM effects WHERE thread_id = ?1 AND checkpoint > ?2",
                params![t, cut],
            )
            .map_err(be)?;
            if let Some(at) = at {
                insert_writes(&tx, t, at, &writes, &mut Numbering::uncached())?;
            }
            tx.commit().map_err(be)?;
            Ok(n as u64)
        })
        .await
    }

    fn prefers_group_commit(&self) -> bool {
        true
    }

    async fn ping(&self) -> Result<(), CheckpointError> {
        self.call(|c| c.query_row("SELECT 1", [], |_| Ok(())).map_err(be))
            .await
    }
}

/// Runs `f` inside a savepoint of `tx`: released when `f` succeeds, rolled back when it fails (its
/// error is the inner result). Plain SQL rather than rusqlite's `Savepoint`, which borrows the
/// transaction mutably and so could not live beside a batch's prepared insert. The outer result
/// is the savepoint's own statements failing.
fn in_savepoint<T>(
    tx: &Connection,
    f: impl FnOnce() -> Result<T, CheckpointError>,
) -> Result<Result<T, CheckpointError>, CheckpointError> {
    let run = |sql: &str| {
        tx.prepare_cached(sql)
            .and_then(|mut s| s.execute([]))
            .map_err(be)
    };
    run("SAVEPOINT batch_item")?;
    let r = f();
    if r.is_err() {
        run("ROLLBACK TO batch_item")?;
    }
    run("RELEASE batch_item")?;
    Ok(r)
}

/// Stores `writes` at checkpoint `cp` of `thread` inside `tx` (a write with the same task, kind
/// and key replaces the earlier one).
fn insert_writes(
    tx: &Connection,
    thread: &str,
    cp: i64,
    writes: &[TaskWrite],
    numbers: &mut Numbering<'_>,
) -> Result<(), CheckpointError> {
    let mut stmt = tx
        .prepare_cached(
            "INSERT OR REPLACE INTO writes
             (thread_id, checkpoint, task_step, task_index, node, kind, key, payload, thread_no)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
        )
        .map_err(be)?;
    let no = numbers.of(tx, thread)?;
    for w in writes {
        stmt.execute(params![
            thread,
            cp,
            w.task.step as i64,
            w.task.index,
            w.node,
            write_kind_str(w.kind),
            w.key,
            w.payload,
            no
        ])
        .map_err(be)?;
    }
    Ok(())
}
