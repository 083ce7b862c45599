//! The server as an operator runs it, over real sockets with the real binary: a replica holds at
//! most its URL's `pool_size` connections to PostgreSQL, and refuses to start when the server has
//! no room for them; a health probe hears 503 "storage unreachable" while the database is down,
//! even from an address whose other requests fill the per-client cap; and client-supplied JSON
//! stored with every request is capped, refused with 422 before anything is stored.
//! PostgreSQL tests run on a fresh database each (dropped after), so no other test's replicas
//! share their run records.

#[path = "../../tests/support/backends.rs"]
mod backends;
#[path = "../../tests/support/pg_database.rs"]
mod pg_database;
mod serve_support;
#[path = "../../tests/support/tcp_proxy.rs"]
mod tcp_proxy;

use serde_json::{json, Value};
use serve_support::{call, serve_on};
use std::time::Duration;
use tcp_proxy::{Mode, TcpProxy};

const GOAL: &str = "Should our support team adopt retrieval-augmented generation?";
const QUICK: &str = "sim:p50=2ms,p99=5ms";

use pg_database::{admin, open_under, server, FreshDatabase};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_replica_holds_at_most_pool_size_connections_and_refuses_to_start_without_room() {
    let Some(db) = FreshDatabase::create("pwops").await else {
        return;
    };
    let (addr, _) = server();
    let app = format!("pwreplica{}", backends::unique().replace('-', ""));
    let url = db.url_at(addr, &format!("application_name={app}&pool_size=4"));
    let (_server, base) = serve_on(&url, QUICK, &[]).await;
    // Runs, store writes and reads at once: every part of the server wants connections.
    let mut calls = Vec::new();
    for i in 0..12 {
        let base = base.clone();
        calls.push(tokio::spawn(async move {
            let thread = format!("conv-{i}");
            serve_support::create_thread(&base, &thread).await;
            let (s, v) = call(
                "POST",
                &format!("{base}/threads/{thread}/runs/wait"),
                Some(json!({"assistant_id": "research", "input": {"input": GOAL}})),
            )
            .await;
            assert_eq!(s, 200, "{v}");
            let (s, v) = call(
                "PUT",
                &format!("{base}/store/items"),
                Some(json!({"namespace": ["ops"], "key": thread, "value": {"i": i}})),
            )
            .await;
            assert!(s == 200 || s == 204, "{s} {v}");
        }));
    }
    for c in calls {
        c.await.unwrap();
    }
    let admin = admin().await;
    let mut counted = open_under(&admin, &app).await;
    for _ in 0..400 {
        if counted.1 == 1 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
        counted = open_under(&admin, &app).await;
    }
    let (open, listening) = counted;
    assert_eq!(listening, 1, "the run event log's LISTEN connection");
    // Idle pooled connections stay open: this is the most the replica held.
    assert!(open <= 4, "{open} connections with pool_size=4");

    // A second replica whose budget the server cannot hold does not start, and says why.
    let port = serve_support::free_port();
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
        .args(["--model", QUICK, "--checkpoint"])
        .arg(db.url_at(addr, "pool_size=10000"))
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success(), "started: {stderr}");
    for says in ["53300", "max_connections", "pool_size=10000", "room for"] {
        assert!(stderr.contains(says), "{says}: {stderr}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_says_storage_unreachable_even_when_the_per_client_cap_is_full() {
    let Some(db) = FreshDatabase::create("pwops").await else {
        return;
    };
    let (addr, _) = server();
    let proxy = TcpProxy::start(addr).await;
    // Requests wait for the database for a minute, each attempt bounded by a second.
    let url = db.url_at(
        proxy.addr(),
        "retry_for=60s&op_timeout=1s&connect_timeout=1s&pool_size=6",
    );
    let (_server, base) = serve_on(&url, QUICK, &["--max-requests-per-client", "2"]).await;
    let http = reqwest::Client::new();
    // The database stops answering: nothing reaches it, nothing comes back.
    proxy.set_mode(Mode::Stall);
    let stuck: Vec<_> = (0..2)
        .map(|i| {
            let (http, base) = (http.clone(), base.clone());
            tokio::spawn(async move {
                http.post(format!("{base}/threads"))
                    .json(&json!({"thread_id": format!("stuck-{i}")}))
                    .send()
                    .await
                    .unwrap()
            })
        })
        .collect();
    // Until the two stuck requests hold the cap, a request that needs no storage (a path no
    // endpoint serves) gets in and its 404 at once; then it is refused.
    let mut capped = false;
    for _ in 0..200 {
        let (s, _) = call("GET", &format!("{base}/no-such-endpoint"), None).await;
        if s == 429 {
            capped = true;
            break;
        }
        assert_eq!(s, 404);
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert!(capped, "the two stuck requests never filled the cap");

    let r = http
        .get(format!("{base}/ok"))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("/ok answers while the database stalls");
    let status = r.status().as_u16();
    let body: Value = r.json().await.unwrap_or(Value::Null);
    assert_eq!(status, 503, "{body}");
    assert_eq!(body["status"], "storage unreachable", "{body}");
    assert!(
        body["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "{body}"
    );
    let r = http
        .get(format!("{base}/metrics"))
        .timeout(Duration::from_secs(20))
        .send()
        .await
        .expect("/metrics answers");
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("planwright_runs_total"));
    // The cap still holds for everything else from this address.
    let (s, _) = call("POST", &format!("{base}/threads"), Some(json!({}))).await;
    assert_eq!(s, 429);

    // The database answers again: the stuck requests finish, and /ok says so.
    proxy.set_mode(Mode::Pass);
    for s in stuck {
        let r = s.await.unwrap();
        let status = r.status().as_u16();
        assert_eq!(status, 200, "{}", r.text().await.unwrap_or_default());
    }
    let mut ok = 0;
    for _ in 0..200 {
        ok = call("GET", &format!("{base}/ok"), None).await.0;
        if ok == 200 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(ok, 200);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stored_fields_over_the_cap_are_refused_and_nothing_is_stored() {
    let dir = serve_support::fresh_dir("stored-field-caps");
    let (_server, base) = serve_on(
        &format!("sqlite:{}", dir.join("serve.sqlite").display()),
        QUICK,
        &[],
    )
    .await;
    // 70,000 characters of JSON: over the 64 KiB cap, well under the 2 MiB body limit.
    let big = json!({"blob": "x".repeat(70_000)});
    let big_len = serde_json::to_string(&big).unwrap().len().to_string();
    let refused = |field: &str, (s, v): (u16, Value)| {
        assert_eq!(s, 422, "{field}: {v}");
        let detail = v["detail"].as_str().unwrap_or_default();
        for says in [format!("`{field}`"), big_len.clone(), "65536".to_string()] {
            assert!(detail.contains(&says), "{field}: {says}: {detail}");
        }
    };

    // A thread's metadata.
    refused(
        "metadata",
        call(
            "POST",
            &format!("{base}/threads"),
            Some(json!({"thread_id": "capped", "metadata": big})),
        )
        .await,
    );
    let (s, _) = call("GET", &format!("{base}/threads/capped"), None).await;
    assert_eq!(s, 404, "no thread was stored");

    // A run's metadata, config and checkpoint, on every endpoint that starts a run.
    serve_support::create_thread(&base, "t").await;
    for endpoint in ["runs", "runs/wait", "runs/stream"] {
        for field in ["metadata", "config", "checkpoint"] {
            let mut body = json!({"assistant_id": "research", "input": {"input": GOAL}});
            body[field] = big.clone();
            let answer = call("POST", &format!("{base}/threads/t/{endpoint}"), Some(body)).await;
            refused(field, answer);
        }
        // `stream_mode` is kept with the request too.
        let body =
            json!({"assistant_id": "research", "input": {"input": GOAL}, "stream_mode": big});
        refused(
            "stream_mode",
            call("POST", &format!("{base}/threads/t/{endpoint}"), Some(body)).await,
        );
        // An assistant id no assistant has is refused before a run is recorded under it.
        let body = json!({"assistant_id": "x".repeat(70_000), "input": {"input": GOAL}});
        let (s, v) = call("POST", &format!("{base}/threads/t/{endpoint}"), Some(body)).await;
        assert_eq!(s, 404, "{endpoint}: {v}");
    }
    let (s, runs) = call("GET", &format!("{base}/threads/t/runs"), None).await;
    assert_eq!(s, 200);
    assert_eq!(runs, json!([]), "no run record was stored");
    let (_, thread) = call("GET", &format!("{base}/threads/t"), None).await;
    assert!(
        thread["metadata"].get("assistant_id").is_none(),
        "the thread was not bound: {thread}"
    );
    let (_, state) = call("GET", &format!("{base}/threads/t/state"), None).await;
    assert_eq!(state["checkpoint"], Value::Null, "nothing ran: {state}");

    // Within the cap, the same requests are served.
    let small = json!({"blob": "x".repeat(1_000)});
    let (s, v) = call(
        "POST",
        &format!("{base}/threads/t/runs/wait"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL},
                    "metadata": small, "config": {"configurable": small}})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    let (_, runs) = call("GET", &format!("{base}/threads/t/runs"), None).await;
    assert_eq!(runs.as_array().map(Vec::len), Some(1), "{runs}");
}
