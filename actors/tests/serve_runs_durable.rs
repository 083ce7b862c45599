//! Run records in the database, over HTTP against the real binary: they and the queue survive a
//! SIGKILL; `cancel?action=rollback` removes what a run wrote (a paused thread is paused again);
//! the `interrupt` and `rollback` multitask strategies make room for a new run; `join` waits; a
//! delayed run (`after_seconds`) keeps its delay across a restart.

mod serve_support;

use serde_json::{json, Value};
use serve_support::{
    call, create_thread, free_port, fresh_dir, history, serve, wait_for_checkpoints,
    wait_runs_ended,
};

const MODEL: &str = "sim:p50=300ms,p99=600ms,seed=3";
/// For a run that must still be going when the test acts on it: the calls after its first
/// checkpoint take seconds, not the few hundred milliseconds a busy CI machine can spend between
/// polls (with `MODEL`, a run cancelled under load had sometimes ended already).
const SLOW_MODEL: &str = "sim:p50=3s,p99=4s,seed=3";
const GOAL: &str = "Should our support team adopt retrieval-augmented generation?";

fn input(strategy: &str) -> Value {
    json!({"assistant_id": "research", "multitask_strategy": strategy, "input": {"input": GOAL}})
}

fn approve() -> Value {
    json!({"assistant_id": "research", "command": {"resume": {"action": "approve"}}})
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_records_and_queued_runs_survive_a_sigkill() {
    let db = fresh_dir("runs-kill").join("serve.sqlite");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let server = serve(&db, port, MODEL).await;
    create_thread(&url, "k-1").await;
    let (s, first) = call(
        "POST",
        &format!("{url}/threads/k-1/runs"),
        Some(input("enqueue")),
    )
    .await;
    assert_eq!(
        (s, first["status"].as_str()),
        (200, Some("running")),
        "{first}"
    );
    let mut queued = Vec::new();
    for _ in 0..2 {
        let (s, r) = call(
            "POST",
            &format!("{url}/threads/k-1/runs"),
            Some(input("enqueue")),
        )
        .await;
        assert_eq!((s, r["status"].as_str()), (200, Some("pending")), "{r}");
        queued.push(r["run_id"].as_str().unwrap().to_string());
    }
    wait_for_checkpoints(&url, "k-1", 2).await;
    // Killed mid-run with two runs queued behind it.
    drop(server);
    let _server = serve(&db, port, MODEL).await;
    let (_, runs) = call("GET", &format!("{url}/threads/k-1/runs"), None).await;
    let ids: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["run_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        ids,
        [
            queued[1].as_str(),
            queued[0].as_str(),
            first["run_id"].as_str().unwrap()
        ],
        "every record is still there, newest first"
    );
    assert_eq!(
        runs[0]["kwargs"]["input"]["input"], GOAL,
        "the request is kept"
    );
    // `join` waits for the last queued run: the interrupted one went on, the queue ran in turn.
    let (s, values) = call(
        "GET",
        &format!("{url}/threads/k-1/runs/{}/join", queued[1]),
        None,
    )
    .await;
    assert_eq!(s, 200, "{values}");
    assert_eq!(values["status"], "ok", "{values}");
    let statuses = wait_runs_ended(&url, "k-1").await;
    let (_, runs) = call("GET", &format!("{url}/threads/k-1/runs"), None).await;
    assert_eq!(statuses, ["success", "success", "success"], "{runs}");
    // The chain is one line through three runs.
    let h = history(&url, "k-1").await;
    for pair in h.windows(2) {
        assert_eq!(
            pair[0]["parent_checkpoint"]["checkpoint_id"], pair[1]["checkpoint"]["checkpoint_id"],
            "a linear chain"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_run_keeps_its_delay_across_a_sigkill() {
    let db = fresh_dir("runs-delay-kill").join("serve.sqlite");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let server = serve(&db, port, MODEL).await;
    create_thread(&url, "d-1").await;
    let asked_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_millis() as u64;
    let mut later = input("reject");
    later["after_seconds"] = json!(3);
    let (s, run) = call("POST", &format!("{url}/threads/d-1/runs"), Some(later)).await;
    assert_eq!((s, run["status"].as_str()), (200, Some("pending")), "{run}");
    // Killed before the run is due; the restarted server picks the pending run up.
    drop(server);
    let _server = serve(&db, port, MODEL).await;
    let run_id = run["run_id"].as_str().unwrap();
    let (s, values) = call(
        "GET",
        &format!("{url}/threads/d-1/runs/{run_id}/join"),
        None,
    )
    .await;
    assert_eq!(
        (s, values["status"].as_str()),
        (200, Some("ok")),
        "{values}"
    );
    // It began no earlier than it was due: its first checkpoint is at least 3 s after the
    // request (timestamps are RFC 3339 UTC with milliseconds, ordered as text).
    let h = history(&url, "d-1").await;
    let first = h.last().expect("the run wrote checkpoints");
    let due = planwright_actors::serve::time::rfc3339(asked_ms + 3000);
    let began = first["created_at"].as_str().unwrap();
    assert!(began >= due.as_str(), "began {began}, due {due}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rollback_puts_a_paused_thread_back_where_the_run_found_it() {
    let db = fresh_dir("runs-rollback").join("serve.sqlite");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let _server = serve(&db, port, SLOW_MODEL).await;
    create_thread(&url, "r-1").await;
    let paused = json!({"assistant_id": "research", "input": {"input": GOAL, "constraints": {"require_approval": true}}});
    let (s, v) = call(
        "POST",
        &format!("{url}/threads/r-1/runs/wait"),
        Some(paused),
    )
    .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("interrupted")), "{v}");
    let (_, before) = call("GET", &format!("{url}/threads/r-1/state"), None).await;
    let kept = history(&url, "r-1").await.len();
    // The approval runs in the background, writes a few checkpoints, and is rolled back.
    let (s, run) = call("POST", &format!("{url}/threads/r-1/runs"), Some(approve())).await;
    assert_eq!(s, 200, "{run}");
    let run_id = run["run_id"].as_str().unwrap();
    wait_for_checkpoints(&url, "r-1", kept + 1).await;
    let (s, e) = call(
        "POST",
        &format!("{url}/threads/r-1/runs/{run_id}/cancel?action=rollback&wait=true"),
        None,
    )
    .await;
    assert_eq!(s, 204, "{e}");
    let (s, _) = call("GET", &format!("{url}/threads/r-1/runs/{run_id}"), None).await;
    assert_eq!(s, 404, "a rolled-back run has no record");
    assert_eq!(
        history(&url, "r-1").await.len(),
        kept,
        "its checkpoints are gone"
    );
    let (_, after) = call("GET", &format!("{url}/threads/r-1/state"), None).await;
    assert_eq!(after["checkpoint"], before["checkpoint"]);
    assert_eq!(
        after["interrupts"], before["interrupts"],
        "paused again: {after}"
    );
    let (_, t) = call("GET", &format!("{url}/threads/r-1"), None).await;
    assert_eq!(t["status"], "interrupted");
    // And it resumes as if the rolled-back run never happened.
    let (s, v) = call(
        "POST",
        &format!("{url}/threads/r-1/runs/wait"),
        Some(approve()),
    )
    .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("ok")), "{v}");
    // An ended run cannot be rolled back; a bad action is named.
    let (_, runs) = call(
        "GET",
        &format!("{url}/threads/r-1/runs?status=success"),
        None,
    )
    .await;
    let done = runs[0]["run_id"].as_str().unwrap();
    let (s, e) = call(
        "POST",
        &format!("{url}/threads/r-1/runs/{done}/cancel?action=rollback"),
        None,
    )
    .await;
    assert_eq!(s, 409, "{e}");
    let (s, e) = call(
        "POST",
        &format!("{url}/threads/r-1/runs/{done}/cancel?action=sideways"),
        None,
    )
    .await;
    assert_eq!(s, 422);
    assert!(e["detail"].as_str().unwrap().contains("sideways"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupt_and_rollback_strategies_make_room_for_a_new_run() {
    let db = fresh_dir("runs-strategies").join("serve.sqlite");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let _server = serve(&db, port, MODEL).await;
    // A clean run, for the length of one run's history.
    create_thread(&url, "clean").await;
    let (s, v) = call(
        "POST",
        &format!("{url}/threads/clean/runs/wait"),
        Some(input("reject")),
    )
    .await;
    assert_eq!((s, v["status"].as_str()), (200, Some("ok")), "{v}");
    let one_run = history(&url, "clean").await.len();

    // The runs the strategies act on must still be going when the second request comes.
    let slow_db = fresh_dir("runs-strategies-slow").join("serve.sqlite");
    let slow_port = free_port();
    let _slow = serve(&slow_db, slow_port, SLOW_MODEL).await;
    let url = format!("http://127.0.0.1:{slow_port}");
    for (thread, strategy) in [("s-int", "interrupt"), ("s-rb", "rollback")] {
        create_thread(&url, thread).await;
        let (s, a) = call(
            "POST",
            &format!("{url}/threads/{thread}/runs"),
            Some(input("reject")),
        )
        .await;
        assert_eq!(s, 200, "{a}");
        let a_id = a["run_id"].as_str().unwrap();
        wait_for_checkpoints(&url, thread, 2).await;
        // `reject` is refused while it runs.
        let (s, _) = call(
            "POST",
            &format!("{url}/threads/{thread}/runs/wait"),
            Some(input("reject")),
        )
        .await;
        assert_eq!(s, 409, "{strategy}");
        let (s, v) = call(
            "POST",
            &format!("{url}/threads/{thread}/runs/wait"),
            Some(input(strategy)),
        )
        .await;
        assert_eq!(
            (s, v["status"].as_str()),
            (200, Some("ok")),
            "{strategy}: {v}"
        );
        let (s, a_now) = call("GET", &format!("{url}/threads/{thread}/runs/{a_id}"), None).await;
        let h = history(&url, thread).await.len();
        match strategy {
            "interrupt" => {
                assert_eq!(a_now["status"], "interrupted", "{a_now}");
                assert!(
                    h > one_run,
                    "the interrupted run's checkpoints stay ({h} vs {one_run})"
                );
            }
            _ => {
                assert_eq!(s, 404, "a rolled-back run has no record: {a_now}");
                assert_eq!(h, one_run, "nothing of the rolled-back run is left");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_that_hangs_up_on_runs_wait_does_not_leave_the_record_running() {
    let db = fresh_dir("runs-hangup").join("serve.sqlite");
    let port = free_port();
    let url = format!("http://127.0.0.1:{port}");
    let _server = serve(&db, port, MODEL).await;
    create_thread(&url, "h-1").await;
    let client = reqwest::Client::builder()
        .timeout(std::time::Duration::from_millis(300))
        .build()
        .unwrap();
    let r = client
        .post(format!("{url}/threads/h-1/runs/wait"))
        .json(&input("reject"))
        .send()
        .await;
    assert!(r.is_err(), "the client gave up before the run ended");
    assert_eq!(wait_runs_ended(&url, "h-1").await, ["success"]);
}
