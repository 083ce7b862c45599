//! `load --assistant` against a minimal Agent Server API written here (no Python, no Planwright
//! server): it refuses thread ids that are not UUIDs (as LangGraph does) and requests without its
//! API key, streams each run as server-sent events (three tokens), pauses every conversation's
//! first run at a `review` node and has no `/metrics`. What the server received shows the template
//! filled from the data rows in turn and the answer rule's resume value; the report shows the
//! streaming figures and no server-side ones; waited runs (`runs/wait`) only their end-to-end time.

use axum::extract::{Path, State};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use planwright_actors::load::{self, LoadArgs};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

#[derive(Default)]
struct Server {
    /// Thread id → paused at `review`.
    paused: HashMap<String, bool>,
    /// Every run's body, in order.
    runs: Vec<Value>,
}

type Shared = Arc<Mutex<Server>>;

const KEY: &str = "sekrit";

fn refused(h: &HeaderMap) -> Option<Response> {
    (h.get("x-api-key").and_then(|v| v.to_str().ok()) != Some(KEY))
        .then(|| (StatusCode::UNAUTHORIZED, Json(json!({"detail": "no key"}))).into_response())
}

fn is_uuid(s: &str) -> bool {
    s.len() == 36
        && s.char_indices().all(|(i, c)| {
            if [8, 13, 18, 23].contains(&i) {
                c == '-'
            } else {
                c.is_ascii_hexdigit()
            }
        })
}

async fn create(State(s): State<Shared>, h: HeaderMap, Json(body): Json<Value>) -> Response {
    if let Some(r) = refused(&h) {
        return r;
    }
    let id = body["thread_id"].as_str().unwrap_or_default().to_string();
    if !is_uuid(&id) {
        let detail = json!({"detail": "Invalid thread ID: must be a UUID"});
        return (StatusCode::UNPROCESSABLE_ENTITY, Json(detail)).into_response();
    }
    s.lock().unwrap().paused.insert(id.clone(), false);
    Json(json!({"thread_id": id})).into_response()
}

async fn stream(
    State(s): State<Shared>,
    h: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = refused(&h) {
        return r;
    }
    {
        let mut s = s.lock().unwrap();
        let first = body.get("command").is_none();
        s.paused.insert(id, first);
        s.runs.push(body);
    }
    let mut sse = String::from("event: metadata\ndata: {\"run_id\": \"r\"}\n\n");
    sse.push_str("event: values\ndata: {}\n\n");
    for t in ["Hello", " there", "!"] {
        sse.push_str(&format!(
            "event: messages\ndata: [{{\"content\": \"{t}\"}}, {{}}]\n\n"
        ));
    }
    sse.push_str("event: updates\ndata: {}\n\n");
    ([("content-type", "text/event-stream")], sse).into_response()
}

async fn wait(
    State(s): State<Shared>,
    h: HeaderMap,
    Path(id): Path<String>,
    Json(body): Json<Value>,
) -> Response {
    if let Some(r) = refused(&h) {
        return r;
    }
    let mut s = s.lock().unwrap();
    let first = body.get("command").is_none();
    s.paused.insert(id, first);
    s.runs.push(body);
    Json(json!({})).into_response()
}

async fn state(State(s): State<Shared>, h: HeaderMap, Path(id): Path<String>) -> Response {
    if let Some(r) = refused(&h) {
        return r;
    }
    let paused = s.lock().unwrap().paused.get(&id).copied().unwrap_or(false);
    let tasks = if paused {
        json!([{"name": "review", "interrupts": [{"id": "i1", "value": {"type": "approval", "q": "ok?"}}]}])
    } else {
        json!([])
    };
    Json(json!({"values": {}, "tasks": tasks})).into_response()
}

async fn start() -> (String, Shared) {
    let shared = Shared::default();
    let app = Router::new()
        .route("/threads", post(create))
        .route("/threads/{id}/runs/stream", post(stream))
        .route("/threads/{id}/runs/wait", post(wait))
        .route("/threads/{id}/state", get(state))
        .with_state(shared.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    (base, shared)
}

fn files() -> (std::path::PathBuf, std::path::PathBuf, std::path::PathBuf) {
    let dir = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("load-agent-api-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (input, data, answers) = (
        dir.join("in.json"),
        dir.join("rows.jsonl"),
        dir.join("a.json"),
    );
    std::fs::write(
        &input,
        r##"{"topic": "{{topic}}", "n": "{{n}}", "note": "#{{conversation}}"}"##,
    )
    .unwrap();
    std::fs::write(&data, "{\"topic\": \"tea\", \"n\": 1, \"who\": \"ann\"}\n{\"topic\": \"rust\", \"n\": 2, \"who\": \"bo\"}\n").unwrap();
    std::fs::write(
        &answers,
        r#"{"rules": [{"node": "review", "when": {"type": "approval"}, "resume": {"action": "approve", "by": "{{who}}"}}]}"#,
    )
    .unwrap();
    (input, data, answers)
}

fn args(base: &str, key: &str) -> LoadArgs {
    let (input, data, answers) = files();
    LoadArgs {
        target: vec![base.to_string()],
        assistant: Some("chat".into()),
        input: Some(input),
        data: Some(data),
        answers: Some(answers),
        stream_mode: Some("values,messages-tuple,updates".into()),
        api_key: Some(key.into()),
        conversations: Some(6),
        concurrency: Some(3),
        quiet: true,
        ..LoadArgs::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_agent_server_gets_uuids_filled_templates_and_scripted_answers() {
    let (base, server) = start().await;
    let r = load::run(&args(&base, KEY)).await.unwrap();
    assert_eq!((r.started, r.completed), (6, 6), "{:?}", r.errors);
    assert_eq!(r.resumes, 6);
    assert_eq!(
        r.node_executions, 0,
        "no /metrics: no server-side figures, no error"
    );
    assert!(r.series.iter().all(|s| s.server_rss_kb.is_none()));
    let st = r.stream.as_ref().unwrap();
    assert_eq!((st.runs, st.streamed_runs), (12, 12));
    assert_eq!((st.tokens, st.events), (36, 60), "metadata is not counted");
    assert_eq!(
        (st.ttft_ms.count, st.itl_ms.count, st.event_gap_ms.count),
        (12, 24, 48)
    );
    assert_eq!(st.conversation_ttft_ms.count, 6);
    assert!(st.ttfe_ms.p50 <= st.ttft_ms.p50 && st.ttft_ms.max <= st.run_ms.max * 1.001);
    let runs = server.lock().unwrap().runs.clone();
    let inputs: Vec<(String, Value, String)> = runs
        .iter()
        .filter(|b| b.get("input").is_some())
        .map(|b| {
            let i = &b["input"];
            (
                i["note"].as_str().unwrap().to_string(),
                i["n"].clone(),
                i["topic"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(inputs.len(), 6);
    for (note, n, topic) in &inputs {
        let k: usize = note.trim_start_matches('#').parse().unwrap();
        let (want_topic, want_n) = if k % 2 == 0 { ("tea", 1) } else { ("rust", 2) };
        assert_eq!(
            (topic.as_str(), n),
            (want_topic, &json!(want_n)),
            "row {k} mod 2, JSON types kept"
        );
    }
    let resumes: Vec<&Value> = runs.iter().filter_map(|b| b.get("command")).collect();
    assert_eq!(resumes.len(), 6);
    assert!(resumes.iter().all(|c| c["resume"]["action"] == "approve"));
    assert_eq!(
        resumes
            .iter()
            .filter(|c| c["resume"]["by"] == "ann")
            .count(),
        3,
        "the answer's placeholder filled from the conversation's row"
    );
    assert!(runs
        .iter()
        .all(|b| b["assistant_id"] == "chat" && b["stream_mode"][1] == "messages-tuple"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wrong_api_key_fails_every_conversation_with_the_status() {
    let (base, _server) = start().await;
    let r = load::run(&args(&base, "wrong")).await.unwrap();
    assert_eq!((r.started, r.failed), (6, 6));
    let why: Vec<&String> = r.errors.keys().collect();
    assert!(why.iter().all(|e| e.contains("HTTP 401")), "{why:?}");
    assert!(r.stream.is_none(), "no run started");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waited_runs_have_an_end_to_end_time_and_no_streaming_figures() {
    let (base, server) = start().await;
    let a = LoadArgs {
        stream_mode: Some("wait".into()),
        thresholds: vec!["run_p99<1h".into(), "ttft_p99<1h".into()],
        ..args(&base, KEY)
    };
    let r = load::run(&a).await.unwrap();
    assert_eq!((r.completed, r.resumes), (6, 6), "{:?}", r.errors);
    let st = r.stream.as_ref().unwrap();
    assert_eq!((st.runs, st.streamed_runs, st.tokens), (12, 0, 0));
    assert_eq!((st.run_ms.count, st.ttfe_ms.count), (12, 0));
    assert!(r.thresholds[0].passed);
    let ttft = &r.thresholds[1];
    assert!(!ttft.passed && ttft.value.is_none(), "not measured: fails");
    let runs = server.lock().unwrap().runs.clone();
    assert!(runs.iter().all(|b| b.get("stream_mode").is_none()));
}
