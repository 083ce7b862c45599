//! Fault injection against a real PostgreSQL: backends terminated mid-run (`pg_terminate_backend`),
//! and a TCP proxy between the checkpointer and the server that drops, refuses, stalls and delays
//! connections, or cuts one right after a `COMMIT` reached the server. Each test asserts what the
//! caller sees and that nothing committed is lost. Faults are on real sockets, so these tests run
//! on real time (bounded: the longest waits out a 2 s retry budget).

#[path = "support/backends.rs"]
mod backends;
#[path = "support/checkpoint_suite.rs"]
#[allow(dead_code)]
mod checkpoint_suite;
mod support;
#[path = "support/tcp_proxy.rs"]
mod tcp_proxy;

use checkpoint_suite::rec_at;
use planwright::checkpoint::{connect, BodyKind, CheckpointError, Checkpointer};
use planwright::{CheckpointId, Engine, RunOptions, ThreadId};
use std::net::SocketAddr;
use std::str::FromStr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::*;
use tcp_proxy::{Mode, TcpProxy};

/// The test server's address, user and database, from `PLANWRIGHT_TEST_POSTGRES`.
fn server() -> (SocketAddr, String, String) {
    let cfg = tokio_postgres::Config::from_str(&backends::pg_url()).unwrap();
    let host = match &cfg.get_hosts()[0] {
        tokio_postgres::config::Host::Tcp(h) => h.clone(),
        #[allow(unreachable_patterns)]
        _ => "127.0.0.1".into(),
    };
    let host = if host == "localhost" {
        "127.0.0.1".into()
    } else {
        host
    };
    let port = cfg.get_ports().first().copied().unwrap_or(5432);
    let addr: SocketAddr = format!("{host}:{port}").parse().unwrap();
    (
        addr,
        cfg.get_user().unwrap_or("postgres").to_string(),
        cfg.get_dbname().unwrap_or("postgres").to_string(),
    )
}

/// A URL for `addr` with the test server's user and database, plus `options`.
fn url_for(addr: SocketAddr, options: &str) -> String {
    let (_, user, db) = server();
    format!("postgres://{user}@{addr}/{db}?{options}")
}

/// The checkpointer for `url`, or `None` (skipping) when PostgreSQL is not there outside CI.
async fn open(url: &str) -> Option<Arc<dyn Checkpointer>> {
    backends::postgres().await?;
    Some(connect(url).await.expect("connects"))
}

/// Terminates every backend whose `application_name` is `app`; how many were terminated.
async fn terminate(app: &str) -> u64 {
    let (client, conn) = tokio_postgres::connect(&backends::pg_url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    client
        .query(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity
             WHERE application_name = $1 AND pid <> pg_backend_pid()",
            &[&app],
        )
        .await
        .unwrap()
        .len() as u64
}

/// Writes checkpoints 1..=n of `t` one after another; every write must succeed.
async fn write_chain(cp: &dyn Checkpointer, t: &ThreadId, n: u64, after_each: impl Fn(u64)) {
    for id in 1..=n {
        let kind = if id % 10 == 1 {
            BodyKind::Snapshot
        } else {
            BodyKind::Delta
        };
        cp.put(rec_at(t, id, kind, id))
            .await
            .unwrap_or_else(|e| panic!("write {id} of {t} failed: {e}"));
        after_each(id);
    }
}

/// Every checkpoint 1..=n of `t` is stored and loads with verified links and checksums.
async fn all_there(cp: &dyn Checkpointer, t: &ThreadId, n: u64) {
    assert_eq!(cp.head(t).await.unwrap(), Some(CheckpointId(n)));
    assert_eq!(cp.list(t, None, usize::MAX).await.unwrap().len() as u64, n);
    for id in (1..=n).step_by(7) {
        cp.load_chain(t, Some(CheckpointId(id))).await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn terminated_backends_are_replaced_and_no_committed_checkpoint_is_lost() {
    let app = format!("pwfault{}", backends::unique().replace('-', ""));
    let (addr, _, _) = server();
    let Some(cp) = open(&url_for(
        addr,
        &format!("application_name={app}&pool_size=4"),
    ))
    .await
    else {
        return;
    };
    let prefix = format!("terminate-{}", backends::unique());
    let done = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicU64::new(0));
    let (d, k, a) = (done.clone(), killed.clone(), app.clone());
    let killer = tokio::spawn(async move {
        while !d.load(Ordering::SeqCst) {
            k.fetch_add(terminate(&a).await, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(15)).await;
        }
    });
    let writers: Vec<_> = (0..4)
        .map(|w| {
            let (cp, t) = (cp.clone(), ThreadId::new(format!("{prefix}/{w}")));
            tokio::spawn(async move { write_chain(&*cp, &t, 120, |_| {}).await })
        })
        .collect();
    for w in writers {
        w.await.unwrap();
    }
    done.store(true, Ordering::SeqCst);
    killer.await.unwrap();
    assert!(
        killed.load(Ordering::SeqCst) > 0,
        "no backend was terminated"
    );
    for w in 0..4 {
        all_there(&*cp, &ThreadId::new(format!("{prefix}/{w}")), 120).await;
    }
    eprintln!(
        "terminated {} backends during 480 writes; none lost",
        killed.load(Ordering::SeqCst)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_in_flight_survives_its_backends_being_terminated() {
    let app = format!("pwrun{}", backends::unique().replace('-', ""));
    let (addr, _, _) = server();
    let Some(cp) = open(&url_for(addr, &format!("application_name={app}"))).await else {
        return;
    };
    let engine: Engine<Walk> = Engine::builder(counter_graph().compile().unwrap())
        .checkpointer(cp.clone())
        .build()
        .await;
    let t = ThreadId::new(format!("run-{}", backends::unique()));
    let done = Arc::new(AtomicBool::new(false));
    let killed = Arc::new(AtomicU64::new(0));
    let (d, k, a) = (done.clone(), killed.clone(), app.clone());
    let killer = tokio::spawn(async move {
        while !d.load(Ordering::SeqCst) {
            k.fetch_add(terminate(&a).await, Ordering::SeqCst);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    });
    let out = engine
        .run(
            t.clone(),
            WalkUpdate::default().target(80),
            RunOptions::default(),
        )
        .await;
    done.store(true, Ordering::SeqCst);
    killer.await.unwrap();
    let out = out.expect("the run continues after reconnecting");
    assert_eq!(out.state.count, 80);
    assert!(
        killed.load(Ordering::SeqCst) > 0,
        "no backend was terminated"
    );
    // Nothing committed is lost: the input, 80 increments and `done`, all readable.
    let history = engine.history(&t, 1_000).await.unwrap();
    assert_eq!(history.len(), 82);
    let state = engine.get_state(&t).await.unwrap().unwrap();
    assert_eq!(state.values.count, 80);
    assert_eq!(state.values.trace.len(), 81);
    eprintln!(
        "run of 80 supersteps: {} backends terminated during it; 82 checkpoints, none lost",
        killed.load(Ordering::SeqCst)
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_dropped_by_the_network_cost_only_a_retried_statement() {
    let (addr, _, _) = server();
    if backends::postgres().await.is_none() {
        return;
    }
    let proxy = Arc::new(TcpProxy::start(addr).await);
    let cp = connect(&url_for(proxy.addr(), "pool_size=3&connect_timeout=1s"))
        .await
        .unwrap();
    let t = ThreadId::new(format!("drops-{}", backends::unique()));
    let p = proxy.clone();
    write_chain(&*cp, &t, 200, move |id| {
        if id % 25 == 0 {
            p.drop_all();
        }
    })
    .await;
    all_there(&*cp, &t, 200).await;
    let accepted = proxy.accepted.load(Ordering::Relaxed);
    assert!(accepted > 3, "connections were replaced");
    eprintln!(
        "200 writes, every connection dropped 8 times: {accepted} connections opened, none lost"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn writes_wait_through_a_short_outage_and_then_succeed() {
    let (addr, _, _) = server();
    if backends::postgres().await.is_none() {
        return;
    }
    let proxy = Arc::new(TcpProxy::start(addr).await);
    let cp = connect(&url_for(proxy.addr(), "connect_timeout=1s&retry_for=20s"))
        .await
        .unwrap();
    let t = ThreadId::new(format!("bounce-{}", backends::unique()));
    write_chain(&*cp, &t, 10, |_| {}).await;
    // The proxy bounces for 300 ms: every connection dropped, new ones refused.
    proxy.set_mode(Mode::Refuse);
    proxy.drop_all();
    let p = proxy.clone();
    let restore = tokio::spawn(async move {
        tokio::time::sleep(Duration::from_millis(300)).await;
        p.set_mode(Mode::Pass);
    });
    assert!(
        cp.ping().await.is_err(),
        "not ready while the database is unreachable"
    );
    cp.put(rec_at(&t, 11, BodyKind::Delta, 11))
        .await
        .expect("the write waited for the database");
    restore.await.unwrap();
    cp.ping().await.expect("ready again");
    all_there(&*cp, &t, 11).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_database_stalled_past_the_retry_budget_is_a_clear_error_then_recovers() {
    let (addr, _, _) = server();
    if backends::postgres().await.is_none() {
        return;
    }
    let proxy = TcpProxy::start(addr).await;
    let cp = connect(&url_for(
        proxy.addr(),
        "connect_timeout=300ms&op_timeout=400ms&retry_for=2s",
    ))
    .await
    .unwrap();
    let t = ThreadId::new(format!("stall-{}", backends::unique()));
    write_chain(&*cp, &t, 3, |_| {}).await;
    proxy.set_mode(Mode::Stall);
    let err = cp
        .put(rec_at(&t, 4, BodyKind::Delta, 4))
        .await
        .expect_err("a stalled database cannot take the write");
    match &err {
        CheckpointError::Unavailable { attempts, .. } => assert!(*attempts > 1, "{err}"),
        other => panic!("expected Unavailable, got {other}"),
    }
    assert!(err.to_string().contains("unreachable"), "{err}");
    assert!(cp.ping().await.is_err());
    proxy.set_mode(Mode::Pass);
    // Whatever the stalled attempts did, the thread is intact and writable.
    match cp.put(rec_at(&t, 4, BodyKind::Delta, 4)).await {
        Ok(())
        | Err(CheckpointError::Conflict {
            found: Some(CheckpointId(4)),
            ..
        }) => {}
        Err(e) => panic!("{e}"),
    }
    cp.put(rec_at(&t, 5, BodyKind::Delta, 5)).await.unwrap();
    all_there(&*cp, &t, 5).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_links_delay_writes_without_failing_them() {
    let (addr, _, _) = server();
    if backends::postgres().await.is_none() {
        return;
    }
    let proxy = TcpProxy::start(addr).await;
    let cp = connect(&url_for(proxy.addr(), "")).await.unwrap();
    proxy.set_mode(Mode::Delay(Duration::from_millis(5)));
    let t = ThreadId::new(format!("slow-{}", backends::unique()));
    write_chain(&*cp, &t, 10, |_| {}).await;
    all_there(&*cp, &t, 10).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_write_whose_commit_answer_was_lost_is_recognised_on_retry_not_a_conflict() {
    let (addr, _, _) = server();
    if backends::postgres().await.is_none() {
        return;
    }
    let proxy = TcpProxy::start(addr).await;
    // Plain text, so the proxy can see the COMMIT go by.
    let cp = connect(&url_for(proxy.addr(), "pool_size=1&sslmode=disable"))
        .await
        .unwrap();
    let t = ThreadId::new(format!("commit-{}", backends::unique()));
    write_chain(&*cp, &t, 2, |_| {}).await;
    // A checkpoint is one statement that commits on its own: cut right after it (its parameters
    // carry the thread id).
    proxy.cut_after_next(t.as_str().as_bytes());
    cp.put(rec_at(&t, 3, BodyKind::Delta, 3))
        .await
        .expect("the retry finds its own committed row");
    assert_eq!(
        proxy.commits_cut.load(Ordering::Relaxed),
        1,
        "the fault happened"
    );
    all_there(&*cp, &t, 3).await;
    // Task writes commit with a `COMMIT`: cut right after it.
    let write = planwright::checkpoint::TaskWrite {
        task: planwright::TaskId { step: 3, index: 0 },
        node: "n".into(),
        kind: planwright::checkpoint::WriteKind::Update,
        key: String::new(),
        payload: b"{}".to_vec(),
    };
    proxy.cut_next_commit();
    cp.put_writes(&t, planwright::CheckpointId(3), vec![write.clone()])
        .await
        .expect("a retried task write is idempotent");
    assert_eq!(
        proxy.commits_cut.load(Ordering::Relaxed),
        2,
        "the fault happened"
    );
    assert_eq!(
        cp.get_writes(&t, planwright::CheckpointId(3))
            .await
            .unwrap(),
        vec![write]
    );
    // A different record on the same parent is still a conflict.
    let mut other = rec_at(&t, 3, BodyKind::Delta, 3);
    other.body = b"[\"someone else\"]".to_vec();
    assert!(matches!(
        cp.put(other).await,
        Err(CheckpointError::Conflict { .. })
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unreachable_server_at_startup_is_a_typed_error_after_the_budget() {
    // A port nothing listens on: bind one, then close it.
    let addr = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap();
    let err = connect(&format!(
        "postgres://postgres@{addr}/x?connect_timeout=200ms&retry_for=500ms"
    ))
    .await
    .err()
    .expect("nothing listens there");
    assert!(matches!(err, CheckpointError::Unavailable { .. }), "{err}");
    let source = std::error::Error::source(&err).expect("keeps its cause");
    assert!(!source.to_string().is_empty());
}

#[tokio::test]
async fn postgres_errors_carry_their_sqlstate_and_message() {
    let Some(_) = backends::postgres().await else {
        return;
    };
    let err = connect(&format!("{}?user=nobody_at_all", backends::pg_url()))
        .await
        .err()
        .expect("the server refuses a role that does not exist");
    let text = err.to_string();
    assert!(
        matches!(&err, CheckpointError::Database { code: Some(c), .. } if c == "28000"),
        "{text}"
    );
    assert!(text.contains("nobody_at_all"), "{text}");
    assert!(std::error::Error::source(&err).is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sslmode_require_encrypts_and_verify_full_refuses_an_unverifiable_certificate() {
    let (addr, _, _) = server();
    if backends::postgres().await.is_none() {
        return;
    }
    let app = format!("pwtls{}", backends::unique().replace('-', ""));
    let cp = match connect(&url_for(
        addr,
        &format!("sslmode=require&application_name={app}&retry_for=1s"),
    ))
    .await
    {
        Ok(cp) => cp,
        Err(e) => {
            eprintln!("SKIPPED: this PostgreSQL does not offer TLS ({e})");
            return;
        }
    };
    let t = ThreadId::new(format!("tls-{}", backends::unique()));
    write_chain(&*cp, &t, 3, |_| {}).await;
    let (client, conn) = tokio_postgres::connect(&backends::pg_url(), tokio_postgres::NoTls)
        .await
        .unwrap();
    tokio::spawn(conn);
    let encrypted: bool = client
        .query_one(
            "SELECT bool_and(s.ssl) FROM pg_stat_ssl s JOIN pg_stat_activity a USING (pid)
             WHERE a.application_name = $1",
            &[&app],
        )
        .await
        .unwrap()
        .get(0);
    assert!(encrypted, "every pooled connection uses TLS");
    // The test server's certificate is self-signed for another name: verify-full refuses it at
    // once (a TLS failure is not retried) with an error that says why.
    let err = connect(&url_for(addr, "sslmode=verify-full&retry_for=30s"))
        .await
        .err()
        .expect("an unverifiable certificate is refused");
    assert!(matches!(err, CheckpointError::Database { .. }), "{err}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_records_survive_terminated_backends_and_dropped_connections() {
    use planwright::runs::{PostgresRuns, RunChange, RunRecord, RunRecordStatus, RunStore};
    let (addr, _, _) = server();
    if backends::postgres().await.is_none() {
        return;
    }
    let app = format!("pwruns{}", backends::unique().replace('-', ""));
    let proxy = Arc::new(TcpProxy::start(addr).await);
    let runs = PostgresRuns::connect(&url_for(
        proxy.addr(),
        &format!("application_name={app}&pool_size=2&connect_timeout=1s"),
    ))
    .await
    .expect("the run store opens");
    let thread = format!("runs-faults-{}", backends::unique());
    for i in 0..60u64 {
        if i % 10 == 5 {
            terminate(&app).await;
        }
        if i % 10 == 9 {
            proxy.drop_all();
        }
        let id = format!("{thread}-{i}");
        // A retried insert finds its own row; a retried transition its own change.
        runs.insert(RunRecord::pending(
            id.as_str(),
            thread.as_str(),
            "research",
            i,
        ))
        .await
        .expect("an insert survives the fault");
        assert!(runs
            .transition(
                &id,
                &[RunRecordStatus::Pending],
                RunRecordStatus::Running,
                RunChange::at(i + 1)
            )
            .await
            .expect("a transition survives the fault"));
    }
    let all = runs.list_thread(&thread, 100, 0).await.unwrap();
    assert_eq!(all.len(), 60, "no record lost, none doubled");
    assert!(all.iter().all(|r| r.status == RunRecordStatus::Running));
    runs.delete_thread(&thread).await.unwrap();
}
