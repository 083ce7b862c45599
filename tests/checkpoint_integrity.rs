//! Integrity of stored threads on the SQL backends: a checkpoint deleted from the middle of a
//! chain, or altered on disk, is an error naming the thread and the checkpoint (through the
//! storage API and through the engine), never a silent empty state; rows written before checksums
//! existed stay readable.

#[path = "support/backends.rs"]
mod backends;
#[path = "support/checkpoint_suite.rs"]
#[allow(dead_code)]
mod checkpoint_suite;
#[path = "support/old_schema.rs"]
mod old_schema;
mod support;

use checkpoint_suite::rec_at;
use planwright::checkpoint::{connect, BodyKind, CheckpointError, Checkpointer, IntegrityProblem};
use planwright::{CheckpointId, Engine, RunError, RunOptions, ThreadId};
use std::sync::Arc;
use support::*;

/// Damage done to one stored checkpoint, by SQL behind the checkpointer's back.
#[derive(Clone, Copy)]
enum Damage {
    Delete,
    FlipBody,
}

async fn damage_sqlite(path: &std::path::Path, thread: &ThreadId, id: u64, d: Damage) {
    let conn = rusqlite::Connection::open(path).unwrap();
    let sql = match d {
        Damage::Delete => "DELETE FROM checkpoints WHERE thread_id = ?1 AND id = ?2",
        Damage::FlipBody => {
            "UPDATE checkpoints SET body = CAST('[{\"x\":1}]' AS BLOB) WHERE thread_id = ?1 AND id = ?2"
        }
    };
    assert_eq!(
        conn.execute(sql, rusqlite::params![thread.as_str(), id as i64])
            .unwrap(),
        1
    );
}

async fn damage_postgres(thread: &ThreadId, id: u64, d: Damage) {
    let (client, conn) = tokio_postgres::connect(&backends::pg_url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let sql = match d {
        Damage::Delete => "DELETE FROM planwright_checkpoints WHERE thread_id = $1 AND id = $2",
        Damage::FlipBody => {
            "UPDATE planwright_checkpoints SET body = '\\x5b5d'::bytea WHERE thread_id = $1 AND id = $2"
        }
    };
    assert_eq!(
        client
            .execute(sql, &[&thread.as_str(), &(id as i64)])
            .await
            .unwrap(),
        1
    );
}

/// A chain 1..=5 (snapshot 1, deltas after) with checkpoint 3 deleted and checkpoint 5 altered.
async fn damaged_chain_is_reported<F, Fut>(cp: Arc<dyn Checkpointer>, prefix: &str, damage: F)
where
    F: Fn(ThreadId, u64, Damage) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    let gap = ThreadId::new(format!("{prefix}/gap"));
    let bad = ThreadId::new(format!("{prefix}/bad"));
    for t in [&gap, &bad] {
        for id in 1..=5 {
            let kind = if id == 1 {
                BodyKind::Snapshot
            } else {
                BodyKind::Delta
            };
            cp.put(rec_at(t, id, kind, id)).await.unwrap();
        }
    }
    damage(gap.clone(), 3, Damage::Delete).await;
    damage(bad.clone(), 5, Damage::FlipBody).await;

    let err = cp.load_chain(&gap, None).await.unwrap_err();
    match &err {
        CheckpointError::Integrity {
            thread,
            checkpoint,
            problem: IntegrityProblem::MissingParent { parent },
        } => {
            assert_eq!(
                (thread, checkpoint, parent),
                (&gap, &CheckpointId(4), &CheckpointId(3))
            );
        }
        other => panic!("a gap must be an integrity error, got {other}"),
    }
    let text = err.to_string();
    assert!(
        text.contains(gap.as_str()) && text.contains("checkpoint 4"),
        "{text}"
    );
    // The part before the gap still loads; the gap's own id is not found.
    assert_eq!(
        cp.load_chain(&gap, Some(CheckpointId(2)))
            .await
            .unwrap()
            .len(),
        2
    );

    for result in [
        cp.load_chain(&bad, None).await.map(|_| ()),
        cp.get(&bad, CheckpointId(5)).await.map(|_| ()),
    ] {
        match result.unwrap_err() {
            CheckpointError::Integrity {
                thread,
                checkpoint,
                problem: IntegrityProblem::ChecksumMismatch { .. },
            } => assert_eq!((thread, checkpoint), (bad.clone(), CheckpointId(5))),
            other => panic!("an altered checkpoint must fail its checksum, got {other}"),
        }
    }
    assert_eq!(
        cp.load_chain(&bad, Some(CheckpointId(4)))
            .await
            .unwrap()
            .len(),
        4
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_reports_a_gap_and_an_altered_checkpoint_by_thread_and_id() {
    let path = backends::sqlite_path("integrity");
    let cp = connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    damaged_chain_is_reported(cp, "s", |t, id, d| {
        let path = path.clone();
        async move { damage_sqlite(&path, &t, id, d).await }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_reports_a_gap_and_an_altered_checkpoint_by_thread_and_id() {
    let Some(cp) = backends::postgres().await else {
        return;
    };
    let prefix = format!("integrity-{}", backends::unique());
    damaged_chain_is_reported(cp, &prefix, |t, id, d| async move {
        damage_postgres(&t, id, d).await
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_missing_a_checkpoint_is_an_error_when_read_or_continued_never_an_empty_state() {
    let path = backends::sqlite_path("integrity-engine");
    let cp = connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let engine: Engine<Walk> = Engine::builder(counter_graph().compile().unwrap())
        .checkpointer(cp.clone())
        .build()
        .await;
    let t = ThreadId::new("research-like");
    let out = engine
        .run(
            t.clone(),
            WalkUpdate::default().target(3),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.state.count, 3);
    let chain = cp.load_chain(&t, None).await.unwrap();
    assert!(
        chain.len() >= 3,
        "the run wrote a chain of deltas: {}",
        chain.len()
    );
    // Delete the checkpoint just after the snapshot the head's chain starts from.
    let victim = chain[1].id;
    damage_sqlite(&path, &t, victim.0, Damage::Delete).await;

    let read = engine.get_state(&t).await;
    assert!(
        matches!(
            read,
            Err(RunError::Checkpoint(CheckpointError::Integrity { .. }))
        ),
        "{:?}",
        read.map(|s| s.map(|s| s.values.count))
    );
    let again = engine
        .run(
            t.clone(),
            WalkUpdate::default().target(5),
            RunOptions::default(),
        )
        .await;
    match again {
        Err(RunError::Checkpoint(CheckpointError::Integrity {
            thread, checkpoint, ..
        })) => {
            assert_eq!(thread, t);
            assert_eq!(checkpoint, CheckpointId(victim.0 + 1));
        }
        Err(other) => panic!("expected an integrity error, got {other}"),
        Ok(out) => panic!("a damaged thread ran on from count {}", out.state.count),
    }
    engine.shutdown().await;
}

/// A file at an older `schema` holding snapshot 1 of thread `old` (with `checksum`, from schema
/// 2), opened by this build (which migrates it and reads the old row), and delta 2 written on it.
async fn old_snapshot_and_a_new_delta(
    name: &str,
    schema: u32,
    checksum: Option<&str>,
) -> (std::path::PathBuf, Arc<dyn Checkpointer>, ThreadId) {
    let (path, conn) = old_schema::sqlite_file_at_schema(name, schema);
    let insert = match checksum {
        None => "INSERT INTO checkpoints VALUES ('old', 1, NULL, 'fp', 'snapshot', X'7B7D', X'5B5D', ?1)",
        Some(_) => "INSERT INTO checkpoints VALUES ('old', 1, NULL, 'fp', 'snapshot', X'7B7D', X'5B5D', ?1, ?2)",
    };
    let mut params: Vec<&str> = vec![old_schema::OLD_METADATA];
    params.extend(checksum);
    conn.execute(insert, rusqlite::params_from_iter(params))
        .unwrap();
    drop(conn);
    let cp = connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let t = ThreadId::new("old");
    assert_eq!(cp.load_chain(&t, None).await.unwrap().len(), 1);
    cp.put(rec_at(&t, 2, BodyKind::Delta, 2)).await.unwrap();
    assert_eq!(cp.load_chain(&t, None).await.unwrap().len(), 2);
    (path, cp, t)
}

#[tokio::test]
async fn a_database_written_before_checksums_stays_readable_and_gets_them_on_new_writes() {
    let (path, ..) = old_snapshot_and_a_new_delta("v1", 1, None).await;
    let sums = stored_checksums(&path);
    assert!(sums[0].is_none() && sums[1].is_some(), "{sums:?}");
}

/// The `checksum` column of every stored checkpoint, by id.
fn stored_checksums(path: &std::path::Path) -> Vec<Option<String>> {
    let conn = rusqlite::Connection::open(path).unwrap();
    let mut stmt = conn
        .prepare("SELECT checksum FROM checkpoints ORDER BY id")
        .unwrap();
    let sums = stmt
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    sums
}

#[tokio::test]
async fn sha256_rows_keep_verifying_beside_the_xxh3_rows_written_after_them() {
    use planwright::checkpoint::integrity::{ChecksumInput, ChecksumScheme};
    let old_sum = ChecksumInput {
        id: CheckpointId(1),
        parent: None,
        fingerprint: "fp",
        kind: BodyKind::Snapshot,
        body: b"{}",
        next_tasks: b"[]",
        metadata_json: old_schema::OLD_METADATA.as_bytes(),
    }
    .sum(ChecksumScheme::Sha256);
    let (path, cp, t) = old_snapshot_and_a_new_delta("sha256-rows", 2, Some(&old_sum)).await;
    let stored = stored_checksums(&path);
    assert_eq!(
        stored[0].as_deref(),
        Some(old_sum.as_str()),
        "the old row keeps its SHA-256"
    );
    assert_eq!(
        stored[1].as_deref().and_then(ChecksumScheme::of_stored),
        Some(ChecksumScheme::Xxh3),
        "{stored:?}"
    );
    // Both kinds still catch damage.
    for id in [1, 2] {
        damage_sqlite(&path, &t, id, Damage::FlipBody).await;
        match cp.get(&t, CheckpointId(id)).await {
            Err(CheckpointError::Integrity {
                checkpoint,
                problem: IntegrityProblem::ChecksumMismatch { .. },
                ..
            }) => assert_eq!(checkpoint, CheckpointId(id)),
            other => panic!("checkpoint {id}: {other:?}"),
        }
    }
}
