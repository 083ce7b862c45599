//! Stateless runs: `POST /runs`, `/runs/wait`, `/runs/stream` and `/runs/batch`. Each run gets a
//! thread of its own (a new UUID owned by the caller; or the `thread_id` the request names,
//! created when missing), then goes through the same path as a run on a thread. With
//! `on_completion: "delete"` (the default, as in LangGraph) the thread and its run records are
//! deleted once the run ends; `keep` keeps them, to be read like any thread.

use super::errors::ApiError;
use super::run_body::RunBody;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

/// How long a stateless streamed run's thread stays after the run ends, so a follower still
/// reading its events finishes before they go.
pub const STREAM_GRACE: Duration = Duration::from_secs(5);
/// Runs one `/runs/batch` request may create.
pub const MAX_BATCH: usize = 100;

/// The thread a stateless request runs on (made for it unless it names one), and its body.
async fn prepare(state: &AppState, body: Value) -> Result<(String, RunBody, bool), ApiError> {
    let Value::Object(mut fields) = body else {
        return Err(ApiError::bad(format!(
            "a run request is a JSON object, not {body}"
        )));
    };
    let named = match fields.remove("thread_id") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s),
        Some(other) => {
            return Err(ApiError::bad(format!(
                "thread_id must be a string, not {other}"
            )))
        }
    };
    let mut body: RunBody = serde_json::from_value(Value::Object(fields))
        .map_err(|e| ApiError::bad(format!("malformed run request: {e}")))?;
    body.resolve_assistant(state).await?;
    body.check(state)?;
    // A thread made for the run is the run's alone: created whatever `if_not_exists` says.
    let made = named.is_none();
    let id = named.unwrap_or_else(super::ids::new_uuid);
    if made {
        body.if_not_exists = Some("create".into());
    }
    let delete = made && body.on_completion.as_deref() != Some("keep");
    Ok((id, body, delete))
}

/// Deletes the thread of a stateless run once `run_id` has ended (after `grace`).
pub(super) fn delete_after(state: Arc<AppState>, thread: String, run_id: String, grace: Duration) {
    tokio::spawn(async move {
        let day = Duration::from_secs(86_400);
        if let Err(e) = super::live_runs::wait_end(&state, &run_id, day).await {
            tracing::warn!(thread_id = thread, run_id, why = %e.1, "a stateless run's end could not be seen; its thread stays");
            return;
        }
        tokio::time::sleep(grace).await;
        if let Err(e) = super::threads::delete_thread(State(state), Path(thread.clone())).await {
            tracing::warn!(thread_id = thread, why = %e.1, "a stateless run's thread could not be deleted");
        }
    });
}

/// The run id a run response names in `Content-Location`.
fn located_run(r: &Response) -> Option<String> {
    let at = r.headers().get(axum::http::header::CONTENT_LOCATION)?;
    Some(at.to_str().ok()?.rsplit('/').next()?.to_string())
}

fn json_body(body: Result<Json<Value>, JsonRejection>) -> Result<Value, ApiError> {
    Ok(body?.0)
}

/// `POST /runs`: a background run on a thread of its own; answers the run's record.
pub async fn create(
    State(state): State<Arc<AppState>>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let (id, body, delete) = prepare(&state, json_body(body)?).await?;
    let r = super::runs::create(State(state.clone()), Path(id.clone()), Ok(Json(body))).await?;
    if let (true, Some(run)) = (delete, located_run(&r)) {
        delete_after(state, id, run, Duration::ZERO);
    }
    Ok(r)
}

/// `POST /runs/wait`: a run on a thread of its own, answered with its values.
pub async fn wait(
    State(state): State<Arc<AppState>>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let (id, body, delete) = prepare(&state, json_body(body)?).await?;
    let r = super::runs::run_wait(State(state.clone()), Path(id.clone()), Ok(Json(body))).await;
    if delete {
        match r.as_ref().ok().and_then(located_run) {
            Some(run) => delete_after(state, id, run, Duration::ZERO),
            // Refused before a run existed: the thread made for it goes at once.
            None => {
                let _ = super::threads::delete_thread(State(state), Path(id)).await;
            }
        }
    }
    r
}

/// `POST /runs/stream`: a run on a thread of its own, as server-sent events.
pub async fn stream(
    State(state): State<Arc<AppState>>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let (id, body, delete) = prepare(&state, json_body(body)?).await?;
    let r =
        super::stream::run_stream(State(state.clone()), Path(id.clone()), Ok(Json(body))).await?;
    if let (true, Some(run)) = (delete, located_run(&r)) {
        delete_after(state, id, run, STREAM_GRACE);
    }
    Ok(r)
}

/// `POST /runs/batch`: several background runs, each on a thread of its own (or the one it
/// names), answered with their records in order. Every request is checked before any starts.
pub async fn batch(
    State(state): State<Arc<AppState>>,
    body: Result<Json<Value>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Value::Array(list) = json_body(body)? else {
        return Err(ApiError::bad(
            "a batch is a JSON array of run requests".to_string(),
        ));
    };
    if list.len() > MAX_BATCH {
        return Err(ApiError::bad(format!(
            "a batch holds at most {MAX_BATCH} runs, not {}",
            list.len()
        )));
    }
    let mut prepared = Vec::with_capacity(list.len());
    for (i, item) in list.into_iter().enumerate() {
        let p = prepare(&state, item)
            .await
            .map_err(|e| ApiError(e.0, format!("run {i} of the batch: {}", e.1)))?;
        prepared.push(p);
    }
    let mut out = Vec::with_capacity(prepared.len());
    for (id, body, delete) in prepared {
        let r = super::runs::create(State(state.clone()), Path(id.clone()), Ok(Json(body))).await?;
        if let (true, Some(run)) = (delete, located_run(&r)) {
            delete_after(state.clone(), id, run, Duration::ZERO);
        }
        let bytes = axum::body::to_bytes(r.into_body(), 1 << 20)
            .await
            .map_err(|e| ApiError::internal(format!("a batch run's record: {e}")))?;
        out.push(serde_json::from_slice::<Value>(&bytes).unwrap_or(json!(null)));
    }
    Ok(Json(Value::Array(out)).into_response())
}
