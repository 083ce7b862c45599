//! `load` against several replicas of one service (`--target` repeated): conversations spread
//! round robin, a replica that is gone sends its conversations to the next, and a run request
//! whose replica took the run and then went away is joined on the next replica, never sent twice.
//! Two real `serve` processes share one PostgreSQL database; the lost replica is a proxy in front
//! of one of them that takes each conversation's first run request, lets the replica start it, and
//! answers 502 as a load balancer does when the replica behind it dies.

#[path = "../../tests/support/backends.rs"]
mod backends;
mod serve_support;

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{Method, StatusCode, Uri};
use planwright_actors::load::{self, LoadArgs};
use serde_json::Value;
use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

async fn serve(checkpoint: &str) -> (serve_support::Server, String) {
    serve_support::serve_on(checkpoint, "sim:p50=2ms,p99=5ms", &[]).await
}

/// The replica behind the proxy, and the threads whose first run request the proxy lost.
struct Proxy {
    behind: String,
    client: reqwest::Client,
    lost: Mutex<BTreeSet<String>>,
}

async fn proxy(
    State(p): State<Arc<Proxy>>,
    method: Method,
    uri: Uri,
    body: Bytes,
) -> (StatusCode, Bytes) {
    let path = uri.path().to_string();
    let url = format!("{}{}", p.behind, uri);
    let forward = p
        .client
        .request(method.clone(), &url)
        .header("content-type", "application/json")
        .body(body.clone());
    let thread = path
        .strip_prefix("/threads/")
        .and_then(|rest| rest.strip_suffix("/runs/wait"))
        .map(str::to_string);
    let first_run = match &thread {
        Some(t) if method == Method::POST => p.lost.lock().unwrap().insert(t.clone()),
        _ => false,
    };
    if !first_run {
        let resp = forward.send().await.unwrap();
        let status = StatusCode::from_u16(resp.status().as_u16()).unwrap();
        return (status, resp.bytes().await.unwrap());
    }
    // The replica takes the run; the proxy waits until it is recorded, then "dies".
    let t = thread.unwrap();
    tokio::spawn(async move {
        let _ = forward.send().await;
    });
    for _ in 0..200 {
        let runs: Value = p
            .client
            .get(format!("{}/threads/{t}/runs", p.behind))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        if runs.as_array().is_some_and(|r| !r.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    (
        StatusCode::BAD_GATEWAY,
        Bytes::from_static(b"{\"detail\":\"replica gone\"}"),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn conversations_spread_over_replicas_and_fail_over_without_running_twice() {
    if backends::postgres().await.is_none() {
        return;
    }
    let pg = backends::pg_url();
    let (_a, a) = serve(&pg).await;
    let (_b, b) = serve(&pg).await;
    let state = Arc::new(Proxy {
        behind: a.clone(),
        client: reqwest::Client::new(),
        lost: Mutex::default(),
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let lost_url = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new()
        .fallback(proxy)
        .with_state(state.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    // A third replica that is down for the whole run.
    let down = format!("http://127.0.0.1:{}", serve_support::free_port());

    let args = LoadArgs {
        target: vec![lost_url.clone(), b.clone(), down.clone()],
        graph: Some("research".into()),
        conversations: Some(12),
        concurrency: Some(4),
        quiet: true,
        ..LoadArgs::default()
    };
    let report = load::run(&args).await.unwrap();
    let text = report.to_text();
    assert_eq!(report.completed, 12, "{:?}\n{text}", report.errors);
    let share = |url: &str| {
        report
            .replicas
            .iter()
            .find(|r| r.url == url)
            .unwrap()
            .clone()
    };
    let (lost, live, gone) = (share(&lost_url), share(&b), share(&down));
    assert_eq!(
        (lost.conversations, live.conversations, gone.conversations),
        (4, 4, 4),
        "round robin\n{text}"
    );
    // The down replica's conversations move to the next replica — the lossy one — so the
    // lossy one loses the first run request of 8 conversations, which all end on the live one.
    assert_eq!(
        gone.failovers, 4,
        "each conversation homed on the down replica moved once"
    );
    assert_eq!(gone.requests, 0);
    assert_eq!(
        lost.failovers, 8,
        "each first run request it took was lost once\n{text}"
    );
    assert_eq!(report.failovers, 12);
    assert!(text.contains("12 failovers"), "{text}");

    // Every thread whose first run request was lost has that run exactly once: it was joined
    // on the next replica, not started again.
    let lost_threads = state.lost.lock().unwrap().clone();
    assert_eq!(lost_threads.len(), 8);
    let client = reqwest::Client::new();
    for t in lost_threads {
        let runs: Value = client
            .get(format!("{b}/threads/{t}/runs"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let with_input = runs
            .as_array()
            .unwrap()
            .iter()
            .filter(|r| !r["kwargs"]["input"].is_null())
            .count();
        assert_eq!(with_input, 1, "thread {t}: {runs}");
        let state: Value = client
            .get(format!("{b}/threads/{t}/state"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        assert_eq!(
            state["next"],
            serde_json::json!([]),
            "the run ended: {state}"
        );
        assert!(
            matches!(
                state["values"]["status"].as_str(),
                Some("ok" | "needs_review")
            ),
            "{state}"
        );
    }
}
