//! Model tokens in the `messages` stream modes, on the real server (`planwright serve`, SQLite,
//! the simulated model `sim:`): a research run that pauses for approval streams its planner's
//! answer (`create_plan`) as token chunks — under `messages-tuple` as `messages` events
//! `[AIMessageChunk, metadata]`, under `messages` as `messages/metadata`, `messages/partial` with
//! the message so far, then `messages/complete` — and the chunks add up to the plan the model
//! answered. The offline policy calls no model, so it streams no tokens.

mod serve_support;

use serde_json::{json, Value};
use serve_support::{call, serve_on, SseEvent, SseReader};

const GOAL: &str = "Should our support team adopt retrieval-augmented generation?";

async fn server(name: &str, model: &str) -> (serve_support::Server, String) {
    let file = serve_support::fresh_dir(name).join("s.sqlite");
    serve_on(&format!("sqlite:{}", file.display()), model, &[]).await
}

/// The events of one research run (paused for approval after `create_plan`) streamed with `mode`.
async fn stream(base: &str, mode: &str) -> Vec<SseEvent> {
    let (s, t) = call("POST", &format!("{base}/threads"), Some(json!({}))).await;
    assert_eq!(s, 200, "{t}");
    let thread = t["thread_id"].as_str().unwrap();
    let body = json!({"assistant_id": "research", "stream_mode": [mode],
        "input": {"input": GOAL, "constraints": {"max_steps": 4, "require_approval": true}}});
    let req = reqwest::Client::new()
        .post(format!("{base}/threads/{thread}/runs/stream"))
        .json(&body);
    SseReader::open(req).await.rest().await
}

fn named<'a>(events: &'a [SseEvent], name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e.event == name)
        .map(|e| &e.data)
        .collect()
}

/// The plan steps of a `create_plan` answer.
fn steps(answer: &str) -> usize {
    let plan: Value = serde_json::from_str(answer).unwrap_or_else(|e| panic!("{e}: {answer}"));
    plan["steps"].as_array().map_or(0, Vec::len)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_tuple_streams_the_planners_tokens_as_chunks() {
    let (_server, base) = server("messages-tuple", "sim:p50=20ms,p99=40ms,seed=3").await;
    let events = stream(&base, "messages-tuple").await;
    assert_eq!(events[0].event, "metadata");
    let chunks = named(&events, "messages");
    assert!(chunks.len() >= 5, "few chunks: {events:?}");
    let mut answer = String::new();
    for c in &chunks {
        let (msg, meta) = (&c[0], &c[1]);
        assert_eq!(msg["type"], "AIMessageChunk", "{c}");
        assert_eq!(msg["id"], chunks[0][0]["id"], "one message: {c}");
        assert_eq!(meta["langgraph_node"], "create_plan", "{c}");
        assert!(meta["langgraph_step"].is_u64() && meta["langgraph_task"].is_string());
        answer.push_str(msg["content"].as_str().unwrap());
    }
    assert!(chunks[0][0]["id"]
        .as_str()
        .unwrap()
        .starts_with("create_plan-"));
    assert!(steps(&answer) >= 2, "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_streams_partials_then_the_complete_message() {
    let (_server, base) = server("messages-full", "sim:p50=20ms,p99=40ms,seed=4").await;
    let events = stream(&base, "messages").await;
    let names: Vec<&str> = events
        .iter()
        .map(|e| e.event.as_str())
        .filter(|n| n.starts_with("messages/"))
        .collect();
    assert_eq!(names.first(), Some(&"messages/metadata"), "{names:?}");
    assert_eq!(names.last(), Some(&"messages/complete"), "{names:?}");
    let partials = named(&events, "messages/partial");
    assert!(partials.len() >= 5, "few partials: {names:?}");
    // Each partial is the message so far: it grows, and ends as the complete message.
    let mut last = String::new();
    for p in &partials {
        let content = p[0]["content"].as_str().unwrap();
        assert!(content.starts_with(&last) && content.len() > last.len());
        last = content.to_string();
    }
    let complete = named(&events, "messages/complete");
    assert_eq!(complete.len(), 1, "{names:?}");
    assert_eq!(complete[0][0]["content"], last.as_str());
    let id = complete[0][0]["id"].as_str().unwrap();
    let meta = named(&events, "messages/metadata");
    assert_eq!(meta[0][id]["metadata"]["langgraph_node"], "create_plan");
    assert!(steps(&last) >= 2, "{last}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_offline_policy_streams_no_tokens() {
    let (_server, base) = server("messages-offline", "offline").await;
    let events = stream(&base, "messages-tuple").await;
    assert!(named(&events, "messages").is_empty(), "{events:?}");
    assert_eq!(events[0].event, "metadata");
}
