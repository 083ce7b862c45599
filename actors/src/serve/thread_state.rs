//! A thread's state: read at the head or a checkpoint, written as a node (`update_state`), its
//! checkpoint metadata patched.

use super::assistant::EditError;
use super::assistants;
use super::assistants::AssistantRef;
use super::errors::ApiError;
use super::ids::checkpoint_id;
use super::thread_records::*;
use super::thread_shape;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use planwright::{CheckpointId, Refusal, RunError, ThreadId};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type ApiResult = Result<Json<Value>, ApiError>;

/// `GET /threads/{thread_id}/state`.
pub async fn thread_state(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    current(&state, &id).await.map(Json)
}

/// Thread `id`'s state at its head, as `GET /threads/{thread_id}/state` shows it.
pub async fn current(state: &AppState, id: &str) -> Result<Value, ApiError> {
    let (thread, rec) = existing(state, id).await?;
    let assistant = assistants::of(state, &thread, &rec);
    let st = assistant.view(&thread).await.map_err(ApiError::internal)?;
    let head = match st.as_ref().and_then(|s| s.checkpoint) {
        Some(cp) => placement(state, &thread, Some(cp)).await?,
        None => None,
    };
    let placed = head
        .as_ref()
        .map(|(_, parent, metadata)| thread_shape::Placed {
            parent: *parent,
            metadata,
        });
    let shown = thread_shape::state_json(thread.as_str(), st.as_ref(), placed);
    Ok(with_patched_metadata(&rec, shown))
}

/// The checkpoint a body names: `checkpoint_id`, else `checkpoint.checkpoint_id`.
fn named_checkpoint(
    checkpoint_id: Option<&str>,
    checkpoint: Option<&Value>,
) -> Result<Option<CheckpointId>, ApiError> {
    let named = checkpoint_id
        .map(|s| Value::String(s.to_string()))
        .or_else(|| checkpoint?.get("checkpoint_id").cloned());
    match named {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => super::ids::checkpoint_id(&s).map(Some),
        Some(other) => Err(ApiError::bad(format!(
            "checkpoint_id must be a string, not {other}"
        ))),
    }
}

/// `POST /threads/{thread_id}/state/checkpoint` body (the SDKs' `get_state(checkpoint=…)`).
#[derive(Deserialize, Default)]
pub struct StateAt {
    #[serde(default)]
    checkpoint: Option<Value>,
}

/// `POST /threads/{thread_id}/state/checkpoint`: the state at `checkpoint.checkpoint_id` (as
/// `GET /threads/{id}/state/{checkpoint_id}`), or the current state when it names none.
pub async fn state_at_checkpoint(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<StateAt>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let Some(cp) = named_checkpoint(None, body.checkpoint.as_ref())? else {
        return thread_state(State(state), Path(id)).await;
    };
    let (_, rec) = existing(&state, &id).await?;
    let Json(v) = super::thread_state::state_at(State(state), Path((id, cp.0.to_string()))).await?;
    Ok(Json(with_patched_metadata(&rec, v)))
}

/// `POST /threads/{thread_id}/state` body (the SDKs' `update_state`).
#[derive(Deserialize, Default)]
pub struct UpdateState {
    #[serde(default)]
    values: Value,
    #[serde(default)]
    as_node: Option<String>,
    #[serde(default)]
    checkpoint_id: Option<String>,
    #[serde(default)]
    checkpoint: Option<Value>,
}

/// The writer of an update that comes before every node, as LangGraph's `as_node: "__start__"`:
/// the update is the graph's input, and the nodes `START` leads to run next.
const START: &str = "__start__";

/// The nodes `START` leads to, from the graph as `assistant` shows it; `None` when a router
/// decides them (then the update needs an `as_node`).
fn start_targets(assistant: &assistants::AssistantRef) -> Option<Vec<String>> {
    let graph = assistant.graph_json();
    let edges = graph["edges"].as_array()?;
    let mut out = Vec::new();
    for e in edges.iter().filter(|e| e["source"] == START) {
        if e["conditional"] == true {
            return None;
        }
        if let Some(t) = e["target"].as_str().filter(|t| *t != "__end__") {
            out.push(t.to_string());
        }
    }
    Some(out)
}

/// The node an update is written as when the request names none: the one that wrote the
/// checkpoint it starts from, as LangGraph does, or the graph's only node; [`START`] when no node
/// wrote it (the thread's input checkpoint), as LangGraph does; 400 naming the nodes when several
/// did.
async fn default_node(
    state: &AppState,
    thread: &ThreadId,
    at: Option<CheckpointId>,
    nodes: &[String],
) -> Result<String, ApiError> {
    let wrote = placement(state, thread, at)
        .await?
        .map(|(_, _, m)| m.nodes)
        .unwrap_or_default();
    let mut wrote: Vec<&String> = wrote.iter().filter(|n| nodes.contains(n)).collect();
    wrote.dedup();
    match (wrote.as_slice(), nodes) {
        ([one], _) => Ok(one.to_string()),
        ([], [only]) => Ok(only.clone()),
        ([], _) => Ok(START.to_string()),
        (many, _) => Err(ApiError::bad(format!(
            "nodes {} wrote thread `{thread}`'s checkpoint: name the one the update is written as with `as_node`",
            many.iter().map(|s| s.as_str()).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// `POST /threads/{thread_id}/state`: writes `values` to the idle thread as node `as_node` would
/// ([`default_node`] when not named; `__start__`: as the graph's input, the nodes `START` leads
/// to running next); with `checkpoint_id` (or `checkpoint.checkpoint_id`) the
/// thread goes back to that checkpoint first (a time-travel branch). Answers
/// `{"checkpoint": {…}}`, the new checkpoint. 409 while a run is going, 404 for an unknown
/// thread or checkpoint, 400 naming what is wrong with the values or the node.
pub async fn update_state(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<UpdateState>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let at = named_checkpoint(body.checkpoint_id.as_deref(), body.checkpoint.as_ref())?;
    let (thread, rec) = existing(&state, &id).await?;
    // A thread created with LangGraph's `graph_id` metadata and never run belongs to that graph.
    let wanted = match (
        rec.get("assistant_id"),
        rec.pointer("/metadata/graph_id").and_then(Value::as_str),
    ) {
        (None, Some(g)) => state.assistants.get(g)?.clone(),
        _ => assistants::of(&state, &thread, &rec),
    };
    let busy = || ApiError::conflict(format!("thread `{id}` has a run in progress"));
    if wanted.is_running(&thread) {
        return Err(busy());
    }
    let nodes = wanted.node_names();
    let as_node = match body.as_node {
        Some(n) if nodes.contains(&n) || n == START => n,
        Some(n) => {
            return Err(ApiError::bad(format!(
                "as_node `{n}` is not a node of assistant `{}`: use one of {}",
                wanted.id(),
                nodes.join(", ")
            )))
        }
        None => default_node(&state, &thread, at, &nodes).await?,
    };
    let checked = wanted
        .check_update(body.values)
        .map_err(|e| ApiError::bad(format!("values: {e}")))?;
    assistants::bind(&state, &thread, rec, &wanted, false).await?;
    if let Some(at) = at {
        wanted.branch(&thread, at).await.map_err(|e| match e {
            RunError::Checkpoint(planwright::checkpoint::CheckpointError::NotFound { .. }) => {
                ApiError::not_found(format!("thread `{id}` has no checkpoint {}", at.0))
            }
            RunError::Refused(Refusal::ThreadBusy(_)) => busy(),
            e => ApiError::internal(e),
        })?;
    }
    let written = if as_node == START {
        let Some(goto) = start_targets(&wanted) else {
            return Err(ApiError::bad(format!(
                "a router decides where assistant `{}` starts: name the node the update is written as with `as_node`, one of {}",
                wanted.id(),
                nodes.join(", ")
            )));
        };
        wanted.update_goto(&thread, Some(checked), &goto).await
    } else {
        wanted.update_state(&thread, checked, &as_node).await
    };
    let cp = written.map_err(|e| match e {
        EditError::Values(v) => ApiError::bad(format!("values: {v}")),
        EditError::Run(RunError::Refused(Refusal::ThreadBusy(_))) => busy(),
        EditError::Run(RunError::Refused(Refusal::UnknownThread(_))) => ApiError::conflict(
            format!("thread `{id}` has no state yet: run it before updating its state"),
        ),
        EditError::Run(RunError::Refused(r @ Refusal::UnknownNode(_))) => {
            ApiError::bad(r.to_string())
        }
        EditError::Run(e) => ApiError::internal(e),
    })?;
    Ok(Json(
        json!({"checkpoint": thread_shape::checkpoint_ref(thread.as_str(), cp)}),
    ))
}

/// `PATCH /threads/{thread_id}/state` body (the JS SDK's `patchState`).
#[derive(Deserialize, Default)]
pub struct PatchState {
    #[serde(default)]
    metadata: Value,
    #[serde(default)]
    checkpoint_id: Option<String>,
    #[serde(default)]
    checkpoint: Option<Value>,
}

/// `PATCH /threads/{thread_id}/state`: merges `metadata` into the metadata of the thread's
/// current checkpoint (or the one named), kept in the thread's record under
/// [`CHECKPOINT_METADATA`]; 204. 400 when the thread has no checkpoint yet.
pub async fn patch_state(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<PatchState>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let Json(body) = body?;
    super::fields::check_size("metadata", Some(&body.metadata))?;
    let add = match body.metadata {
        Value::Object(m) => m,
        other => {
            return Err(ApiError::unprocessable(format!(
                "metadata must be a JSON object, not {other}"
            )))
        }
    };
    let at = named_checkpoint(body.checkpoint_id.as_deref(), body.checkpoint.as_ref())?;
    let (thread, rec) = existing(&state, &id).await?;
    let Some((cp, ..)) = placement(&state, &thread, at).await? else {
        return Err(match at {
            Some(at) => ApiError::not_found(format!("thread `{id}` has no checkpoint {}", at.0)),
            None => ApiError::bad(format!(
                "thread `{id}` has no checkpoint yet: its state has no metadata to patch"
            )),
        });
    };
    let key = cp.0.to_string();
    let now = update_record(&state, &thread, &rec, |rec| {
        let Some(obj) = rec.as_object_mut() else {
            return false;
        };
        let all = obj.entry(CHECKPOINT_METADATA).or_insert_with(|| json!({}));
        if !all.is_object() {
            *all = json!({});
        }
        let Some(mine) = all
            .as_object_mut()
            .map(|a| a.entry(key.clone()).or_insert_with(|| json!({})))
        else {
            return false;
        };
        let Some(m) = mine.as_object_mut() else {
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
        Some(_) => Ok(StatusCode::NO_CONTENT),
        None => Err(ApiError::not_found(format!("thread `{id}` does not exist"))),
    }
}

/// The thread's record and assistant, or 404.
pub(super) async fn thread_of(
    state: &AppState,
    id: &str,
) -> Result<(ThreadId, AssistantRef), ApiError> {
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
    let placed = super::thread_records::placement(&state, &thread, Some(cp)).await?;
    let placed = placed
        .as_ref()
        .map(|(_, parent, metadata)| super::thread_shape::Placed {
            parent: *parent,
            metadata,
        });
    Ok(Json(super::thread_shape::state_json(
        &id,
        Some(&view),
        placed,
    )))
}
