//! Looking at threads (the assistant endpoints are in [`super::assistants_api`], a graph's shape
//! in [`super::graph_shape`]): the state at a past checkpoint (`/threads/{id}/state/{checkpoint_id}`), and copying a thread
//! (`/threads/{id}/copy`, optionally from a past checkpoint). The studio page reads only these
//! and the rest of the API, so any client (and a replica set) sees the same thing.

use super::assistants::{self, AssistantRef};
use super::errors::ApiError;
use super::AppState;
use axum::extract::{Path, State};
use axum::Json;
use super::ids::checkpoint_id;
use planwright::ThreadId;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type ApiResult = Result<Json<Value>, ApiError>;


/// The thread's record and assistant, or 404.
async fn thread_of(state: &AppState, id: &str) -> Result<(ThreadId, AssistantRef), ApiError> {
    let thread = ThreadId::new(id);
    let rec = state
        .checkpointer
        .thread_metadata(&thread)
        .await
        .map_err(ApiError::internal)?
        // The caller's, as the auth check found it, unless it changed hands since.
        .filter(super::auth::caller_may_see)
        .ok_or_else(|| ApiError::not_found(format!("thread `{id}` does not exist")))?;
    let a = assistants::of(state, &thread, &rec);
    Ok((thread, a))
}

/// `GET /threads/{thread_id}/state/{checkpoint_id}`: the values at a past checkpoint.
pub async fn state_at(
    State(state): State<Arc<AppState>>,
    Path((id, cp)): Path<(String, String)>,
) -> ApiResult {
    let (thread, a) = thread_of(&state, &id).await?;
    let cp = checkpoint_id(&cp)?;
    let view = a
        .view_at(&thread, cp)
        .await
        .map_err(|e| ApiError::not_found(format!("checkpoint {cp} of thread `{id}`: {e}")))?;
    let placed = super::threads::placement(&state, &thread, Some(cp)).await?;
    let placed = placed
        .as_ref()
        .map(|(_, parent, metadata)| super::thread_shape::Placed {
            parent: *parent,
            metadata,
        });
    Ok(Json(super::thread_shape::state_json(&id, Some(&view), placed)))
}

/// `POST /threads/{thread_id}/copy` body.
#[derive(Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub struct CopyBody {
    /// The new thread's id (default: a fresh one).
    #[serde(default)]
    thread_id: Option<String>,
    /// Copy the thread as it was at this checkpoint (default: its newest).
    #[serde(default)]
    checkpoint_id: Option<String>,
}

/// `POST /threads/{thread_id}/copy`: a new thread whose history starts at the source's newest
/// checkpoint (or `checkpoint_id`), bound to the same assistant; a run on it continues from
/// there (rerun from the past without touching the source).
pub async fn copy(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<super::auth::Principal>,
    Path(id): Path<String>,
    body: axum::body::Bytes,
) -> ApiResult {
    let body: CopyBody = if body.iter().all(u8::is_ascii_whitespace) {
        CopyBody::default()
    } else {
        serde_json::from_slice(&body)
            .map_err(|e| ApiError::bad(format!("malformed copy request: {e}")))?
    };
    let (thread, a) = thread_of(&state, &id).await?;
    let view = a.view(&thread)
        .await
        .map_err(ApiError::internal)?;
    let at = match (&body.checkpoint_id, view.and_then(|v| v.checkpoint)) {
        (Some(s), _) => checkpoint_id(s)?,
        (None, Some(head)) => head,
        (None, None) => {
            return Err(ApiError::conflict(format!(
                "thread `{id}` has no checkpoint to copy"
            )))
        }
    };
    let new_id = body.thread_id.unwrap_or_else(super::ids::new_uuid);
    super::errors::check_thread_id(&new_id)?;
    let new_thread = ThreadId::new(&new_id);
    // The new id is claimed with its record first, in one atomic step, so a copy never writes
    // into a thread somebody else is creating at the same moment.
    let rec = json!({
        "metadata": {"copied_from": {"thread_id": id, "checkpoint_id": at.0.to_string()}},
        "created_at": super::time::now(),
        "assistant_id": a.id(),
        "owner": me.user,
    });
    let created = state
        .checkpointer
        .create_thread(&new_thread, rec)
        .await
        .map_err(ApiError::internal)?;
    if !created {
        return Err(ApiError::conflict(format!(
            "thread `{new_id}` already exists"
        )));
    }
    let forked = a.fork(&thread, at, &new_thread).await;
    if let Err(e) = forked {
        // The claimed id holds nothing of the copy: it is given back.
        if let Err(d) = state.checkpointer.delete_thread(&new_thread).await {
            tracing::warn!(thread_id = %new_thread, error = %d, "copy failed and its new thread could not be removed");
        }
        return Err(ApiError::bad(format!(
            "cannot copy thread `{id}` at checkpoint {at}: {e}"
        )));
    }
    super::threads::get_thread(State(state), Path(new_id)).await
}
