//! `POST /threads/{thread_id}/history`: a thread's checkpoints, newest first, paged with `before`.

use super::assistants;
use super::errors::ApiError;
use super::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use planwright::ThreadId;
use serde_json::{json, Value};
use std::sync::Arc;

/// `POST /threads/{thread_id}/history`: the thread's checkpoints, newest first (`limit`, default 10).
pub async fn history(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> Result<Json<Value>, ApiError> {
    // An empty body takes the defaults; anything else must be a JSON object.
    let body: Option<Json<Value>> = if body.iter().all(u8::is_ascii_whitespace) {
        None
    } else {
        match serde_json::from_slice::<Value>(&body) {
            Ok(v @ Value::Object(_)) => Some(Json(v)),
            Ok(other) => {
                return Err(ApiError::bad(format!(
                    "history request: expected a JSON object, not {other}"
                )))
            }
            Err(e) => return Err(ApiError::bad(format!("malformed JSON body: {e}"))),
        }
    };
    let thread = ThreadId::new(&id);
    // The caller's, as the auth check found it, unless it changed hands since.
    let Some(rec) = state
        .checkpointer
        .thread_metadata(&thread)
        .await
        .map_err(ApiError::internal)?
        .filter(super::auth::caller_may_see)
    else {
        return Err(ApiError::not_found(format!("thread `{id}` does not exist")));
    };
    let assistant = assistants::of(&state, &thread, &rec);
    let limit = match body.as_ref().and_then(|Json(b)| b.get("limit")) {
        None | Some(Value::Null) => 10,
        Some(v) => v.as_u64().filter(|n| *n > 0).ok_or_else(|| {
            ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("limit must be a positive integer, not {v}"),
            )
        })?,
    }
    .min(1000) as usize;
    // `before`: a checkpoint id, or LangGraph's `{"checkpoint_id": …}` config.
    let before = match body.as_ref().and_then(|Json(b)| b.get("before")) {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(super::inspect::checkpoint_id(s)?),
        Some(v) => match v
            .get("checkpoint_id")
            .or_else(|| v.pointer("/configurable/checkpoint_id"))
        {
            Some(Value::String(s)) => Some(super::inspect::checkpoint_id(s)?),
            _ => {
                return Err(ApiError::bad(format!(
                    "before: expected a checkpoint id or {{\"checkpoint_id\": …}}, not {v}"
                )))
            }
        },
    };
    let list = assistants::history(&state, assistant, &thread, before, limit)
        .await
        .map_err(ApiError::internal)?;
    let mut out = Vec::with_capacity(list.len());
    for h in list {
        let values = assistants::values_at(&state, assistant, &thread, h.id)
            .await
            .unwrap_or(Value::Null);
        out.push(json!({
            "values": values,
            "next": [],
            "checkpoint": {"thread_id": id, "checkpoint_id": h.id.0.to_string(), "checkpoint_ns": ""},
            "parent_checkpoint": h.parent.map(|p| json!({"thread_id": id, "checkpoint_id": p.0.to_string(), "checkpoint_ns": ""})),
            "metadata": history_metadata(&h.metadata),
            "created_at": h.metadata.created_at_ms,
        }));
    }
    Ok(Json(Value::Array(out)))
}

/// A checkpoint's metadata as the history shows it; a time-travel branch names the checkpoint
/// it went back to (`branched_from`, as a checkpoint id string).
fn history_metadata(m: &planwright::checkpoint::CheckpointMetadata) -> Value {
    let mut out = json!({"step": m.step, "source": m.source, "writes": m.nodes});
    if let Some(at) = m.extra.get("branched_from").and_then(Value::as_u64) {
        out["branched_from"] = json!(at.to_string());
    }
    out
}
