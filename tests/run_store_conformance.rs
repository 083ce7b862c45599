//! One run-store conformance suite, every backend (memory, SQLite file, PostgreSQL server), a
//! SQLite file reopened (records survive the process), and a property test of SQLite against the
//! in-memory model.

#[path = "support/backends.rs"]
mod backends;
#[path = "support/run_store_suite.rs"]
mod run_store_suite;

use planwright::runs::{
    connect, MemoryRuns, PostgresRuns, RunChange, RunRecordStatus, RunStore, SqliteRuns,
};
use proptest::prelude::*;
use std::sync::Arc;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn memory_run_store_conforms() {
    run_store_suite::run_all(Arc::new(MemoryRuns::new()), "mem").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_run_store_conforms() {
    let path = backends::sqlite_path("runs");
    let s = SqliteRuns::open(path.display().to_string()).await.unwrap();
    assert!(path.exists(), "a real file");
    run_store_suite::run_all(Arc::new(s), "sqlite").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_run_store_conforms() {
    if backends::postgres().await.is_none() {
        return;
    }
    let s = PostgresRuns::connect(&backends::pg_url())
        .await
        .expect("the PostgreSQL run store opens");
    let prefix = format!("pg{}", backends::unique());
    run_store_suite::run_all(Arc::new(s), &prefix).await;
}

#[tokio::test]
async fn run_records_survive_reopening_the_file_and_unfinished_ones_are_found() {
    let path = backends::sqlite_path("runs-reopen").display().to_string();
    {
        let s = SqliteRuns::open(path.clone()).await.unwrap();
        s.insert(run_store_suite::rec("r-done", "t", 1))
            .await
            .unwrap();
        s.transition(
            "r-done",
            &[RunRecordStatus::Pending],
            RunRecordStatus::Success,
            RunChange::at(2),
        )
        .await
        .unwrap();
        s.insert(run_store_suite::rec("r-queued", "t", 3))
            .await
            .unwrap();
    }
    let s = SqliteRuns::open(path).await.unwrap();
    let unfinished = s.unfinished(10).await.unwrap();
    assert_eq!(unfinished.len(), 1);
    assert_eq!(unfinished[0].run_id, "r-queued");
    assert_eq!(
        unfinished[0].kwargs["input"]["goal"], "r-queued",
        "the request is kept to start it later"
    );
    assert_eq!(s.list_thread("t", 10, 0).await.unwrap().len(), 2);
}

#[tokio::test]
async fn run_store_urls_select_the_backend_and_bad_ones_are_named() {
    assert_eq!(connect("memory:").await.unwrap().backend_name(), "memory");
    let path = backends::sqlite_path("runs-url");
    let s = connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    assert_eq!(s.backend_name(), "sqlite");
    for bad in ["redis://x", "sqlite:", "nonsense"] {
        let err = connect(bad).await.err().expect("rejected").to_string();
        assert!(err.contains(bad), "{err}");
    }
}

#[derive(Clone, Debug)]
enum Op {
    Insert(u8, u8),
    Transition(u8, Vec<u8>, u8),
    Delete(u8),
    DeleteThread(u8),
    Sweep(Option<u64>, Option<usize>, usize),
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (0u8..8, 0u8..3).prop_map(|(r, t)| Op::Insert(r, t)),
        (0u8..8, proptest::collection::vec(0u8..6, 1..3), 0u8..6)
            .prop_map(|(r, f, to)| Op::Transition(r, f, to)),
        (0u8..8).prop_map(Op::Delete),
        (0u8..3).prop_map(Op::DeleteThread),
        (
            proptest::option::of(0u64..40),
            proptest::option::of(0usize..4),
            1usize..4
        )
            .prop_map(|(b, k, n)| Op::Sweep(b, k, n)),
    ]
}

async fn apply(s: &dyn RunStore, op: &Op, clock: u64) -> String {
    let st = |i: u8| RunRecordStatus::ALL[i as usize % 6];
    match op {
        Op::Insert(r, t) => {
            let rec = run_store_suite::rec(&format!("r{r}"), &format!("t{t}"), clock);
            match s.insert(rec).await {
                Ok(stored) => format!("ok {} {}", stored.run_id, stored.thread_id),
                Err(e) => format!("err {e}"),
            }
        }
        Op::Transition(r, from, to) => {
            let from: Vec<_> = from.iter().map(|i| st(*i)).collect();
            format!(
                "{:?}",
                s.transition(&format!("r{r}"), &from, st(*to), RunChange::at(clock))
                    .await
                    .unwrap()
            )
        }
        Op::Delete(r) => format!("{:?}", s.delete(&format!("r{r}")).await.unwrap()),
        Op::DeleteThread(t) => format!("{:?}", s.delete_thread(&format!("t{t}")).await.unwrap()),
        Op::Sweep(b, k, n) => format!("{:?}", s.sweep("", *b, *k, *n).await.unwrap()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]
    #[test]
    fn sqlite_agrees_with_the_memory_model(ops in proptest::collection::vec(op(), 1..40)) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        rt.block_on(async {
            let model = MemoryRuns::new();
            let path = backends::sqlite_path("runs-prop").display().to_string();
            let real = SqliteRuns::open(path).await.unwrap();
            for (i, op) in ops.iter().enumerate() {
                let clock = i as u64;
                let (a, b) = (apply(&model, op, clock).await, apply(&real, op, clock).await);
                prop_assert_eq!(&a, &b, "op {} {:?}", i, op);
            }
            for t in 0..3 {
                let t = format!("t{t}");
                let strip = |v: Vec<planwright::runs::RunRecord>| -> Vec<(String, RunRecordStatus, u64)> {
                    v.into_iter().map(|r| (r.run_id, r.status, r.updated_at)).collect()
                };
                prop_assert_eq!(
                    strip(model.list_thread(&t, 100, 0).await.unwrap()),
                    strip(real.list_thread(&t, 100, 0).await.unwrap())
                );
            }
            Ok(())
        })?;
    }
}
