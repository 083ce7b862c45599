//! Background runs: `POST /threads/{thread_id}/runs` starts a run and answers at once with a run
//! record; `GET …/runs/{run_id}` reads its status (`pending`, `running`, `success`,
//! `interrupted`, `error`); `POST …/runs/{run_id}/cancel` cancels it. Also the thread's history.

use super::assistants;
use super::errors::ApiError;
use super::handlers::{start_run, RunBody};
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use dashmap::DashMap;
use planwright::{RunStatus, ThreadId};
use serde_json::{json, Value};
use std::sync::Arc;

/// Run records by run id.
#[derive(Default)]
pub struct RunRegistry {
    runs: DashMap<String, Value>,
}

impl RunRegistry {
    fn set_status(&self, run_id: &str, status: &str) {
        if let Some(mut r) = self.runs.get_mut(run_id) {
            r["status"] = json!(status);
            r["updated_at"] = json!(httpdate::fmt_http_date(std::time::SystemTime::now()));
        }
    }
}

/// `POST /threads/{thread_id}/runs`.
pub async fn create(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<RunBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body?;
    let (thread, assistant, handle) = start_run(&state, &id, body, false).await?;
    let run_id = handle.run_id().0.to_string();
    let now = httpdate::fmt_http_date(std::time::SystemTime::now());
    let record = json!({
        "run_id": run_id, "thread_id": thread.as_str(), "assistant_id": assistant.as_str(),
        "status": "running", "created_at": now, "updated_at": now, "metadata": {},
        "multitask_strategy": "reject",
    });
    state.background.runs.insert(run_id.clone(), record.clone());
    let st = state.clone();
    tokio::spawn(async move {
        let status = match handle.wait().await {
            Ok(out) if out.status == RunStatus::Interrupted => "interrupted",
            Ok(out) if out.status == RunStatus::Cancelled => "interrupted",
            Ok(out) => {
                if matches!(out.values["status"].as_str(), Some("failed" | "aborted")) {
                    "error"
                } else {
                    "success"
                }
            }
            Err(planwright::RunError::Cancelled) => "interrupted",
            Err(_) => "error",
        };
        st.runs.count(match status {
            "success" => "finished",
            "interrupted" => "interrupted",
            _ => "failed",
        });
        st.background.set_status(&run_id, status);
    });
    Ok(Json(record))
}

fn find(state: &AppState, thread: &str, run_id: &str) -> Result<Value, ApiError> {
    state
        .background
        .runs
        .get(run_id)
        .map(|r| r.clone())
        .filter(|r| r["thread_id"] == thread)
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "run `{run_id}` does not exist on thread `{thread}`"
            ))
        })
}

/// `GET /threads/{thread_id}/runs/{run_id}`.
pub async fn get(
    State(state): State<Arc<AppState>>,
    Path((thread, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    find(&state, &thread, &run_id).map(Json)
}

/// `POST /threads/{thread_id}/runs/{run_id}/cancel`.
pub async fn cancel(
    State(state): State<Arc<AppState>>,
    Path((thread, run_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let run = find(&state, &thread, &run_id)?;
    if run["status"] == "running" {
        let assistant = match run["assistant_id"].as_str() {
            Some(a) => assistants::Assistant::parse(a)?,
            None => assistants::Assistant::Research,
        };
        assistants::cancel(&state, assistant, &ThreadId::new(thread));
    }
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /threads/{thread_id}/history`: the thread's checkpoints, newest first (`limit`, default 10).
pub async fn history(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Option<Json<Value>>,
) -> Result<Json<Value>, ApiError> {
    let thread = ThreadId::new(&id);
    let Some(rec) = state
        .checkpointer
        .thread_metadata(&thread)
        .await
        .map_err(ApiError::internal)?
    else {
        return Err(ApiError::not_found(format!("thread `{id}` does not exist")));
    };
    let assistant = assistants::of(&state, &thread, &rec);
    let limit = body
        .as_ref()
        .and_then(|Json(b)| b.get("limit"))
        .and_then(Value::as_u64)
        .unwrap_or(10)
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
            "metadata": {"step": h.metadata.step, "source": h.metadata.source, "writes": h.metadata.nodes},
            "created_at": h.metadata.created_at_ms,
        }));
    }
    Ok(Json(Value::Array(out)))
}
