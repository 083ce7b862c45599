//! `POST /threads/{thread_id}/commands`: one protocol command in, its answer out, as the JS SDK's
//! `ThreadStream` and Python's `AsyncThreadStream` send them. A command is `{"id", "method",
//! "params"}`; the answer is `{"type": "success", "id", "result", "meta"}` or `{"type": "error",
//! "id", "error", "message"}` (HTTP 200 both: the error codes are the protocol's,
//! `invalid_argument`, `no_such_run`, `no_such_checkpoint`, `not_supported`, …).
//!
//! - `run.start` `{assistant_id, input, config?, metadata?, multitask_strategy?}` starts a run
//!   the way `POST /threads/{thread_id}/runs` does, its events kept whole in the run event log
//!   (`stream_resumable`) for [`super::events`]; the thread is created when it does not exist
//!   (the SDKs name a new thread themselves). On a thread waiting for an answer, the input is the
//!   answer (a resume), as LangGraph's servers take it — by id when one question waits, so the
//!   run announces it answered (`input.answered`). Result `{run_id}`; `meta.applied_through_seq`
//!   is the last event `seq` before the run's, so a stream opened with it as `since` gets the run
//!   whole and nothing older.
//! - `input.respond` `{namespace, interrupt_id, response, update?, goto?}` (or `{responses:
//!   [{namespace, interrupt_id, response}, …]}`) resumes the paused thread with one run whose
//!   `command.resume` maps each interrupt id to its response, as langgraph-api merges them; the
//!   run's events start with `input.answered` naming those ids. Result `{}`.
//! - `input.inject` `{namespace: [], message: {role: "user" | "system", content, name?}}`: the
//!   message goes to the thread's graph as the input of a run queued after the active one
//!   (`{"messages": [message]}`, multitask `enqueue`), LangGraph's way of taking input while a
//!   run is busy; a graph without a `messages` key refuses it (`invalid_argument`, naming the
//!   key). Result `{}`, `meta.applied_through_seq` before the run's events.
//! - `state.get` `{namespace: [], keys?}`: `{values, checkpoint: {id}}`.
//! - `state.listCheckpoints` `{limit?, before?}`: `{checkpoints: [{id, timestamp, step,
//!   node_name?, metadata}]}`, newest first.
//! - `state.fork` `{checkpoint_id, input?, config?}`: a run from that checkpoint (time travel);
//!   `{run_id, thread_id}`.
//! - `agent.getTree`: the root graph and the status of the thread's newest run.
//!
//! `subscription.*` belong to the WebSocket transport ([`super::socket`], which answers every
//! other command through [`answer`], this endpoint's own path): over HTTP they are refused, as
//! the SSE transport subscribes by opening `POST /threads/{thread_id}/stream/events`.

use super::super::errors::ApiError;
use super::super::run_body::RunBody;
use super::super::thread_records::existing;
use super::super::{assistants, AppState};
use super::events::run_base;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use planwright::ids::InterruptId;
use planwright::runs::RunRecord;
use serde_json::{json, Map, Value};
use std::sync::Arc;

/// The stream modes a protocol run publishes: what the protocol's channels are made of.
const STREAM_MODES: [&str; 6] = [
    "values",
    "updates",
    "messages-tuple",
    "custom",
    "tasks",
    "checkpoints",
];

/// A command that failed: the protocol's error code and a message for the client.
struct Failure {
    code: &'static str,
    message: String,
}

impl Failure {
    fn new(code: &'static str, message: impl Into<String>) -> Self {
        Self {
            code,
            message: message.into(),
        }
    }
}

impl From<ApiError> for Failure {
    /// The API's answer to the same request, as the protocol's code.
    fn from(e: ApiError) -> Self {
        let code = match e.0 {
            StatusCode::NOT_FOUND => "no_such_run",
            StatusCode::FORBIDDEN | StatusCode::UNAUTHORIZED => "permission_denied",
            s if s.is_client_error() => "invalid_argument",
            _ => "unknown_error",
        };
        // A 500's cause goes to the log with an id; the client gets the id.
        let message = if e.0.is_server_error() {
            let r = e.into_response();
            format!("the server failed ({})", r.status())
        } else {
            e.1
        };
        Self::new(code, message)
    }
}

/// What a command answers: its result and, when it started a run, the last `seq` before it.
type Answer = Result<(Value, Option<u64>), Failure>;

/// The endpoint.
pub async fn command(
    State(state): State<Arc<AppState>>,
    Path(thread_id): Path<String>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(cmd) = body?;
    Ok(match answer(&state, &thread_id, &cmd).await {
        Ok(out) => Json(out).into_response(),
        Err(malformed) => (StatusCode::BAD_REQUEST, Json(malformed)).into_response(),
    })
}

/// A command's envelope: its `id`, `method` and `params` (an object; `{}` when absent).
pub struct Envelope<'c> {
    /// The client's id for the command, repeated in its answer.
    pub id: u64,
    /// What it asks.
    pub method: &'c str,
    /// Its arguments.
    pub params: Value,
}

/// Reads a command's envelope: `Err` is the frame to answer with — for a command without a
/// usable `id` or `method`, `Err((None, frame))` (HTTP answers it with a 400), for bad `params`
/// `Err((Some(id), frame))`.
pub fn envelope(cmd: &Value) -> Result<Envelope<'_>, (Option<u64>, Value)> {
    let (Some(id), Some(method)) = (cmd["id"].as_u64(), cmd["method"].as_str()) else {
        let f = Failure::new(
            "invalid_argument",
            "a protocol command is {\"id\": a non-negative integer, \"method\": a string, \"params\"}",
        );
        return Err((None, error(cmd["id"].as_u64(), f)));
    };
    let params = match cmd.get("params") {
        None | Some(Value::Null) => json!({}),
        Some(p @ Value::Object(_)) => p.clone(),
        Some(_) => {
            let f = Failure::new("invalid_argument", "`params` must be an object");
            return Err((Some(id), error(Some(id), f)));
        }
    };
    Ok(Envelope { id, method, params })
}

/// The answer frame to one command on `thread_id`, whichever transport brought it; `Err` only
/// for a command without a usable `id` or `method` (which HTTP answers with a 400).
pub async fn answer(state: &Arc<AppState>, thread_id: &str, cmd: &Value) -> Result<Value, Value> {
    let Envelope { id, method, params } = match envelope(cmd) {
        Ok(e) => e,
        Err((None, frame)) => return Err(frame),
        Err((Some(_), frame)) => return Ok(frame),
    };
    let answer = match method {
        "run.start" => run_start(state, thread_id, &params).await,
        "input.respond" => input_respond(state, thread_id, &params).await,
        "state.get" => state_get(state, thread_id, &params).await,
        "state.listCheckpoints" => list_checkpoints(state, thread_id, &params).await,
        "state.fork" => fork(state, thread_id, &params).await,
        "agent.getTree" => tree(state, thread_id).await,
        "subscription.subscribe" | "subscription.unsubscribe" | "subscription.reconnect" => {
            Err(Failure::new(
                "not_supported",
                format!(
                    "`{method}` belongs to the WebSocket transport (GET \
                     /threads/{thread_id}/stream/events as a WebSocket); over HTTP, subscribe \
                     with POST /threads/{thread_id}/stream/events"
                ),
            ))
        }
        "input.inject" => inject(state, thread_id, &params).await,
        other => Err(Failure::new(
            "unknown_command",
            format!("unknown protocol command `{other}`"),
        )),
    };
    let out = match answer {
        Ok((result, applied)) => {
            let mut meta = json!({ "thread_id": thread_id });
            if let Some(seq) = applied {
                meta["applied_through_seq"] = json!(seq);
            }
            json!({"type": "success", "id": id, "result": result, "meta": meta})
        }
        Err(f) => error(Some(id), f),
    };
    Ok(out)
}

/// The error frame answering command `id` (`None`: a command without a usable id).
pub fn error_frame(id: Option<u64>, code: &'static str, message: impl Into<String>) -> Value {
    error(id, Failure::new(code, message))
}

/// The success frame answering command `id` on `thread_id`.
pub fn success_frame(id: u64, thread_id: &str, result: Value) -> Value {
    json!({"type": "success", "id": id, "result": result, "meta": {"thread_id": thread_id}})
}

fn error(id: Option<u64>, f: Failure) -> Value {
    json!({"type": "error", "id": id, "error": f.code, "message": f.message})
}

/// The object `params[key]`, if it is one.
fn object(params: &Value, key: &str) -> Result<Option<Value>, Failure> {
    match params.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Object(_)) => Ok(Some(v.clone())),
        Some(_) => Err(Failure::new(
            "invalid_argument",
            format!("`{key}` must be an object"),
        )),
    }
}

/// A run request for `assistant_id` publishing the protocol's stream modes.
fn run_body(assistant_id: &str, params: &Value) -> Result<Map<String, Value>, Failure> {
    let strategy = params
        .get("multitask_strategy")
        .or_else(|| params.get("multitaskStrategy"))
        .and_then(Value::as_str)
        .unwrap_or("enqueue");
    let mut body = Map::new();
    body.insert("assistant_id".into(), json!(assistant_id));
    body.insert("stream_mode".into(), json!(STREAM_MODES));
    body.insert("stream_subgraphs".into(), json!(true));
    body.insert("stream_resumable".into(), json!(true));
    body.insert("multitask_strategy".into(), json!(strategy));
    for key in ["config", "metadata"] {
        if let Some(v) = object(params, key)? {
            body.insert(key.into(), v);
        }
    }
    Ok(body)
}

/// Starts a run through `POST /threads/{thread_id}/runs` and returns its record.
async fn start(
    state: &Arc<AppState>,
    thread_id: &str,
    body: Map<String, Value>,
) -> Result<RunRecord, Failure> {
    let body: RunBody = serde_json::from_value(Value::Object(body))
        .map_err(|e| Failure::new("invalid_argument", e.to_string()))?;
    let response = super::super::runs::create(
        State(state.clone()),
        Path(thread_id.to_string()),
        Ok(Json(body)),
    )
    .await?;
    let bytes = axum::body::to_bytes(response.into_body(), usize::MAX)
        .await
        .map_err(|e| Failure::new("unknown_error", e.to_string()))?;
    let shown: Value =
        serde_json::from_slice(&bytes).map_err(|e| Failure::new("unknown_error", e.to_string()))?;
    let run_id = shown["run_id"].as_str().unwrap_or_default();
    let rec = state
        .run_store
        .get(run_id)
        .await
        .map_err(|e| Failure::new("unknown_error", e.to_string()))?
        .ok_or_else(|| Failure::new("no_such_run", format!("run `{run_id}` is gone")))?;
    super::events::runs_changed();
    Ok(rec)
}

/// Whether the thread exists and waits for an answer.
async fn waiting(state: &AppState, thread_id: &str) -> bool {
    !pending(state, thread_id).await.is_empty()
}

/// The ids of the questions the thread waits on (none when it does not exist).
async fn pending(state: &AppState, thread_id: &str) -> Vec<String> {
    let Ok((thread, rec)) = existing(state, thread_id).await else {
        return Vec::new();
    };
    let a = assistants::of(state, &thread, &rec);
    match a.view(&thread).await {
        Ok(Some(v)) => v.interrupts.iter().map(|i| i.id.0.clone()).collect(),
        _ => Vec::new(),
    }
}

async fn run_start(state: &Arc<AppState>, thread_id: &str, params: &Value) -> Answer {
    let Some(assistant_id) = params["assistant_id"].as_str() else {
        return Err(Failure::new(
            "invalid_argument",
            "run.start needs an `assistant_id`",
        ));
    };
    let mut body = run_body(assistant_id, params)?;
    body.insert("if_not_exists".into(), json!("create"));
    match params.get("input").filter(|v| !v.is_null()) {
        Some(input) if waiting(state, thread_id).await => {
            let resume = match pending(state, thread_id).await.as_slice() {
                [one] if InterruptId::is_digest(one) => json!({ one.as_str(): input }),
                _ => input.clone(),
            };
            body.insert("command".into(), json!({ "resume": resume }));
        }
        Some(input) => {
            body.insert("input".into(), input.clone());
        }
        None => {}
    }
    let rec = start(state, thread_id, body).await?;
    Ok((json!({"run_id": rec.run_id}), Some(run_base(&rec) - 1)))
}

async fn input_respond(state: &Arc<AppState>, thread_id: &str, params: &Value) -> Answer {
    let entries: Vec<&Value> = match params.get("responses") {
        Some(Value::Array(list)) => list.iter().collect(),
        Some(_) => {
            return Err(Failure::new(
                "invalid_argument",
                "`responses` must be a list of {namespace, interrupt_id, response}",
            ))
        }
        None => vec![params],
    };
    if entries.is_empty() {
        return Err(Failure::new(
            "invalid_argument",
            "input.respond needs a response",
        ));
    }
    let mut answers = Map::new();
    for entry in &entries {
        let Some(interrupt_id) = entry["interrupt_id"].as_str() else {
            return Err(Failure::new(
                "invalid_argument",
                "input.respond needs an `interrupt_id` for each response",
            ));
        };
        let response = entry.get("response").cloned().unwrap_or(Value::Null);
        answers.insert(interrupt_id.to_string(), response);
    }
    let (thread, rec) = existing(state, thread_id)
        .await
        .map_err(|_| Failure::new("no_such_run", format!("thread `{thread_id}` has no run")))?;
    let assistant = assistants::of(state, &thread, &rec);
    let view = assistant
        .view(&thread)
        .await
        .map_err(|e| Failure::new("unknown_error", e.to_string()))?;
    let pending: Vec<String> = view
        .map(|v| v.interrupts.iter().map(|i| i.id.0.clone()).collect())
        .unwrap_or_default();
    // A thread that shows no question yet (its run still on its way to the pause) is checked by
    // the resumed run itself.
    let unknown = answers.keys().find(|id| !pending.contains(id));
    if let (false, Some(unknown)) = (pending.is_empty(), unknown) {
        return Err(Failure::new(
            "no_such_interrupt",
            format!(
                "thread `{thread_id}` waits for {}, not `{unknown}`",
                pending.join(", ")
            ),
        ));
    }
    // By id (LangGraph's resume map) when the ids have LangGraph's form; an older thread's one
    // question, whose id has not, takes the bare value.
    let resume = if answers.keys().all(|id| InterruptId::is_digest(id)) {
        Value::Object(answers)
    } else if answers.len() == 1 {
        answers
            .into_iter()
            .next()
            .map(|(_, v)| v)
            .unwrap_or(Value::Null)
    } else {
        return Err(Failure::new(
            "not_supported",
            "this thread's questions have ids older than resume maps: answer one per input.respond",
        ));
    };
    let mut body = run_body(assistant.id(), params)?;
    let mut command = json!({ "resume": resume });
    for key in ["update", "goto"] {
        if let Some(v) = params.get(key).filter(|v| !v.is_null()) {
            command[key] = v.clone();
        }
    }
    body.insert("command".into(), command);
    let rec = start(state, thread_id, body).await?;
    Ok((json!({}), Some(run_base(&rec) - 1)))
}

async fn inject(state: &Arc<AppState>, thread_id: &str, params: &Value) -> Answer {
    if params["namespace"]
        .as_array()
        .is_some_and(|n| !n.is_empty())
    {
        return Err(Failure::new(
            "no_such_namespace",
            "input.inject gives the message to the root graph (namespace [])",
        ));
    }
    let message = &params["message"];
    let role_ok = matches!(message["role"].as_str(), Some("user" | "system"));
    if !role_ok || !message["content"].is_string() {
        return Err(Failure::new(
            "invalid_argument",
            "input.inject needs a `message` {role: \"user\" or \"system\", content: a string, \
             name?}",
        ));
    }
    let (thread, rec) = existing(state, thread_id)
        .await
        .map_err(|_| Failure::new("no_such_run", format!("thread `{thread_id}` has no run")))?;
    let assistant = assistants::of(state, &thread, &rec);
    let mut body = run_body(assistant.id(), params)?;
    body.insert("input".into(), json!({ "messages": [message] }));
    let rec = start(state, thread_id, body).await?;
    Ok((json!({}), Some(run_base(&rec) - 1)))
}

async fn state_get(state: &AppState, thread_id: &str, params: &Value) -> Answer {
    if params["namespace"]
        .as_array()
        .is_some_and(|n| !n.is_empty())
    {
        return Err(Failure::new(
            "no_such_namespace",
            "state.get reads the root graph's state (namespace [])",
        ));
    }
    let (thread, rec) = existing(state, thread_id).await?;
    let assistant = assistants::of(state, &thread, &rec);
    let view = assistant
        .view(&thread)
        .await
        .map_err(|e| Failure::new("unknown_error", e.to_string()))?;
    let Some(view) = view else {
        return Ok((json!({"values": {}}), None));
    };
    let mut values = view.values;
    if let (Some(keys), Some(obj)) = (params["keys"].as_array(), values.as_object_mut()) {
        obj.retain(|k, _| keys.iter().any(|w| w.as_str() == Some(k.as_str())));
    }
    let mut result = json!({ "values": values });
    if let Some(cp) = view.checkpoint {
        result["checkpoint"] = json!({"id": cp.0.to_string(), "ns": ""});
    }
    Ok((result, None))
}

async fn list_checkpoints(state: &AppState, thread_id: &str, params: &Value) -> Answer {
    let (thread, _) = existing(state, thread_id).await?;
    let limit = params["limit"].as_u64().unwrap_or(10).min(1000) as usize;
    let before = match params["before"].as_str() {
        Some(s) => Some(super::super::ids::checkpoint_id(s)?),
        None => None,
    };
    let list = state
        .checkpointer
        .list(&thread, before, limit)
        .await
        .map_err(|e| Failure::new("unknown_error", e.to_string()))?;
    let checkpoints: Vec<Value> = list
        .into_iter()
        .map(|(id, parent, meta)| {
            let mut c = json!({
                "id": id.0.to_string(),
                "timestamp": super::super::time::rfc3339(meta.created_at_ms),
                "step": meta.step,
                "metadata": {
                    "source": meta.source,
                    "parent_id": parent.map(|p| p.0.to_string()),
                },
            });
            if let Some(node) = meta.nodes.first() {
                c["node_name"] = json!(node);
            }
            c
        })
        .collect();
    Ok((json!({ "checkpoints": checkpoints }), None))
}

async fn fork(state: &Arc<AppState>, thread_id: &str, params: &Value) -> Answer {
    let Some(at) = params["checkpoint_id"].as_str() else {
        return Err(Failure::new(
            "invalid_argument",
            "state.fork needs a `checkpoint_id`",
        ));
    };
    let (thread, rec) = existing(state, thread_id).await?;
    let assistant = assistants::of(state, &thread, &rec);
    let id = super::super::ids::checkpoint_id(at)?;
    if assistant.view_at(&thread, id).await.is_err() {
        return Err(Failure::new(
            "no_such_checkpoint",
            format!("thread `{thread_id}` has no checkpoint `{at}`"),
        ));
    }
    let mut body = run_body(assistant.id(), params)?;
    let mut config = body.remove("config").unwrap_or_else(|| json!({}));
    config["configurable"]["checkpoint_id"] = json!(at);
    body.insert("config".into(), config);
    if let Some(input) = params.get("input").filter(|v| !v.is_null()) {
        body.insert("input".into(), input.clone());
    }
    let rec = start(state, thread_id, body).await?;
    Ok((
        json!({"run_id": rec.run_id, "thread_id": thread_id}),
        Some(run_base(&rec) - 1),
    ))
}

async fn tree(state: &AppState, thread_id: &str) -> Answer {
    let (thread, rec) = existing(state, thread_id).await?;
    let assistant = assistants::of(state, &thread, &rec);
    let newest = state
        .run_store
        .list_thread(thread_id, 1, 0)
        .await
        .map_err(|e| Failure::new("unknown_error", e.to_string()))?;
    let status = match newest.first() {
        Some(r) => super::events::lifecycle_of(r).unwrap_or("running"),
        None => "completed",
    };
    Ok((
        json!({"tree": {"namespace": [], "status": status, "graph_name": assistant.id()}}),
        None,
    ))
}
