//! Streams that can be rejoined, on one server (SQLite, the event log in the same file): a
//! client that drops a `runs/stream` connection rejoins with `Last-Event-ID` and gets exactly the
//! events it missed, also after the server was killed and started again; a background run asked
//! to be resumable is joined from the start, whole or filtered by mode; one that is not resumable
//! streams live from the moment it is joined and stores nothing when nobody joins it;
//! `on_disconnect: "cancel"` cancels a streamed or waited-for run
//! whose client hangs up. Across replicas (PostgreSQL, a replica killed mid-stream) in
//! `serve_replicas.rs`.

mod serve_support;

use planwright::runs::RunEventLog;
use serde_json::json;
use serve_support::{call, serve_on, SseReader};

const GOAL: &str =
    "Should our support team adopt retrieval-augmented generation for customer support?";

async fn server() -> (serve_support::Server, String) {
    server_with("sim:p50=30ms,p99=60ms,seed=3").await
}

async fn server_with(model: &str) -> (serve_support::Server, String) {
    let (server, base, _) = server_in(model).await;
    (server, base)
}

/// A server with `model`, and its SQLite file.
async fn server_in(model: &str) -> (serve_support::Server, String, std::path::PathBuf) {
    // A directory per server: the tests of this file run at once.
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = serve_support::fresh_dir(&format!("serve-streams-{n}")).join("s.sqlite");
    let (server, base) = serve_on(&format!("sqlite:{}", file.display()), model, &[]).await;
    (server, base, file)
}

/// The status of the thread's only run, once it has ended.
async fn ended_run(base: &str, t: &str) -> String {
    let statuses = serve_support::wait_runs_ended(base, t).await;
    assert_eq!(statuses.len(), 1, "{statuses:?}");
    statuses[0].clone()
}

async fn thread(base: &str) -> String {
    let (_, t) = call("POST", &format!("{base}/threads"), Some(json!({}))).await;
    t["thread_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_stream_is_rejoined_with_last_event_id_and_misses_nothing() {
    let (_s, base) = server().await;
    let t = thread(&base).await;
    let http = reqwest::Client::new();
    let (mut seen, run) = first_three_events(&base, &t).await; // then the client goes away
    let mut again = SseReader::open(
        http.get(format!("{base}/threads/{t}/runs/{run}/stream"))
            .header("Last-Event-ID", "3"),
    )
    .await;
    seen.extend(again.rest().await);
    assert!(seen.iter().any(|e| e.event == "updates"));
    // Joining the ended run again replays it whole.
    whole_and_replayed(&base, &t, &run, &seen).await;
}

/// Starts a streamed research run on thread `t`, reads its first three events and hangs up; the
/// events, and the run's id. The run goes on.
async fn first_three_events(base: &str, t: &str) -> (Vec<serve_support::SseEvent>, String) {
    let mut first = SseReader::open(
        reqwest::Client::new()
            .post(format!("{base}/threads/{t}/runs/stream"))
            .json(
                &json!({"assistant_id": "research", "input": {"input": GOAL},
                          "stream_mode": ["values", "updates"]}),
            ),
    )
    .await;
    let mut seen = Vec::new();
    while seen.len() < 3 {
        seen.push(first.next().await.expect("the run streams"));
    }
    let run = seen[0].data["run_id"].as_str().unwrap().to_string();
    (seen, run)
}

/// `seen` is run `run`'s stream whole — numbered 1, 2, 3, … with no gap, ending with the run's
/// final values — the run succeeded, and joining it now replays exactly `seen`.
async fn whole_and_replayed(base: &str, t: &str, run: &str, seen: &[serve_support::SseEvent]) {
    let ids: Vec<u64> = seen.iter().map(|e| e.id.unwrap()).collect();
    assert_eq!(ids, (1..=ids.len() as u64).collect::<Vec<_>>(), "{seen:?}");
    let end = seen.last().unwrap();
    assert_eq!(end.event, "values", "{end:?}");
    assert!(
        matches!(end.data["status"].as_str(), Some("ok" | "needs_review")),
        "{end:?}"
    );
    let (_, rec) = call("GET", &format!("{base}/threads/{t}/runs/{run}"), None).await;
    assert_eq!(rec["status"], "success", "{rec}");
    let replay = SseReader::open(
        reqwest::Client::new().get(format!("{base}/threads/{t}/runs/{run}/stream")),
    )
    .await
    .rest()
    .await;
    assert_eq!(replay, seen);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stream_is_rejoined_after_the_server_was_killed_and_started_again() {
    let db = serve_support::fresh_dir("serve-streams-kill").join("s.sqlite");
    let port = serve_support::free_port();
    let base = format!("http://127.0.0.1:{port}");
    // Slow enough that the run is still going when the server is killed.
    let model = "sim:p50=300ms,p99=600ms,seed=3";
    let server = serve_support::serve(&db, port, model).await;
    let t = thread(&base).await;
    let http = reqwest::Client::new();
    let (mut seen, run) = first_three_events(&base, &t).await;
    drop(server); // SIGKILL, mid-run
    let _again = serve_support::serve(&db, port, model).await;
    let last = seen.last().unwrap().id.unwrap();
    let mut rejoined = SseReader::open(
        http.get(format!("{base}/threads/{t}/runs/{run}/stream"))
            .header("Last-Event-ID", last.to_string()),
    )
    .await;
    seen.extend(rejoined.rest().await);
    assert_eq!(
        seen.iter().filter(|e| e.event == "metadata").count(),
        1,
        "one stream, not a second one started after the restart"
    );
    // The stream went on where the client left it, numbered on from the stored events, and the
    // stored stream is the one the client saw before the kill and after it (a log kept in memory
    // would have started again at 1 with the restarted run's own first events).
    whole_and_replayed(&base, &t, &run, &seen).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumable_background_run_is_joined_whole_or_by_mode() {
    let (_s, base) = server().await;
    let t = thread(&base).await;
    let (s, run) = call(
        "POST",
        &format!("{base}/threads/{t}/runs"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL},
                    "stream_mode": ["values", "updates"], "stream_resumable": true})),
    )
    .await;
    assert_eq!(s, 200, "{run}");
    let run = run["run_id"].as_str().unwrap().to_string();
    let http = reqwest::Client::new();
    let whole = SseReader::open(http.get(format!("{base}/threads/{t}/runs/{run}/stream")))
        .await
        .rest()
        .await;
    assert_eq!(whole[0].event, "metadata");
    assert_eq!(whole[0].data["run_id"], run.as_str());
    assert!(whole.iter().any(|e| e.event == "updates"));
    let updates = SseReader::open(http.get(format!(
        "{base}/threads/{t}/runs/{run}/stream?stream_mode=updates"
    )))
    .await
    .rest()
    .await;
    let expected: Vec<_> = whole
        .iter()
        .filter(|e| e.event == "updates")
        .cloned()
        .collect();
    assert_eq!(updates, expected);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_background_run_streams_live_to_whoever_joins_it_and_stores_nothing_otherwise() {
    // Model calls of 200–300 ms: the run is still going when the client joins.
    let (_s, base, file) = server_in("sim:p50=200ms,p99=300ms,seed=3").await;
    let http = reqwest::Client::new();
    // `client.runs.create` then `client.runs.join_stream`, without `stream_resumable`.
    let t = thread(&base).await;
    let (s, run) = call(
        "POST",
        &format!("{base}/threads/{t}/runs"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL},
                    "stream_mode": ["values", "updates"]})),
    )
    .await;
    assert_eq!(s, 200, "{run}");
    let run = run["run_id"].as_str().unwrap().to_string();
    let joined_run = run.clone();
    let joined = SseReader::open(http.get(format!("{base}/threads/{t}/runs/{run}/stream")))
        .await
        .rest()
        .await;
    let names: Vec<_> = joined.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names.first(), Some(&"metadata"), "{names:?}");
    assert_eq!(joined[0].data["run_id"], run.as_str());
    assert_eq!(
        names.get(1),
        Some(&"values"),
        "the state so far, first: {names:?}"
    );
    assert!(names.contains(&"updates"), "then the run, live: {names:?}");
    let last = joined.iter().rev().find(|e| e.event == "values").unwrap();
    assert_eq!(
        last.data["status"], "ok",
        "the stream ends with the final values"
    );
    assert_eq!(ended_run(&base, &t).await, "success");

    // A run nobody follows stores no stream: joined once it has ended, it sends nothing.
    let t = thread(&base).await;
    let (_, run) = call(
        "POST",
        &format!("{base}/threads/{t}/runs"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL}})),
    )
    .await;
    let run = run["run_id"].as_str().unwrap().to_string();
    assert_eq!(ended_run(&base, &t).await, "success");
    let events = SseReader::open(http.get(format!("{base}/threads/{t}/runs/{run}/stream")))
        .await
        .rest()
        .await;
    assert!(events.is_empty(), "{events:?}");
    // Nothing in the server's log (the stream of the first run is there, whole).
    let log = planwright::runs::SqliteRunEvents::open(file.display().to_string())
        .await
        .unwrap();
    assert_eq!(log.last_seq(&run).await.unwrap(), 0, "nothing stored");
    assert_eq!(
        log.last_seq(&joined_run).await.unwrap(),
        joined.len() as u64 + 1
    );
    let (s, _) = call("GET", &format!("{base}/threads/{t}/runs/nope/stream"), None).await;
    assert_eq!(s, 404);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_disconnect_cancel_stops_the_run_when_its_client_hangs_up() {
    let (_s, base) = server_with("sim:p50=200ms,p99=300ms,seed=3").await;
    let http = reqwest::Client::new();
    // A stream whose client leaves after two events.
    let t = thread(&base).await;
    let mut stream = SseReader::open(http.post(format!("{base}/threads/{t}/runs/stream")).json(
        &json!({"assistant_id": "research", "input": {"input": GOAL},
                          "stream_mode": "updates", "on_disconnect": "cancel"}),
    ))
    .await;
    stream.next().await.expect("metadata");
    stream.next().await.expect("an update");
    drop(stream);
    assert_eq!(ended_run(&base, &t).await, "interrupted");
    // A runs/wait whose client gives up after a moment.
    let t = thread(&base).await;
    let gave_up = http
        .post(format!("{base}/threads/{t}/runs/wait"))
        .timeout(std::time::Duration::from_millis(300))
        .json(
            &json!({"assistant_id": "research", "input": {"input": GOAL},
                      "on_disconnect": "cancel"}),
        )
        .send()
        .await;
    assert!(gave_up.is_err(), "the run outlasts the client's patience");
    assert_eq!(ended_run(&base, &t).await, "interrupted");
    // Without it, the run goes on and succeeds.
    let t = thread(&base).await;
    let _ = http
        .post(format!("{base}/threads/{t}/runs/wait"))
        .timeout(std::time::Duration::from_millis(300))
        .json(&json!({"assistant_id": "research", "input": {"input": GOAL}}))
        .send()
        .await;
    assert_eq!(ended_run(&base, &t).await, "success");
    // A mode that does not exist names itself.
    let (s, e) = call(
        "POST",
        &format!("{base}/threads/{t}/runs/wait"),
        Some(
            json!({"assistant_id": "research", "input": {"input": GOAL}, "on_disconnect": "later"}),
        ),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(e.to_string().contains("on_disconnect"), "{e}");
}

#[test]
fn a_bad_events_url_is_refused_at_start_naming_the_flag() {
    for (url, says) in [
        ("bogus://x", "nats://HOST:PORT"),
        ("nats://127.0.0.1:1", "cannot connect to NATS"),
        // A log in another database than the run records could check no append.
        ("sqlite:/tmp/pw-elsewhere.sqlite", "beside its run record"),
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_planwright"))
            .args(["serve", "--addr", "127.0.0.1:0", "--checkpoint", "memory:"])
            .args(["--events", url])
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{url}: {err}");
        assert!(
            err.contains("--events") && err.contains(says),
            "{url}: {err}"
        );
    }
}
