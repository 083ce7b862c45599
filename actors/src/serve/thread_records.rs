//! A thread's record — its metadata, creation time, owner and the assistant it belongs to, kept
//! as the checkpointer's thread metadata: read as the caller may see it, changed only over what
//! was read (compare-and-set), where its head checkpoint sits, and the checkpoint metadata added
//! by `PATCH /threads/{id}/state`. Below every endpoint that touches a thread.

use super::errors::ApiError;
use super::AppState;
use planwright::checkpoint::CheckpointMetadata;
use planwright::{CheckpointId, ThreadId};
use serde_json::{json, Value};

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

pub(super) async fn existing(state: &AppState, id: &str) -> Result<(ThreadId, Value), ApiError> {
    let thread = ThreadId::new(id);
    match record(state, &thread).await? {
        // The caller's, as the auth check found it, unless it changed hands since.
        Some(rec) if super::auth::caller_may_see(&rec) => Ok((thread, rec)),
        _ => Err(ApiError::not_found(format!("thread `{id}` does not exist"))),
    }
}

/// The thread record's key holding metadata added to its checkpoints by
/// `PATCH /threads/{id}/state`, by checkpoint id: the checkpointer stores a checkpoint's metadata
/// once, with the checkpoint, and has no way to change it, so the additions live in the record
/// and are merged into the state's `metadata` when shown ([`with_patched_metadata`]).
pub const CHECKPOINT_METADATA: &str = "checkpoint_metadata";

/// `state` (a state object) with the metadata `PATCH /threads/{id}/state` added to its
/// checkpoint merged into its `metadata`.
pub fn with_patched_metadata(rec: &Value, mut state: Value) -> Value {
    let Some(cp) = state
        .pointer("/checkpoint/checkpoint_id")
        .and_then(Value::as_str)
        .map(str::to_string)
    else {
        return state;
    };
    let Some(added) = rec
        .get(CHECKPOINT_METADATA)
        .and_then(|m| m.get(&cp))
        .and_then(Value::as_object)
    else {
        return state;
    };
    if let Some(m) = state.get_mut("metadata").and_then(Value::as_object_mut) {
        for (k, v) in added {
            m.insert(k.clone(), v.clone());
        }
    }
    state
}

/// The metadata a thread shows: its record's, with the assistant (and graph) it runs once
/// bound, as LangGraph's threads carry them (and as the `metadata` filter sees them).
pub(super) fn shown_metadata(rec: &Value) -> Value {
    let mut metadata = rec.get("metadata").cloned().unwrap_or(json!({}));
    if let (Some(a), Some(m)) = (rec.get("assistant_id"), metadata.as_object_mut()) {
        m.insert("assistant_id".into(), a.clone());
        m.insert("graph_id".into(), a.clone());
    }
    metadata
}
