//! Threads, runs, copies and store items carry their times as RFC 3339 in UTC with milliseconds
//! (`2026-11-27T20:40:01.123Z`, the ISO-8601 form LangGraph uses), over a real socket.

use planwright_actors::serve::{router, state, ServeArgs};
use serde_json::{json, Value};

async fn start() -> String {
    let dir = std::env::temp_dir().join(format!("planwright-times-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let args = ServeArgs {
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
        ..ServeArgs::default()
    };
    let st = state(&args).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(st)).await;
    });
    format!("http://{addr}")
}

async fn call(method: reqwest::Method, url: &str, body: Option<Value>) -> Value {
    let mut req = reqwest::Client::new().request(method, url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    resp.json().await.unwrap()
}

/// `YYYY-MM-DDTHH:MM:SS.mmmZ`.
fn assert_rfc3339(what: &str, v: &Value) {
    let s = v.as_str().unwrap_or_else(|| panic!("{what}: {v}"));
    let b = s.as_bytes();
    let shape_ok = s.len() == 24
        && s.ends_with('Z')
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && b[16] == b':'
        && b[19] == b'.'
        && s.chars()
            .enumerate()
            .all(|(i, c)| matches!(i, 4 | 7 | 10 | 13 | 16 | 19 | 23) || c.is_ascii_digit());
    assert!(shape_ok, "{what} is not RFC 3339 UTC with ms: {s}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_and_runs_carry_rfc3339_times() {
    use reqwest::Method;
    let base = start().await;
    let thread = call(Method::POST, &format!("{base}/threads"), Some(json!({}))).await;
    assert_rfc3339("thread created_at", &thread["created_at"]);
    assert_rfc3339("thread updated_at", &thread["updated_at"]);
    let id = thread["thread_id"].as_str().unwrap().to_string();
    let got = call(Method::GET, &format!("{base}/threads/{id}"), None).await;
    assert_rfc3339("GET thread created_at", &got["created_at"]);
    let run = call(
        Method::POST,
        &format!("{base}/threads/{id}/runs"),
        Some(json!({"assistant_id": "research", "input": {"input": "pet insurance in Australia"}})),
    )
    .await;
    assert_rfc3339("run created_at", &run["created_at"]);
    assert_rfc3339("run updated_at", &run["updated_at"]);
    let run_id = run["run_id"].as_str().unwrap();
    let got = call(
        Method::GET,
        &format!("{base}/threads/{id}/runs/{run_id}"),
        None,
    )
    .await;
    assert_rfc3339("GET run created_at", &got["created_at"]);
    let listed = call(Method::GET, &format!("{base}/threads/{id}/runs"), None).await;
    assert_rfc3339("listed run", &listed[0]["created_at"]);
}
