//! Run records: every run this process starts (background, `wait` and `stream`) gets a record;
//! `POST /threads/{thread_id}/runs` starts a run and answers at once with it; `GET
//! …/runs/{run_id}` reads its status (`pending`, `running`, `success`, `interrupted`, `error`);
//! `GET /threads/{thread_id}/runs` lists the thread's runs, newest first; `POST
//! …/runs/{run_id}/cancel` cancels a running one. Also the thread's history.

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
    seq: std::sync::atomic::AtomicU64,
}

impl RunRegistry {
    /// A run's status now, if it has a record.
    pub fn status_of(&self, run_id: &str) -> Option<String> {
        self.runs
            .get(run_id)
            .and_then(|r| r["status"].as_str().map(String::from))
    }

    /// Notes why a run failed to start.
    pub fn set_error(&self, run_id: &str, detail: &str) {
        if let Some(mut r) = self.runs.get_mut(run_id) {
            r["error"] = json!(detail);
        }
    }

    fn set_status(&self, run_id: &str, status: &str) {
        if let Some(mut r) = self.runs.get_mut(run_id) {
            r["status"] = json!(status);
            r["updated_at"] = json!(httpdate::fmt_http_date(std::time::SystemTime::now()));
        }
    }
}

/// Finished run records kept in memory; past this (plus a tenth, so eviction is amortised) the
/// oldest finished ones are dropped. Running records are never dropped.
const KEEP_FINISHED: usize = 10_000;

impl RunRegistry {
    fn evict(&self) {
        if self.runs.len() <= KEEP_FINISHED + KEEP_FINISHED / 10 {
            return;
        }
        let mut done: Vec<(u64, String)> = self
            .runs
            .iter()
            .filter(|r| r["status"] != "running" && r["status"] != "pending")
            .map(|r| (r["seq"].as_u64().unwrap_or(0), r.key().clone()))
            .collect();
        done.sort_unstable();
        let excess = self.runs.len().saturating_sub(KEEP_FINISHED);
        for (_, id) in done.into_iter().take(excess) {
            self.runs.remove(&id);
        }
    }
}

/// Sets a run's record status.
pub fn set_status(state: &AppState, run_id: &str, status: &str) {
    state.background.set_status(run_id, status);
}

/// Records a run that has just started; returns its record.
pub fn track(
    state: &AppState,
    thread: &ThreadId,
    assistant: assistants::Assistant,
    run_id: &str,
    strategy: &str,
) -> Value {
    let now = httpdate::fmt_http_date(std::time::SystemTime::now());
    let seq = state
        .background
        .seq
        .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let record = json!({
        "run_id": run_id, "thread_id": thread.as_str(), "assistant_id": assistant.as_str(),
        "status": "running", "created_at": now, "updated_at": now, "metadata": {},
        "multitask_strategy": strategy, "seq": seq,
    });
    state
        .background
        .runs
        .insert(run_id.to_string(), record.clone());
    state.background.evict();
    record
}

/// The record status of a run's end, counted in the metrics.
pub fn finished(
    state: &AppState,
    run_id: &str,
    result: &Result<assistants::Outcome, planwright::RunError>,
) -> &'static str {
    let status = match result {
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
    state.background.set_status(run_id, status);
    status
}

/// `POST /threads/{thread_id}/runs`.
pub async fn create(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<RunBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(body) = body?;
    let strategy = body.strategy().to_string();
    if strategy == "enqueue" {
        // On a busy thread an enqueued run answers at once, `pending`, and waits its turn.
        let thread = ThreadId::new(&id);
        let rec = state
            .checkpointer
            .thread_metadata(&thread)
            .await
            .map_err(ApiError::internal)?
            .ok_or_else(|| ApiError::not_found(format!("thread `{id}` does not exist")))?;
        let assistant = assistants::Assistant::parse(body.assistant())?;
        let bound = assistants::of(&state, &thread, &rec);
        if super::queue::busy(&state, bound, &thread) {
            let n = state
                .background
                .seq
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let run_id = format!("q{n}-{}", std::process::id());
            let mut record = track(&state, &thread, assistant, &run_id, &strategy);
            set_status(&state, &run_id, "pending");
            record["status"] = json!("pending");
            record.as_object_mut().map(|r| r.remove("seq"));
            super::queue::submit(&state, &id, run_id, body);
            return Ok(Json(record));
        }
    }
    let (thread, assistant, handle) = start_run(&state, &id, body, false).await?;
    let run_id = handle.run_id().0.to_string();
    let mut record = track(&state, &thread, assistant, &run_id, &strategy);
    record.as_object_mut().map(|r| r.remove("seq"));
    let st = state.clone();
    tokio::spawn(async move {
        let result = handle.wait().await;
        let status = finished(&st, &run_id, &result);
        st.runs.count(match status {
            "success" => "finished",
            "interrupted" => "interrupted",
            _ => "failed",
        });
    });
    Ok(Json(record))
}

/// `GET /threads/{thread_id}/runs`: the thread's runs started by this process, newest first
/// (`limit`, default 10, at most 1000; `offset`).
pub async fn list(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    axum::extract::Query(q): axum::extract::Query<std::collections::HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let number = |k: &str, default: usize| -> Result<usize, ApiError> {
        match q.get(k) {
            None => Ok(default),
            Some(v) => v.parse().map_err(|_| {
                ApiError(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("{k} `{v}` is not a non-negative integer"),
                )
            }),
        }
    };
    let (limit, offset) = (number("limit", 10)?.min(1000), number("offset", 0)?);
    if state
        .checkpointer
        .thread_metadata(&ThreadId::new(&id))
        .await
        .map_err(ApiError::internal)?
        .is_none()
    {
        return Err(ApiError::not_found(format!("thread `{id}` does not exist")));
    }
    let mut runs: Vec<Value> = state
        .background
        .runs
        .iter()
        .filter(|r| r["thread_id"] == id.as_str())
        .map(|r| r.clone())
        .collect();
    runs.sort_by_key(|r| std::cmp::Reverse(r["seq"].as_u64().unwrap_or(0)));
    let out = runs
        .into_iter()
        .skip(offset)
        .take(limit)
        .map(|mut r| {
            r.as_object_mut().map(|o| o.remove("seq"));
            r
        })
        .collect();
    Ok(Json(Value::Array(out)))
}

fn find(state: &AppState, thread: &str, run_id: &str) -> Result<Value, ApiError> {
    state
        .background
        .runs
        .get(run_id)
        .map(|r| {
            let mut r = r.clone();
            r.as_object_mut().map(|o| o.remove("seq"));
            r
        })
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
    if run["status"] == "pending" {
        // Not started yet: it never will.
        set_status(&state, &run_id, "interrupted");
        return Ok(StatusCode::NO_CONTENT);
    }
    if run["status"] == "running" {
        let assistant = match run["assistant_id"].as_str() {
            Some(a) => assistants::Assistant::parse(a)?,
            None => assistants::Assistant::Research,
        };
        // Recorded before the engine stops the run: a restart in between never resumes it.
        let t = ThreadId::new(&thread);
        super::handlers::mark_cancelled(&state, &t, Some(&run_id)).await?;
        assistants::cancel(&state, assistant, &t);
    }
    Ok(StatusCode::NO_CONTENT)
}

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
    let Some(rec) = state
        .checkpointer
        .thread_metadata(&thread)
        .await
        .map_err(ApiError::internal)?
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
