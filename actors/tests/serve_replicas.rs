//! Replicas of `serve` on one PostgreSQL database: a replica frozen (SIGSTOP) past its lease has
//! its run taken over by another, which finishes it from the last checkpoint; when the frozen one
//! wakes (SIGCONT) its late writes are refused, it gives the run up, and the thread's history
//! shows one linear chain. A replica stopped with SIGTERM hands its run over at once. Streams
//! cross replicas: a `runs/stream` client rejoins on another replica when its own dies, and a
//! background run is joined live from a replica that does not run it.

#[path = "../../tests/support/backends.rs"]
mod backends;
mod serve_support;

use serde_json::{json, Value};
use std::time::{Duration, Instant};

async fn get(url: &str) -> Value {
    reqwest::Client::new()
        .get(url)
        .timeout(Duration::from_secs(5))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

async fn post(url: &str, body: Value) -> Value {
    reqwest::Client::new()
        .post(url)
        .json(&body)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap()
}

/// A background research run on a new thread of replica `base`: (thread, run).
async fn start_run(base: &str) -> (String, String) {
    let thread = post(&format!("{base}/threads"), json!({})).await["thread_id"]
        .as_str()
        .unwrap()
        .to_string();
    let run = post(
        &format!("{base}/threads/{thread}/runs"),
        json!({"assistant_id": "research",
               "input": {"input": "Should our support team adopt retrieval-augmented generation for customer support?"}}),
    )
    .await;
    (thread, run["run_id"].as_str().expect("a run").to_string())
}

async fn checkpoints(base: &str, thread: &str) -> Vec<Value> {
    post(
        &format!("{base}/threads/{thread}/history"),
        json!({"limit": 1000}),
    )
    .await
    .as_array()
    .cloned()
    .unwrap_or_default()
}

/// Waits until the thread has `n` checkpoints (the run is under way).
async fn progressed(base: &str, thread: &str, n: usize) {
    let t0 = Instant::now();
    while checkpoints(base, thread).await.len() < n {
        assert!(
            t0.elapsed() < Duration::from_secs(30),
            "the run made no progress"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

async fn ended(base: &str, thread: &str, run: &str, within: Duration) -> Value {
    let t0 = Instant::now();
    loop {
        let r = get(&format!("{base}/threads/{thread}/runs/{run}")).await;
        if !matches!(r["status"].as_str(), Some("pending" | "running")) {
            return r;
        }
        assert!(
            t0.elapsed() < within,
            "the run did not end in {within:?}: {r}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Each checkpoint's parent is the one before it: one writer, one chain.
fn assert_linear(history: &[Value]) {
    let ids: Vec<u64> = history
        .iter()
        .map(|c| {
            c["checkpoint"]["checkpoint_id"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
        .collect();
    for pair in history.windows(2) {
        assert_eq!(
            pair[0]["parent_checkpoint"]["checkpoint_id"], pair[1]["checkpoint"]["checkpoint_id"],
            "history is not one chain: {ids:?}"
        );
    }
}

fn metric(page: &str, name: &str) -> u64 {
    page.lines()
        .find(|l| l.starts_with(name))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// One test, two scenarios one after the other: any live replica on the database may take a
/// run over, so the scenarios must not overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replicas_take_over_frozen_and_stopped_replicas_runs() {
    if backends::postgres().await.is_none() {
        return;
    }
    a_frozen_replicas_run_is_taken_over_and_its_late_writes_are_refused().await;
    a_replica_stopped_with_sigterm_hands_its_run_over_at_once().await;
    a_cancel_sent_to_one_replica_stops_the_run_on_another().await;
    multitask_strategies_see_runs_on_other_replicas().await;
    a_stream_crosses_replicas_and_survives_its_replica(&[]).await;
    a_background_run_on_one_replica_is_joined_live_on_another(&[]).await;
    // The same with the stream's events in NATS JetStream, where a NATS server answers.
    if tokio::net::TcpStream::connect("127.0.0.1:4222")
        .await
        .is_ok()
    {
        let nats = ["--events", "nats://127.0.0.1:4222"];
        a_stream_crosses_replicas_and_survives_its_replica(&nats).await;
        a_background_run_on_one_replica_is_joined_live_on_another(&nats).await;
    }
}

/// `runs.create` on replica A without `stream_resumable`, `runs.join_stream` on replica B: B's
/// follower asks for the stream across replicas (a `NOTIFY`, or a NATS message), A starts
/// publishing, and B's client gets the run live to its final values.
async fn a_background_run_on_one_replica_is_joined_live_on_another(events: &[&str]) {
    let model = "sim:p50=300ms,p99=500ms,seed=7";
    let (_a, a_url) = serve_support::serve_on(&backends::pg_url(), model, events).await;
    let (_b, b_url) = serve_support::serve_on(&backends::pg_url(), model, events).await;
    let (thread, run) = start_run(&a_url).await;
    let joined = serve_support::SseReader::open(
        reqwest::Client::new().get(format!("{b_url}/threads/{thread}/runs/{run}/stream")),
    )
    .await
    .rest()
    .await;
    let names: Vec<_> = joined.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(names.first(), Some(&"metadata"), "{names:?}");
    let end = joined.last().expect("events");
    assert_eq!(end.event, "values", "{names:?}");
    assert!(
        matches!(end.data["status"].as_str(), Some("ok" | "needs_review")),
        "{end:?}"
    );
    let rec = ended(&b_url, &thread, &run, Duration::from_secs(60)).await;
    assert_eq!(rec["status"], "success", "{rec}");
}

async fn a_frozen_replicas_run_is_taken_over_and_its_late_writes_are_refused() {
    let (a, a_url) = serve("1s", "sim:p50=300ms,p99=500ms,seed=5").await;
    let (_b, b_url) = serve("1s", "sim:p50=300ms,p99=500ms,seed=5").await;
    let (thread, run) = start_run(&a_url).await;
    progressed(&a_url, &thread, 2).await;
    a.signal("STOP");
    // B takes the run over once A's lease has expired, and finishes it.
    let rec = ended(&b_url, &thread, &run, Duration::from_secs(60)).await;
    assert_eq!(rec["status"], "success", "{rec}");
    let b_metrics = serve_support::metrics(&b_url).await;
    assert!(
        metric(&b_metrics, "planwright_replica_runs_taken_over_total") >= 1,
        "{b_metrics}"
    );
    assert!(
        metric(&b_metrics, "planwright_replica_runs_claimed_total") >= 1,
        "{b_metrics}"
    );
    // A wakes: whatever it still writes is refused; it gives the run up.
    a.signal("CONT");
    let t0 = Instant::now();
    loop {
        let page = serve_support::metrics(&a_url).await;
        if metric(&page, "planwright_replica_runs_held") == 0 {
            break;
        }
        assert!(
            t0.elapsed() < Duration::from_secs(20),
            "A still holds the run: {page}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    let rec = get(&format!("{b_url}/threads/{thread}/runs/{run}")).await;
    assert_eq!(
        rec["status"], "success",
        "A did not overwrite the record: {rec}"
    );
    let history = checkpoints(&b_url, &thread).await;
    assert_linear(&history);
    let state = get(&format!("{b_url}/threads/{thread}/state")).await;
    assert_eq!(state["values"]["status"], "ok", "{state}");
    // No plan step ran twice: each appears once among the executed steps.
    let mut steps: Vec<String> = state["values"]["execution_history"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["event"] == "step_executed")
        .map(|e| e["step_id"].as_str().unwrap_or_default().to_string())
        .collect();
    let n = steps.len();
    steps.sort();
    steps.dedup();
    assert_eq!(steps.len(), n, "a step ran twice: {state}");
    assert!(n >= 2, "{state}");
}

async fn a_replica_stopped_with_sigterm_hands_its_run_over_at_once() {
    // Leases of a minute: the run moves only because A releases it.
    let (a, a_url) = serve("60s", "sim:p50=1s,p99=1500ms,seed=5").await;
    let (_b, b_url) = serve("60s", "sim:p50=1s,p99=1500ms,seed=5").await;
    let (thread, run) = start_run(&a_url).await;
    progressed(&a_url, &thread, 2).await;
    a.signal("TERM");
    let rec = ended(&b_url, &thread, &run, Duration::from_secs(40)).await;
    assert_eq!(rec["status"], "success", "{rec}");
    let b_metrics = serve_support::metrics(&b_url).await;
    assert_eq!(
        metric(&b_metrics, "planwright_replica_runs_taken_over_total"),
        1,
        "B finished A's run: {b_metrics}"
    );
    assert_linear(&checkpoints(&b_url, &thread).await);
}

async fn a_cancel_sent_to_one_replica_stops_the_run_on_another() {
    let (_a, a_url) = serve("5s", "sim:p50=2s,p99=3s,seed=5").await;
    let (_b, b_url) = serve("5s", "sim:p50=2s,p99=3s,seed=5").await;
    let (thread, run) = start_run(&a_url).await;
    progressed(&a_url, &thread, 2).await;
    let status = reqwest::Client::new()
        .post(format!(
            "{b_url}/threads/{thread}/runs/{run}/cancel?wait=true"
        ))
        .send()
        .await
        .unwrap()
        .status();
    assert_eq!(status.as_u16(), 204);
    let rec = get(&format!("{b_url}/threads/{thread}/runs/{run}")).await;
    assert_eq!(rec["status"], "interrupted", "{rec}");
    let page = serve_support::metrics(&a_url).await;
    assert_eq!(
        metric(&page, "planwright_replica_runs_held"),
        0,
        "A stopped it: {page}"
    );
    // A later run on the thread starts from where the cancelled one stopped, on either replica.
    assert_linear(&checkpoints(&b_url, &thread).await);
}

async fn multitask_strategies_see_runs_on_other_replicas() {
    let (_a, a_url) = serve("5s", "sim:p50=2s,p99=3s,seed=5").await;
    let (_b, b_url) = serve("5s", "sim:p50=2s,p99=3s,seed=5").await;
    let (thread, first) = start_run(&a_url).await;
    progressed(&a_url, &thread, 2).await;
    let input = json!({"input": "Should our support team adopt retrieval-augmented generation for customer support?"});
    // reject (the default): the thread is busy on A, so B refuses.
    let resp = reqwest::Client::new()
        .post(format!("{b_url}/threads/{thread}/runs"))
        .json(&json!({"assistant_id": "research", "input": input}))
        .send()
        .await
        .unwrap();
    assert_eq!(resp.status().as_u16(), 409);
    let detail = resp.json::<Value>().await.unwrap();
    assert!(
        detail["detail"]
            .as_str()
            .unwrap()
            .contains("another replica"),
        "{detail}"
    );
    // interrupt: B stops A's run, then runs the new one.
    let second = post(
        &format!("{b_url}/threads/{thread}/runs/wait"),
        json!({"assistant_id": "research", "input": input, "multitask_strategy": "interrupt"}),
    )
    .await;
    assert!(
        matches!(second["status"].as_str(), Some("ok" | "needs_review")),
        "{second}"
    );
    let first = get(&format!("{b_url}/threads/{thread}/runs/{first}")).await;
    assert_eq!(first["status"], "interrupted", "{first}");
    assert_linear(&checkpoints(&b_url, &thread).await);
}

/// A client streams a run from replica A while another follows it from B; A is killed
/// mid-run; the first client rejoins on B with `Last-Event-ID` (event log: `events`' flags). Both see every event of the
/// run exactly once, in order, the same events, through to the final values of the run B
/// finished.
async fn a_stream_crosses_replicas_and_survives_its_replica(events: &[&str]) {
    let model = "sim:p50=300ms,p99=500ms,seed=7";
    let flags = [&["--lease-ttl", "1s"], events].concat();
    let (mut a, a_url) = serve_support::serve_on(&backends::pg_url(), model, &flags).await;
    let (_b, b_url) = serve_support::serve_on(&backends::pg_url(), model, &flags).await;
    let thread = post(&format!("{a_url}/threads"), json!({})).await["thread_id"]
        .as_str()
        .unwrap()
        .to_string();
    let http = reqwest::Client::new();
    let mut first = serve_support::SseReader::open(
        http.post(format!("{a_url}/threads/{thread}/runs/stream")).json(&json!({
            "assistant_id": "research", "stream_mode": ["values", "updates"],
            "input": {"input": "Should our support team adopt retrieval-augmented generation for customer support?"}
        })),
    )
    .await;
    let metadata = first.next().await.expect("a metadata event");
    assert_eq!(metadata.event, "metadata");
    let run = metadata.data["run_id"].as_str().unwrap().to_string();
    // A second client follows the same run from replica B, from the start.
    let mut second = serve_support::SseReader::open(
        http.get(format!("{b_url}/threads/{thread}/runs/{run}/stream")),
    )
    .await;
    let mut seen = vec![metadata];
    while seen.len() < 4 {
        seen.push(first.next().await.expect("the run streams"));
    }
    a.kill();
    // The first client's connection breaks; it may have read a few more events first.
    seen.extend(first.rest().await);
    let last = seen.last().unwrap().id.expect("events carry ids");
    let mut again = serve_support::SseReader::open(
        http.get(format!("{b_url}/threads/{thread}/runs/{run}/stream"))
            .header("Last-Event-ID", last.to_string()),
    )
    .await;
    seen.extend(again.rest().await);
    let followed = second.rest().await;
    let ids: Vec<u64> = seen.iter().map(|e| e.id.unwrap()).collect();
    assert_eq!(
        ids,
        (1..=ids.len() as u64).collect::<Vec<_>>(),
        "every event once, in order"
    );
    assert_eq!(seen, followed, "both clients saw the same stream");
    let end = seen.last().unwrap();
    assert_eq!(end.event, "values", "{end:?}");
    assert!(
        matches!(end.data["status"].as_str(), Some("ok" | "needs_review")),
        "{end:?}"
    );
    let rec = ended(&b_url, &thread, &run, Duration::from_secs(60)).await;
    assert_eq!(rec["status"], "success", "{rec}");
    let page = serve_support::metrics(&b_url).await;
    assert_eq!(
        metric(&page, "planwright_replica_runs_taken_over_total"),
        1,
        "B finished the run A streamed: {page}"
    );
    // A bad Last-Event-ID names the problem; a run of another thread is not found.
    let r = http
        .get(format!("{b_url}/threads/{thread}/runs/{run}/stream"))
        .header("Last-Event-ID", "yesterday")
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 400);
    assert!(r.text().await.unwrap().contains("Last-Event-ID"));
    let r = http
        .get(format!("{b_url}/threads/other/runs/{run}/stream"))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 404);
}

/// A replica on the test database with lease `lease_ttl` and `model`.
async fn serve(lease_ttl: &str, model: &str) -> (serve_support::Server, String) {
    serve_support::serve_on(&backends::pg_url(), model, &["--lease-ttl", lease_ttl]).await
}
