//! Cancel, over HTTP against the real binary: a cancelled run leaves its thread usable (new
//! input replaces the unfinished superstep), and a restart never resumes it.

use serde_json::json;
use std::path::Path;
use std::time::Duration;

mod serve_support;

use serve_support::{call, free_port, fresh_dir, wait_for_checkpoints, wait_runs_ended, Server};

// Model calls of about two seconds: the cancel must land while the run's last model call is
// still going, after a wait for its first checkpoints that takes longer on a loaded machine.
const MODEL: &str = "sim:p50=2s,p99=3s,seed=2";

async fn serve(db: &Path, port: u16) -> Server {
    serve_support::serve(db, port, MODEL).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_run_is_not_resumed_by_a_restart_and_new_input_replaces_it() {
    let db = fresh_dir("cancel").join("serve.sqlite");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let server = serve(&db, port).await;
    assert_eq!(
        call(
            "POST",
            &format!("{url}/threads"),
            Some(json!({"thread_id": "c-1"}))
        )
        .await
        .0,
        200
    );
    let input = json!({"assistant_id": "research", "input": {"input": "Should our support team adopt retrieval-augmented generation?"}});
    let (s, run) = call(
        "POST",
        &format!("{url}/threads/c-1/runs"),
        Some(input.clone()),
    )
    .await;
    assert_eq!(s, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap().to_string();
    // Wait for the first checkpoints, then cancel.
    wait_for_checkpoints(&url, "c-1", 2).await;
    let (s, _) = call(
        "POST",
        &format!("{url}/threads/c-1/runs/{run_id}/cancel"),
        None,
    )
    .await;
    assert_eq!(s, 204);
    let mut status = String::new();
    for _ in 0..400 {
        let (_, t) = call("GET", &format!("{url}/threads/c-1"), None).await;
        status = t["status"].as_str().unwrap_or("").to_string();
        if status != "busy" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    assert_ne!(status, "busy");
    let (_, before) = call("GET", &format!("{url}/threads/c-1/state"), None).await;
    assert!(
        !before["next"].as_array().unwrap().is_empty(),
        "the cancel left work unfinished: {before}"
    );
    // Killed and restarted: the cancelled run stays where it was.
    drop(server);
    let server = serve(&db, port).await;
    tokio::time::sleep(Duration::from_millis(300)).await;
    let (_, after) = call("GET", &format!("{url}/threads/c-1/state"), None).await;
    assert_eq!(
        after["checkpoint"], before["checkpoint"],
        "a restart does not resume a cancelled run"
    );
    let (_, t) = call("GET", &format!("{url}/threads/c-1"), None).await;
    assert_ne!(t["status"], "busy");
    // New input replaces the unfinished superstep and runs to a brief.
    let (s, out) = call("POST", &format!("{url}/threads/c-1/runs/wait"), Some(input)).await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["status"], "ok", "{out}");
    drop(server);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_runs_answer_at_once_and_run_in_turn() {
    let dir = fresh_dir("enqueue");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let _server = serve(&dir.join("serve.sqlite"), port).await;
    assert_eq!(
        call(
            "POST",
            &format!("{url}/threads"),
            Some(json!({"thread_id": "q-1"}))
        )
        .await
        .0,
        200
    );
    let input = |goal: &str| json!({"assistant_id": "research", "multitask_strategy": "enqueue", "input": {"input": goal}});
    let (s, first) = call(
        "POST",
        &format!("{url}/threads/q-1/runs"),
        Some(input("What does retrieval-augmented generation cost?")),
    )
    .await;
    assert_eq!(
        (s, first["status"].as_str()),
        (200, Some("running")),
        "{first}"
    );
    // While it runs, three more are queued: each answered at once, pending, marked enqueue.
    let mut queued = Vec::new();
    for goal in [
        "What are the risks of RAG?",
        "How fast is RAG?",
        "Who maintains RAG indexes?",
    ] {
        let (s, r) = call(
            "POST",
            &format!("{url}/threads/q-1/runs"),
            Some(input(goal)),
        )
        .await;
        assert_eq!(s, 200, "{r}");
        assert_eq!(r["status"], "pending", "{r}");
        assert_eq!(r["multitask_strategy"], "enqueue");
        queued.push(r["run_id"].as_str().unwrap().to_string());
    }
    // The second queued run is cancelled before its turn: it never starts.
    let (s, _) = call(
        "POST",
        &format!("{url}/threads/q-1/runs/{}/cancel", queued[1]),
        None,
    )
    .await;
    assert_eq!(s, 204);
    let statuses = wait_runs_ended(&url, "q-1").await;
    // Newest first: the third queued, the cancelled second, the first queued, the first run.
    assert_eq!(
        statuses,
        ["success", "interrupted", "success", "success"],
        "{statuses:?}"
    );
}
