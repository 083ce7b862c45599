//! One conformance suite, every backend: memory, SQLite file, PostgreSQL server.

#[path = "support/backends.rs"]
mod backends;
#[path = "support/checkpoint_suite.rs"]
mod checkpoint_suite;
#[path = "support/old_schema.rs"]
mod old_schema;

use planwright::checkpoint::{connect, BodyKind, Checkpointer, MemoryCheckpointer};
use proptest::prelude::*;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_backend_conforms() {
    checkpoint_suite::run_all(Arc::new(MemoryCheckpointer::new()), "mem").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_backend_conforms() {
    checkpoint_suite::run_all(backends::sqlite("conformance").await, "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_exclusive_backend_conforms() {
    let path = backends::sqlite_path("exclusive");
    let cp = connect(&format!("sqlite:{}?locking=exclusive", path.display()))
        .await
        .unwrap();
    checkpoint_suite::run_all(cp, "sqlite-x").await;
}

/// Every call on the blocking pool, without the inline first attempt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_offloaded_backend_conforms() {
    let path = backends::sqlite_path("offload");
    let cp = connect(&format!("sqlite:{}?inline=0", path.display()))
        .await
        .unwrap();
    checkpoint_suite::run_all(cp, "sqlite-o").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_backend_conforms() {
    let Some(cp) = backends::postgres().await else {
        return;
    };
    checkpoint_suite::run_all(cp, &format!("pg-{}", backends::unique())).await;
}

#[tokio::test]
async fn connection_strings_select_the_backend_and_bad_ones_are_named() {
    assert_eq!(connect("memory:").await.unwrap().backend_name(), "memory");
    let path = backends::sqlite_path("url");
    let cp = connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    assert_eq!(cp.backend_name(), "sqlite");
    assert!(path.exists(), "a real file");
    for bad in ["redis://x", "sqlite:", "nonsense", "sqlite:x.db?mode=ro"] {
        let err = connect(bad).await.err().expect("rejected").to_string();
        assert!(err.contains(bad), "{err}");
    }
}

#[tokio::test]
async fn sqlite_reopens_an_existing_file_without_reapplying_migrations() {
    let path = backends::sqlite_path("reopen");
    let url = format!("sqlite:{}", path.display());
    let t = planwright::ThreadId::new("t");
    {
        let cp = connect(&url).await.unwrap();
        cp.put(checkpoint_suite::rec(&t, 1, None, BodyKind::Snapshot, "{}"))
            .await
            .unwrap();
    }
    let cp = connect(&url).await.unwrap();
    assert_eq!(
        cp.head(&t).await.unwrap(),
        Some(planwright::CheckpointId(1))
    );
}

/// Schema 3 rebuilds the two tables keyed by thread into tables in arrival order with unique
/// key indexes: a file of schema 2 keeps its checkpoints and task writes, a write with the same
/// key still replaces the earlier one, a record that is not the head's child is still refused,
/// and new rows follow the old ones.
#[tokio::test]
async fn sqlite_migrates_a_schema_2_file_to_rows_in_arrival_order() {
    use planwright::checkpoint::{CheckpointError, TaskWrite, WriteKind};
    use planwright::{CheckpointId, TaskId, ThreadId};
    let path = {
        let (path, conn) = old_schema::sqlite_file_at_schema("schema2", 2);
        for (t, id, parent, kind, body) in [
            ("b", 1, None, "snapshot", "{}"),
            ("a", 1, None, "snapshot", "{}"),
            ("a", 2, Some(1), "delta", "[]"),
        ] {
            conn.execute(
                "INSERT INTO checkpoints VALUES (?1, ?2, ?3, 'fp', ?4, CAST(?5 AS BLOB), X'5B5D', ?6, NULL)",
                rusqlite::params![t, id, parent, kind, body, old_schema::OLD_METADATA],
            )
            .unwrap();
        }
        conn.execute(
            "INSERT INTO writes VALUES ('a', 2, 3, 0, 'n', 'update', '', X'31')",
            [],
        )
        .unwrap();
        path
    };
    let cp = connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let a = ThreadId::new("a");
    let ids = |chain: Vec<planwright::checkpoint::CheckpointRecord>| {
        chain.iter().map(|r| r.id.0).collect::<Vec<_>>()
    };
    assert_eq!(ids(cp.load_chain(&a, None).await.unwrap()), vec![1, 2]);
    assert_eq!(
        cp.head(&ThreadId::new("b")).await.unwrap(),
        Some(CheckpointId(1))
    );
    let old = cp.get_writes(&a, CheckpointId(2)).await.unwrap();
    assert_eq!(old.len(), 1);
    assert_eq!(old[0].payload, b"1");
    // The same task, kind and key replaces the migrated write.
    let again = TaskWrite {
        task: TaskId { step: 3, index: 0 },
        node: "n".into(),
        kind: WriteKind::Update,
        key: String::new(),
        payload: b"2".to_vec(),
    };
    cp.put_writes(&a, CheckpointId(2), vec![again.clone()])
        .await
        .unwrap();
    assert_eq!(
        cp.get_writes(&a, CheckpointId(2)).await.unwrap(),
        vec![again]
    );
    // The head's rule holds over the migrated rows.
    let stale = checkpoint_suite::rec(&a, 3, Some(1), BodyKind::Delta, "{}");
    assert!(matches!(
        cp.put(stale).await,
        Err(CheckpointError::Conflict { .. })
    ));
    cp.put(checkpoint_suite::rec(&a, 3, Some(2), BodyKind::Delta, "{}"))
        .await
        .unwrap();
    assert_eq!(ids(cp.load_chain(&a, None).await.unwrap()), vec![1, 2, 3]);
    drop(cp);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let version: u32 = conn
        .query_row("SELECT MAX(version) FROM planwright_schema", [], |r| {
            r.get(0)
        })
        .unwrap();
    assert_eq!(version, 6);
    // Schema 4: every thread numbered in the order it was first written, every row keyed by it.
    let numbers: Vec<(String, i64)> = conn
        .prepare("SELECT thread_id, no FROM thread_numbers ORDER BY no")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(numbers, [("a".to_string(), 1), ("b".to_string(), 2)]);
    assert!(rows_keyed_by_their_threads_numbers(&conn));
    let key: Vec<String> = conn
        .prepare("SELECT name FROM pragma_index_info('checkpoints_key') ORDER BY seqno")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(key, ["thread_no", "id"]);
    // Rows in arrival order: the migrated ones by key, then the new one.
    let order: Vec<(String, i64)> = conn
        .prepare("SELECT thread_id, id FROM checkpoints ORDER BY seq")
        .unwrap()
        .query_map([], |r| Ok((r.get(0)?, r.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    let want: Vec<(String, i64)> = [("a", 1), ("a", 2), ("b", 1), ("a", 3)]
        .iter()
        .map(|(t, i)| (t.to_string(), *i))
        .collect();
    assert_eq!(order, want);
}

/// One operation of a random sequence: put `id` on `parent` for thread `t`.
fn arb_ops() -> impl Strategy<Value = Vec<(u8, u64, Option<u64>)>> {
    proptest::collection::vec((0u8..3, 1u64..6, proptest::option::of(1u64..6)), 1..25)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// SQLite accepts and rejects exactly what the in-memory model does, and ends with the same
    /// heads, for any sequence of conditional puts.
    #[test]
    fn sqlite_agrees_with_the_memory_model(ops in arb_ops()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let model = MemoryCheckpointer::new();
            let real = backends::sqlite("prop").await;
            for (t, id, parent) in &ops {
                let thread = planwright::ThreadId::new(format!("t{t}"));
                let r = checkpoint_suite::rec(&thread, *id, *parent, BodyKind::Snapshot, "{}");
                let a = model.put(r.clone()).await.is_ok();
                let b = real.put(r).await.is_ok();
                assert_eq!(a, b, "op {t}/{id}/{parent:?}");
            }
            for t in 0..3 {
                let thread = planwright::ThreadId::new(format!("t{t}"));
                assert_eq!(model.head(&thread).await.unwrap(), real.head(&thread).await.unwrap());
            }
        });
    }
}

/// One write of a random sequence for [`batched_writes_agree_with_the_memory_model`]: which
/// connection (0: the batch writer's, 1: another on the same file), how (0: alone in a batch, 1:
/// joined to the batch before it, 2: a single `put`, 3: delete the thread), the thread, the id and
/// the parent.
fn arb_writes() -> impl Strategy<Value = Vec<(u8, u8, u8, u64, Option<u64>)>> {
    proptest::collection::vec(
        (
            0u8..2,
            0u8..4,
            0u8..3,
            1u64..7,
            proptest::option::of(1u64..7),
        ),
        1..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(32))]
    /// The batch writer remembers the heads it committed instead of reading them again; whatever
    /// else moves a head — a single `put` or a delete on the same connection, any write by another
    /// connection, a record of the same batch — it still accepts and rejects exactly what the
    /// in-memory model does, record by record, and ends with the same heads.
    #[test]
    fn batched_writes_agree_with_the_memory_model(ops in arb_writes()) {
        use planwright::checkpoint::{BatchItem, SqliteCheckpointer};
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let model = MemoryCheckpointer::new();
            let path = backends::sqlite_path("heads");
            let conns = [
                SqliteCheckpointer::open(&path).unwrap(),
                SqliteCheckpointer::open(&path).unwrap(),
            ];
            let thread = |t: &u8| planwright::ThreadId::new(format!("t{t}"));
            let mut i = 0;
            while i < ops.len() {
                let (conn, how, t, id, parent) = ops[i];
                let record = |t: u8, id: u64, parent: Option<u64>| {
                    checkpoint_suite::rec(&thread(&t), id, parent, BodyKind::Snapshot, "{}")
                };
                match how {
                    3 => {
                        model.delete_thread(&thread(&t)).await.unwrap();
                        conns[conn as usize].delete_thread(&thread(&t)).await.unwrap();
                        i += 1;
                    }
                    2 => {
                        let a = model.put(record(t, id, parent)).await.is_ok();
                        let b = conns[conn as usize].put(record(t, id, parent)).await.is_ok();
                        assert_eq!(a, b, "put {t}/{id}/{parent:?}");
                        i += 1;
                    }
                    _ => {
                        // This write and the ones after it marked "joined", as one batch.
                        let mut batch = vec![(t, id, parent)];
                        i += 1;
                        while i < ops.len() && ops[i].1 == 1 {
                            batch.push((ops[i].2, ops[i].3, ops[i].4));
                            i += 1;
                        }
                        let items = |b: &[(u8, u64, Option<u64>)]| {
                            b.iter()
                                .map(|(t, id, p)| BatchItem::Record(record(*t, *id, *p)))
                                .collect::<Vec<_>>()
                        };
                        let a: Vec<bool> = model
                            .put_batch(items(&batch))
                            .await
                            .iter()
                            .map(Result::is_ok)
                            .collect();
                        let b: Vec<bool> = conns[conn as usize]
                            .put_batch(items(&batch))
                            .await
                            .iter()
                            .map(Result::is_ok)
                            .collect();
                        assert_eq!(a, b, "batch {batch:?}");
                    }
                }
            }
            for t in 0..3u8 {
                let want = model.head(&thread(&t)).await.unwrap();
                for c in &conns {
                    assert_eq!(c.head(&thread(&t)).await.unwrap(), want, "thread {t}");
                }
            }
        });
    }
}

/// The background sweeper applies its retention at once and then every interval (paused time).
#[tokio::test(start_paused = true)]
async fn the_background_sweeper_deletes_old_threads_every_interval() {
    use planwright::checkpoint::{spawn_sweeper, Retention};
    use std::time::Duration;
    let cp: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new());
    let old = |name: &str| planwright::ThreadId::new(name);
    // Written in 2023 (`rec`'s timestamps): older than a day.
    cp.put(checkpoint_suite::rec(
        &old("a"),
        1,
        None,
        BodyKind::Snapshot,
        "{}",
    ))
    .await
    .unwrap();
    let sweeper = spawn_sweeper(
        cp.clone(),
        Retention {
            thread_age: Some(Duration::from_secs(86_400)),
            interval: Duration::from_secs(60),
            ..Retention::default()
        },
    );
    let mut reports = sweeper.reports();
    reports.changed().await.unwrap();
    assert_eq!(reports.borrow().clone().unwrap().threads_deleted, 1);
    assert_eq!(cp.head(&old("a")).await.unwrap(), None);
    cp.put(checkpoint_suite::rec(
        &old("b"),
        1,
        None,
        BodyKind::Snapshot,
        "{}",
    ))
    .await
    .unwrap();
    tokio::time::sleep(Duration::from_secs(61)).await;
    reports.changed().await.unwrap();
    assert_eq!(reports.borrow().clone().unwrap().threads_deleted, 1);
    assert_eq!(cp.head(&old("b")).await.unwrap(), None);
    drop(sweeper);
}

/// Writes on a SQLite file go on while a sweep deletes hundreds of threads in small batches.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_succeed_while_a_sweep_deletes_in_batches() {
    use planwright::checkpoint::{sweep, Retention};
    use std::time::Duration;
    let cp = backends::sqlite("sweep").await;
    for i in 0..300 {
        let t = planwright::ThreadId::new(format!("old/{i}"));
        cp.put(checkpoint_suite::rec(&t, 1, None, BodyKind::Snapshot, "{}"))
            .await
            .unwrap();
    }
    let writer = {
        let cp = cp.clone();
        tokio::spawn(async move {
            let t = planwright::ThreadId::new("live");
            for id in 1..=100u64 {
                let kind = if id == 1 {
                    BodyKind::Snapshot
                } else {
                    BodyKind::Delta
                };
                let mut r = checkpoint_suite::rec(&t, id, (id > 1).then(|| id - 1), kind, "[]");
                r.metadata.created_at_ms = u64::MAX / 2; // far in the future: never swept
                cp.put(r).await.expect("a write during the sweep");
            }
        })
    };
    let retention = Retention {
        thread_age: Some(Duration::from_secs(86_400)),
        batch: 10,
        ..Retention::default()
    };
    let now_ms = 1_800_000_000_000;
    let report = sweep(&*cp, &retention, now_ms).await.unwrap();
    writer.await.unwrap();
    assert_eq!(report.threads_deleted, 300, "{report:?}");
    assert_eq!(
        cp.head(&planwright::ThreadId::new("live")).await.unwrap(),
        Some(planwright::CheckpointId(100))
    );
    assert!(cp.list_threads("old/", 10, 0).await.unwrap().is_empty());
}

/// Every row of `checkpoints` and `writes` carries its thread's current number.
fn rows_keyed_by_their_threads_numbers(conn: &rusqlite::Connection) -> bool {
    let unkeyed: i64 = conn
        .query_row(
            "SELECT (SELECT COUNT(*) FROM checkpoints c LEFT JOIN thread_numbers n
                       ON n.thread_id = c.thread_id WHERE c.thread_no IS NOT n.no)
                  + (SELECT COUNT(*) FROM writes w LEFT JOIN thread_numbers n
                       ON n.thread_id = w.thread_id WHERE w.thread_no IS NOT n.no)",
            [],
            |r| r.get(0),
        )
        .unwrap();
    unkeyed == 0
}

/// The batch writer remembers thread numbers; a thread deleted by another connection (another
/// process) and its number given to a new thread, or deleted by this process, is numbered afresh
/// on its next write, never written under the number it had.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remembered_thread_numbers_follow_deletes_here_and_elsewhere() {
    use planwright::checkpoint::{BatchItem, CheckpointError, SqliteCheckpointer, TaskWrite};
    use planwright::{CheckpointId, TaskId, ThreadId};
    let path = backends::sqlite_path("numbers");
    let here = SqliteCheckpointer::open(&path).unwrap();
    let elsewhere = SqliteCheckpointer::open(&path).unwrap();
    let (a, b, c) = (ThreadId::new("a"), ThreadId::new("b"), ThreadId::new("c"));
    let snapshot = |t: &ThreadId| checkpoint_suite::rec(t, 1, None, BodyKind::Snapshot, "{}");
    let all_ok = |r: Vec<Result<(), CheckpointError>>| r.into_iter().all(|r| r.is_ok());
    let ids = |chain: Vec<planwright::checkpoint::CheckpointRecord>| {
        chain.iter().map(|r| r.id.0).collect::<Vec<_>>()
    };
    assert!(all_ok(
        here.put_batch(vec![
            BatchItem::Record(snapshot(&a)),
            BatchItem::Record(snapshot(&b))
        ])
        .await
    ));
    let write = TaskWrite {
        task: TaskId { step: 2, index: 0 },
        node: "n".into(),
        kind: planwright::checkpoint::WriteKind::Update,
        key: String::new(),
        payload: b"{}".to_vec(),
    };
    // Numbers remembered from the first batch.
    assert!(all_ok(
        here.put_batch(vec![
            BatchItem::Record(checkpoint_suite::rec(&b, 2, Some(1), BodyKind::Delta, "{}")),
            BatchItem::Writes(b.clone(), CheckpointId(2), vec![write.clone()]),
        ])
        .await
    ));
    // Another process deletes b (the highest number), and its number goes to c.
    elsewhere.delete_thread(&b).await.unwrap();
    elsewhere.put(snapshot(&c)).await.unwrap();
    // b starts again here: under a new number, not c's.
    assert!(all_ok(
        here.put_batch(vec![BatchItem::Record(snapshot(&b))]).await
    ));
    assert_eq!(ids(here.load_chain(&b, None).await.unwrap()), vec![1]);
    assert_eq!(ids(here.load_chain(&c, None).await.unwrap()), vec![1]);
    assert_eq!(ids(elsewhere.load_chain(&c, None).await.unwrap()), vec![1]);
    assert!(rows_keyed_by_their_threads_numbers(
        &rusqlite::Connection::open(&path).unwrap()
    ));
    // Written here (its number remembered again), deleted here, and started again here.
    assert!(all_ok(
        here.put_batch(vec![BatchItem::Record(checkpoint_suite::rec(
            &a,
            2,
            Some(1),
            BodyKind::Delta,
            "{}"
        ))])
        .await
    ));
    here.delete_thread(&a).await.unwrap();
    assert!(all_ok(
        here.put_batch(vec![
            BatchItem::Record(snapshot(&a)),
            BatchItem::Writes(a.clone(), CheckpointId(1), vec![write]),
        ])
        .await
    ));
    assert_eq!(ids(elsewhere.load_chain(&a, None).await.unwrap()), vec![1]);
    assert_eq!(
        elsewhere
            .get_writes(&a, CheckpointId(1))
            .await
            .unwrap()
            .len(),
        1
    );
    // A first write that conflicts leaves nothing wrong behind for the next one.
    let d = ThreadId::new("d");
    let results = here
        .put_batch(vec![BatchItem::Record(checkpoint_suite::rec(
            &d,
            2,
            Some(1),
            BodyKind::Delta,
            "{}",
        ))])
        .await;
    assert!(matches!(results[0], Err(CheckpointError::Conflict { .. })));
    assert!(all_ok(
        here.put_batch(vec![BatchItem::Record(snapshot(&d))]).await
    ));
    assert_eq!(ids(elsewhere.load_chain(&d, None).await.unwrap()), vec![1]);
    assert!(rows_keyed_by_their_threads_numbers(
        &rusqlite::Connection::open(&path).unwrap()
    ));
}

/// A batch item of task writes that fails part way (here a trigger refuses its second row) stores
/// none of its rows, and the items around it still commit, with the batch's own insert statement
/// still usable after the item's savepoint rolled back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_writes_item_leaves_none_of_its_rows_and_the_batch_commits() {
    use planwright::checkpoint::{BatchItem, SqliteCheckpointer, TaskWrite};
    use planwright::{CheckpointId, TaskId, ThreadId};
    let path = backends::sqlite_path("failing-writes");
    let cp = SqliteCheckpointer::open(&path).unwrap();
    rusqlite::Connection::open(&path)
        .unwrap()
        .execute_batch(
            "CREATE TRIGGER refuse_boom BEFORE INSERT ON writes WHEN NEW.key = 'boom'
             BEGIN SELECT RAISE(ABORT, 'refused by the test'); END;",
        )
        .unwrap();
    let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
    let write = |index: u32, key: &str| TaskWrite {
        task: TaskId { step: 2, index },
        node: "n".into(),
        kind: planwright::checkpoint::WriteKind::Update,
        key: key.into(),
        payload: b"{}".to_vec(),
    };
    let results = cp
        .put_batch(vec![
            BatchItem::Record(checkpoint_suite::rec(&a, 1, None, BodyKind::Snapshot, "{}")),
            BatchItem::Writes(
                a.clone(),
                CheckpointId(1),
                vec![write(0, "kept-out"), write(1, "boom")],
            ),
            BatchItem::Record(checkpoint_suite::rec(&b, 1, None, BodyKind::Snapshot, "{}")),
            BatchItem::Writes(b.clone(), CheckpointId(1), vec![write(0, "fine")]),
            BatchItem::Record(checkpoint_suite::rec(&a, 2, Some(1), BodyKind::Delta, "[]")),
        ])
        .await;
    assert!(results[1]
        .as_ref()
        .is_err_and(|e| e.to_string().contains("refused by the test")));
    for i in [0, 2, 3, 4] {
        assert!(results[i].is_ok(), "item {i}: {:?}", results[i]);
    }
    assert!(cp.get_writes(&a, CheckpointId(1)).await.unwrap().is_empty());
    assert_eq!(cp.get_writes(&b, CheckpointId(1)).await.unwrap().len(), 1);
    assert_eq!(cp.head(&a).await.unwrap(), Some(CheckpointId(2)));
    assert_eq!(cp.head(&b).await.unwrap(), Some(CheckpointId(1)));
}

/// One step of a random effect-journal sequence: put (0), get (1), or trim/prune/rewind/delete
/// the thread (2..=5); the thread, the key, the checkpoint and the value.
fn arb_effect_ops() -> impl Strategy<Value = Vec<(u8, u8, u8, u64, Vec<u8>)>> {
    proptest::collection::vec(
        (
            prop_oneof![4 => Just(0u8), 4 => Just(1u8), 1 => 2u8..6],
            0u8..2,
            0u8..4,
            1u64..6,
            proptest::collection::vec(any::<u8>(), 0..8),
        ),
        1..40,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]
    /// SQLite's effect journal answers every get and put as the in-memory one does, for any
    /// sequence of puts, gets and the thread operations that delete entries (trim, prune,
    /// rewind, delete). Each thread has checkpoints 1..=5, a snapshot at 3.
    #[test]
    fn sqlite_effect_journal_agrees_with_the_memory_model(ops in arb_effect_ops()) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let model: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new());
            let real = backends::sqlite("prop-effects").await;
            let thread = |t: u8| planwright::ThreadId::new(format!("t{t}"));
            for cp in [&model, &real] {
                for t in 0..2 {
                    for id in 1..=5u64 {
                        let kind = if id == 1 || id == 3 { BodyKind::Snapshot } else { BodyKind::Delta };
                        let parent = (id > 1).then(|| id - 1);
                        cp.put(checkpoint_suite::rec(&thread(t), id, parent, kind, "{}")).await.unwrap();
                    }
                }
            }
            for (op, t, key, at, value) in &ops {
                let (t, key, at) = (thread(*t), format!("k{key}"), planwright::CheckpointId(*at));
                let mut answers = Vec::new();
                for cp in [&model, &real] {
                    let j = cp.effect_journal().unwrap();
                    let answer = match op {
                        0 => Some(j.effect_put(&t, at, &key, value.clone()).await.unwrap()),
                        1 => j.effect_get(&t, &key).await.unwrap(),
                        2 => { cp.trim(&t, at).await.unwrap(); None }
                        3 => { let _ = cp.prune(&t, at, b"{}".to_vec()).await; None }
                        4 => { cp.rewind(&t, Some(at), vec![]).await.unwrap(); None }
                        _ => { cp.delete_thread(&t).await.unwrap(); None }
                    };
                    answers.push(answer);
                }
                assert_eq!(answers[0], answers[1], "op {op} on {t}/{key} at {at:?}");
            }
        });
    }
}
