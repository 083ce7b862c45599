//! `POST /threads/{thread_id}/history`: a thread's checkpoints, newest first, paged with `before`.

use super::assistants;
use super::errors::ApiError;
use super::thread_shape;
use super::AppState;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use planwright::ThreadId;
use serde_json::Value;
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
        Some(Value::String(s)) => Some(super::ids::checkpoint_id(s)?),
        Some(v) => match v
            .get("checkpoint_id")
            .or_else(|| v.pointer("/configurable/checkpoint_id"))
        {
            Some(Value::String(s)) => Some(super::ids::checkpoint_id(s)?),
            _ => {
                return Err(ApiError::bad(format!(
                    "before: expected a checkpoint id or {{\"checkpoint_id\": …}}, not {v}"
                )))
            }
        },
    };
    // `checkpoint`: only that checkpoint (LangGraph's `get_history(checkpoint=…)`).
    let only = match body
        .as_ref()
        .and_then(|Json(b)| b.get("checkpoint"))
        .and_then(|c| c.get("checkpoint_id"))
    {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(super::ids::checkpoint_id(s)?),
        Some(v) => {
            return Err(ApiError::bad(format!(
                "checkpoint.checkpoint_id must be a string, not {v}"
            )))
        }
    };
    // `metadata`: only checkpoints whose metadata holds these keys with these values.
    let wanted = match body.as_ref().and_then(|Json(b)| b.get("metadata")) {
        None | Some(Value::Null) => None,
        Some(m @ Value::Object(_)) => Some(m.clone()),
        Some(v) => {
            return Err(ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("metadata must be a JSON object, not {v}"),
            ))
        }
    };
    let from = only
        .map(|c| planwright::CheckpointId(c.0.saturating_add(1)))
        .or(before);
    let mut out = Vec::with_capacity(limit);
    let mut cursor = from;
    'pages: loop {
        let page = state
            .checkpointer
            .list(&thread, cursor, limit.max(50))
            .await
            .map_err(ApiError::internal)?;
        let last_page = page.len() < limit.max(50);
        for (cp, parent, metadata) in page {
            cursor = Some(cp);
            if only.is_some_and(|o| o != cp) {
                break 'pages;
            }
            let shown = thread_shape::metadata_json(&metadata);
            if wanted
                .as_ref()
                .is_some_and(|w| !thread_shape::json_contains(&shown, w))
            {
                continue;
            }
            let view = assistant.view_at(&thread, cp).await.ok();
            let placed = thread_shape::Placed {
                parent,
                metadata: &metadata,
            };
            out.push(thread_shape::state_json(&id, view.as_ref(), Some(placed)));
            if out.len() >= limit || only.is_some() {
                break 'pages;
            }
        }
        if last_page {
            break;
        }
    }
    Ok(Json(Value::Array(out)))
}
