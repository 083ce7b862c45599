//! The thread endpoints: create, get, change the metadata of, delete and prune threads. Search
//! and count are in [`super::thread_search`], state in [`super::thread_state`].

use super::assistants;
use super::auth::Principal;
use super::errors::ApiError;
use super::ids::new_uuid;
use super::thread_records::*;
use super::thread_shape;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use planwright::{Refusal, RunError, ThreadId};
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

pub(super) async fn thread_json(state: &AppState, thread: &ThreadId, rec: Value) -> ApiResult {
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
    let metadata = shown_metadata(&rec);
    Ok(Json(json!({
        "thread_id": thread.as_str(),
        "created_at": created_at,
        "updated_at": state_updated_at,
        "state_updated_at": state_updated_at,
        "metadata": metadata,
        "status": status,
        "interrupts": st.as_ref().map_or(json!({}), thread_shape::interrupts_by_task),
        "config": {},
        "error": null,
        "values": st.map(|s| s.values),
    })))
}

/// `POST /threads`.
pub async fn create_thread(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<Principal>,
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
    if delete_one(&state, &thread, &rec).await? {
        Ok(StatusCode::NO_CONTENT)
    } else {
        Err(ApiError::conflict(format!("thread `{id}` is busy")))
    }
}

/// Deletes `thread` (whose record is `rec`) and its runs; `false` when it is busy.
pub(super) async fn delete_one(
    state: &AppState,
    thread: &ThreadId,
    rec: &Value,
) -> Result<bool, ApiError> {
    let assistant = assistants::of(state, thread, rec);
    let deleted = assistant.delete_thread(thread).await;
    assistants::unbind(state, thread);
    match deleted {
        Ok(()) => {
            // Its runs go with it; a queued one finds its record gone and never starts.
            state
                .run_store
                .delete_thread(thread.as_str())
                .await
                .map_err(ApiError::internal)?;
            Ok(true)
        }
        Err(RunError::Refused(Refusal::ThreadBusy(_))) => Ok(false),
        Err(e) => Err(ApiError::internal(e)),
    }
}

/// Drops every checkpoint of `thread` but its newest, unless a run of it is pending or running
/// (on any replica: its rollback goes back to the checkpoint it started from); whether it did.
async fn keep_only_head(
    state: &AppState,
    thread: &ThreadId,
    rec: &Value,
) -> Result<bool, ApiError> {
    let newest = state
        .run_store
        .list_thread(thread.as_str(), 1, 0)
        .await
        .map_err(ApiError::internal)?;
    if newest.first().is_some_and(|r| !r.status.is_ended()) {
        return Ok(false);
    }
    let assistant = assistants::of(state, thread, rec);
    match assistant.prune(thread, 1).await {
        Ok(()) => Ok(true),
        Err(RunError::Refused(Refusal::UnknownThread(_))) => Ok(false),
        Err(e) => Err(ApiError::internal(e)),
    }
}

/// `PATCH /threads/{thread_id}` body.
#[derive(Deserialize, Default)]
pub struct PatchThread {
    #[serde(default)]
    metadata: Value,
}

/// `PATCH /threads/{thread_id}`: merges `metadata` into the thread's (key by key, as LangGraph
/// does) through the record's compare-and-set ([`update_record`]); answers the thread.
pub async fn patch_thread(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<PatchThread>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    super::fields::check_size("metadata", Some(&body.metadata))?;
    let add = match body.metadata {
        Value::Null => serde_json::Map::new(),
        Value::Object(m) => m,
        other => {
            return Err(ApiError::unprocessable(format!(
                "metadata must be a JSON object, not {other}"
            )))
        }
    };
    let (thread, rec) = existing(&state, &id).await?;
    let now = update_record(&state, &thread, &rec, |rec| {
        let Some(obj) = rec.as_object_mut() else {
            return false;
        };
        let metadata = obj.entry("metadata").or_insert_with(|| json!({}));
        if !metadata.is_object() {
            *metadata = json!({});
        }
        let Some(m) = metadata.as_object_mut() else {
            return false;
        };
        let mut changed = false;
        for (k, v) in &add {
            if m.get(k) != Some(v) {
                m.insert(k.clone(), v.clone());
                changed = true;
            }
        }
        changed
    })
    .await?;
    match now {
        Some(rec) => thread_json(&state, &thread, rec).await,
        None => Err(ApiError::not_found(format!("thread `{id}` does not exist"))),
    }
}

/// `POST /threads/prune` body.
#[derive(Deserialize, Default)]
pub struct Prune {
    #[serde(default)]
    thread_ids: Vec<String>,
    #[serde(default)]
    strategy: Option<String>,
}

/// `POST /threads/prune`: with strategy `delete` (the default), deletes the caller's threads
/// among `thread_ids` as `DELETE /threads/{id}` does; with `keep_latest`, keeps each thread but
/// only its newest checkpoint (its history goes, its state and pending writes stay). Answers
/// `{"pruned_count": n}`; unknown threads, other users' and busy ones are left out of the count.
pub async fn prune_threads(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<Principal>,
    body: Result<Json<Prune>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let keep_latest = match body.strategy.as_deref() {
        None | Some("delete") => false,
        Some("keep_latest") => true,
        Some(other) => {
            return Err(ApiError::unprocessable(format!(
                "strategy `{other}`: use delete or keep_latest"
            )))
        }
    };
    let mut pruned = 0;
    for id in &body.thread_ids {
        let thread = ThreadId::new(id.as_str());
        let Some(rec) = record(&state, &thread).await? else {
            continue;
        };
        if !me.may_see(&rec) {
            continue;
        }
        let done = match keep_latest {
            true => keep_only_head(&state, &thread, &rec).await?,
            false => delete_one(&state, &thread, &rec).await?,
        };
        pruned += usize::from(done);
    }
    Ok(Json(json!({"pruned_count": pruned})))
}
