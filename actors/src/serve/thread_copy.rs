//! `POST /threads/{thread_id}/copy`: a new thread whose history starts at the source's newest
//! checkpoint (or a past one), bound to the same assistant.

use super::errors::ApiError;
use super::ids::checkpoint_id;
use super::AppState;
use axum::extract::{Path, State};
use axum::Json;
use planwright::ThreadId;
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type ApiResult = Result<Json<Value>, ApiError>;
use super::thread_state::thread_of;

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
    let view = a.view(&thread).await.map_err(ApiError::internal)?;
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
