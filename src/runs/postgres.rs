//! Run records in PostgreSQL: `planwright_runs`, beside the threads, on a pool built from the same
//! URL options as the checkpointer's (size, timeouts, `sslmode`). Every call goes through the
//! checkpointer's retry loop: a dropped connection costs the statement in flight, retried on a
//! fresh connection. Each statement is safe to retry: an insert whose first attempt committed
//! finds its own row (`ON CONFLICT DO NOTHING`, then a read), a transition whose first attempt
//! committed finds the status already at its target.

use super::{Claim, RunChange, RunRecord, RunRecordStatus, RunStore, RunStoreError};
use crate::checkpoint::postgres::retry::{with_retry_bounded, Attempt};
use crate::checkpoint::postgres::{PgConfig, SharedPool};
use crate::checkpoint::CheckpointError;
use crate::ids::CheckpointId;
use async_trait::async_trait;
use deadpool_postgres::Pool;
use std::future::Future;
use std::time::Duration;
use tokio_postgres::Row;

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS planwright_runs (
    seq BIGSERIAL PRIMARY KEY,
    run_id TEXT NOT NULL UNIQUE,
    thread_id TEXT NOT NULL,
    assistant_id TEXT NOT NULL,
    status TEXT NOT NULL,
    multitask_strategy TEXT NOT NULL,
    created_at BIGINT NOT NULL,
    updated_at BIGINT NOT NULL,
    metadata TEXT NOT NULL,
    kwargs TEXT NOT NULL,
    owner TEXT,
    error TEXT,
    start_checkpoint BIGINT,
    start_writes TEXT
);
CREATE INDEX IF NOT EXISTS planwright_runs_thread ON planwright_runs (thread_id, seq);
CREATE INDEX IF NOT EXISTS planwright_runs_unfinished ON planwright_runs (seq)
    WHERE status IN ('pending', 'running');
ALTER TABLE planwright_runs ADD COLUMN IF NOT EXISTS lease_owner TEXT;
ALTER TABLE planwright_runs ADD COLUMN IF NOT EXISTS lease_until BIGINT NOT NULL DEFAULT 0;
ALTER TABLE planwright_runs ADD COLUMN IF NOT EXISTS fence BIGINT NOT NULL DEFAULT 0;
ALTER TABLE planwright_runs ADD COLUMN IF NOT EXISTS cancel_asked BOOLEAN NOT NULL DEFAULT false;
CREATE SEQUENCE IF NOT EXISTS planwright_fence_seq;
CREATE TABLE IF NOT EXISTS planwright_run_events (
    run_id TEXT NOT NULL REFERENCES planwright_runs (run_id) ON DELETE CASCADE,
    seq BIGINT NOT NULL,
    event TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
);
";

/// Serialises the schema's creation across processes starting together.
const SCHEMA_LOCK: i64 = 0x706c_616e_7275;

const COLUMNS: &str = "seq, run_id, thread_id, assistant_id, status, multitask_strategy, \
     created_at, updated_at, metadata, kwargs, owner, error, start_checkpoint, start_writes";

/// Run records in a PostgreSQL database.
pub struct PostgresRuns {
    pub(super) pool: Pool,
    retry_for: Duration,
    op_timeout: Duration,
}

fn be(op: &'static str) -> impl Fn(CheckpointError) -> RunStoreError {
    move |e| RunStoreError::backend(op, e)
}

/// Why a pool did not open, as the run store says it: a malformed URL is its
/// [`RunStoreError::BadUrl`].
pub(super) fn open_error(e: CheckpointError) -> RunStoreError {
    match e {
        CheckpointError::BadUrl { url, reason } => RunStoreError::BadUrl { url, reason },
        e => RunStoreError::backend("connect", e),
    }
}

impl PostgresRuns {
    /// Connects with the checkpointer's URL options, on a pool of its own (checked against the
    /// server's free connections: [`SharedPool::open`]), and creates the table if needed.
    pub async fn connect(url: &str) -> Result<Self, RunStoreError> {
        let shared = SharedPool::open(url).await.map_err(open_error)?;
        Self::with_pool(shared.pool(), shared.config()).await
    }

    /// Run records on an existing pool (the process's shared one, see
    /// [`PgPools`](crate::checkpoint::PgPools)), with the retry budget and timeouts of `cfg`;
    /// creates the table if needed.
    pub async fn with_pool(pool: Pool, cfg: &PgConfig) -> Result<Self, RunStoreError> {
        let me = Self {
            pool,
            retry_for: cfg.retry_for,
            op_timeout: cfg.op_timeout,
        };
        let pool = &me.pool;
        me.retry("create table", |_| async move {
            let mut client = pool.get().await?;
            let tx = client.transaction().await?;
            tx.execute("SELECT pg_advisory_xact_lock($1)", &[&SCHEMA_LOCK])
                .await?;
            tx.batch_execute(SCHEMA).await?;
            tx.commit().await?;
            Ok(())
        })
        .await
        .map_err(be("create table"))?;
        Ok(me)
    }

    /// Runs `op` with the checkpointer's retries, each attempt bounded by `op_timeout`.
    pub(super) async fn retry<T, F, Fut>(
        &self,
        what: &'static str,
        op: F,
    ) -> Result<T, CheckpointError>
    where
        F: FnMut(u32) -> Fut,
        Fut: Future<Output = Result<T, Attempt>>,
    {
        with_retry_bounded(what, self.retry_for, self.op_timeout, op).await
    }

    async fn rows(
        &self,
        what: &'static str,
        sql: String,
        params: Vec<Box<dyn tokio_postgres::types::ToSql + Sync + Send>>,
    ) -> Result<Vec<RunRecord>, RunStoreError> {
        let pool = &self.pool;
        let (sql, params) = (&sql, &params);
        let rows = self
            .retry(what, |_| async move {
                let client = pool.get().await?;
                let refs: Vec<&(dyn tokio_postgres::types::ToSql + Sync)> = params
                    .iter()
                    .map(|b| b.as_ref() as &(dyn tokio_postgres::types::ToSql + Sync))
                    .collect();
                Ok(client.query(sql.as_str(), &refs).await?)
            })
            .await
            .map_err(be(what))?;
        rows.iter().map(record).collect()
    }
}

fn record(row: &Row) -> Result<RunRecord, RunStoreError> {
    let read = |e: tokio_postgres::Error| RunStoreError::backend("read", e);
    let run_id: String = row.try_get(1).map_err(read)?;
    let corrupt = |reason: String| RunStoreError::Corrupt {
        run_id: run_id.clone(),
        reason,
    };
    let int = |i: usize, what: &str| -> Result<u64, RunStoreError> {
        let v: i64 = row.try_get(i).map_err(read)?;
        u64::try_from(v).map_err(|_| corrupt(format!("negative {what} {v}")))
    };
    let json = |i: usize, what: &str| -> Result<serde_json::Value, RunStoreError> {
        let text: String = row.try_get(i).map_err(read)?;
        serde_json::from_str(&text).map_err(|e| corrupt(format!("{what} is not JSON: {e}")))
    };
    let status: String = row.try_get(4).map_err(read)?;
    let start: Option<i64> = row.try_get(12).map_err(read)?;
    Ok(RunRecord {
        seq: int(0, "seq")?,
        thread_id: row.try_get(2).map_err(read)?,
        assistant_id: row.try_get(3).map_err(read)?,
        status: RunRecordStatus::parse(&status)
            .ok_or_else(|| corrupt(format!("unknown status `{status}`")))?,
        multitask_strategy: row.try_get(5).map_err(read)?,
        created_at: int(6, "created_at")?,
        updated_at: int(7, "updated_at")?,
        metadata: json(8, "metadata")?,
        kwargs: json(9, "kwargs")?,
        owner: row.try_get(10).map_err(read)?,
        error: row.try_get(11).map_err(read)?,
        start_checkpoint: start
            .map(|v| {
                u64::try_from(v)
                    .map(CheckpointId)
                    .map_err(|_| corrupt(format!("negative start checkpoint {v}")))
            })
            .transpose()?,
        start_writes: match row.try_get::<_, Option<String>>(13).map_err(read)? {
            None => serde_json::Value::Null,
            Some(t) => serde_json::from_str(&t)
                .map_err(|e| corrupt(format!("start writes are not JSON: {e}")))?,
        },
        run_id: run_id.clone(),
    })
}

/// The start writes as stored: `NULL` for none.
fn writes_text(v: &serde_json::Value) -> Option<String> {
    (!v.is_null()).then(|| v.to_string())
}

fn big(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl RunStore for PostgresRuns {
    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    async fn insert(&self, r: RunRecord) -> Result<RunRecord, RunStoreError> {
        let pool = &self.pool;
        let rec = &r;
        self.retry("insert run", |_| async move {
            let client = pool.get().await?;
            client
                .execute(
                    "INSERT INTO planwright_runs (run_id, thread_id, assistant_id, status,
                        multitask_strategy, created_at, updated_at, metadata, kwargs, owner, error,
                        start_checkpoint, start_writes)
                     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)
                     ON CONFLICT (run_id) DO NOTHING",
                    &[
                        &rec.run_id,
                        &rec.thread_id,
                        &rec.assistant_id,
                        &rec.status.as_str(),
                        &rec.multitask_strategy,
                        &(rec.created_at as i64),
                        &(rec.updated_at as i64),
                        &rec.metadata.to_string(),
                        &rec.kwargs.to_string(),
                        &rec.owner,
                        &rec.error,
                        &rec.start_checkpoint.map(|c| c.0 as i64),
                        &writes_text(&rec.start_writes),
                    ],
                )
                .await?;
            Ok(())
        })
        .await
        .map_err(be("insert run"))?;
        // Whatever is stored under the id now: this insert's row, an earlier attempt's, or another
        // thread's run.
        let stored = self
            .get(&r.run_id)
            .await?
            .ok_or_else(|| RunStoreError::Corrupt {
                run_id: r.run_id.clone(),
                reason: "inserted, then not found".into(),
            })?;
        if stored.thread_id != r.thread_id {
            return Err(RunStoreError::Exists {
                run_id: r.run_id,
                thread_id: stored.thread_id,
            });
        }
        Ok(stored)
    }

    async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, RunStoreError> {
        Ok(self
            .rows(
                "get run",
                format!("SELECT {COLUMNS} FROM planwright_runs WHERE run_id = $1"),
                vec![Box::new(run_id.to_string())],
            )
            .await?
            .pop())
    }

    async fn list_thread(
        &self,
        thread_id: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<RunRecord>, RunStoreError> {
        self.rows(
            "list runs",
            format!(
                "SELECT {COLUMNS} FROM planwright_runs WHERE thread_id = $1
                 ORDER BY seq DESC LIMIT $2 OFFSET $3"
            ),
            vec![
                Box::new(thread_id.to_string()),
                Box::new(big(limit)),
                Box::new(big(offset)),
            ],
        )
        .await
    }

    async fn unfinished(&self, limit: usize) -> Result<Vec<RunRecord>, RunStoreError> {
        self.rows(
            "unfinished runs",
            format!(
                "SELECT {COLUMNS} FROM planwright_runs
                 WHERE status IN ('pending', 'running') ORDER BY seq LIMIT $1"
            ),
            vec![Box::new(big(limit))],
        )
        .await
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
        let pool = &self.pool;
        let (now, until) = (now_ms as i64, now_ms.saturating_add(ttl_ms) as i64);
        // One statement: the claim, or (when it claimed nothing) the row as it stood, which says
        // why. An ended run is never claimed.
        let row = self
            .retry("claim run", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .query_opt(
                        "WITH claimed AS (
                            UPDATE planwright_runs
                            SET lease_owner = $2, lease_until = $4,
                                fence = nextval('planwright_fence_seq')
                            WHERE run_id = $1 AND status IN ('pending', 'running')
                              AND (lease_owner IS NULL OR lease_owner = $2 OR lease_until < $3)
                            RETURNING fence, status, lease_owner)
                         SELECT fence, status, lease_owner FROM claimed
                         UNION ALL
                         SELECT NULL, status, lease_owner FROM planwright_runs
                         WHERE run_id = $1 AND NOT EXISTS (SELECT 1 FROM claimed)",
                        &[&run_id, &owner, &now, &until],
                    )
                    .await?)
            })
            .await
            .map_err(be("claim run"))?;
        let Some(row) = row else {
            return Ok(Claim::Missing);
        };
        let status: String = row.get(1);
        let status = RunRecordStatus::parse(&status).ok_or_else(|| RunStoreError::Corrupt {
            run_id: run_id.to_string(),
            reason: format!("unknown status `{status}`"),
        })?;
        Ok(match row.get::<_, Option<i64>>(0) {
            Some(fence) => Claim::Granted {
                token: fence as u64,
                status,
            },
            None if status.is_ended() => Claim::Ended(status),
            None => Claim::Held {
                owner: row.get::<_, Option<String>>(2).unwrap_or_default(),
            },
        })
    }

    async fn renew(
        &self,
        owner: &str,
        now_ms: u64,
        ttl_ms: u64,
    ) -> Result<Vec<(String, bool)>, RunStoreError> {
        let pool = &self.pool;
        let until = now_ms.saturating_add(ttl_ms) as i64;
        // An expired lease nobody claimed since is still this owner's (its token is the newest):
        // renewing it is safe, and a replica whose renewal came late (a database cut, a pause)
        // keeps its runs. A released lease (`lease_until = 0`) stays released.
        let rows = self
            .retry("renew leases", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .query(
                        "UPDATE planwright_runs SET lease_until = $2
                         WHERE lease_owner = $1 AND status IN ('pending', 'running')
                           AND lease_until > 0
                         RETURNING run_id, cancel_asked",
                        &[&owner, &until],
                    )
                    .await?)
            })
            .await
            .map_err(be("renew leases"))?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1))).collect())
    }

    async fn lease_holder(&self, run_id: &str) -> Result<Option<String>, RunStoreError> {
        let pool = &self.pool;
        let row = self
            .retry("read lease", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .query_opt(
                        "SELECT lease_owner FROM planwright_runs WHERE run_id = $1",
                        &[&run_id],
                    )
                    .await?)
            })
            .await
            .map_err(be("read lease"))?;
        Ok(row.and_then(|r| r.get::<_, Option<String>>(0)))
    }

    async fn request_cancel(&self, run_id: &str) -> Result<bool, RunStoreError> {
        let pool = &self.pool;
        let n = self
            .retry("request cancel", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .execute(
                        "UPDATE planwright_runs SET cancel_asked = true
                         WHERE run_id = $1 AND status = 'running'",
                        &[&run_id],
                    )
                    .await?)
            })
            .await
            .map_err(be("request cancel"))?;
        Ok(n > 0)
    }

    async fn release(&self, run_id: &str, owner: &str) -> Result<(), RunStoreError> {
        let pool = &self.pool;
        self.retry("release lease", |_| async move {
            pool.get()
                .await?
                .execute(
                    "UPDATE planwright_runs SET lease_until = 0
                     WHERE run_id = $1 AND lease_owner = $2",
                    &[&run_id, &owner],
                )
                .await?;
            Ok(())
        })
        .await
        .map_err(be("release lease"))
    }

    async fn release_all(&self, owner: &str) -> Result<(), RunStoreError> {
        let pool = &self.pool;
        self.retry("release leases", |_| async move {
            pool.get()
                .await?
                .execute(
                    "UPDATE planwright_runs SET lease_until = 0
                     WHERE lease_owner = $1 AND status = 'running'",
                    &[&owner],
                )
                .await?;
            Ok(())
        })
        .await
        .map_err(be("release leases"))
    }

    async fn expired(
        &self,
        now_ms: u64,
        grace_ms: u64,
        limit: usize,
    ) -> Result<Vec<RunRecord>, RunStoreError> {
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let stale = now_ms.saturating_sub(grace_ms) as i64;
        self.rows(
            "expired leases",
            format!(
                "SELECT {COLUMNS} FROM planwright_runs
                 WHERE status IN ('pending', 'running')
                   AND ((lease_owner IS NOT NULL AND lease_until < $1)
                        OR (lease_owner IS NULL AND updated_at < $2))
                 ORDER BY seq LIMIT $3"
            ),
            vec![Box::new(now_ms as i64), Box::new(stale), Box::new(limit)],
        )
        .await
    }

    async fn transition(
        &self,
        run_id: &str,
        from: &[RunRecordStatus],
        to: RunRecordStatus,
        change: RunChange,
    ) -> Result<bool, RunStoreError> {
        let pool = &self.pool;
        let from: Vec<String> = from.iter().map(|s| s.as_str().to_string()).collect();
        let (from, change) = (&from, &change);
        self.retry("transition run", |attempt| async move {
            let client = pool.get().await?;
            let n = client
                .execute(
                    "UPDATE planwright_runs SET status = $2, updated_at = $3,
                        error = COALESCE($4, error),
                        start_checkpoint = COALESCE($5, start_checkpoint),
                        start_writes = COALESCE($7, start_writes)
                     WHERE run_id = $1 AND status = ANY($6)",
                    &[
                        &run_id,
                        &to.as_str(),
                        &(change.at as i64),
                        &change.error,
                        &change.start_checkpoint.map(|c| c.0 as i64),
                        from,
                        &change.start_writes.as_ref().map(|w| w.to_string()),
                    ],
                )
                .await?;
            if n == 0 && attempt > 0 {
                // An earlier attempt may have committed before its connection dropped.
                let row = client
                    .query_opt(
                        "SELECT status, updated_at FROM planwright_runs WHERE run_id = $1",
                        &[&run_id],
                    )
                    .await?;
                return Ok(row.is_some_and(|r| {
                    r.get::<_, String>(0) == to.as_str() && r.get::<_, i64>(1) == change.at as i64
                }));
            }
            Ok(n == 1)
        })
        .await
        .map_err(be("transition run"))
    }

    async fn delete(&self, run_id: &str) -> Result<bool, RunStoreError> {
        let pool = &self.pool;
        self.retry("delete run", |_| async move {
            let client = pool.get().await?;
            Ok(client
                .execute("DELETE FROM planwright_runs WHERE run_id = $1", &[&run_id])
                .await?
                > 0)
        })
        .await
        .map_err(be("delete run"))
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<u64, RunStoreError> {
        let pool = &self.pool;
        self.retry("delete thread runs", |_| async move {
            let client = pool.get().await?;
            Ok(client
                .execute(
                    "DELETE FROM planwright_runs WHERE thread_id = $1",
                    &[&thread_id],
                )
                .await?)
        })
        .await
        .map_err(be("delete thread runs"))
    }

    async fn sweep(
        &self,
        prefix: &str,
        ended_before: Option<u64>,
        keep: Option<usize>,
        batch: usize,
    ) -> Result<u64, RunStoreError> {
        let pool = &self.pool;
        let (before, keep, batch) = (ended_before.map(|t| t as i64), keep.map(big), big(batch));
        let len = prefix.chars().count() as i32;
        self.retry("sweep runs", |_| async move {
            let client = pool.get().await?;
            Ok(client
                .execute(
                    "DELETE FROM planwright_runs WHERE seq IN (
                        SELECT seq FROM (
                            SELECT seq, updated_at,
                                   ROW_NUMBER() OVER (ORDER BY seq DESC) - 1 AS newer
                            FROM planwright_runs
                            WHERE status NOT IN ('pending', 'running')
                              AND substr(thread_id, 1, $4) = $5
                        ) ranked
                        WHERE ($1::BIGINT IS NOT NULL AND updated_at < $1)
                           OR ($2::BIGINT IS NOT NULL AND newer >= $2)
                        ORDER BY seq LIMIT $3
                    )",
                    &[&before, &keep, &batch, &len, &prefix],
                )
                .await?)
        })
        .await
        .map_err(be("sweep runs"))
    }
}
