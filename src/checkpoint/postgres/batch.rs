//! Group commit's fast path: many threads' checkpoints in **one statement**.
//!
//! A batch of records of distinct threads is sent as arrays (`unnest`) to one prepared statement
//! that moves each thread's head (`UPDATE … WHERE head IS NOT DISTINCT FROM parent AND fence ≤
//! token`, the same compare-and-swap and fence check as a single write, evaluated on the row's
//! newest version), creates the threads that do not exist yet, and inserts the checkpoints of
//! exactly the threads whose head moved. A single statement is atomic on its own: no `BEGIN`, no
//! `COMMIT` round trip, one WAL flush for the whole batch.
//!
//! It answers which threads it stored. The others — a conflict, a fence, a retried write whose
//! first attempt committed — go through the one-by-one path (`fenced_put`), which reports
//! exactly why; so the fast path only ever has to be right about success.

use super::super::codec::{id_to_sql, kind_str, metadata_json};
use super::super::CheckpointRecord;
use super::retry::Attempt;
use std::collections::HashSet;

const PUT_ROWS: &str = "
WITH input AS (
    SELECT * FROM unnest($1::text[], $2::int8[], $3::int8[], $4::text[], $5::text[],
                         $6::bytea[], $7::bytea[], $8::text[], $9::text[], $10::int8[])
        AS u(thread_id, id, parent, fingerprint, kind, body, next_tasks, metadata, checksum, token)
), moved AS (
    UPDATE planwright_threads t SET head = i.id
    FROM input i
    WHERE t.thread_id = i.thread_id
      AND t.head IS NOT DISTINCT FROM i.parent
      AND (i.token IS NULL OR t.fence <= i.token)
    RETURNING t.thread_id
), created AS (
    INSERT INTO planwright_threads (thread_id, head, metadata)
    SELECT i.thread_id, i.id, NULL FROM input i
    WHERE i.parent IS NULL
      AND NOT EXISTS (SELECT 1 FROM planwright_threads t WHERE t.thread_id = i.thread_id)
    ON CONFLICT (thread_id) DO NOTHING
    RETURNING thread_id
), stored AS (
    SELECT thread_id FROM moved UNION ALL SELECT thread_id FROM created
), ins AS (
    INSERT INTO planwright_checkpoints
        (thread_id, id, parent, fingerprint, kind, body, next_tasks, metadata, checksum)
    SELECT i.thread_id, i.id, i.parent, i.fingerprint, i.kind, i.body, i.next_tasks,
           i.metadata, i.checksum
    FROM input i JOIN stored s USING (thread_id)
    RETURNING thread_id
)
SELECT thread_id FROM ins";

/// One record of a batch: the record, its checksum, the writer's fencing token for its thread.
pub struct Row<'a> {
    pub record: &'a CheckpointRecord,
    pub checksum: &'a str,
    pub token: Option<i64>,
}

/// Stores what it can of `rows` (distinct threads, each `parent < id`) in one statement;
/// returns the threads whose checkpoint it stored.
pub async fn put_rows(
    client: &deadpool_postgres::Client,
    rows: &[Row<'_>],
) -> Result<HashSet<String>, Attempt> {
    let mut threads = Vec::with_capacity(rows.len());
    let mut ids = Vec::with_capacity(rows.len());
    let mut parents = Vec::with_capacity(rows.len());
    let mut fingerprints = Vec::with_capacity(rows.len());
    let mut kinds = Vec::with_capacity(rows.len());
    let mut bodies = Vec::with_capacity(rows.len());
    let mut nexts = Vec::with_capacity(rows.len());
    let mut metadata = Vec::with_capacity(rows.len());
    let mut sums = Vec::with_capacity(rows.len());
    let mut tokens = Vec::with_capacity(rows.len());
    for row in rows {
        let r = row.record;
        threads.push(r.thread_id.as_str());
        ids.push(id_to_sql(r.id)?);
        parents.push(r.parent.map(id_to_sql).transpose()?);
        fingerprints.push(r.graph_fingerprint.as_str());
        kinds.push(kind_str(r.kind));
        bodies.push(r.body.as_slice());
        nexts.push(r.next_tasks.as_slice());
        metadata.push(metadata_json(&r.metadata)?);
        sums.push(row.checksum);
        tokens.push(row.token);
    }
    let statement = client.prepare_cached(PUT_ROWS).await?;
    let stored = client
        .query(
            &statement,
            &[
                &threads,
                &ids,
                &parents,
                &fingerprints,
                &kinds,
                &bodies,
                &nexts,
                &metadata,
                &sums,
                &tokens,
            ],
        )
        .await?;
    Ok(stored.iter().map(|r| r.get::<_, String>(0)).collect())
}

/// Whether `r` may take the fast path at all (a parent not before the record is the one-by-one
/// path's conflict to report).
pub fn eligible(r: &CheckpointRecord) -> bool {
    r.parent.is_none_or(|p| p < r.id)
}
