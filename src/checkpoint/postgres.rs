//! The PostgreSQL checkpointer (`postgres://…`): for many processes sharing threads.
//!
//! One writer per thread is enforced **in the database**: a checkpoint is stored only by an
//! `UPDATE … SET head = new WHERE head IS NOT DISTINCT FROM parent` that matched a row (or by the
//! insert that creates the thread), in the same transaction as the checkpoint row. Two processes
//! racing on one thread therefore cannot both extend the same parent: the loser gets
//! [`CheckpointError::Conflict`] and nothing of its write remains. Migrations run under a
//! transaction-scoped advisory lock, so processes starting together do not race on the schema.
//!
//! A small pool of connections (each a `tokio_postgres::Client` behind an async mutex) lets
//! several conversations write at once; `put_many` stores a batch in one transaction.

use super::codec::{
    id_from_sql, id_to_sql, kind_str, metadata_json, parse_kind, parse_metadata, parse_value,
    parse_write_kind, write_kind_str,
};
use super::migrate::{pending, Migration};
use super::{
    CheckpointError, CheckpointMetadata, CheckpointRecord, Checkpointer, TaskWrite, ThreadSummary,
};
use crate::ids::{CheckpointId, TaskId, ThreadId};
use async_trait::async_trait;
use std::sync::atomic::{AtomicUsize, Ordering};
use tokio::sync::{Mutex, MutexGuard};
use tokio_postgres::{Client, GenericClient, NoTls, Row};

/// Connections in the pool.
const POOL: usize = 4;
/// Advisory lock key serialising migrations across processes.
const MIGRATION_LOCK: i64 = 0x706c_616e_7772;

static MIGRATIONS: [Migration; 1] = [Migration {
    version: 1,
    name: "threads, checkpoints and task writes",
    sql: "
        CREATE TABLE planwright_threads (
            thread_id TEXT PRIMARY KEY,
            head BIGINT,
            metadata TEXT
        );
        CREATE TABLE planwright_checkpoints (
            thread_id TEXT NOT NULL,
            id BIGINT NOT NULL,
            parent BIGINT,
            fingerprint TEXT NOT NULL,
            kind TEXT NOT NULL,
            body BYTEA NOT NULL,
            next_tasks BYTEA NOT NULL,
            metadata TEXT NOT NULL,
            PRIMARY KEY (thread_id, id)
        );
        CREATE TABLE planwright_writes (
            thread_id TEXT NOT NULL,
            checkpoint BIGINT NOT NULL,
            task_step BIGINT NOT NULL,
            task_index BIGINT NOT NULL,
            node TEXT NOT NULL,
            kind TEXT NOT NULL,
            key TEXT NOT NULL,
            payload BYTEA NOT NULL,
            PRIMARY KEY (thread_id, checkpoint, task_step, task_index, kind, key)
        );
    ",
}];

/// Checkpoints in a PostgreSQL database.
pub struct PostgresCheckpointer {
    pool: Vec<Mutex<Client>>,
    next: AtomicUsize,
}

fn be(e: tokio_postgres::Error) -> CheckpointError {
    CheckpointError::Backend(format!("postgres: {e}"))
}

async fn open_client(url: &str) -> Result<Client, CheckpointError> {
    let (client, conn) = tokio_postgres::connect(url, NoTls)
        .await
        .map_err(|e| CheckpointError::Backend(format!("cannot connect to PostgreSQL: {e}")))?;
    tokio::spawn(async move {
        if let Err(e) = conn.await {
            tracing::warn!(error = %e, "postgres connection ended");
        }
    });
    Ok(client)
}

impl PostgresCheckpointer {
    /// Connects, applies pending migrations, and opens the pool.
    pub async fn connect(url: &str) -> Result<Self, CheckpointError> {
        let mut first = open_client(url).await?;
        migrate(&mut first).await?;
        let mut pool = vec![Mutex::new(first)];
        for _ in 1..POOL {
            pool.push(Mutex::new(open_client(url).await?));
        }
        Ok(Self {
            pool,
            next: AtomicUsize::new(0),
        })
    }

    async fn client(&self) -> MutexGuard<'_, Client> {
        for c in &self.pool {
            if let Ok(g) = c.try_lock() {
                return g;
            }
        }
        let i = self.next.fetch_add(1, Ordering::Relaxed) % self.pool.len();
        self.pool[i].lock().await
    }
}

async fn migrate(client: &mut Client) -> Result<(), CheckpointError> {
    let tx = client.transaction().await.map_err(be)?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(be)?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS planwright_schema (version INTEGER NOT NULL)")
        .await
        .map_err(be)?;
    let current: i32 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM planwright_schema",
            &[],
        )
        .await
        .map_err(be)?
        .get(0);
    for m in pending(&MIGRATIONS, current.max(0) as u32)? {
        tx.batch_execute(m.sql).await.map_err(|e| {
            CheckpointError::Backend(format!("migration {} ({}) failed: {e}", m.version, m.name))
        })?;
        tx.execute(
            "INSERT INTO planwright_schema (version) VALUES ($1)",
            &[&(m.version as i32)],
        )
        .await
        .map_err(be)?;
    }
    tx.commit().await.map_err(be)
}

/// The conditional write of one record inside an open transaction.
async fn put_in(tx: &impl GenericClient, r: &CheckpointRecord) -> Result<(), CheckpointError> {
    let t = r.thread_id.as_str();
    let id = id_to_sql(r.id)?;
    let parent = r.parent.map(id_to_sql).transpose()?;
    let conflict = |found: Option<i64>| -> Result<(), CheckpointError> {
        Err(CheckpointError::Conflict {
            thread: r.thread_id.clone(),
            expected: r.parent,
            found: found.map(|h| id_from_sql(&r.thread_id, h)).transpose()?,
        })
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
        .await
        .map_err(be)?;
    if moved == 0 {
        let created = if parent.is_none() {
            tx.execute(
                "INSERT INTO planwright_threads (thread_id, head, metadata) VALUES ($1, $2, NULL)
                 ON CONFLICT (thread_id) DO NOTHING",
                &[&t, &id],
            )
            .await
            .map_err(be)?
        } else {
            0
        };
        if created == 0 {
            let found: Option<i64> = tx
                .query_opt(
                    "SELECT head FROM planwright_threads WHERE thread_id = $1",
                    &[&t],
                )
                .await
                .map_err(be)?
                .and_then(|row| row.get(0));
            return conflict(found);
        }
    }
    tx.execute(
        "INSERT INTO planwright_checkpoints
         (thread_id, id, parent, fingerprint, kind, body, next_tasks, metadata)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        &[
            &t,
            &id,
            &parent,
            &r.graph_fingerprint,
            &kind_str(r.kind),
            &r.body,
            &r.next_tasks,
            &metadata_json(&r.metadata)?,
        ],
    )
    .await
    .map_err(be)?;
    Ok(())
}

const RECORD_COLUMNS: &str = "id, parent, fingerprint, kind, body, next_tasks, metadata";

fn record_from_row(thread: &ThreadId, row: &Row) -> Result<CheckpointRecord, CheckpointError> {
    let parent: Option<i64> = row.get(1);
    let kind: &str = row.get(3);
    let meta: &str = row.get(6);
    Ok(CheckpointRecord {
        thread_id: thread.clone(),
        id: id_from_sql(thread, row.get(0))?,
        parent: parent.map(|p| id_from_sql(thread, p)).transpose()?,
        graph_fingerprint: row.get(2),
        kind: parse_kind(thread, kind)?,
        body: row.get(4),
        next_tasks: row.get(5),
        metadata: parse_metadata(thread, meta)?,
    })
}

#[async_trait]
impl Checkpointer for PostgresCheckpointer {
    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    async fn put(&self, record: CheckpointRecord) -> Result<(), CheckpointError> {
        let mut c = self.client().await;
        let tx = c.transaction().await.map_err(be)?;
        put_in(&tx, &record).await?;
        tx.commit().await.map_err(be)
    }

    async fn put_many(&self, records: Vec<CheckpointRecord>) -> Vec<Result<(), CheckpointError>> {
        let mut c = self.client().await;
        let tx = match c.transaction().await {
            Ok(tx) => tx,
            Err(e) => return records.iter().map(|_| Err(be_ref(&e))).collect(),
        };
        let mut results = Vec::with_capacity(records.len());
        for r in &records {
            // A conflict writes nothing and raises no SQL error, so the batch goes on.
            results.push(put_in(&tx, r).await);
        }
        if results
            .iter()
            .any(|r| matches!(r, Err(CheckpointError::Backend(_))))
        {
            // An SQL error aborted the transaction: nothing of the batch was stored.
            let _ = tx.rollback().await;
            return results
                .into_iter()
                .map(|r| match r {
                    Err(e) => Err(e),
                    Ok(()) => Err(CheckpointError::Backend(
                        "batch rolled back after another record failed".into(),
                    )),
                })
                .collect();
        }
        match tx.commit().await {
            Ok(()) => results,
            Err(e) => records.iter().map(|_| Err(be_ref(&e))).collect(),
        }
    }

    async fn put_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        writes: Vec<TaskWrite>,
    ) -> Result<(), CheckpointError> {
        let cp = id_to_sql(checkpoint)?;
        let mut c = self.client().await;
        let tx = c.transaction().await.map_err(be)?;
        let stmt = tx
            .prepare(
                "INSERT INTO planwright_writes
                 (thread_id, checkpoint, task_step, task_index, node, kind, key, payload)
                 VALUES ($1, $2, $3, $4, $5, $6, $7, $8)
                 ON CONFLICT (thread_id, checkpoint, task_step, task_index, kind, key)
                 DO UPDATE SET node = excluded.node, payload = excluded.payload",
            )
            .await
            .map_err(be)?;
        for w in &writes {
            tx.execute(
                &stmt,
                &[
                    &thread.as_str(),
                    &cp,
                    &(w.task.step as i64),
                    &(w.task.index as i64),
                    &w.node,
                    &write_kind_str(w.kind),
                    &w.key,
                    &w.payload,
                ],
            )
            .await
            .map_err(be)?;
        }
        tx.commit().await.map_err(be)
    }

    async fn get_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
    ) -> Result<Vec<TaskWrite>, CheckpointError> {
        let cp = id_to_sql(checkpoint)?;
        let rows = self
            .client()
            .await
            .query(
                "SELECT task_step, task_index, node, kind, key, payload FROM planwright_writes
                 WHERE thread_id = $1 AND checkpoint = $2
                 ORDER BY task_step, task_index, key, kind",
                &[&thread.as_str(), &cp],
            )
            .await
            .map_err(be)?;
        rows.iter()
            .map(|row| {
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
            })
            .collect()
    }

    async fn head(&self, thread: &ThreadId) -> Result<Option<CheckpointId>, CheckpointError> {
        let row = self
            .client()
            .await
            .query_opt(
                "SELECT head FROM planwright_threads WHERE thread_id = $1",
                &[&thread.as_str()],
            )
            .await
            .map_err(be)?;
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
        let row = self
            .client()
            .await
            .query_opt(&sql, &[&thread.as_str(), &id_to_sql(id)?])
            .await
            .map_err(be)?
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
        let c = self.client().await;
        let t = thread.as_str();
        let target: Option<i64> = match id {
            Some(i) => {
                let i = id_to_sql(i)?;
                let found = c
                    .query_opt(
                        "SELECT id FROM planwright_checkpoints WHERE thread_id = $1 AND id = $2",
                        &[&t, &i],
                    )
                    .await
                    .map_err(be)?;
                if found.is_none() {
                    return Err(CheckpointError::NotFound {
                        thread: thread.clone(),
                        checkpoint: id,
                    });
                }
                Some(i)
            }
            None => c
                .query_opt(
                    "SELECT head FROM planwright_threads WHERE thread_id = $1",
                    &[&t],
                )
                .await
                .map_err(be)?
                .and_then(|r| r.get(0)),
        };
        let Some(target) = target else {
            return Ok(Vec::new());
        };
        let sql = format!(
            "SELECT {RECORD_COLUMNS} FROM planwright_checkpoints
             WHERE thread_id = $1 AND id <= $2 AND id >= COALESCE((
                 SELECT MAX(id) FROM planwright_checkpoints
                 WHERE thread_id = $1 AND id <= $2 AND kind = 'snapshot'), 0)
             ORDER BY id"
        );
        let rows = c.query(&sql, &[&t, &target]).await.map_err(be)?;
        rows.iter().map(|r| record_from_row(thread, r)).collect()
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
        let rows = self
            .client()
            .await
            .query(
                "SELECT id, parent, metadata FROM planwright_checkpoints
                 WHERE thread_id = $1 AND id < $2 ORDER BY id DESC LIMIT $3",
                &[&thread.as_str(), &before, &limit],
            )
            .await
            .map_err(be)?;
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
        let rows = self
            .client()
            .await
            .query(
                "SELECT t.thread_id, t.head, t.metadata, c.metadata FROM planwright_threads t
                 JOIN planwright_checkpoints c ON c.thread_id = t.thread_id AND c.id = t.head
                 WHERE left(t.thread_id, length($1)) = $1
                 ORDER BY t.thread_id LIMIT $2 OFFSET $3",
                &[&prefix, &limit, &offset],
            )
            .await
            .map_err(be)?;
        rows.iter()
            .map(|row| {
                let thread = ThreadId::new(row.get::<_, String>(0));
                let meta: Option<&str> = row.get(2);
                Ok(ThreadSummary {
                    head: id_from_sql(&thread, row.get(1))?,
                    head_metadata: parse_metadata(&thread, row.get(3))?,
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
        self.client()
            .await
            .execute(
                "INSERT INTO planwright_threads (thread_id, head, metadata) VALUES ($1, NULL, $2)
                 ON CONFLICT (thread_id) DO UPDATE SET metadata = excluded.metadata",
                &[&thread.as_str(), &metadata.to_string()],
            )
            .await
            .map_err(be)?;
        Ok(())
    }

    async fn thread_metadata(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        let row = self
            .client()
            .await
            .query_opt(
                "SELECT metadata FROM planwright_threads WHERE thread_id = $1",
                &[&thread.as_str()],
            )
            .await
            .map_err(be)?;
        row.map(|r| parse_value(thread, r.get::<_, Option<&str>>(0)))
            .transpose()
    }

    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), CheckpointError> {
        let mut c = self.client().await;
        let tx = c.transaction().await.map_err(be)?;
        for table in [
            "planwright_writes",
            "planwright_checkpoints",
            "planwright_threads",
        ] {
            tx.execute(
                &format!("DELETE FROM {table} WHERE thread_id = $1"),
                &[&thread.as_str()],
            )
            .await
            .map_err(be)?;
        }
        tx.commit().await.map_err(be)
    }

    async fn prune(
        &self,
        thread: &ThreadId,
        keep_from: CheckpointId,
        snapshot: Vec<u8>,
    ) -> Result<(), CheckpointError> {
        let keep = id_to_sql(keep_from)?;
        let t = thread.as_str();
        let mut c = self.client().await;
        let tx = c.transaction().await.map_err(be)?;
        let changed = tx
            .execute(
                "UPDATE planwright_checkpoints SET kind = 'snapshot', body = $3
                 WHERE thread_id = $1 AND id = $2",
                &[&t, &keep, &snapshot],
            )
            .await
            .map_err(be)?;
        if changed == 0 {
            return Err(CheckpointError::NotFound {
                thread: thread.clone(),
                checkpoint: Some(keep_from),
            });
        }
        tx.execute(
            "DELETE FROM planwright_checkpoints WHERE thread_id = $1 AND id < $2",
            &[&t, &keep],
        )
        .await
        .map_err(be)?;
        tx.execute(
            "DELETE FROM planwright_writes WHERE thread_id = $1 AND checkpoint < $2",
            &[&t, &keep],
        )
        .await
        .map_err(be)?;
        tx.commit().await.map_err(be)
    }
}

fn be_ref(e: &tokio_postgres::Error) -> CheckpointError {
    CheckpointError::Backend(format!("postgres: {e}"))
}
