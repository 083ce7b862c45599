//! Backends for the durable tests: a fresh SQLite file, and the PostgreSQL server of this
//! machine. When `CI` is set and PostgreSQL cannot be reached, tests fail: they never skip
//! silently in CI. Without `CI`, they print why they skip.

#![allow(dead_code)]

use planwright::checkpoint::{connect, Checkpointer};
use std::sync::Arc;

/// The PostgreSQL URL tests use (`PLANWRIGHT_TEST_POSTGRES` overrides it).
pub fn pg_url() -> String {
    std::env::var("PLANWRIGHT_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string())
}

/// The PostgreSQL checkpointer, or `None` (with a notice) when unreachable outside CI.
pub async fn postgres() -> Option<Arc<dyn Checkpointer>> {
    match connect(&pg_url()).await {
        Ok(cp) => Some(cp),
        Err(e) if std::env::var_os("CI").is_some() => {
            panic!(
                "CI is set and PostgreSQL at {} is unreachable: {e}",
                pg_url()
            )
        }
        Err(e) => {
            eprintln!(
                "SKIPPED: PostgreSQL at {} is unreachable ({e}); set CI to make this fatal",
                pg_url()
            );
            None
        }
    }
}

/// A fresh SQLite file path under the system temp dir.
pub fn sqlite_path(name: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join("planwright-tests");
    let _ = std::fs::create_dir_all(&dir);
    let path = dir.join(format!("{name}-{}-{}.sqlite", std::process::id(), unique()));
    let _ = std::fs::remove_file(&path);
    path
}

/// A process-unique, run-unique suffix.
pub fn unique() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    format!("{nanos:x}-{}", N.fetch_add(1, Ordering::Relaxed))
}

/// A fresh SQLite checkpointer.
pub async fn sqlite(name: &str) -> Arc<dyn Checkpointer> {
    let path = sqlite_path(name);
    connect(&format!("sqlite:{}", path.display()))
        .await
        .expect("sqlite opens")
}

/// Every backend to run a durable test on — memory, a fresh SQLite file named after `name`, and
/// PostgreSQL where it answers — each with a thread prefix of its own.
pub async fn every(name: &str) -> Vec<(Arc<dyn Checkpointer>, String)> {
    let u = unique();
    let mut all: Vec<(Arc<dyn Checkpointer>, String)> = vec![
        (
            Arc::new(planwright::checkpoint::MemoryCheckpointer::new()),
            format!("mem-{u}"),
        ),
        (sqlite(name).await, format!("sqlite-{u}")),
    ];
    if let Some(pg) = postgres().await {
        all.push((pg, format!("pg-{u}")));
    }
    all
}

/// Runs a durable test on every backend in turn — memory, a fresh SQLite file named after `name`,
/// and PostgreSQL where it answers — handing it the checkpointer and a thread prefix of its own
/// (PostgreSQL's database outlives the test, so each run names its threads apart). The test's
/// assertions name the prefix (`mem-…`, `sqlite-…`, `pg-…`), so a failure says which backend.
pub async fn on_every_backend<F, Fut>(name: &str, mut test: F)
where
    F: FnMut(Arc<dyn Checkpointer>, String) -> Fut,
    Fut: std::future::Future<Output = ()>,
{
    for (cp, prefix) in every(name).await {
        test(cp, prefix).await;
    }
}

/// An engine for `graph` storing in `cp` (a durable test's usual engine; a restart is another
/// call with the same checkpointer).
pub async fn engine<S: planwright::State>(
    graph: planwright::StateGraph<S>,
    cp: &Arc<dyn Checkpointer>,
) -> planwright::Engine<S> {
    planwright::Engine::builder(graph.compile().expect("the test's graph compiles"))
        .checkpointer(cp.clone())
        .build()
        .await
}
