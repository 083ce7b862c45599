//! Run records in SQLite: one table, `planwright_runs`, beside the checkpoints (or in its own
//! file). Every call runs on tokio's blocking pool, so a file lock held by another process never
//! stalls a worker thread. Pending and running records have a partial index of their own, so a
//! starting server reads only them. The runs' stream events (`planwright_run_events`, see
//! [`super::SqliteRunEvents`]) are created with them and deleted with them (a trigger: deleting,
//! sweeping or dropping a thread's records takes their events too).

use super::{RunChange, RunRecord, RunRecordStatus, RunStore, RunStoreError};
use crate::ids::CheckpointId;
use async_trait::async_trait;
use rusqlite::{params, Connection, Row};
use std::sync::{Arc, Mutex};

const SCHEMA: &str = "
CREATE TABLE IF NOT EXISTS planwright_runs (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    run_id TEXT NOT NULL UNIQUE,
    thread_id TEXT NOT NULL,
    assistant_id TEXT NOT NULL,
    status TEXT NOT NULL,
    multitask_strategy TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    metadata TEXT NOT NULL,
    kwargs TEXT NOT NULL,
    owner TEXT,
    error TEXT,
    start_checkpoint INTEGER,
    start_writes TEXT
);
CREATE INDEX IF NOT EXISTS planwright_runs_thread ON planwright_runs (thread_id, seq);
CREATE INDEX IF NOT EXISTS planwright_runs_unfinished ON planwright_runs (seq)
    WHERE status IN ('pending', 'running');
CREATE TABLE IF NOT EXISTS planwright_run_events (
    run_id TEXT NOT NULL,
    seq INTEGER NOT NULL,
    event TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (run_id, seq)
) WITHOUT ROWID;
CREATE TRIGGER IF NOT EXISTS planwright_run_events_go_with_their_run
    AFTER DELETE ON planwright_runs
    BEGIN
        DELETE FROM planwright_run_events WHERE run_id = OLD.run_id;
    END;
";

/// The columns every query reads, in [`record`]'s order.
pub(super) const COLUMNS: &str =
    "seq, run_id, thread_id, assistant_id, status, multitask_strategy, \
     created_at, updated_at, metadata, kwargs, owner, error, start_checkpoint, start_writes";

/// Run records in a SQLite file.
pub struct SqliteRuns {
    conn: Arc<Mutex<Connection>>,
}

pub(super) fn be(op: &'static str) -> impl Fn(rusqlite::Error) -> RunStoreError {
    move |e| RunStoreError::backend(op, e)
}

impl SqliteRuns {
    /// Opens (or creates) the run table in the SQLite file at `path`.
    pub async fn open(path: String) -> Result<Self, RunStoreError> {
        let conn = tokio::task::spawn_blocking(move || {
            crate::checkpoint::sqlite_side_connection(&path, SCHEMA)
                .map_err(|(op, e)| RunStoreError::Backend { op, source: e })
        })
        .await
        .map_err(|e| RunStoreError::backend("open", e))??;
        Ok(Self {
            conn: Arc::new(Mutex::new(conn)),
        })
    }

    pub(super) async fn with<T: Send + 'static>(
        &self,
        op: &'static str,
        f: impl FnOnce(&mut Connection) -> Result<T, RunStoreError> + Send + 'static,
    ) -> Result<T, RunStoreError> {
        let conn = self.conn.clone();
        tokio::task::spawn_blocking(move || {
            let mut c = conn.lock().unwrap_or_else(|p| p.into_inner());
            f(&mut c)
        })
        .await
        .map_err(|e| RunStoreError::backend(op, e))?
    }
}

/// A stored row as a record; a row that does not decode is [`RunStoreError::Corrupt`].
fn record(row: &Row<'_>) -> Result<RunRecord, RunStoreError> {
    let read = be("read");
    let run_id: String = row.get(1).map_err(&read)?;
    let corrupt = |reason: String| RunStoreError::Corrupt {
        run_id: run_id.clone(),
        reason,
    };
    let int = |i: usize, what: &str| -> Result<u64, RunStoreError> {
        let v: i64 = row.get(i).map_err(&read)?;
        u64::try_from(v).map_err(|_| corrupt(format!("negative {what} {v}")))
    };
    let json = |i: usize, what: &str| -> Result<serde_json::Value, RunStoreError> {
        let text: String = row.get(i).map_err(&read)?;
        serde_json::from_str(&text).map_err(|e| corrupt(format!("{what} is not JSON: {e}")))
    };
    let status: String = row.get(4).map_err(&read)?;
    let start: Option<i64> = row.get(12).map_err(&read)?;
    Ok(RunRecord {
        seq: int(0, "seq")?,
        thread_id: row.get(2).map_err(&read)?,
        assistant_id: row.get(3).map_err(&read)?,
        status: RunRecordStatus::parse(&status)
            .ok_or_else(|| corrupt(format!("unknown status `{status}`")))?,
        multitask_strategy: row.get(5).map_err(&read)?,
        created_at: int(6, "created_at")?,
        updated_at: int(7, "updated_at")?,
        metadata: json(8, "metadata")?,
        kwargs: json(9, "kwargs")?,
        owner: row.get(10).map_err(&read)?,
        error: row.get(11).map_err(&read)?,
        start_checkpoint: start
            .map(|v| {
                u64::try_from(v)
                    .map(CheckpointId)
                    .map_err(|_| corrupt(format!("negative start checkpoint {v}")))
            })
            .transpose()?,
        start_writes: match row.get::<_, Option<String>>(13).map_err(&read)? {
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

fn query(
    c: &Connection,
    sql: &str,
    p: impl rusqlite::Params,
) -> Result<Vec<RunRecord>, RunStoreError> {
    let mut stmt = c.prepare_cached(sql).map_err(be("read"))?;
    let mut rows = stmt.query(p).map_err(be("read"))?;
    let mut out = Vec::new();
    while let Some(row) = rows.next().map_err(be("read"))? {
        out.push(record(row)?);
    }
    Ok(out)
}

fn by_id(c: &Connection, run_id: &str) -> Result<Option<RunRecord>, RunStoreError> {
    Ok(query(
        c,
        &format!("SELECT {COLUMNS} FROM planwright_runs WHERE run_id = ?1"),
        [run_id],
    )?
    .pop())
}

fn limit(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

#[async_trait]
impl RunStore for SqliteRuns {
    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    async fn insert(&self, r: RunRecord) -> Result<RunRecord, RunStoreError> {
        self.with("insert", move |c| {
            // Immediate: a deferred transaction that reads, then writes, fails at once with
            // "database is locked" when another connection wrote in between.
            let tx = c
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(be("insert"))?;
            if let Some(stored) = by_id(&tx, &r.run_id)? {
                return if stored.thread_id == r.thread_id {
                    Ok(stored)
                } else {
                    Err(RunStoreError::Exists {
                        run_id: r.run_id,
                        thread_id: stored.thread_id,
                    })
                };
            }
            tx.execute(
                "INSERT INTO planwright_runs (run_id, thread_id, assistant_id, status,
                    multitask_strategy, created_at, updated_at, metadata, kwargs, owner, error,
                    start_checkpoint, start_writes)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13)",
                params![
                    r.run_id,
                    r.thread_id,
                    r.assistant_id,
                    r.status.as_str(),
                    r.multitask_strategy,
                    r.created_at as i64,
                    r.updated_at as i64,
                    r.metadata.to_string(),
                    r.kwargs.to_string(),
                    r.owner,
                    r.error,
                    r.start_checkpoint.map(|c| c.0 as i64),
                    writes_text(&r.start_writes),
                ],
            )
            .map_err(be("insert"))?;
            let stored = RunRecord {
                seq: tx.last_insert_rowid() as u64,
                ..r
            };
            tx.commit().map_err(be("insert"))?;
            Ok(stored)
        })
        .await
    }

    async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, RunStoreError> {
        let run_id = run_id.to_string();
        self.with("get", move |c| by_id(c, &run_id)).await
    }

    async fn list_thread(
        &self,
        thread_id: &str,
        n: usize,
        offset: usize,
    ) -> Result<Vec<RunRecord>, RunStoreError> {
        let thread_id = thread_id.to_string();
        self.with("list", move |c| {
            query(
                c,
                &format!(
                    "SELECT {COLUMNS} FROM planwright_runs WHERE thread_id = ?1
                     ORDER BY seq DESC LIMIT ?2 OFFSET ?3"
                ),
                params![thread_id, limit(n), limit(offset)],
            )
        })
        .await
    }

    async fn unfinished(&self, n: usize) -> Result<Vec<RunRecord>, RunStoreError> {
        self.with("unfinished", move |c| {
            query(
                c,
                &format!(
                    "SELECT {COLUMNS} FROM planwright_runs
                     WHERE status IN ('pending', 'running') ORDER BY seq LIMIT ?1"
                ),
                [limit(n)],
            )
        })
        .await
    }

    async fn transition(
        &self,
        run_id: &str,
        from: &[RunRecordStatus],
        to: RunRecordStatus,
        change: RunChange,
    ) -> Result<bool, RunStoreError> {
        let run_id = run_id.to_string();
        let from: Vec<&'static str> = from.iter().map(|s| s.as_str()).collect();
        self.with("transition", move |c| {
            let Some(stored) = by_id(c, &run_id)? else {
                return Ok(false);
            };
            if !from.contains(&stored.status.as_str()) {
                return Ok(false);
            }
            // The status is checked again in the statement: another connection may have moved it.
            let n = c
                .execute(
                    "UPDATE planwright_runs SET status = ?2, updated_at = ?3,
                        error = COALESCE(?4, error),
                        start_checkpoint = COALESCE(?5, start_checkpoint),
                        start_writes = COALESCE(?7, start_writes)
                     WHERE run_id = ?1 AND status = ?6",
                    params![
                        run_id,
                        to.as_str(),
                        change.at as i64,
                        change.error,
                        change.start_checkpoint.map(|c| c.0 as i64),
                        stored.status.as_str(),
                        change.start_writes.as_ref().map(|w| w.to_string()),
                    ],
                )
                .map_err(be("transition"))?;
            Ok(n == 1)
        })
        .await
    }

    async fn delete(&self, run_id: &str) -> Result<bool, RunStoreError> {
        let run_id = run_id.to_string();
        self.with("delete", move |c| {
            let n = c
                .execute("DELETE FROM planwright_runs WHERE run_id = ?1", [run_id])
                .map_err(be("delete"))?;
            Ok(n > 0)
        })
        .await
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<u64, RunStoreError> {
        let thread_id = thread_id.to_string();
        self.with("delete thread", move |c| {
            let n = c
                .execute(
                    "DELETE FROM planwright_runs WHERE thread_id = ?1",
                    [thread_id],
                )
                .map_err(be("delete thread"))?;
            Ok(n as u64)
        })
        .await
    }

    async fn sweep(
        &self,
        prefix: &str,
        ended_before: Option<u64>,
        keep: Option<usize>,
        batch: usize,
    ) -> Result<u64, RunStoreError> {
        let prefix = prefix.to_string();
        self.with("sweep", move |c| {
            // Ended records ranked newest first; the ones past `keep` or too old go, a batch at a time.
            let n = c
                .execute(
                    "DELETE FROM planwright_runs WHERE seq IN (
                        SELECT seq FROM (
                            SELECT seq, updated_at,
                                   ROW_NUMBER() OVER (ORDER BY seq DESC) - 1 AS newer
                            FROM planwright_runs
                            WHERE status NOT IN ('pending', 'running')
                              AND substr(thread_id, 1, ?4) = ?5
                        )
                        WHERE (?1 IS NOT NULL AND updated_at < ?1)
                           OR (?2 IS NOT NULL AND newer >= ?2)
                        ORDER BY seq LIMIT ?3
                    )",
                    params![
                        ended_before.map(|t| t as i64),
                        keep.map(limit),
                        limit(batch),
                        prefix.chars().count() as i64,
                        prefix,
                    ],
                )
                .map_err(be("sweep"))?;
            Ok(n as u64)
        })
        .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_row_with_an_unknown_status_is_corrupt_not_defaulted() {
        let dir = std::env::temp_dir().join(format!("pw-runs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("corrupt.db").display().to_string();
        let _ = std::fs::remove_file(&path);
        let s = SqliteRuns::open(path.clone()).await.unwrap();
        s.insert(RunRecord::pending("r1", "t1", "research", 1))
            .await
            .unwrap();
        let c = Connection::open(&path).unwrap();
        c.execute("UPDATE planwright_runs SET status = 'weird'", [])
            .unwrap();
        let err = s.get("r1").await.unwrap_err();
        assert!(
            matches!(&err, RunStoreError::Corrupt { run_id, reason } if run_id == "r1" && reason.contains("weird")),
            "{err}"
        );
    }
}
