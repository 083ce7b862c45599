//! One conformance suite, every backend: memory, SQLite file, PostgreSQL server.

#[path = "support/backends.rs"]
mod backends;
#[path = "support/checkpoint_suite.rs"]
mod checkpoint_suite;

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
