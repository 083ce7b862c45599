//! The OpenAI-compatible client against a real HTTP server on 127.0.0.1 that each test starts,
//! answering from a script: successes, slow answers, 429 with Retry-After, 500s, 400s, malformed
//! JSON, dropped connections, and a concurrency limit.

use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Json, Router};
use planwright_actors::model::{
    ask, ChatMessage, ChatModel, ChatRequest, ModelError, OpenAiConfig, OpenAiModel,
};
use serde_json::{json, Value};
use std::collections::VecDeque;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// One scripted server answer.
#[derive(Clone)]
enum Answer {
    Ok(&'static str),
    Status(u16, Option<&'static str>),
    Slow(Duration),
    Drop,
}

#[derive(Default)]
struct Server {
    script: Mutex<VecDeque<Answer>>,
    requests: Mutex<Vec<Value>>,
    in_flight: AtomicUsize,
    max_in_flight: AtomicUsize,
}

fn completion(content: &str) -> Value {
    json!({
        "choices": [{"message": {"role": "assistant", "content": content}}],
        "usage": {"prompt_tokens": 11, "completion_tokens": 5}
    })
}

async fn handle(
    State(s): State<Arc<Server>>,
    headers: HeaderMap,
    Json(body): Json<Value>,
) -> Response {
    s.requests.lock().unwrap().push(json!({
        "body": body,
        "auth": headers.get("authorization").and_then(|v| v.to_str().ok()),
        "key": headers.get("idempotency-key").and_then(|v| v.to_str().ok()),
    }));
    let now = s.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
    s.max_in_flight.fetch_max(now, Ordering::SeqCst);
    let next = s
        .script
        .lock()
        .unwrap()
        .pop_front()
        .unwrap_or(Answer::Ok("{\"answer\": 0}"));
    let resp = match next {
        Answer::Ok(content) => Json(completion(content)).into_response(),
        Answer::Slow(d) => {
            tokio::time::sleep(d).await;
            Json(completion("{\"answer\": 1}")).into_response()
        }
        Answer::Status(code, retry_after) => {
            let mut r = (
                StatusCode::from_u16(code).unwrap(),
                format!("status {code}"),
            )
                .into_response();
            if let Some(ra) = retry_after {
                r.headers_mut().insert("retry-after", ra.parse().unwrap());
            }
            r
        }
        Answer::Drop => {
            s.in_flight.fetch_sub(1, Ordering::SeqCst);
            // Abort the connection without an HTTP answer.
            panic!("dropping the connection on purpose");
        }
    };
    s.in_flight.fetch_sub(1, Ordering::SeqCst);
    resp
}

async fn start(script: Vec<Answer>) -> (Arc<Server>, String) {
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
    (server, format!("http://{addr}/v1"))
}

fn model(base: &str) -> OpenAiModel {
    let mut cfg = OpenAiConfig::new(base, "test-model");
    cfg.api_key = Some("sk-test".into());
    cfg.timeout = Duration::from_millis(300);
    cfg.initial_backoff = Duration::from_millis(5);
    cfg.max_retries = 3;
    OpenAiModel::new(cfg).unwrap()
}

fn request() -> ChatRequest {
    ChatRequest {
        call: "decide".into(),
        messages: vec![
            ChatMessage::system("You decide."),
            ChatMessage::user("What next?"),
        ],
        schema: std::sync::Arc::new(
            json!({"type": "object", "required": ["answer"], "additionalProperties": false,
                        "properties": {"answer": {"type": "integer"}}}),
        ),
        input: "{}".into(),
        typed: None,
        idempotency_key: None,
    }
}

#[derive(serde::Deserialize, Debug, PartialEq)]
struct Answerish {
    answer: i64,
}

#[tokio::test]
async fn a_structured_answer_with_usage_and_the_request_shape() {
    let (server, base) = start(vec![Answer::Ok("{\"answer\": 42}")]).await;
    let (v, usage): (Answerish, _) = ask(&model(&base), request()).await.unwrap();
    assert_eq!(v, Answerish { answer: 42 });
    assert_eq!((usage.prompt_tokens, usage.completion_tokens), (11, 5));
    let sent = server.requests.lock().unwrap()[0].clone();
    assert_eq!(sent["auth"], "Bearer sk-test");
    assert_eq!(sent["body"]["model"], "test-model");
    assert_eq!(sent["body"]["messages"][1]["role"], "user");
    assert_eq!(sent["body"]["response_format"]["type"], "json_schema");
    assert_eq!(
        sent["body"]["response_format"]["json_schema"]["strict"],
        true
    );
    assert_eq!(
        sent["body"]["response_format"]["json_schema"]["name"],
        "decide"
    );
}

#[tokio::test]
async fn a_slow_answer_times_out_then_the_retry_succeeds() {
    let (server, base) = start(vec![
        Answer::Slow(Duration::from_secs(5)),
        Answer::Ok("{\"answer\": 2}"),
    ])
    .await;
    let reply = model(&base).chat(&request()).await.unwrap();
    assert_eq!(reply.content, "{\"answer\": 2}");
    assert_eq!(server.requests.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn rate_limits_honour_retry_after_and_500s_are_retried() {
    let (server, base) = start(vec![
        Answer::Status(429, Some("0")),
        Answer::Status(500, None),
        Answer::Status(503, None),
        Answer::Ok("{\"answer\": 3}"),
    ])
    .await;
    let reply = model(&base).chat(&request()).await.unwrap();
    assert_eq!(reply.content, "{\"answer\": 3}");
    assert_eq!(server.requests.lock().unwrap().len(), 4);
}

#[tokio::test]
async fn server_errors_that_persist_surface_after_the_retries() {
    let (server, base) = start(vec![Answer::Status(500, None); 6]).await;
    let err = model(&base).chat(&request()).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Server { status: 500, .. }),
        "{err}"
    );
    assert_eq!(
        server.requests.lock().unwrap().len(),
        4,
        "first attempt + 3 retries"
    );
}

#[tokio::test]
async fn a_4xx_is_not_retried() {
    let (server, base) = start(vec![
        Answer::Status(400, None),
        Answer::Ok("{\"answer\": 1}"),
    ])
    .await;
    let err = model(&base).chat(&request()).await.unwrap_err();
    assert!(
        matches!(err, ModelError::Server { status: 400, .. }),
        "{err}"
    );
    assert!(!err.is_transient());
    assert_eq!(server.requests.lock().unwrap().len(), 1);
}

#[tokio::test]
async fn malformed_output_is_fed_back_once_then_fails_typed() {
    let (server, base) = start(vec![Answer::Ok("not json"), Answer::Ok("{\"answer\": 7}")]).await;
    let (v, _): (Answerish, _) = ask(&model(&base), request()).await.unwrap();
    assert_eq!(v.answer, 7);
    let second = server.requests.lock().unwrap()[1].clone();
    let msgs = second["body"]["messages"].as_array().unwrap();
    assert_eq!(
        msgs[2]["content"], "not json",
        "the bad answer is shown back"
    );
    assert!(
        msgs[3]["content"].as_str().unwrap().contains("not JSON"),
        "{msgs:?}"
    );

    let (_, base) = start(vec![
        Answer::Ok("{\"answer\": \"x\"}"),
        Answer::Ok("{\"wrong\": 1}"),
    ])
    .await;
    let err = ask::<Answerish>(&model(&base), request())
        .await
        .unwrap_err();
    match err {
        ModelError::Malformed { call, detail } => {
            assert_eq!(call, "decide");
            assert!(
                detail.contains("missing required property `answer`"),
                "{detail}"
            );
        }
        other => panic!("expected Malformed, got {other}"),
    }
}

#[tokio::test]
async fn a_dropped_connection_is_retried() {
    let (server, base) = start(vec![Answer::Drop, Answer::Ok("{\"answer\": 5}")]).await;
    let reply = model(&base).chat(&request()).await.unwrap();
    assert_eq!(reply.content, "{\"answer\": 5}");
    assert_eq!(server.requests.lock().unwrap().len(), 2);
}

#[tokio::test]
async fn an_unreachable_server_is_a_transport_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let mut cfg = OpenAiConfig::new(format!("http://{addr}/v1"), "m");
    cfg.max_retries = 1;
    cfg.initial_backoff = Duration::from_millis(1);
    let err = OpenAiModel::new(cfg)
        .unwrap()
        .chat(&request())
        .await
        .unwrap_err();
    assert!(matches!(err, ModelError::Transport(_)), "{err}");
}

#[tokio::test]
async fn the_concurrency_limit_holds() {
    let (server, base) = start(vec![Answer::Slow(Duration::from_millis(40)); 8]).await;
    let mut cfg = OpenAiConfig::new(&base, "m");
    cfg.max_concurrency = 2;
    let m = Arc::new(OpenAiModel::new(cfg).unwrap());
    let calls = (0..8).map(|_| {
        let m = m.clone();
        tokio::spawn(async move { m.chat(&request()).await })
    });
    for r in futures::future::join_all(calls).await {
        r.unwrap().unwrap();
    }
    assert_eq!(server.max_in_flight.load(Ordering::SeqCst), 2);
}

#[test]
fn configuration_errors_are_clear() {
    let err = OpenAiModel::new(OpenAiConfig::new("localhost:8000", "m"))
        .err()
        .unwrap();
    assert!(err.to_string().contains("not an http(s) URL"), "{err}");
}

/// A call's idempotency key goes as `Idempotency-Key` on every retry of the call; a call
/// without one sends none.
#[tokio::test]
async fn the_idempotency_key_goes_on_every_retry() {
    let (server, base) = start(vec![
        Answer::Status(503, None),
        Answer::Ok("{\"answer\": 1}"),
    ])
    .await;
    let mut req = request();
    req.idempotency_key = Some("0123456789abcdef0123456789abcdef".into());
    model(&base).chat(&req).await.unwrap();
    let keys: Vec<Value> = server
        .requests
        .lock()
        .unwrap()
        .iter()
        .map(|r| r["key"].clone())
        .collect();
    assert_eq!(
        keys,
        [
            json!("0123456789abcdef0123456789abcdef"),
            json!("0123456789abcdef0123456789abcdef")
        ]
    );
    model(&base).chat(&request()).await.unwrap();
    assert_eq!(server.requests.lock().unwrap()[2]["key"], Value::Null);
}

/// Inside a node (`model::journaled`), a model call is a journaled effect: its key goes to the
/// server, and the task's retry gets the journaled reply without a second request; the repair
/// call after a malformed answer is a call of its own, with a key of its own.
#[tokio::test]
async fn a_journaled_call_is_not_sent_again_when_its_task_is_retried() {
    use planwright::graph::{StateGraph, END, START};
    use planwright::{Engine, NodeContext, NodeError, NodeOptions, RetryPolicy, RunOptions};
    let (server, base) = start(vec![Answer::Ok("not json"), Answer::Ok("{\"answer\": 7}")]).await;
    let model = Arc::new(model(&base));
    let graph = StateGraph::<Asked>::new("asks")
        .add_node("ask", move |_s: Arc<Asked>, ctx: NodeContext| {
            let model = model.clone();
            async move {
                let (v, _): (Answerish, _) =
                    planwright_actors::model::journaled(&ctx, ask(&*model, request()))
                        .await
                        .map_err(NodeError::retryable)?;
                if ctx.attempt() == 1 {
                    return Err(NodeError::Retryable(
                        "the node failed after its call".into(),
                    ));
                }
                Ok(AskedUpdate::default().answer(v.answer))
            }
        })
        .node_options(
            "ask",
            NodeOptions::default().retry(RetryPolicy::exponential(2, Duration::ZERO)),
        )
        .add_edge(START, "ask")
        .add_edge("ask", END);
    let engine = Engine::builder(graph.compile().unwrap())
        .checkpointer(Arc::new(planwright::checkpoint::MemoryCheckpointer::new()))
        .build()
        .await;
    let out = engine
        .run("asks".into(), AskedUpdate::default(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.state.answer, 7);
    let requests = server.requests.lock().unwrap().clone();
    assert_eq!(
        requests.len(),
        2,
        "the first answer and its repair, once each"
    );
    let keys: Vec<&str> = requests
        .iter()
        .map(|r| r["key"].as_str().unwrap())
        .collect();
    assert!(keys.iter().all(|k| k.len() == 32), "{keys:?}");
    assert_ne!(keys[0], keys[1], "the repair is a call of its own");
}

planwright::state! {
    /// What the journaled test's node answers.
    pub struct Asked => AskedUpdate {
        replace answer: i64,
    }
}
