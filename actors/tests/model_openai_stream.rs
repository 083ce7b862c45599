//! The OpenAI-compatible client streaming an answer from a real HTTP server on 127.0.0.1: the
//! server-sent events arrive in pieces (with pauses between them), each content delta reaches the
//! caller in order, usage comes from the last event, a failure before the first chunk is retried
//! and one after it is not.

use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use planwright_actors::model::{
    ChatMessage, ChatModel, ChatRequest, ModelError, OpenAiConfig, OpenAiModel, Usage,
};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Duration;

#[derive(Clone)]
enum Answer {
    /// These content deltas, then usage and `[DONE]`.
    Stream(Vec<&'static str>),
    /// These deltas, then the connection ends without `[DONE]`.
    Cut(Vec<&'static str>),
    Status(u16),
}

#[derive(Default)]
struct Server {
    script: Mutex<VecDeque<Answer>>,
    bodies: Mutex<Vec<Value>>,
    /// The `Idempotency-Key` of each request (`None`: no header).
    keys: Mutex<Vec<Option<String>>>,
}

fn delta(c: &str) -> String {
    format!(
        "data: {}\n\n",
        json!({"choices": [{"delta": {"content": c}}]})
    )
}

async fn handle(
    State(s): State<Arc<Server>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    s.bodies.lock().unwrap().push(body);
    s.keys.lock().unwrap().push(
        headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .map(String::from),
    );
    let next = s
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Answer::Status(500));
    let (pieces, done) = match next {
        Answer::Status(code) => {
            return (StatusCode::from_u16(code).unwrap(), "scripted failure").into_response()
        }
        Answer::Stream(p) => (p, true),
        Answer::Cut(p) => (p, false),
    };
    let mut events: Vec<String> = pieces.iter().map(|p| delta(p)).collect();
    if done {
        events.push(format!(
            "data: {}\n\n",
            json!({"choices": [], "usage": {"prompt_tokens": 12, "completion_tokens": 6}})
        ));
        events.push("data: [DONE]\n\n".into());
    }
    let stream = futures::stream::iter(events).then(|e| async move {
        tokio::time::sleep(Duration::from_millis(2)).await;
        Ok::<_, std::io::Error>(e)
    });
    Response::builder()
        .header("content-type", "text/event-stream")
        .body(Body::from_stream(stream))
        .unwrap()
}

use futures::StreamExt;

async fn start(script: Vec<Answer>) -> (Arc<Server>, OpenAiModel) {
    let server = Arc::new(Server {
        script: Mutex::new(script.into()),
        ..Server::default()
    });
    let app = Router::new()
        .route("/v1/chat/completions", post(handle))
        .with_state(server.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let mut cfg = OpenAiConfig::new(format!("http://{addr}/v1"), "test-model");
    cfg.timeout = Duration::from_secs(5);
    cfg.initial_backoff = Duration::from_millis(5);
    cfg.max_retries = 2;
    (server, OpenAiModel::new(cfg).unwrap())
}

fn request() -> ChatRequest {
    ChatRequest {
        call: "write".into(),
        messages: vec![ChatMessage::user("Write.")],
        schema: std::sync::Arc::new(json!({"type": "object"})),
        input: "{}".into(),
        typed: None,
        idempotency_key: None,
    }
}

async fn stream(
    model: &OpenAiModel,
) -> (
    Result<planwright_actors::model::ChatReply, ModelError>,
    Vec<String>,
) {
    let chunks = Mutex::new(Vec::new());
    let on_chunk = |c: &str| chunks.lock().unwrap().push(c.to_string());
    let r = model.chat_streaming(&request(), &on_chunk).await;
    (r, chunks.into_inner().unwrap())
}

#[tokio::test]
async fn deltas_reach_the_caller_in_order_and_make_the_reply() {
    let (server, model) = start(vec![Answer::Stream(vec![
        "{\"line\": ",
        "\"hello ",
        "world\"}",
    ])])
    .await;
    let (reply, chunks) = stream(&model).await;
    let reply = reply.unwrap();
    assert_eq!(chunks, ["{\"line\": ", "\"hello ", "world\"}"]);
    assert_eq!(reply.content, "{\"line\": \"hello world\"}");
    assert_eq!(
        reply.usage,
        Usage {
            prompt_tokens: 12,
            completion_tokens: 6
        }
    );
    let body = server.bodies.lock().unwrap()[0].clone();
    assert_eq!(body["stream"], true);
    assert_eq!(body["stream_options"]["include_usage"], true);
    assert_eq!(body["model"], "test-model");
}

#[tokio::test]
async fn a_failure_before_the_first_chunk_is_retried() {
    let (server, model) = start(vec![Answer::Status(503), Answer::Stream(vec!["ok"])]).await;
    let (reply, chunks) = stream(&model).await;
    assert_eq!(reply.unwrap().content, "ok");
    assert_eq!(chunks, ["ok"]);
    assert_eq!(server.bodies.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn a_stream_cut_after_a_chunk_fails_without_a_retry() {
    let (server, model) = start(vec![
        Answer::Cut(vec!["par", "tial"]),
        Answer::Stream(vec!["never"]),
    ])
    .await;
    let (reply, chunks) = stream(&model).await;
    let err = reply.unwrap_err();
    assert!(err.to_string().contains("[DONE]"), "{err}");
    assert_eq!(chunks, ["par", "tial"], "the caller saw the start once");
    assert_eq!(
        server.bodies.lock().unwrap().len(),
        1,
        "no retry after a chunk"
    );
}

#[tokio::test]
async fn a_client_error_is_not_retried() {
    let (server, model) = start(vec![Answer::Status(400)]).await;
    let (reply, chunks) = stream(&model).await;
    assert!(matches!(
        reply.unwrap_err(),
        ModelError::Server { status: 400, .. }
    ));
    assert!(chunks.is_empty());
    assert_eq!(server.bodies.lock().unwrap().len(), 1);
}

/// A call's idempotency key goes as `Idempotency-Key` on every attempt of the streamed call (a
/// failure before the first chunk is retried with the same key); a call without one sends none.
#[tokio::test]
async fn the_idempotency_key_goes_on_every_attempt() {
    let (server, model) = start(vec![Answer::Status(503), Answer::Stream(vec!["{}"])]).await;
    let mut req = request();
    req.idempotency_key = Some("0123456789abcdef0123456789abcdef".into());
    let on_chunk = |_: &str| {};
    model.chat_streaming(&req, &on_chunk).await.unwrap();
    let key = Some("0123456789abcdef0123456789abcdef".to_string());
    assert_eq!(*server.keys.lock().unwrap(), [key.clone(), key]);
    let (server, model) = start(vec![Answer::Stream(vec!["{}"])]).await;
    let (reply, _) = stream(&model).await;
    reply.unwrap();
    assert_eq!(*server.keys.lock().unwrap(), [None]);
}
