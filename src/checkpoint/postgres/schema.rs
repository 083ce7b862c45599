//! The PostgreSQL schema and its migrations, applied under a transaction-scoped advisory lock so
//! processes starting together do not race on it.

use super::super::migrate::{pending, Migration};
use super::super::CheckpointError;
use super::retry::{db_error, Attempt};
use deadpool_postgres::Pool;

/// Advisory lock key serialising migrations across processes.
const MIGRATION_LOCK: i64 = 0x706c_616e_7772;

static MIGRATIONS: [Migration; 4] = [
    Migration {
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
    },
    Migration {
        version: 2,
        name: "checkpoint checksums",
        // Rows of version 1 keep a NULL checksum: readable, links still verified.
        sql: "ALTER TABLE planwright_checkpoints ADD COLUMN IF NOT EXISTS checksum TEXT;",
    },
    Migration {
        version: 3,
        name: "fencing tokens",
        // 0: no process has fenced the thread; every writer may write it (as before).
        sql: "ALTER TABLE planwright_threads ADD COLUMN IF NOT EXISTS fence BIGINT NOT NULL DEFAULT 0;",
    },
    Migration {
        version: 4,
        name: "effect journal",
        // Results of tasks' external calls, put-if-absent by (thread, key); `checkpoint` is the
        // one the calling task started from, for retention and rollback (see
        // `checkpoint::EffectJournal`).
        sql: "
        CREATE TABLE IF NOT EXISTS planwright_effects (
            thread_id TEXT NOT NULL,
            key TEXT NOT NULL,
            checkpoint BIGINT NOT NULL,
            value BYTEA NOT NULL,
            PRIMARY KEY (thread_id, key)
        );
    ",
    },
];

/// One attempt at applying pending migrations (the caller retries).
pub async fn migrate(pool: &Pool) -> Result<(), Attempt> {
    let mut client = pool.get().await?;
    let tx = client.transaction().await?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await?;
    tx.batch_execute("CREATE TABLE IF NOT EXISTS planwright_schema (version INTEGER NOT NULL)")
        .await?;
    let current: i32 = tx
        .query_one(
            "SELECT COALESCE(MAX(version), 0) FROM planwright_schema",
            &[],
        )
        .await?
        .get(0);
    for m in pending(&MIGRATIONS, current.max(0) as u32)? {
        if let Err(e) = tx.batch_execute(m.sql).await {
            if super::retry::is_transient(&e) {
                return Err(Attempt::Retry(db_error(e)));
            }
            return Err(Attempt::Fail(CheckpointError::backend(
                format!("migration {} ({}) failed", m.version, m.name),
                db_error(e),
            )));
        }
        tx.execute(
            "INSERT INTO planwright_schema (version) VALUES ($1)",
            &[&(m.version as i32)],
        )
        .await?;
    }
    tx.commit().await?;
    Ok(())
}
