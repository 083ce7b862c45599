//! `serve` as an MCP server: `POST /mcp`, the Model Context Protocol over Streamable HTTP, so that
//! an MCP client (a desktop assistant, an IDE, another agent) calls the served graphs as tools.
//!
//! The endpoint is stateless: it keeps no MCP session (no `Mcp-Session-Id`) and answers every
//! request with one JSON body, which the Streamable HTTP transport allows in place of an SSE
//! stream. It speaks `initialize`, `ping`, `tools/list` and `tools/call`; notifications and
//! responses a client sends are accepted (202) and need no answer. It sits behind the same auth
//! as every other route, and a run it starts belongs to the caller, as one started by
//! `/runs/wait` does.
//!
//! Each registered assistant is a tool named by its id, described by its description, whose input
//! schema is the assistant's input schema (as `/assistants/{id}/schemas` shows it) plus two
//! arguments of the server's own: `thread_id` (run on that thread, created when missing) and
//! `resume` (answer the interrupt the thread is paused on). A call without `thread_id` is a
//! stateless run (`/runs/wait`); its thread is kept only when the run pauses, so that it can be
//! resumed. A run that pauses is a result, not an error: it says what is asked and how to answer.

use super::errors::ApiError;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// The protocol versions this endpoint answers in; a client asking for another gets the newest.
const VERSIONS: [&str; 4] = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"];
/// The arguments the server takes for itself, not passed to the graph.
const THREAD_ID: &str = "thread_id";
const RESUME: &str = "resume";
/// JSON-RPC error codes.
const PARSE_ERROR: i64 = -32700;
const INVALID_REQUEST: i64 = -32600;
const METHOD_NOT_FOUND: i64 = -32601;
const INVALID_PARAMS: i64 = -32602;
const INTERNAL_ERROR: i64 = -32603;

/// `GET` and `DELETE /mcp`: 405, as the endpoint opens no server-initiated stream and keeps no
/// session to end.
pub async fn no_stream() -> Response {
    (
        StatusCode::METHOD_NOT_ALLOWED,
        [(header::ALLOW, "POST")],
        "this MCP endpoint answers POST requests with JSON and keeps no session",
    )
        .into_response()
}

/// `POST /mcp`: one JSON-RPC message.
pub async fn post(
    State(state): State<Arc<AppState>>,
    body: Result<Json<Value>, JsonRejection>,
) -> Response {
    let msg = match body {
        Ok(Json(v)) => v,
        Err(e) => {
            tracing::warn!(why = %e.body_text(), "an MCP request that is not JSON");
            return rpc_error(
                Value::Null,
                PARSE_ERROR,
                format!("not JSON: {}", e.body_text()),
            );
        }
    };
    let Value::Object(msg) = msg else {
        return rpc_error(
            Value::Null,
            INVALID_REQUEST,
            "a JSON-RPC message is one object (batches are not taken)".into(),
        );
    };
    let Some(method) = msg.get("method").and_then(Value::as_str) else {
        // A response to a request of ours (none are sent) or garbage without a method.
        return if msg.contains_key("result") || msg.contains_key("error") {
            StatusCode::ACCEPTED.into_response()
        } else {
            rpc_error(
                msg.get("id").cloned().unwrap_or(Value::Null),
                INVALID_REQUEST,
                "a JSON-RPC request names its method".into(),
            )
        };
    };
    let Some(id) = msg.get("id").cloned() else {
        // A notification (`notifications/initialized`, `notifications/cancelled`, …).
        return StatusCode::ACCEPTED.into_response();
    };
    let params = msg.get("params").cloned().unwrap_or(json!({}));
    let answer = match method {
        "initialize" => Ok(initialize(&params)),
        "ping" => Ok(json!({})),
        "tools/list" => Ok(list_tools(&state)),
        "tools/call" => call_tool(state, params).await,
        other => Err((
            METHOD_NOT_FOUND,
            format!("method `{other}` is not served here"),
        )),
    };
    match answer {
        Ok(result) => Json(json!({"jsonrpc": "2.0", "id": id, "result": result})).into_response(),
        Err((code, message)) => {
            tracing::warn!(method, code, why = %message, "an MCP request refused");
            rpc_error(id, code, message)
        }
    }
}

fn rpc_error(id: Value, code: i64, message: String) -> Response {
    Json(json!({"jsonrpc": "2.0", "id": id, "error": {"code": code, "message": message}}))
        .into_response()
}

/// The answer to `initialize`: the client's protocol version when known, the tools capability.
fn initialize(params: &Value) -> Value {
    let asked = params["protocolVersion"].as_str().unwrap_or_default();
    let version = VERSIONS
        .iter()
        .find(|v| **v == asked)
        .unwrap_or(&VERSIONS[0]);
    json!({
        "protocolVersion": version,
        "capabilities": {"tools": {"listChanged": false}},
        "serverInfo": {"name": "planwright", "version": env!("CARGO_PKG_VERSION")},
        "instructions": "Each tool runs a planner graph. A run that pauses returns what it asks; \
            answer by calling the same tool with the returned thread_id and resume.",
    })
}

/// `tools/list`: every registered assistant.
fn list_tools(state: &AppState) -> Value {
    let tools: Vec<Value> = state
        .assistants
        .all()
        .iter()
        .map(|a| {
            json!({
                "name": a.id(),
                "description": a.description(),
                "inputSchema": input_schema(&a.schemas()["input_schema"]),
            })
        })
        .collect();
    json!({"tools": tools})
}

/// The assistant's input schema with the server's `thread_id` and `resume` arguments: either the
/// input's required fields or a thread to resume.
fn input_schema(input: &Value) -> Value {
    let mut out = match input {
        Value::Object(m) if m.get("type").and_then(Value::as_str) == Some("object") => m.clone(),
        // MCP arguments are an object: an input schema that is not one says nothing of them.
        _ => Map::from_iter([("type".to_string(), json!("object"))]),
    };
    let required = out.remove("required");
    let mut props = match out.remove("properties") {
        Some(Value::Object(p)) => p,
        _ => Map::new(),
    };
    props.insert(
        THREAD_ID.into(),
        json!({"type": "string", "description": "run on this thread (created when missing) instead of a thread of the call's own"}),
    );
    props.insert(
        RESUME.into(),
        json!({"description": "the answer to the question a paused run on `thread_id` asks"}),
    );
    out.insert("properties".into(), Value::Object(props));
    let resuming = json!({"required": [THREAD_ID, RESUME]});
    match required {
        Some(r) if r.as_array().is_some_and(|r| !r.is_empty()) => {
            out.insert("anyOf".into(), json!([{"required": r}, resuming]));
        }
        _ => {}
    }
    Value::Object(out)
}

type RpcResult = Result<Value, (i64, String)>;

/// `tools/call`: a run of the named assistant, waited for.
async fn call_tool(state: Arc<AppState>, params: Value) -> RpcResult {
    let Some(name) = params["name"].as_str() else {
        return Err((INVALID_PARAMS, "tools/call names its tool in `name`".into()));
    };
    if state.assistants.find(name).is_none() {
        let known: Vec<&str> = state.assistants.all().iter().map(|a| a.id()).collect();
        return Err((
            INVALID_PARAMS,
            format!("unknown tool `{name}`: the tools are {}", known.join(", ")),
        ));
    }
    let mut args = match params.get("arguments") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::Object(m)) => m.clone(),
        Some(other) => {
            return Ok(refused(
                name,
                format!("the arguments are an object, not {other}"),
            ))
        }
    };
    let thread = match args.remove(THREAD_ID) {
        None | Some(Value::Null) => None,
        Some(Value::String(t)) => Some(t),
        Some(other) => {
            return Ok(refused(
                name,
                format!("`thread_id` is a string, not {other}"),
            ))
        }
    };
    let resume = args.remove(RESUME);
    let mut body = json!({"assistant_id": name});
    match (&resume, &thread) {
        (Some(_), None) => {
            return Ok(refused(
                name,
                "`resume` answers a paused thread: give its `thread_id` too".into(),
            ))
        }
        (Some(r), Some(_)) => body["command"] = json!({"resume": r}),
        (None, _) => body["input"] = Value::Object(args),
    }
    let made = thread.is_none();
    let answer = match &thread {
        Some(t) => {
            body["if_not_exists"] = json!("create");
            match serde_json::from_value(body) {
                Ok(b) => {
                    super::runs::run_wait(State(state.clone()), Path(t.clone()), Ok(Json(b))).await
                }
                Err(e) => Err(ApiError::bad(format!("malformed run request: {e}"))),
            }
        }
        // Kept until its end is known: a run that pauses leaves its thread to be resumed.
        None => {
            body["on_completion"] = json!("keep");
            super::stateless::wait(State(state.clone()), Ok(Json(body))).await
        }
    };
    let response = match answer {
        Ok(r) => r,
        // A refused input or a failed run is the tool's error, for the caller to read and fix.
        Err(ApiError(status, why)) => {
            tracing::warn!(
                tool = name,
                status = status.as_u16(),
                why,
                "an MCP tool call failed"
            );
            return Ok(tool_error(format!("{name}: {why}")));
        }
    };
    let (thread_id, run_id) = located(&response);
    let bytes = axum::body::to_bytes(response.into_body(), 16 << 20)
        .await
        .map_err(|e| {
            (
                INTERNAL_ERROR,
                format!("the run's values could not be read: {e}"),
            )
        })?;
    let values: Value = serde_json::from_slice(&bytes).unwrap_or(Value::Null);
    let interrupts = values.get("__interrupt__").cloned();
    match interrupts {
        Some(asked) => Ok(paused(name, thread_id.as_deref(), values, asked)),
        None => {
            if let (true, Some(t), Some(r)) = (made, thread_id, run_id) {
                super::stateless::delete_after(state, t, r, Duration::ZERO);
            }
            let text = serde_json::to_string_pretty(&values).unwrap_or_default();
            Ok(json!({
                "content": [{"type": "text", "text": text}],
                "structuredContent": {"status": "success", "values": values},
                "isError": false,
            }))
        }
    }
}

/// The result of a run that paused: what it asks and how to answer.
fn paused(name: &str, thread: Option<&str>, mut values: Value, asked: Value) -> Value {
    if let Value::Object(m) = &mut values {
        m.remove("__interrupt__");
    }
    let questions: Vec<Value> = asked
        .as_array()
        .map(|l| l.iter().map(|i| i["value"].clone()).collect())
        .unwrap_or_default();
    let thread = thread.unwrap_or_default();
    let text = format!(
        "The run paused and asks: {}\nTo answer, call `{name}` again with {{\"thread_id\": \"{thread}\", \"resume\": <your answer>}}.",
        match questions.as_slice() {
            [one] => one.to_string(),
            many => Value::Array(many.to_vec()).to_string(),
        }
    );
    json!({
        "content": [{"type": "text", "text": text}],
        "structuredContent": {
            "status": "interrupted",
            "thread_id": thread,
            "interrupts": asked,
            "values": values,
            "resume": {"tool": name, "arguments": {"thread_id": thread, "resume": "<your answer>"}},
        },
        "isError": false,
    })
}

/// The tool error for arguments refused before a run (MCP reports input errors as tool errors,
/// so that the caller reads them and corrects its call).
fn refused(name: &str, why: String) -> Value {
    tracing::warn!(tool = name, why, "an MCP tool call's arguments refused");
    tool_error(format!("{name}: {why}"))
}

/// A tool result that is an error, with its reason as text.
fn tool_error(why: String) -> Value {
    json!({"content": [{"type": "text", "text": why}], "isError": true})
}

/// The thread and run a run response names in `Content-Location` (`/threads/T/runs/R`).
fn located(r: &Response) -> (Option<String>, Option<String>) {
    let at = r
        .headers()
        .get(header::CONTENT_LOCATION)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    let parts: Vec<&str> = at.split('/').collect();
    match parts.as_slice() {
        ["", "threads", t, "runs", r] => (Some(t.to_string()), Some(r.to_string())),
        _ => (None, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tool_schema_takes_the_input_or_a_thread_to_resume() {
        let s = input_schema(&json!({
            "type": "object", "required": ["input"], "additionalProperties": false,
            "properties": {"input": {"type": "string"}}
        }));
        assert_eq!(s["properties"]["input"]["type"], "string");
        assert!(s["properties"].get(THREAD_ID).is_some());
        assert!(s["properties"].get(RESUME).is_some());
        assert_eq!(
            s["anyOf"],
            json!([{"required": ["input"]}, {"required": ["thread_id", "resume"]}])
        );
        assert_eq!(s["additionalProperties"], false);
        let any = input_schema(&json!({}));
        assert_eq!(any["type"], "object");
        assert!(any.get("anyOf").is_none());
    }

    #[test]
    fn a_run_location_names_its_thread_and_run() {
        let r = super::super::stream::located("t-1", "r-1", "x");
        assert_eq!(
            located(&r),
            (Some("t-1".to_string()), Some("r-1".to_string()))
        );
    }
}
