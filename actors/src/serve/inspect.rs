//! Looking at graphs and threads: the LangGraph Server API's assistant endpoints
//! (`/assistants/search`, `/assistants/{id}`, `/assistants/{id}/graph`), the state at a past
//! checkpoint (`/threads/{id}/state/{checkpoint_id}`), copying a thread (`/threads/{id}/copy`,
//! optionally from a past checkpoint), and a Planwright extension, `/assistants/{id}/nodes`, with
//! each node's live statistics. The studio page reads only these and the rest of the API, so any
//! client (and a replica set) sees the same thing.

use super::assistants::{self, Assistant};
use super::errors::ApiError;
use super::AppState;
use axum::extract::{Path, State};
use axum::Json;
use planwright::graph::{CompiledRouter, Target};
use planwright::{CheckpointId, CompiledGraph, ThreadId};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

type ApiResult = Result<Json<Value>, ApiError>;

fn assistant_json(a: Assistant) -> Value {
    let description = match a {
        Assistant::Research => "research-brief planner: plan → validate → execute → assess → replan → synthesize",
        Assistant::Acquire => "field-acquisition planner: tick → prepare → calc_gate → acquire → decide → enforce_policy → actions",
    };
    json!({
        "assistant_id": a.as_str(), "graph_id": a.as_str(), "name": a.as_str(),
        "description": description, "config": {}, "context": {}, "metadata": {}, "version": 1,
        "created_at": Value::Null, "updated_at": Value::Null,
    })
}

/// `POST /assistants/search`: both built-in assistants.
pub async fn search_assistants() -> Json<Value> {
    Json(json!([
        assistant_json(Assistant::Research),
        assistant_json(Assistant::Acquire)
    ]))
}

/// `GET /assistants/{assistant_id}`.
pub async fn get_assistant(Path(id): Path<String>) -> ApiResult {
    Ok(Json(assistant_json(Assistant::parse(&id)?)))
}

fn target_name<S: planwright::State>(g: &CompiledGraph<S>, t: &Target) -> String {
    match t {
        Target::Node(id) => g.node(*id).name.to_string(),
        Target::End => "__end__".into(),
    }
}

/// A compiled graph as LangGraph's `/assistants/{id}/graph` shape: `nodes` (`__start__`, every
/// node, `__end__`) and `edges` (`source`, `target`, `conditional`, and the router's label as
/// `data`), plus the graph's Mermaid text.
pub fn graph_json<S: planwright::State>(g: &CompiledGraph<S>) -> Value {
    let mut nodes = vec![json!({"id": "__start__", "type": "schema", "data": "__start__"})];
    for n in g.nodes() {
        nodes.push(json!({
            "id": &*n.name, "type": "runnable", "data": {"name": &*n.name},
            "interrupt_before": n.interrupt_before, "interrupt_after": n.interrupt_after,
        }));
    }
    nodes.push(json!({"id": "__end__", "type": "schema", "data": "__end__"}));
    let mut edges = Vec::new();
    let mut out = |source: &str, plain: &[Target], router: Option<&CompiledRouter<S>>| {
        for t in plain {
            edges
                .push(json!({"source": source, "target": target_name(g, t), "conditional": false}));
        }
        for (label, t) in router.map(|r| r.labels.as_slice()).unwrap_or_default() {
            edges.push(json!({"source": source, "target": target_name(g, t), "conditional": true, "data": label}));
        }
    };
    out("__start__", g.start_edges(), g.start_router());
    for n in g.nodes() {
        out(&n.name, &n.edges, n.router.as_ref());
    }
    json!({"nodes": nodes, "edges": edges, "mermaid": g.mermaid()})
}

/// `GET /assistants/{assistant_id}/graph`.
pub async fn graph(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    Ok(Json(match Assistant::parse(&id)? {
        Assistant::Research => graph_json(state.research.graph()),
        Assistant::Acquire => graph_json(state.acquire.graph()),
    }))
}

/// `GET /assistants/{assistant_id}/nodes`: each node's statistics now (executions, failures,
/// running tasks, mailbox depth, queue and work p50/p99 in microseconds) and the assistant's
/// active runs.
pub async fn nodes(State(state): State<Arc<AppState>>, Path(id): Path<String>) -> ApiResult {
    let (stats, active) = match Assistant::parse(&id)? {
        Assistant::Research => (state.research.node_stats(), state.research.active_runs()),
        Assistant::Acquire => (state.acquire.node_stats(), state.acquire.active_runs()),
    };
    Ok(Json(
        json!({"assistant_id": id, "active_runs": active, "nodes": stats}),
    ))
}

/// Parses a checkpoint id as the API writes it (decimal).
pub fn checkpoint_id(s: &str) -> Result<CheckpointId, ApiError> {
    s.trim().parse::<u64>().map(CheckpointId).map_err(|_| {
        ApiError::bad(format!(
            "checkpoint_id `{s}` is not a checkpoint id of this server (a decimal number)"
        ))
    })
}

/// The thread's record and assistant, or 404.
async fn thread_of(state: &AppState, id: &str) -> Result<(ThreadId, Assistant), ApiError> {
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
    let values = assistants::values_at(&state, a, &thread, cp)
        .await
        .map_err(|e| ApiError::not_found(format!("checkpoint {cp} of thread `{id}`: {e}")))?;
    Ok(Json(json!({
        "values": values,
        "checkpoint": {"thread_id": id, "checkpoint_id": cp.0.to_string(), "checkpoint_ns": ""},
    })))
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
    let view = assistants::view(&state, a, &thread)
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
    let new_id = body.thread_id.unwrap_or_else(super::handlers::new_uuid);
    super::errors::check_thread_id(&new_id)?;
    let new_thread = ThreadId::new(&new_id);
    // The new id is claimed with its record first, in one atomic step, so a copy never writes
    // into a thread somebody else is creating at the same moment.
    let rec = json!({
        "metadata": {"copied_from": {"thread_id": id, "checkpoint_id": at.0.to_string()}},
        "created_at": super::time::now(),
        "assistant_id": a.as_str(),
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
    let forked = match a {
        Assistant::Research => state.research.fork(&thread, at, &new_thread).await,
        Assistant::Acquire => state.acquire.fork(&thread, at, &new_thread).await,
    };
    if let Err(e) = forked {
        // The claimed id holds nothing of the copy: it is given back.
        if let Err(d) = state.checkpointer.delete_thread(&new_thread).await {
            tracing::warn!(thread_id = %new_thread, error = %d, "copy failed and its new thread could not be removed");
        }
        return Err(ApiError::bad(format!(
            "cannot copy thread `{id}` at checkpoint {at}: {e}"
        )));
    }
    super::handlers::get_thread(State(state), Path(new_id)).await
}
