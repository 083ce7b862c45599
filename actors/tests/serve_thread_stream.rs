//! `GET /threads/{thread_id}/stream` on the real server over a socket: a client that joins a
//! thread gets every run of it in order, each ending in `run_done`, comes back with
//! `Last-Event-ID` to the rest without a repeat, and with `lifecycle` / `state_update` sees only
//! run starts and ends, or the thread's state as the API writes it.

mod serve_support;

use serde_json::{json, Value};
use serve_support::{call, serve_on, SseEvent, SseReader};
use std::time::Duration;

const GOAL: &str =
    "Should our support team adopt retrieval-augmented generation for customer support?";

async fn new_thread(base: &str) -> String {
    let (status, t) = call("POST", &format!("{base}/threads"), Some(json!({}))).await;
    assert_eq!(status, 200, "{t}");
    t["thread_id"].as_str().unwrap().to_string()
}

fn join(base: &str, thread: &str, modes: &str, last: Option<&str>) -> reqwest::RequestBuilder {
    let mut r = reqwest::Client::new().get(format!(
        "{base}/threads/{thread}/stream?stream_mode={modes}"
    ));
    if let Some(id) = last {
        r = r.header("Last-Event-ID", id);
    }
    r
}

/// Runs the research planner on `thread` to its end (`runs/wait`, not resumable): its run id.
async fn run_to_end(base: &str, thread: &str) -> String {
    let (status, out) = call(
        "POST",
        &format!("{base}/threads/{thread}/runs"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL},
                    "stream_mode": ["values", "updates"]})),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let run = out["run_id"].as_str().unwrap().to_string();
    let (status, out) = call(
        "GET",
        &format!("{base}/threads/{thread}/runs/{run}/join"),
        None,
    )
    .await;
    assert_eq!(status, 200, "{out}");
    run
}

/// Events until the `run_done` of `run` (inclusive).
async fn until_done(stream: &mut SseReader, run: &str) -> Vec<SseEvent> {
    let mut out = Vec::new();
    loop {
        let e = tokio::time::timeout(Duration::from_secs(60), stream.next())
            .await
            .expect("the thread stream went quiet")
            .expect("the thread stream ended");
        let done = is_done(&e, run);
        out.push(e);
        if done {
            return out;
        }
    }
}

fn is_done(e: &SseEvent, run: &str) -> bool {
    e.event == "metadata" && e.data["status"] == "run_done" && e.data["run_id"] == run
}

fn ids(events: &[SseEvent]) -> Vec<String> {
    events.iter().map(|e| e.raw_id.clone().unwrap()).collect()
}

/// `(run seq, event seq)` of a thread stream id.
fn place(id: &str) -> (u64, u64) {
    let (r, e) = id.split_once('-').unwrap();
    (r.parse().unwrap(), e.parse().unwrap())
}

#[tokio::test]
async fn a_joined_thread_streams_each_run_whole_and_a_rejoin_misses_nothing() {
    let (_server, base) = serve_on("memory:", "offline", &[]).await;
    let t = new_thread(&base).await;
    let mut stream = SseReader::open(join(&base, &t, "run_modes", None)).await;
    let first = run_to_end(&base, &t).await;
    let second = run_to_end(&base, &t).await;

    let a = until_done(&mut stream, &first).await;
    let b = until_done(&mut stream, &second).await;
    for (run, events) in [(&first, &a), (&second, &b)] {
        // Each run whole, from its first event: its metadata, its updates and values, its end.
        assert_eq!(events[0].event, "metadata", "{events:?}");
        assert_eq!(events[0].data["run_id"], json!(run), "{events:?}");
        assert!(events.iter().any(|e| e.event == "updates"), "{events:?}");
        assert!(events.iter().any(|e| e.event == "values"), "{events:?}");
        assert!(events.iter().all(|e| e.raw_id.is_some()), "{events:?}");
    }
    // Ids go up through both runs: the run's place, then the event's.
    let all: Vec<(u64, u64)> = ids(&a).iter().chain(&ids(&b)).map(|i| place(i)).collect();
    assert!(all.windows(2).all(|w| w[0] < w[1]), "{all:?}");
    assert!(place(&ids(&a)[0]).0 < place(&ids(&b)[0]).0);
    drop(stream);

    // Back after an event in the middle of the first run: the rest of it, then the second.
    let cut = a.len() / 2;
    let last = a[cut - 1].raw_id.clone().unwrap();
    let mut again = SseReader::open(join(&base, &t, "run_modes", Some(&last))).await;
    let a2 = until_done(&mut again, &first).await;
    let b2 = until_done(&mut again, &second).await;
    assert_eq!(ids(&a2), ids(&a[cut..]));
    assert_eq!(ids(&b2), ids(&b));
    let data = |v: &[SseEvent]| v.iter().map(|e| e.data.clone()).collect::<Vec<Value>>();
    assert_eq!(data(&a2), data(&a[cut..]));

    // Back after the first run's end: the second only.
    let end = a.last().unwrap().raw_id.clone().unwrap();
    let mut third = SseReader::open(join(&base, &t, "run_modes", Some(&end))).await;
    let b3 = until_done(&mut third, &second).await;
    assert_eq!(ids(&b3), ids(&b));
}

#[tokio::test]
async fn lifecycle_shows_starts_and_ends_and_state_update_shows_api_writes() {
    let (_server, base) = serve_on("memory:", "offline", &[]).await;
    let t = new_thread(&base).await;
    let mut life = SseReader::open(join(&base, &t, "lifecycle", None)).await;
    let mut updates = SseReader::open(join(&base, &t, "state_update", None)).await;
    let run = run_to_end(&base, &t).await;
    let events = until_done(&mut life, &run).await;
    let names: Vec<(&str, &Value)> = events
        .iter()
        .map(|e| (e.event.as_str(), &e.data["status"]))
        .collect();
    assert_eq!(names.len(), 2, "a start and an end only: {events:?}");
    assert_eq!(events[0].data["run_id"], json!(run));
    assert_eq!(events[0].data["attempt"], json!(1));

    // A run's supersteps are not state updates; a write through the API is.
    let (status, out) = call(
        "POST",
        &format!("{base}/threads/{t}/state"),
        Some(json!({"values": {"goal": "A newer question?"}})),
    )
    .await;
    assert_eq!(status, 200, "{out}");
    let e = tokio::time::timeout(Duration::from_secs(30), updates.next())
        .await
        .expect("no state_update came")
        .unwrap();
    assert_eq!(e.event, "state_update", "{e:?}");
    assert_eq!(e.data["thread_id"], json!(t));
    assert_eq!(
        e.data["state"]["values"]["goal"],
        json!("A newer question?")
    );
    assert_eq!(
        e.data["state"]["checkpoint"]["checkpoint_id"], out["checkpoint"]["checkpoint_id"],
        "{e:?}"
    );
}

#[tokio::test]
async fn bad_requests_name_the_problem() {
    let (_server, base) = serve_on("memory:", "offline", &[]).await;
    let t = new_thread(&base).await;
    let send = |r: reqwest::RequestBuilder| async move {
        let resp = r.send().await.unwrap();
        (resp.status().as_u16(), resp.text().await.unwrap())
    };
    let (status, body) = send(join(&base, &t, "values", None)).await;
    assert_eq!(status, 422, "{body}");
    assert!(
        body.contains("values") && body.contains("run_modes"),
        "{body}"
    );
    let (status, body) = send(join(&base, &t, "run_modes", Some("seven"))).await;
    assert_eq!(status, 400, "{body}");
    assert!(body.contains("Last-Event-ID"), "{body}");
    let (status, body) = send(join(&base, "no-such-thread", "run_modes", None)).await;
    assert_eq!(status, 404, "{body}");
}
