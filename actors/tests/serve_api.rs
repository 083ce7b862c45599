//! The HTTP API over a real socket: threads, runs that pause for approval and resume, state,
//! errors that name the problem, bearer auth, metrics.

use planwright_actors::serve::{router, state, ServeArgs};
use serde_json::{json, Value};

async fn start() -> String {
    let dir = std::env::temp_dir().join(format!(
        "planwright-serve-{}-{}",
        std::process::id(),
        rand_suffix()
    ));
    let args = ServeArgs {
        addr: "127.0.0.1:0".into(),
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
        token: Some("secret".into()),
        model: "offline".into(),
    };
    let st = state(&args).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(st)).await;
    });
    format!("http://{addr}")
}

fn rand_suffix() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or(0)
}

fn client() -> reqwest::Client {
    reqwest::Client::new()
}

async fn call(method: reqwest::Method, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = client().request(method, url).bearer_auth("secret");
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

const GOAL: &str = "Create a short research brief on whether our support team should adopt retrieval-augmented generation for customer support";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_pauses_for_approval_and_resumes() {
    let base = start().await;
    let (s, ok) = call(reqwest::Method::GET, &format!("{base}/ok"), None).await;
    assert_eq!((s, ok), (200, json!({"ok": true})));
    let (s, thread) = call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"metadata": {"user": "ann"}})),
    )
    .await;
    assert_eq!(s, 200, "{thread}");
    let id = thread["thread_id"].as_str().unwrap().to_string();
    assert_eq!(thread["status"], "idle");

    let run = json!({"assistant_id": "research", "input": {"input": GOAL, "constraints": {"max_steps": 4, "required_sections": ["cost", "risks"], "require_approval": true}}});
    let (s, v) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/{id}/runs/wait"),
        Some(run),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "interrupted");
    assert!(v["__interrupt__"][0]["value"]["plan"].is_array(), "{v}");
    let (_, t) = call(reqwest::Method::GET, &format!("{base}/threads/{id}"), None).await;
    assert_eq!(t["status"], "interrupted");
    assert_eq!(t["metadata"]["user"], "ann");

    // A resume value that is not one of the three answers is refused; the thread stays paused.
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/{id}/runs/wait"),
        Some(json!({"assistant_id": "research", "command": {"resume": {"action": "maybe"}}})),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(e["detail"].as_str().unwrap().contains("approve"), "{e}");

    let (s, v) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/{id}/runs/wait"),
        Some(json!({"assistant_id": "research", "command": {"resume": {"action": "approve"}}})),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "ok", "{v}");
    assert!(v["final_report"].as_str().unwrap().contains("[rag-"), "{v}");
    let (_, st) = call(
        reqwest::Method::GET,
        &format!("{base}/threads/{id}/state"),
        None,
    )
    .await;
    assert_eq!(st["values"]["status"], "ok");
    assert_eq!(st["next"], json!([]));

    // Resuming a thread that is not paused is a clear 400.
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/{id}/runs/wait"),
        Some(json!({"assistant_id": "research", "command": {"resume": {"action": "approve"}}})),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["detail"].as_str().unwrap().contains("not interrupted"),
        "{e}"
    );

    let (_, found) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/search"),
        Some(json!({"limit": 10})),
    )
    .await;
    assert!(found
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["thread_id"] == id.as_str()));
    let (_, metrics) = call(reqwest::Method::GET, &format!("{base}/metrics"), None).await;
    let m = metrics.as_str().unwrap();
    assert!(
        m.contains("planwright_runs_total{status=\"interrupted\"} 1"),
        "{m}"
    );
    assert!(
        m.contains("planwright_node_executions_total{graph=\"research\",node=\"create_plan\"}"),
        "{m}"
    );
    let (s, _) = call(
        reqwest::Method::DELETE,
        &format!("{base}/threads/{id}"),
        None,
    )
    .await;
    assert_eq!(s, 204);
    let (s, _) = call(reqwest::Method::GET, &format!("{base}/threads/{id}"), None).await;
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_requests_get_json_errors_that_name_the_problem() {
    let base = start().await;
    let (s, e) = client()
        .get(format!("{base}/ok"))
        .send()
        .await
        .map(|r| (r.status().as_u16(), r))
        .unwrap();
    assert_eq!(s, 401);
    assert!(e.text().await.unwrap().contains("Bearer"));
    let (_, t) = call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"thread_id": "t1"})),
    )
    .await;
    assert_eq!(t["thread_id"], "t1");
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"thread_id": "t1"})),
    )
    .await;
    assert_eq!(s, 409, "{e}");
    for (body, status, needle) in [
        (
            json!({"assistant_id": "chess", "input": {}}),
            404,
            "unknown assistant `chess`",
        ),
        (
            json!({"assistant_id": "research", "input": {"goal": 3}}),
            400,
            "malformed research input",
        ),
        (
            json!({"assistant_id": "research", "input": {"input": "   "}}),
            400,
            "goal",
        ),
        (json!({"assistant_id": "research"}), 400, "needs `input`"),
        (
            json!({"assistant_id": "research", "input": {"input": GOAL}, "multitask_strategy": "interrupt"}),
            400,
            "multitask_strategy",
        ),
    ] {
        let (s, e) = call(
            reqwest::Method::POST,
            &format!("{base}/threads/t1/runs/wait"),
            Some(body),
        )
        .await;
        assert_eq!(s, status, "{e}");
        assert!(
            e["detail"]
                .as_str()
                .unwrap()
                .to_lowercase()
                .contains(needle),
            "{e}"
        );
    }
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/nope/runs/wait"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL}})),
    )
    .await;
    assert_eq!(s, 404, "{e}");
    let big = "x".repeat(3 * 1024 * 1024);
    let (s, e) = call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"metadata": {"blob": big}})),
    )
    .await;
    assert_eq!(s, 413, "{e}");
    assert!(e["detail"].as_str().unwrap().contains("too large"), "{e}");
    let resp = client()
        .post(format!("{base}/threads"))
        .bearer_auth("secret")
        .header("content-type", "application/json")
        .body("{not json")
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 400);
    assert!(resp.text().await.unwrap().contains("malformed JSON"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_runs_can_be_read_and_history_lists_checkpoints() {
    let base = start().await;
    call(
        reqwest::Method::POST,
        &format!("{base}/threads"),
        Some(json!({"thread_id": "bg"})),
    )
    .await;
    let (s, run) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/bg/runs"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL}})),
    )
    .await;
    assert_eq!(s, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();
    assert_eq!(run["thread_id"], "bg");
    let mut status = Value::Null;
    for _ in 0..200 {
        let (_, r) = call(
            reqwest::Method::GET,
            &format!("{base}/threads/bg/runs/{run_id}"),
            None,
        )
        .await;
        status = r["status"].clone();
        if status != "running" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert_eq!(status, "success");
    let (s, _) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/bg/runs/{run_id}/cancel"),
        None,
    )
    .await;
    assert_eq!(s, 204, "cancelling a finished run is a no-op");
    let (s, e) = call(
        reqwest::Method::GET,
        &format!("{base}/threads/bg/runs/999999"),
        None,
    )
    .await;
    assert_eq!(s, 404, "{e}");
    let (s, hist) = call(
        reqwest::Method::POST,
        &format!("{base}/threads/bg/history"),
        Some(json!({"limit": 3})),
    )
    .await;
    assert_eq!(s, 200, "{hist}");
    let hist = hist.as_array().unwrap();
    assert_eq!(hist.len(), 3);
    assert_eq!(hist[0]["values"]["status"], "ok");
    assert!(
        hist[0]["checkpoint"]["checkpoint_id"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
            > hist[1]["checkpoint"]["checkpoint_id"]
                .as_str()
                .unwrap()
                .parse::<u64>()
                .unwrap()
    );
}
