//! One conformance suite for every run event log (memory, SQLite, PostgreSQL, NATS JetStream): events are numbered in
//! order without gaps, read from any point, appended only after the seq the writer last saw (a
//! retried batch that already committed succeeds, anything else is refused), and followers are
//! woken on appends — on PostgreSQL and NATS across two log instances standing for two replicas
//! (`LISTEN/NOTIFY`, a NATS subscription), and so is a run's writer when a follower asks for its
//! stream (`request_stream`), with appends refused to a writer that does not hold
//! the run's lease. The NATS test runs where a NATS server with JetStream answers on
//! 127.0.0.1:4222 (CI has one), and is skipped elsewhere, as the PostgreSQL ones are.

#[path = "support/backends.rs"]
mod backends;

use planwright::runs::{
    MemoryRunEvents, NatsRunEvents, PostgresRunEvents, PostgresRuns, RunEventLog, RunRecord,
    RunStore, RunStoreError, SqliteRunEvents, SqliteRuns,
};
use std::sync::Arc;
use std::time::Duration;

fn batch(names: &[&str]) -> Vec<(String, String)> {
    names
        .iter()
        .map(|n| (n.to_string(), format!("{{\"n\":\"{n}\"}}")))
        .collect()
}

/// Waits (bounded, so a broken wake-up fails instead of hanging) for `w` to change.
async fn woken(w: &mut planwright::runs::events::LogWatch) {
    tokio::time::timeout(Duration::from_secs(10), w.changed())
        .await
        .expect("followers were not woken")
        .expect("the log went away");
}

async fn conformance(log: &dyn RunEventLog, run: &str) {
    assert_eq!(log.last_seq(run).await.unwrap(), 0);
    assert!(log.read(run, 0, 10).await.unwrap().is_empty());
    let mut w = log.watch(run);
    assert_eq!(
        log.append(run, None, 0, batch(&["metadata", "values", "updates"]))
            .await
            .unwrap(),
        3
    );
    woken(&mut w).await;
    let all = log.read(run, 0, 10).await.unwrap();
    assert_eq!(
        all.iter()
            .map(|e| (e.seq, e.event.as_str()))
            .collect::<Vec<_>>(),
        [(1, "metadata"), (2, "values"), (3, "updates")]
    );
    assert_eq!(all[1].data, "{\"n\":\"values\"}");
    assert_eq!(log.read(run, 2, 10).await.unwrap()[0].seq, 3);
    assert_eq!(log.read(run, 0, 2).await.unwrap().len(), 2);
    assert!(log.read(run, 3, 10).await.unwrap().is_empty());
    // The same batch again after the same seq: a retry whose first attempt committed.
    assert_eq!(
        log.append(run, None, 0, batch(&["metadata", "values", "updates"]))
            .await
            .unwrap(),
        3
    );
    // Anything else not after the log's end is another writer's: refused.
    for (after, names) in [(0, &["other"][..]), (2, &["x"][..]), (7, &["y"][..])] {
        let e = log
            .append(run, None, after, batch(names))
            .await
            .unwrap_err();
        assert!(
            matches!(&e, RunStoreError::AppendRefused { run_id, .. } if run_id == run),
            "{e}"
        );
    }
    assert_eq!(log.last_seq(run).await.unwrap(), 3);
    assert_eq!(log.append(run, None, 3, batch(&["end"])).await.unwrap(), 4);
    assert_eq!(log.last_seq(run).await.unwrap(), 4);
    // A follower asking for the stream wakes the run's request watchers (its writer's) and
    // appends nothing.
    let mut writer = log.watch_requests(run);
    log.request_stream(run).await.unwrap();
    woken(&mut writer).await;
    assert_eq!(log.last_seq(run).await.unwrap(), 4);
    // Other runs' logs are their own.
    assert!(log
        .read(&format!("{run}-other"), 0, 10)
        .await
        .unwrap()
        .is_empty());
}

#[tokio::test]
async fn memory_log_conforms_and_forgets_the_oldest_runs() {
    let log = MemoryRunEvents::new(2);
    conformance(&log, "r1").await;
    log.append("r2", None, 0, batch(&["a"])).await.unwrap();
    log.append("r3", None, 0, batch(&["a"])).await.unwrap();
    assert!(
        log.read("r1", 0, 10).await.unwrap().is_empty(),
        "r1 forgotten"
    );
    assert_eq!(log.read("r3", 0, 10).await.unwrap().len(), 1);
}

#[tokio::test]
async fn sqlite_log_conforms_outlives_its_process_and_goes_with_the_run() {
    let dir = std::env::temp_dir().join(format!("pw-run-events-{}", backends::unique()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("server.sqlite").display().to_string();
    let runs = SqliteRuns::open(path.clone()).await.unwrap();
    for (run, thread) in [("r1", "t1"), ("r2", "t2")] {
        runs.insert(RunRecord::pending(run, thread, "research", 1))
            .await
            .unwrap();
    }
    let log = SqliteRunEvents::open(path.clone()).await.unwrap();
    conformance(&log, "r1").await;
    // A run without a record has no stream.
    let e = log
        .append("r-none", None, 0, batch(&["x"]))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("no record"), "{e}");
    log.append("r2", None, 0, batch(&["metadata"]))
        .await
        .unwrap();
    drop(log);
    // A new process on the same file: the stream goes on after its last event.
    let reopened = SqliteRunEvents::open(path.clone()).await.unwrap();
    assert_eq!(reopened.last_seq("r1").await.unwrap(), 4);
    assert_eq!(
        reopened
            .read("r1", 2, 10)
            .await
            .unwrap()
            .iter()
            .map(|e| (e.seq, e.event.as_str()))
            .collect::<Vec<_>>(),
        [(3, "updates"), (4, "end")]
    );
    assert_eq!(
        reopened
            .append("r1", None, 4, batch(&["values"]))
            .await
            .unwrap(),
        5
    );
    // Deleting a run's record takes its events (and only its).
    assert!(runs.delete("r1").await.unwrap());
    assert_eq!(reopened.last_seq("r1").await.unwrap(), 0);
    assert!(reopened.read("r1", 0, 10).await.unwrap().is_empty());
    assert_eq!(reopened.last_seq("r2").await.unwrap(), 1);
    std::fs::remove_dir_all(&dir).ok();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_log_conforms_across_replicas_and_fences_writers() {
    if backends::postgres().await.is_none() {
        return;
    }
    let url = backends::pg_url();
    let runs = PostgresRuns::connect(&url).await.unwrap();
    let a = PostgresRunEvents::connect(&url).await.unwrap();
    let b = PostgresRunEvents::connect(&url).await.unwrap();
    across_replicas(&runs, &a, &b, true).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nats_log_conforms_across_replicas_and_fences_writers() {
    const NATS: &str = "nats://127.0.0.1:4222";
    if backends::postgres().await.is_none()
        || tokio::net::TcpStream::connect("127.0.0.1:4222")
            .await
            .is_err()
    {
        return;
    }
    let runs: Arc<dyn RunStore> =
        Arc::new(PostgresRuns::connect(&backends::pg_url()).await.unwrap());
    let a = NatsRunEvents::connect(NATS, Some(runs.clone()))
        .await
        .unwrap();
    let b = NatsRunEvents::connect(NATS, Some(runs.clone()))
        .await
        .unwrap();
    across_replicas(&*runs, &a, &b, false).await;
    // A bad address names itself.
    let e = NatsRunEvents::connect("nats://127.0.0.1:1", None)
        .await
        .err()
        .unwrap();
    assert!(e.to_string().contains("nats://127.0.0.1:1"), "{e}");
}

/// The suite on log `a`, then what two replicas (`a`, `b`) sharing it see, with leases in `runs`.
/// `cascades`: the log's events go with the run's record.
async fn across_replicas(
    runs: &dyn RunStore,
    a: &dyn RunEventLog,
    b: &dyn RunEventLog,
    cascades: bool,
) {
    let p = format!("ev{}", backends::unique());
    let run = format!("{p}-r");
    runs.insert(RunRecord::pending(&run, format!("{p}-t"), "research", 1))
        .await
        .unwrap();
    conformance(a, &run).await;
    // A follower on the other replica is woken by an append here.
    let mut w = b.watch(&run);
    a.append(&run, None, 4, batch(&["values"])).await.unwrap();
    woken(&mut w).await;
    assert_eq!(b.read(&run, 4, 10).await.unwrap()[0].event, "values");
    // An append is no request for the stream: the other replica's request watcher of a run
    // nobody asked about stays put while its follower is woken by the same notification.
    let fresh = format!("{p}-fresh");
    runs.insert(RunRecord::pending(&fresh, format!("{p}-t"), "research", 1))
        .await
        .unwrap();
    let mut w = b.watch(&fresh);
    let asks = b.watch_requests(&fresh);
    a.append(&fresh, None, 0, batch(&["metadata"]))
        .await
        .unwrap();
    woken(&mut w).await;
    assert!(!asks.has_changed().unwrap());
    // A follower on the other replica asking for the stream wakes the writer here, and only
    // this run's watchers.
    // (A run nothing is appended to, so that only the request can wake its watcher.)
    let quiet = format!("{run}-quiet");
    let mut writer = a.watch_requests(&quiet);
    let unrelated = a.watch_requests(&format!("{run}-unrelated"));
    b.request_stream(&quiet).await.unwrap();
    woken(&mut writer).await;
    assert!(!unrelated.has_changed().unwrap());
    assert_eq!(a.last_seq(&quiet).await.unwrap(), 0);
    // Only the lease holder appends as a writer.
    let e = a
        .append(&run, Some("A"), 5, batch(&["x"]))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("nobody"), "{e}");
    runs.claim(&run, "A", 1_000, 60_000)
        .await
        .unwrap()
        .token()
        .unwrap();
    assert_eq!(
        a.append(&run, Some("A"), 5, batch(&["x"])).await.unwrap(),
        6
    );
    // B takes the run over (A's lease expired): A's appends are refused from then on.
    runs.claim(&run, "B", 100_000, 60_000)
        .await
        .unwrap()
        .token()
        .unwrap();
    let e = a
        .append(&run, Some("A"), 6, batch(&["late"]))
        .await
        .unwrap_err();
    assert!(e.to_string().contains("held by B"), "{e}");
    assert_eq!(b.last_seq(&run).await.unwrap(), 6);
    assert_eq!(
        b.append(&run, Some("B"), 6, batch(&["y"])).await.unwrap(),
        7
    );
    // An append by a writer another replica does not know of, after the stream moved on.
    let e = b
        .append(&run, Some("B"), 6, batch(&["z"]))
        .await
        .unwrap_err();
    assert!(matches!(e, RunStoreError::AppendRefused { .. }), "{e}");
    assert_eq!(
        a.read(&run, 0, 100)
            .await
            .unwrap()
            .iter()
            .map(|e| e.event.as_str())
            .collect::<Vec<_>>(),
        ["metadata", "values", "updates", "end", "values", "x", "y"]
    );
    if cascades {
        // A run without a record has no stream; deleting the record deletes its events.
        let e = a
            .append(&format!("{p}-none"), None, 0, batch(&["x"]))
            .await
            .unwrap_err();
        assert!(e.to_string().contains("no record"), "{e}");
        assert!(runs.delete(&run).await.unwrap());
        assert!(a.read(&run, 0, 100).await.unwrap().is_empty());
    }
}
