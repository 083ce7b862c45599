//! The thread endpoints: create, get, delete, search and count threads, change their metadata,
//! read and write their state. A thread's record (metadata, creation time, owner, the assistant it
//! belongs to) is the checkpointer's thread metadata.

use super::assistants;
use super::errors::ApiError;
use super::ids::new_uuid;
use super::thread_shape;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use planwright::checkpoint::CheckpointMetadata;
use planwright::{CheckpointId, Refusal, RunError, ThreadId};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type ApiResult = Result<Json<Value>, ApiError>;

#[derive(Deserialize, Default)]
pub struct CreateThread {
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    metadata: Value,
    #[serde(default)]
    if_exists: Option<String>,
}

pub(super) async fn record(state: &AppState, thread: &ThreadId) -> Result<Option<Value>, ApiError> {
    state
        .checkpointer
        .thread_metadata(thread)
        .await
        .map_err(ApiError::internal)
}

/// How many times [`update_record`] reads a thread's record again after another request changed
/// it between its read and its write.
pub const RECORD_UPDATE_TRIES: usize = 8;

/// Changes thread `thread`'s record `seen` with `change` (which says whether it changed
/// anything) and answers the record as it stands then, or `None` when the thread is no longer
/// the one `seen` was read from: deleted, or deleted and created again (by another user, say)
/// since, which another `owner` or `created_at` tells. Each write lands only on the record it
/// read ([`planwright::checkpoint::Checkpointer::replace_thread_metadata`]), so no update brings
/// a deleted thread back, loses a concurrent one, or gives a record another owner; a record
/// changed meanwhile is read again, at most [`RECORD_UPDATE_TRIES`] times (409 after).
pub async fn update_record(
    state: &AppState,
    thread: &ThreadId,
    seen: &Value,
    change: impl Fn(&mut Value) -> bool,
) -> Result<Option<Value>, ApiError> {
    let same_thread = |rec: &Value| {
        rec.is_object()
            && rec.get("owner") == seen.get("owner")
            && rec.get("created_at") == seen.get("created_at")
    };
    let mut current = seen.clone();
    for _ in 0..RECORD_UPDATE_TRIES {
        if !same_thread(&current) {
            return Ok(None);
        }
        let mut next = current.clone();
        if !change(&mut next) {
            return Ok(Some(current));
        }
        let replaced = state
            .checkpointer
            .replace_thread_metadata(thread, &current, next.clone())
            .await
            .map_err(ApiError::internal)?;
        if replaced {
            return Ok(Some(next));
        }
        match record(state, thread).await? {
            Some(rec) => current = rec,
            None => return Ok(None),
        }
    }
    tracing::warn!(thread_id = %thread, tries = RECORD_UPDATE_TRIES, "thread record kept changing; update given up");
    Err(ApiError::conflict(format!(
        "thread `{thread}`'s record changed under {RECORD_UPDATE_TRIES} updates in a row; try again"
    )))
}

/// Where checkpoint `at` of `thread` (its head when `None`) sits: its id, parent and metadata.
pub(super) async fn placement(
    state: &AppState,
    thread: &ThreadId,
    at: Option<CheckpointId>,
) -> Result<Option<(CheckpointId, Option<CheckpointId>, CheckpointMetadata)>, ApiError> {
    let before = at.map(|c| CheckpointId(c.0.saturating_add(1)));
    let list = state
        .checkpointer
        .list(thread, before, 1)
        .await
        .map_err(ApiError::internal)?;
    Ok(list
        .into_iter()
        .next()
        .filter(|(id, ..)| at.is_none_or(|a| a == *id)))
}

async fn thread_json(state: &AppState, thread: &ThreadId, rec: Value) -> ApiResult {
    let assistant = assistants::of(state, thread, &rec);
    let st = assistant.view(thread).await.map_err(ApiError::internal)?;
    let status = match &st {
        _ if assistant.is_running(thread) => "busy",
        Some(s) if !s.interrupts.is_empty() => "interrupted",
        Some(s) if s.failed => "error",
        _ => "idle",
    };
    let head = placement(state, thread, None).await?;
    let created_at = super::time::stored(rec.get("created_at"));
    let state_updated_at = head.as_ref().map_or(created_at.clone(), |(_, _, m)| {
        json!(super::time::rfc3339(m.created_at_ms))
    });
    let mut metadata = rec.get("metadata").cloned().unwrap_or(json!({}));
    // Like LangGraph, a thread's metadata names the assistant (and graph) it runs, once bound.
    if let (Some(a), Some(m)) = (rec.get("assistant_id"), metadata.as_object_mut()) {
        m.insert("assistant_id".into(), a.clone());
        m.insert("graph_id".into(), a.clone());
    }
    Ok(Json(json!({
        "thread_id": thread.as_str(),
        "created_at": created_at,
        "updated_at": state_updated_at,
        "state_updated_at": state_updated_at,
        "metadata": metadata,
        "status": status,
        "interrupts": st.as_ref().map_or(json!({}), |s| thread_shape::interrupts_by_task(thread.as_str(), s)),
        "config": {},
        "error": null,
        "values": st.map(|s| s.values),
    })))
}

/// `POST /threads`.
pub async fn create_thread(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<super::auth::Principal>,
    body: Result<Json<CreateThread>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let id = body.thread_id.unwrap_or_else(new_uuid);
    super::errors::check_thread_id(&id)?;
    super::fields::check_size("metadata", Some(&body.metadata))?;
    if !(body.metadata.is_null() || body.metadata.is_object()) {
        return Err(ApiError(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("metadata must be a JSON object, not {}", body.metadata),
        ));
    }
    let thread = ThreadId::new(id);
    if let Some(rec) = record(&state, &thread).await? {
        if !me.may_see(&rec) {
            // Another user's thread: its id is taken, and nothing more is told.
            return Err(ApiError::conflict(format!(
                "thread `{thread}` already exists"
            )));
        }
        return match body.if_exists.as_deref() {
            Some("do_nothing") => thread_json(&state, &thread, rec).await,
            _ => Err(ApiError::conflict(format!(
                "thread `{thread}` already exists"
            ))),
        };
    }
    let metadata = if body.metadata.is_null() {
        json!({})
    } else {
        body.metadata
    };
    let rec = json!({"metadata": metadata, "created_at": super::time::now(), "owner": me.user});
    // The check above answers the common case; this one settles two creators of one id at once:
    // the first owns the thread, and the second's record never replaces it.
    let created = state
        .checkpointer
        .create_thread(&thread, rec.clone())
        .await
        .map_err(ApiError::internal)?;
    if !created {
        // Created by someone else a moment ago: the same answer as if it had been there first.
        return match record(&state, &thread).await? {
            Some(rec) if me.may_see(&rec) && body.if_exists.as_deref() == Some("do_nothing") => {
                thread_json(&state, &thread, rec).await
            }
            _ => Err(ApiError::conflict(format!(
                "thread `{thread}` already exists"
            ))),
        };
    }
    thread_json(&state, &thread, rec).await
}

pub(super) async fn existing(state: &AppState, id: &str) -> Result<(ThreadId, Value), ApiError> {
    let thread = ThreadId::new(id);
    match record(state, &thread).await? {
        // The caller's, as the auth check found it, unless it changed hands since.
        Some(rec) if super::auth::caller_may_see(&rec) => Ok((thread, rec)),
        _ => Err(ApiError::not_found(format!("thread `{id}` does not exist"))),
    }
}

/// `GET /threads/{thread_id}`.
pub async fn get_thread(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let (thread, rec) = existing(&state, &id).await?;
    thread_json(&state, &thread, rec).await
}

/// `DELETE /threads/{thread_id}`.
pub async fn delete_thread(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
) -> Result<StatusCode, ApiError> {
    let (thread, rec) = existing(&state, &id).await?;
    let assistant = assistants::of(&state, &thread, &rec);
    let deleted = assistant.delete_thread(&thread).await;
    assistants::unbind(&state, &thread);
    match deleted {
        Ok(()) => {
            // Its runs go with it; a queued one finds its record gone and never starts.
            state
                .run_store
                .delete_thread(thread.as_str())
                .await
                .map_err(ApiError::internal)?;
            Ok(StatusCode::NO_CONTENT)
        }
        Err(RunError::Refused(Refusal::ThreadBusy(_))) => {
            Err(ApiError::conflict(format!("thread `{id}` is busy")))
        }
        Err(e) => Err(ApiError::internal(e)),
    }
}

/// `POST /threads/search` body (LangGraph's fields this server supports, plus `prefix`).
#[derive(Deserialize, Default)]
pub struct Search {
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
    /// Only threads in this status (`idle`, `busy`, `interrupted`, `error`).
    #[serde(default)]
    status: Option<String>,
    /// Only threads whose id starts with this (a Planwright extension).
    #[serde(default)]
    prefix: Option<String>,
}

/// The statuses a thread can be in.
const THREAD_STATUSES: [&str; 4] = ["idle", "busy", "interrupted", "error"];
/// Threads read per page while filtering by status.
const SCAN_PAGE: usize = 200;

/// `POST /threads/search`: threads by id, `limit` (default 10, at most 1000) from `offset`,
/// optionally only those with an id `prefix` and in one `status` (then `offset` counts matches).
pub async fn search_threads(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<super::auth::Principal>,
    body: Result<Json<Search>, JsonRejection>,
) -> ApiResult {
    let Json(q) = body?;
    if let Some(s) = q.status.as_deref() {
        if !THREAD_STATUSES.contains(&s) {
            return Err(ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("status `{s}`: use one of {}", THREAD_STATUSES.join(", ")),
            ));
        }
    }
    let limit = q.limit.unwrap_or(10).min(1000);
    let prefix = q.prefix.as_deref().unwrap_or("");
    let mut out = Vec::new();
    // A user who is not an admin sees their own threads only: filter while scanning.
    let status = q.status.as_deref();
    let Some(wanted) = status.or((!me.admin).then_some("")) else {
        let list = state
            .checkpointer
            .list_threads(prefix, limit, q.offset.unwrap_or(0))
            .await
            .map_err(ApiError::internal)?;
        for t in list {
            let Json(v) = thread_json(&state, &t.thread_id, t.metadata).await?;
            out.push(v);
        }
        return Ok(Json(Value::Array(out)));
    };
    let mut skip = q.offset.unwrap_or(0);
    let mut from = 0;
    while out.len() < limit {
        let list = state
            .checkpointer
            .list_threads(prefix, SCAN_PAGE, from)
            .await
            .map_err(ApiError::internal)?;
        let done = list.len() < SCAN_PAGE;
        from += list.len();
        for t in list {
            if !me.may_see(&t.metadata) {
                continue;
            }
            let Json(v) = thread_json(&state, &t.thread_id, t.metadata).await?;
            if !wanted.is_empty() && v["status"] != wanted {
                continue;
            }
            if skip > 0 {
                skip -= 1;
            } else if out.len() < limit {
                out.push(v);
            }
        }
        if done {
            break;
        }
    }
    Ok(Json(Value::Array(out)))
}

/// `GET /threads/{thread_id}/state`.
pub async fn thread_state(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let (thread, rec) = existing(&state, &id).await?;
    let assistant = assistants::of(&state, &thread, &rec);
    let st = assistant.view(&thread).await.map_err(ApiError::internal)?;
    let head = match st.as_ref().and_then(|s| s.checkpoint) {
        Some(cp) => placement(&state, &thread, Some(cp)).await?,
        None => None,
    };
    let placed = head
        .as_ref()
        .map(|(_, parent, metadata)| thread_shape::Placed {
            parent: *parent,
            metadata,
        });
    Ok(Json(thread_shape::state_json(
        thread.as_str(),
        st.as_ref(),
        placed,
    )))
}
