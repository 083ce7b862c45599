//! The PostgreSQL checkpointer (`postgres://…`): for many processes sharing threads.
//!
//! One writer per thread is enforced **in the database**: a checkpoint is stored only by an
//! `UPDATE … SET head = new WHERE head IS NOT DISTINCT FROM parent` that matched a row (or by the
//! insert that creates the thread), in the same transaction as the checkpoint row. Two processes
//! racing on one thread therefore cannot both extend the same parent: the loser gets
//! [`CheckpointError::Conflict`] and nothing of its write remains.
//!
//! Connections come from a `deadpool-postgres` pool ([`config`]: size, timeouts, TLS from the
//! URL); a connection found closed is replaced. Every operation runs through [`retry`]: a dropped
//! connection costs the statement in flight, which is retried on a fresh connection, and while
//! the database is unreachable operations wait with exponential backoff up to `retry_for`. A
//! checkpoint write retried after an unknown commit outcome recognises its own row by checksum
//! instead of reporting a conflict with itself. Every checkpoint carries a checksum
//! ([`integrity`](super::integrity)), verified on load with the chain's parent links.

mod batch;
pub mod budget;
pub mod config;
pub mod retry;
mod schema;

pub use budget::{NoRoom, SharedPool};
pub use config::{pool_from_url, PgConfig, SslMode};

use super::codec::{
    id_from_sql, id_to_sql, kind_str, metadata_json, parse_kind, parse_metadata, parse_value,
    parse_write_kind, write_kind_str,
};
use super::integrity::{checksum, link_chain, verify_checksum, ChecksumInput, ChecksumScheme};
use super::{
    CheckpointError, CheckpointMetadata, CheckpointRecord, Checkpointer, EffectJournal, TaskWrite,
    ThreadSummary,
};
use crate::ids::{CheckpointId, TaskId, ThreadId};
use async_trait::async_trait;
use deadpool_postgres::{GenericClient, Pool};
use retry::{with_retry_bounded, Attempt};
use std::future::Future;
use std::time::Duration;
use tokio_postgres::Row;

/// Checkpoints in a PostgreSQL database.
pub struct PostgresCheckpointer {
    pool: Pool,
    retry_for: Duration,
    op_timeout: Duration,
    /// The fencing token this process writes each fenced thread with.
    fences: dashmap::DashMap<ThreadId, i64>,
}

impl PostgresCheckpointer {
    /// Reads the URL (see [`config`] for its options), opens a pool of its own after checking
    /// that the server has room for its budget ([`SharedPool::open`]), applies pending
    /// migrations (waiting up to `retry_for` for the database), and keeps the pool. A malformed
    /// URL is [`CheckpointError::BadUrl`].
    pub async fn connect(url: &str) -> Result<Self, CheckpointError> {
        let shared = SharedPool::open(url).await?;
        Self::with_pool(shared.pool(), shared.config()).await
    }

    /// A checkpointer on an existing pool (shared with other tables), with the retry budget and
    /// timeouts of `cfg`. Applies pending migrations.
    pub async fn with_pool(pool: Pool, cfg: &PgConfig) -> Result<Self, CheckpointError> {
        let me = Self {
            pool,
            retry_for: cfg.retry_for,
            op_timeout: cfg.op_timeout,
            fences: dashmap::DashMap::new(),
        };
        let pool = &me.pool;
        me.retry("migrate", |_| schema::migrate(pool)).await?;
        Ok(me)
    }

    /// The pool, for callers that keep their own tables in the same database.
    pub fn pool(&self) -> &Pool {
        &self.pool
    }

    /// Runs `op` with retries (see [`retry`]), each attempt bounded by `op_timeout`.
    async fn retry<T, F, Fut>(&self, what: &'static str, op: F) -> Result<T, CheckpointError>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, Attempt>>,
    {
        with_retry_bounded(what, self.retry_for, self.op_timeout, op).await
    }

    /// The token this process writes `thread` with (`None`: it never fenced the thread).
    fn token(&self, thread: &ThreadId) -> Option<i64> {
        self.fences.get(thread).map(|t| *t)
    }
}

/// Refuses, inside the transaction, a write to a thread fenced with a larger token than the
/// writer's. The row lock (`FOR SHARE`) orders it against a takeover's `fence`: a takeover that
/// commits first is seen; one that comes after waits for this write, which it then loads.
async fn check_fence(
    tx: &impl GenericClient,
    thread: &ThreadId,
    token: Option<i64>,
) -> Result<(), Attempt> {
    let Some(token) = token else { return Ok(()) };
    let fence: Option<i64> = tx
        .query_opt(
            "SELECT fence FROM planwright_threads WHERE thread_id = $1 FOR SHARE",
            &[&thread.as_str()],
        )
        .await?
        .map(|row| row.get(0));
    if let Some(fence) = fence.filter(|f| *f > token) {
        tracing::warn!(
            thread_id = thread.as_str(),
            token,
            fence,
            "write refused: another replica took the thread over (its fencing token is newer)"
        );
        return Err(Attempt::Fail(CheckpointError::Fenced {
            thread: thread.clone(),
            token: token as u64,
        }));
    }
    Ok(())
}

/// [`check_fence`], then [`put_in`].
async fn fenced_put(
    tx: &impl GenericClient,
    token: Option<i64>,
    r: &CheckpointRecord,
    sum: &str,
    retrying: bool,
) -> Result<(), Attempt> {
    check_fence(tx, &r.thread_id, token).await?;
    put_in(tx, r, sum, retrying).await
}

/// The conditional write of one record inside an open transaction. With `retrying` (an earlier
/// attempt's commit outcome is unknown), a head already at this record's id whose stored checksum
/// is this record's is the earlier attempt's own write: success, not a conflict.
async fn put_in(
    tx: &impl GenericClient,
    r: &CheckpointRecord,
    sum: &str,
    retrying: bool,
) -> Result<(), Attempt> {
    let t = r.thread_id.as_str();
    let id = id_to_sql(r.id)?;
    let parent = r.parent.map(id_to_sql).transpose()?;
    let conflict = |found: Option<i64>| -> Result<(), Attempt> {
        Err(Attempt::Fail(CheckpointError::Conflict {
            thread: r.thread_id.clone(),
            expected: r.parent,
            found: found.map(|h| id_from_sql(&r.thread_id, h)).transpose()?,
        }))
    };
    if r.parent.is_some_and(|p| p >= r.id) {
        return conflict(parent);
    }
    let moved = tx
        .execute(
            "UPDATE planwright_threads SET head = $2
             WHERE thread_id = $1 AND head IS NOT DISTINCT FROM $3",
            &[&t, &id, &parent],
        )
        .await?;
    if moved == 0 {
        let created = if parent.is_none() {
            tx.execute(
                "INSERT INTO planwright_threads (thread_id, head, metadata) VALUES ($1, $2, NULL)
                 ON CONFLICT (thread_id) DO NOTHING",
                &[&t, &id],
            )
            .await?
        } else {
            0
        };
        if created == 0 {
            let found: Option<i64> = tx
                .query_opt(
                    "SELECT head FROM planwright_threads WHERE thread_id = $1",
                    &[&t],
                )
                .await?
                .and_then(|row| row.get(0));
            if retrying && found == Some(id) {
                let stored: Option<String> = tx
                    .query_opt(
                        "SELECT checksum FROM planwright_checkpoints WHERE thread_id = $1 AND id = $2",
                        &[&t, &id],
                    )
                    .await?
                    .and_then(|row| row.get(0));
                if stored.as_deref() == Some(sum) {
                    return Ok(());
                }
            }
            return conflict(found);
        }
    }
    tx.execute(
        "INSERT INTO planwright_checkpoints
         (thread_id, id, parent, fingerprint, kind, body, next_tasks, metadata, checksum)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        &[
            &t,
            &id,
            &parent,
            &r.graph_fingerprint,
            &kind_str(r.kind),
            &r.body,
            &r.next_tasks,
            &metadata_json(&r.metadata)?,
            &sum,
        ],
    )
    .await?;
    Ok(())
}

/// The checksums this backend writes: SHA-256, which every Planwright version reads (replicas of
/// two versions share the database during a rolling upgrade; SQLite, one process's file, writes
/// the cheaper XXH3).
const SCHEME: ChecksumScheme = ChecksumScheme::Sha256;

const RECORD_COLUMNS: &str = "id, parent, fingerprint, kind, body, next_tasks, metadata, checksum";

/// The writes saved at checkpoint `$2` of thread `$1`, ordered by task then key.
const WRITES_AT_SQL: &str =
    "SELECT task_step, task_index, node, kind, key, payload FROM planwright_writes
     WHERE thread_id = $1 AND checkpoint = $2
     ORDER BY task_step, task_index, key, kind";

/// A row of [`WRITES_AT_SQL`] as a task write.
fn write_from_row(
    thread: &ThreadId,
    row: &tokio_postgres::Row,
) -> Result<TaskWrite, CheckpointError> {
    let step: i64 = row.get(0);
    let index: i64 = row.get(1);
    Ok(TaskWrite {
        task: TaskId {
            step: step as u64,
            index: index as u32,
        },
        node: row.get(2),
        kind: parse_write_kind(thread, row.get(3))?,
        key: row.get(4),
        payload: row.get(5),
    })
}

/// A stored checkpoint, its checksum verified.
fn record_from_row(thread: &ThreadId, row: &Row) -> Result<CheckpointRecord, CheckpointError> {
    let parent: Option<i64> = row.get(1);
    let kind: &str = row.get(3);
    let meta: &str = row.get(6);
    let stored: Option<&str> = row.get(7);
    let r = CheckpointRecord {
        thread_id: thread.clone(),
        id: id_from_sql(thread, row.get(0))?,
        parent: parent.map(|p| id_from_sql(thread, p)).transpose()?,
        graph_fingerprint: row.get(2),
        kind: parse_kind(thread, kind)?,
        body: row.get(4),
        next_tasks: row.get(5),
        metadata: parse_metadata(thread, meta)?,
    };
    verify_checksum(thread, r.id, stored, &ChecksumInput::of(&r, meta))?;
    Ok(r)
}

/// Why a whole batch failed, for each of its records (errors are not `Clone`).
fn batch_error(e: &CheckpointError) -> CheckpointError {
    CheckpointError::backend_msg(format!("batch not stored: {}", crate::ErrorChain(e)))
}

#[async_trait]
impl EffectJournal for PostgresCheckpointer {
    async fn effect_get(
        &self,
        thread: &ThreadId,
        key: &str,
    ) -> Result<Option<Vec<u8>>, CheckpointError> {
        let pool = &self.pool;
        self.retry("effect_get", |_| async move {
            let c = pool.get().await?;
            let stmt = c
                .prepare_cached(
                    "SELECT value FROM planwright_effects WHERE thread_id = $1 AND key = $2",
                )
                .await?;
            Ok(c.query_opt(&stmt, &[&thread.as_str(), &key])
                .await?
                .map(|row| row.get(0)))
        })
        .await
    }

    /// One statement when the key is new (an insert that returns the value); when it is not,
    /// a second reads the value there. Retrying after an unknown commit outcome is safe: the
    /// retry finds the value stored, whoever stored it.
    async fn effect_put(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        key: &str,
        value: Vec<u8>,
    ) -> Result<Vec<u8>, CheckpointError> {
        let cp = id_to_sql(checkpoint)?;
        let (pool, value) = (&self.pool, &value);
        self.retry("effect_put", |_| async move {
            let c = pool.get().await?;
            let insert = c
                .prepare_cached(
                    "INSERT INTO planwright_effects (thread_id, key, checkpoint, value)
                     VALUES ($1, $2, $3, $4) ON CONFLICT (thread_id, key) DO NOTHING
                     RETURNING value",
                )
                .await?;
            if let Some(row) = c
                .query_opt(&insert, &[&thread.as_str(), &key, &cp, value])
                .await?
            {
                return Ok(row.get(0));
            }
            let read = c
                .prepare_cached(
                    "SELECT value FROM planwright_effects WHERE thread_id = $1 AND key = $2",
                )
                .await?;
            Ok(c.query_one(&read, &[&thread.as_str(), &key]).await?.get(0))
        })
        .await
    }
}

#[async_trait]
impl Checkpointer for PostgresCheckpointer {
    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    fn effect_journal(&self) -> Option<&dyn EffectJournal> {
        Some(self)
    }

    /// Yes: a batch of distinct threads is one multi-row statement (`batch`), one commit for
    /// many supersteps (measured: docs/performance-history.md).
    fn prefers_group_commit(&self) -> bool {
        true
    }

    /// Up to 4 batches, each on a connection of its own (never more than half the pool, so other
    /// callers still find a connection).
    fn max_concurrent_batches(&self) -> usize {
        (self.pool.status().max_size / 2).clamp(1, 4)
    }

    /// One `SELECT 1` on a pooled connection, within `op_timeout`, without retries.
    async fn ping(&self) -> Result<(), CheckpointError> {
        let attempt = async {
            let c = self.pool.get().await?;
            c.simple_query("SELECT 1").await?;
            Ok::<_, Attempt>(())
        };
        match tokio::time::timeout(self.op_timeout, attempt).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(Attempt::Retry(e) | Attempt::Fail(e))) => Err(e),
            Err(_) => Err(CheckpointError::backend_msg(format!(
                "postgres: no answer to the health probe within {:?}",
                self.op_timeout
            ))),
        }
    }

    async fn put(&self, record: CheckpointRecord) -> Result<(), CheckpointError> {
        let sum = checksum(&record, SCHEME)?;
        let (r, sum, pool) = (&record, sum.as_str(), &self.pool);
        let token = self.token(&record.thread_id);
        self.retry("put", |n| async move {
            let mut c = pool.get().await?;
            // One statement when it succeeds (no BEGIN/COMMIT round trips); the transaction
            // below says why when it does not, or finds an earlier attempt's commit.
            if batch::eligible(r) {
                let row = batch::Row {
                    record: r,
                    checksum: sum,
                    token,
                };
                if !batch::put_rows(&c, &[row]).await?.is_empty() {
                    return Ok(());
                }
            }
            let tx = c.transaction().await?;
            check_fence(&tx, &r.thread_id, token).await?;
            put_in(&tx, r, sum, n > 0).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn put_many(&self, records: Vec<CheckpointRecord>) -> Vec<Result<(), CheckpointError>> {
        let sums: Result<Vec<String>, _> = records.iter().map(|r| checksum(r, SCHEME)).collect();
        let sums = match sums {
            Ok(s) => s,
            Err(e) => return records.iter().map(|_| Err(batch_error(&e))).collect(),
        };
        let (records_ref, sums, pool) = (&records, &sums, &self.pool);
        // A thread that appears twice (a record extending the batch's own earlier one) must see
        // its statements run one record after the other: then the batch goes one by one.
        let distinct = {
            let mut seen = std::collections::HashSet::new();
            records.iter().all(|r| seen.insert(&r.thread_id))
        };
        let r = self
            .retry("put_many", |n| async move {
                let mut c = pool.get().await?;
                // Fast path: every record of a distinct thread in one statement.
                let mut stored = vec![false; records_ref.len()];
                if distinct {
                    let rows: Vec<batch::Row> = records_ref
                        .iter()
                        .zip(sums)
                        .filter(|(r, _)| batch::eligible(r))
                        .map(|(r, sum)| batch::Row {
                            record: r,
                            checksum: sum,
                            token: self.token(&r.thread_id),
                        })
                        .collect();
                    if !rows.is_empty() {
                        let done = batch::put_rows(&c, &rows).await?;
                        for (i, r) in records_ref.iter().enumerate() {
                            stored[i] = done.contains(r.thread_id.as_str());
                        }
                    }
                    if stored.iter().all(|s| *s) {
                        return Ok(records_ref.iter().map(|_| Ok(())).collect());
                    }
                }
                // The rest one by one, in one transaction: each says why it was not stored (or
                // finds it was, by an earlier attempt whose commit was not acknowledged).
                let tx = c.transaction().await?;
                let rest = records_ref
                    .iter()
                    .zip(sums)
                    .enumerate()
                    .filter(|(i, _)| !stored[*i]);
                // Every record's statements are sent at once: tokio-postgres pipelines requests
                // made concurrently on one connection. Each record's own statements stay in order.
                let txr = &tx;
                let attempts: Vec<(usize, Result<(), Attempt>)> = if distinct {
                    futures::future::join_all(rest.map(|(i, (r, sum))| async move {
                        (
                            i,
                            fenced_put(txr, self.token(&r.thread_id), r, sum, n > 0).await,
                        )
                    }))
                    .await
                } else {
                    let mut out = Vec::with_capacity(records_ref.len());
                    for (i, (r, sum)) in rest {
                        out.push((
                            i,
                            fenced_put(&tx, self.token(&r.thread_id), r, sum, n > 0).await,
                        ));
                    }
                    out
                };
                let mut results: Vec<Result<(), CheckpointError>> =
                    records_ref.iter().map(|_| Ok(())).collect();
                for (i, attempt) in attempts {
                    match attempt {
                        Ok(()) => {}
                        // A conflict writes nothing and raises no SQL error: the batch goes on.
                        Err(Attempt::Fail(
                            e @ (CheckpointError::Conflict { .. } | CheckpointError::Fenced { .. }),
                        )) => results[i] = Err(e),
                        Err(Attempt::Retry(e)) => return Err(Attempt::Retry(e)),
                        Err(Attempt::Fail(e)) => {
                            // An SQL error aborted the transaction: nothing of it is stored.
                            let _ = tx.rollback().await;
                            for (j, s) in stored.iter().enumerate() {
                                if !s {
                                    results[j] = Err(batch_error(&e));
                                }
                            }
                            return Ok(results);
                        }
                    }
                }
                tx.commit().await?;
                Ok(results)
            })
            .await;
        match r {
            Ok(results) => results,
            Err(e) => records.iter().map(|_| Err(batch_error(&e))).collect(),
        }
    }

    async fn fence(&self, thread: &ThreadId, token: u64) -> Result<bool, CheckpointError> {
        let t = i64::try_from(token).map_err(|_| {
            CheckpointError::backend_msg(format!("fencing token {token} is out of range"))
        })?;
        let pool = &self.pool;
        let taken = self
            .retry("fence", |_| async move {
                let c = pool.get().await?;
                let n = c
                    .execute(
                        "INSERT INTO planwright_threads (thread_id, head, metadata, fence)
                         VALUES ($1, NULL, NULL, $2)
                         ON CONFLICT (thread_id) DO UPDATE SET fence = $2
                         WHERE planwright_threads.fence < $2",
                        &[&thread.as_str(), &t],
                    )
                    .await?;
                if n > 0 {
                    return Ok(true);
                }
                // Tokens are given once each: the fence equal to ours is an earlier attempt's
                // commit whose answer was lost.
                let fence: Option<i64> = c
                    .query_opt(
                        "SELECT fence FROM planwright_threads WHERE thread_id = $1",
                        &[&thread.as_str()],
                    )
                    .await?
                    .map(|row| row.get(0));
                Ok(fence == Some(t))
            })
            .await?;
        if !taken {
            return Ok(false);
        }
        self.fences.insert(thread.clone(), t);
        Ok(true)
    }

    /// Each pair on its own pooled connection, all at once: the engine's writer hands these over
    /// from many runs, which would otherwise wait for each other's round trips in turn.
    async fn put_writes_many(
        &self,
        batch: Vec<(ThreadId, CheckpointId, Vec<TaskWrite>)>,
    ) -> Vec<Result<(), CheckpointError>> {
        futures::future::join_all(
            batch
                .into_iter()
                .map(|(t, c, w)| async move { self.put_writes(&t, c, w).await }),
        )
        .await
    }

    async fn put_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        writes: Vec<TaskWrite>,
    ) -> Result<(), CheckpointError> {
        let cp = id_to_sql(checkpoint)?;
        let (writes, pool) = (&writes, &self.pool);
        let token = self.token(thread);
        self.retry("put_writes", |_| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            check_fence(&tx, thread, token).await?;
            insert_writes(&tx, thread.as_str(), cp, writes).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn get_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
    ) -> Result<Vec<TaskWrite>, CheckpointError> {
        let cp = id_to_sql(checkpoint)?;
        let pool = &self.pool;
        let rows = self
            .retry("get_writes", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .query(WRITES_AT_SQL, &[&thread.as_str(), &cp])
                    .await?)
            })
            .await?;
        rows.iter().map(|row| write_from_row(thread, row)).collect()
    }

    async fn head_with_writes(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<(CheckpointRecord, Vec<TaskWrite>)>, CheckpointError> {
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM planwright_checkpoints
             WHERE thread_id = $1
               AND id = (SELECT head FROM planwright_threads WHERE thread_id = $1)"
        );
        let (sql, pool) = (&sql, &self.pool);
        // One connection, two statements: the head record, then the writes saved at it (keyed
        // by its id, so a checkpoint stored in between does not mix its writes in).
        let rows = self
            .retry("head_with_writes", |_| async move {
                let c = pool.get().await?;
                let Some(head) = c.query_opt(sql, &[&thread.as_str()]).await? else {
                    return Ok(None);
                };
                let id: i64 = head.get(0);
                let writes = c.query(WRITES_AT_SQL, &[&thread.as_str(), &id]).await?;
                Ok(Some((head, writes)))
            })
            .await?;
        let Some((head, writes)) = rows else {
            return Ok(None);
        };
        let writes = writes
            .iter()
            .map(|row| write_from_row(thread, row))
            .collect::<Result<_, _>>()?;
        Ok(Some((record_from_row(thread, &head)?, writes)))
    }

    async fn head(&self, thread: &ThreadId) -> Result<Option<CheckpointId>, CheckpointError> {
        let pool = &self.pool;
        let row = self
            .retry("head", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .query_opt(
                        "SELECT head FROM planwright_threads WHERE thread_id = $1",
                        &[&thread.as_str()],
                    )
                    .await?)
            })
            .await?;
        row.and_then(|r| r.get::<_, Option<i64>>(0))
            .map(|h| id_from_sql(thread, h))
            .transpose()
    }

    async fn get(
        &self,
        thread: &ThreadId,
        id: CheckpointId,
    ) -> Result<CheckpointRecord, CheckpointError> {
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM planwright_checkpoints WHERE thread_id = $1 AND id = $2"
        );
        let (sql, pool, sid) = (&sql, &self.pool, id_to_sql(id)?);
        let row = self
            .retry("get", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .query_opt(sql, &[&thread.as_str(), &sid])
                    .await?)
            })
            .await?
            .ok_or_else(|| CheckpointError::NotFound {
                thread: thread.clone(),
                checkpoint: Some(id),
            })?;
        record_from_row(thread, &row)
    }

    async fn load_chain(
        &self,
        thread: &ThreadId,
        id: Option<CheckpointId>,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        let want = id.map(id_to_sql).transpose()?;
        let pool = &self.pool;
        let (target, rows) = self
            .retry("load_chain", |_| async move {
                let c = pool.get().await?;
                let t = thread.as_str();
                let target: Option<i64> = match want {
                    Some(i) => c
                        .query_opt(
                            "SELECT id FROM planwright_checkpoints WHERE thread_id = $1 AND id = $2",
                            &[&t, &i],
                        )
                        .await?
                        .map(|r| r.get(0))
                        .ok_or_else(|| CheckpointError::NotFound {
                            thread: thread.clone(),
                            checkpoint: id,
                        })
                        .map(Some)?,
                    None => c
                        .query_opt(
                            "SELECT head FROM planwright_threads WHERE thread_id = $1",
                            &[&t],
                        )
                        .await?
                        .and_then(|r| r.get(0)),
                };
                let Some(target) = target else {
                    return Ok((None, Vec::new()));
                };
                let sql = format!(
                    "SELECT {RECORD_COLUMNS} FROM planwright_checkpoints
                     WHERE thread_id = $1 AND id <= $2 AND id >= COALESCE((
                         SELECT MAX(id) FROM planwright_checkpoints
                         WHERE thread_id = $1 AND id <= $2 AND kind = 'snapshot'), 0)
                     ORDER BY id"
                );
                Ok((Some(target), c.query(&sql, &[&t, &target]).await?))
            })
            .await?;
        let Some(target) = target else {
            return Ok(Vec::new());
        };
        let records = rows
            .iter()
            .map(|r| record_from_row(thread, r))
            .collect::<Result<Vec<_>, _>>()?;
        if records.is_empty() {
            // The head names a checkpoint that is not stored.
            return Err(CheckpointError::Integrity {
                thread: thread.clone(),
                checkpoint: id_from_sql(thread, target)?,
                problem: super::IntegrityProblem::MissingParent {
                    parent: id_from_sql(thread, target)?,
                },
            });
        }
        link_chain(thread, id_from_sql(thread, target)?, records)
    }

    async fn list(
        &self,
        thread: &ThreadId,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<(CheckpointId, Option<CheckpointId>, CheckpointMetadata)>, CheckpointError>
    {
        let before = before.map(id_to_sql).transpose()?.unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let pool = &self.pool;
        let rows = self
            .retry("list", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .query(
                        "SELECT id, parent, metadata FROM planwright_checkpoints
                         WHERE thread_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3",
                        &[&thread.as_str(), &before, &limit],
                    )
                    .await?)
            })
            .await?;
        rows.iter()
            .map(|row| {
                let parent: Option<i64> = row.get(1);
                Ok((
                    id_from_sql(thread, row.get(0))?,
                    parent.map(|p| id_from_sql(thread, p)).transpose()?,
                    parse_metadata(thread, row.get(2))?,
                ))
            })
            .collect()
    }

    async fn list_threads(
        &self,
        prefix: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<ThreadSummary>, CheckpointError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let offset = i64::try_from(offset).unwrap_or(i64::MAX);
        let pool = &self.pool;
        let rows = self
            .retry("list_threads", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .query(
                        "SELECT t.thread_id, c.id, t.metadata, c.metadata FROM planwright_threads t
                         LEFT JOIN planwright_checkpoints c
                             ON c.thread_id = t.thread_id AND c.id = t.head
                         WHERE left(t.thread_id, length($1)) = $1
                             AND (c.id IS NOT NULL OR t.metadata IS NOT NULL)
                         ORDER BY t.thread_id LIMIT $2 OFFSET $3",
                        &[&prefix, &limit, &offset],
                    )
                    .await?)
            })
            .await?;
        rows.iter()
            .map(|row| {
                let thread = ThreadId::new(row.get::<_, String>(0));
                let meta: Option<&str> = row.get(2);
                let head: Option<i64> = row.get(1);
                let head_meta: Option<&str> = row.get(3);
                Ok(ThreadSummary {
                    head: head.map(|h| id_from_sql(&thread, h)).transpose()?,
                    head_metadata: head_meta.map(|m| parse_metadata(&thread, m)).transpose()?,
                    metadata: parse_value(&thread, meta)?,
                    thread_id: thread,
                })
            })
            .collect()
    }

    async fn set_thread_metadata(
        &self,
        thread: &ThreadId,
        metadata: serde_json::Value,
    ) -> Result<(), CheckpointError> {
        let (text, pool) = (&metadata.to_string(), &self.pool);
        self.retry("set_thread_metadata", |_| async move {
            pool.get()
                .await?
                .execute(
                    "INSERT INTO planwright_threads (thread_id, head, metadata) VALUES ($1, NULL, $2)
                     ON CONFLICT (thread_id) DO UPDATE SET metadata = excluded.metadata",
                    &[&thread.as_str(), text],
                )
                .await?;
            Ok(())
        })
        .await
    }

    async fn create_thread(
        &self,
        thread: &ThreadId,
        metadata: serde_json::Value,
    ) -> Result<bool, CheckpointError> {
        // Every thread with checkpoints has its row here, so the primary key settles it.
        let (text, pool) = (&metadata.to_string(), &self.pool);
        let created = self
            .retry("create_thread", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .execute(
                        "INSERT INTO planwright_threads (thread_id, head, metadata) VALUES ($1, NULL, $2)
                         ON CONFLICT (thread_id) DO NOTHING",
                        &[&thread.as_str(), text],
                    )
                    .await?)
            })
            .await?;
        Ok(created == 1)
    }

    async fn replace_thread_metadata(
        &self,
        thread: &ThreadId,
        expected: &serde_json::Value,
        metadata: serde_json::Value,
    ) -> Result<bool, CheckpointError> {
        let (text, pool) = (&metadata.to_string(), &self.pool);
        self.retry("replace_thread_metadata", |_| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            // The row stays locked from the read to the commit; compared as JSON values.
            let row = tx
                .query_opt(
                    "SELECT metadata FROM planwright_threads WHERE thread_id = $1 FOR UPDATE",
                    &[&thread.as_str()],
                )
                .await?;
            let now = row.and_then(|r| r.get::<_, Option<String>>(0));
            let same = now
                .as_deref()
                .and_then(|t| serde_json::from_str::<serde_json::Value>(t).ok())
                .is_some_and(|v| &v == expected);
            if !same {
                return Ok(false);
            }
            tx.execute(
                "UPDATE planwright_threads SET metadata = $2 WHERE thread_id = $1",
                &[&thread.as_str(), text],
            )
            .await?;
            tx.commit().await?;
            Ok(true)
        })
        .await
    }

    async fn thread_metadata(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        let pool = &self.pool;
        let row = self
            .retry("thread_metadata", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .query_opt(
                        "SELECT metadata FROM planwright_threads WHERE thread_id = $1",
                        &[&thread.as_str()],
                    )
                    .await?)
            })
            .await?;
        row.map(|r| parse_value(thread, r.get::<_, Option<&str>>(0)))
            .transpose()
    }

    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), CheckpointError> {
        let pool = &self.pool;
        self.retry("delete_thread", |_| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            for table in [
                "planwright_writes",
                "planwright_effects",
                "planwright_checkpoints",
                "planwright_threads",
            ] {
                tx.execute(
                    &format!("DELETE FROM {table} WHERE thread_id = $1"),
                    &[&thread.as_str()],
                )
                .await?;
            }
            tx.commit().await?;
            Ok(())
        })
        .await
    }

    async fn trim(
        &self,
        thread: &ThreadId,
        keep_from: CheckpointId,
    ) -> Result<u64, CheckpointError> {
        let keep = id_to_sql(keep_from)?;
        let pool = &self.pool;
        self.retry("trim", |_| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            let t = thread.as_str();
            let snapshot: Option<i64> = tx
                .query_one(
                    "SELECT MAX(id) FROM planwright_checkpoints
                     WHERE thread_id = $1 AND id <= $2 AND kind = 'snapshot'",
                    &[&t, &keep],
                )
                .await?
                .get(0);
            let Some(snapshot) = snapshot else {
                return Ok(0);
            };
            let n = tx
                .execute(
                    "DELETE FROM planwright_checkpoints WHERE thread_id = $1 AND id < $2",
                    &[&t, &snapshot],
                )
                .await?;
            tx.execute(
                "DELETE FROM planwright_writes WHERE thread_id = $1 AND checkpoint < $2",
                &[&t, &snapshot],
            )
            .await?;
            tx.execute(
                "DELETE FROM planwright_effects WHERE thread_id = $1 AND checkpoint < $2",
                &[&t, &snapshot],
            )
            .await?;
            tx.commit().await?;
            Ok(n)
        })
        .await
    }

    async fn rewind(
        &self,
        thread: &ThreadId,
        to: Option<CheckpointId>,
        writes: Vec<TaskWrite>,
    ) -> Result<u64, CheckpointError> {
        let (cut, at) = match to {
            Some(to) => (id_to_sql(to)?, Some(id_to_sql(to)?)),
            None => (-1, None),
        };
        let (writes, pool) = (&writes, &self.pool);
        self.retry("rewind", |_| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            let t = thread.as_str();
            // The head moves first, under the row lock that every checkpoint write takes, so
            // no writer extends the chain being cut.
            tx.execute(
                "UPDATE planwright_threads SET head = $2 WHERE thread_id = $1",
                &[&t, &at],
            )
            .await?;
            let n = tx
                .execute(
                    "DELETE FROM planwright_checkpoints WHERE thread_id = $1 AND id > $2",
                    &[&t, &cut],
                )
                .await?;
            tx.execute(
                "DELETE FROM planwright_writes WHERE thread_id = $1 AND checkpoint >= $2",
                &[&t, &at.unwrap_or(cut)],
            )
            .await?;
            tx.execute(
                "DELETE FROM planwright_effects WHERE thread_id = $1 AND checkpoint > $2",
                &[&t, &cut],
            )
            .await?;
            if let Some(at) = at {
                insert_writes(&tx, t, at, writes).await?;
            }
            tx.commit().await?;
            Ok(n)
        })
        .await
    }

    async fn prune(
        &self,
        thread: &ThreadId,
        keep_from: CheckpointId,
        snapshot: Vec<u8>,
    ) -> Result<(), CheckpointError> {
        let keep = id_to_sql(keep_from)?;
        let (snapshot, pool) = (&snapshot, &self.pool);
        self.retry("prune", |_| async move {
            let mut c = pool.get().await?;
            let tx = c.transaction().await?;
            let t = thread.as_str();
            let row = tx
                .query_opt(
                    "SELECT parent, fingerprint, next_tasks, metadata FROM planwright_checkpoints
                     WHERE thread_id = $1 AND id = $2 FOR UPDATE",
                    &[&t, &keep],
                )
                .await?
                .ok_or_else(|| CheckpointError::NotFound {
                    thread: thread.clone(),
                    checkpoint: Some(keep_from),
                })?;
            let parent: Option<i64> = row.get(0);
            let fingerprint: &str = row.get(1);
            let next_tasks: &[u8] = row.get(2);
            let meta: &str = row.get(3);
            let sum = ChecksumInput {
                id: keep_from,
                parent: parent.map(|p| id_from_sql(thread, p)).transpose()?,
                fingerprint,
                kind: super::BodyKind::Snapshot,
                body: snapshot,
                next_tasks,
                metadata_json: meta.as_bytes(),
            }
            .sum(SCHEME);
            tx.execute(
                "UPDATE planwright_checkpoints SET kind = 'snapshot', body = $3, checksum = $4
                 WHERE thread_id = $1 AND id = $2",
                &[&t, &keep, snapshot, &sum],
            )
            .await?;
            tx.execute(
                "DELETE FROM planwright_checkpoints WHERE thread_id = $1 AND id < $2",
                &[&t, &keep],
            )
            .await?;
            tx.execute(
                "DELETE FROM planwright_writes WHERE thread_id = $1 AND checkpoint < $2",
                &[&t, &keep],
            )
            .await?;
            tx.execute(
                "DELETE FROM planwright_effects WHERE thread_id = $1 AND checkpoint < $2",
                &[&t, &keep],
            )
            .await?;
            tx.commit().await?;
            Ok(())
        })
        .await
    }
}

/// Stores `writes` at checkpoint `cp` of `thread` inside `tx` (a write with the same task, kind
/// and key replaces the earlier one).
async fn insert_writes(
    tx: &deadpool_postgres::Transaction<'_>,
    thread: &str,
    cp: i64,
    writes: &[TaskWrite],
) -> Result<(), Attempt> {
    let stmt = tx
        .prepare_cached(
            "INSERT INTO planwright_writes
             (thread_id, checkpoint, task_step, task_index, node, kind, key, payload)
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
             ON CONFLICT (thread_id, checkpoint, task_step, task_index, kind, key)
             DO UPDATE SET node = excluded.node, payload = excluded.payload",
        )
        .await?;
    for w in writes {
        tx.execute(
            &stmt,
            &[
                &thread,
                &cp,
                &(w.task.step as i64),
                &(w.task.index as i64),
                &w.node,
                &write_kind_str(w.kind),
                &w.key,
                &w.payload,
            ],
        )
        .await?;
    }
    Ok(())
}
