//! The run endpoints, over the run store (see [`super::lifecycle`] for a run's life):
//! `POST /threads/{thread_id}/runs` starts a run in the background and answers at once with its
//! record (`pending` when it waits its turn behind an earlier run, with `multitask_strategy:
//! "enqueue"`); `GET …/runs` lists the thread's runs, newest first; `GET …/runs/{run_id}` reads
//! one; `POST …/runs/wait` runs and answers the run's values; `GET …/runs/{run_id}/join` waits for it to end and answers the thread's values; `POST
//! …/runs/{run_id}/cancel` cancels a pending or running run (`action=interrupt` keeps what it
//! wrote, `action=rollback` removes it; `wait=true` returns once it stopped). Records live in the
//! database beside the threads, so all of this holds across restarts.

use super::assistants;
use super::cancel::{self, CancelAction};
use super::errors::ApiError;
use super::lifecycle;
use super::live_runs::{self, record_json};
use super::run_body::RunBody;
use super::thread_records::existing;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, Query, State};
use axum::http::StatusCode;
use axum::response::Response;
use axum::Json;
use planwright::runs::RunRecord;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// `POST /threads/{thread_id}/runs`: the run's record, its place in `Content-Location`.
pub async fn create(
    state: State<Arc<AppState>>,
    id: Path<String>,
    body: Result<Json<RunBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(rec) = create_record(state, id, body).await?;
    let field = |k: &str| rec[k].as_str().unwrap_or_default().to_string();
    let (thread, run) = (field("thread_id"), field("run_id"));
    Ok(super::stream::located(&thread, &run, Json(rec)))
}

async fn create_record(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<RunBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(mut body) = body?;
    body.resolve_assistant(&state).await?;
    body.check(&state)?;
    if body.after_seconds.is_some_and(|s| s > 0.0) {
        // A delayed run waits `pending`, then queues for its thread like an enqueued one (the
        // queue holds it until its record says it is due).
        let (thread, trec) = super::start::thread_for_run(&state, &id, &body).await?;
        let (rec, here) = lifecycle::accept(&state, &thread, &trec, &body).await?;
        if here {
            super::queue::submit(&state, rec.clone());
        }
        return Ok(Json(record_json(&rec)));
    }
    if body.strategy() == "enqueue" {
        // On a busy thread an enqueued run answers at once, `pending`, and waits its turn.
        let (thread, trec) = super::start::thread_for_run(&state, &id, &body).await?;
        let assistant = state.assistants.get(body.assistant())?;
        let bound = assistants::of(&state, &thread, &trec);
        if bound.id() != assistant.id() {
            return Err(ApiError::conflict(format!(
                "thread `{id}` belongs to assistant `{}`; it cannot run `{}` (create another thread)",
                bound.id(),
                assistant.id()
            )));
        }
        if super::queue::busy(&state, &bound, &thread)
            || cancel::running_elsewhere(&state, &thread).await?.is_some()
        {
            let (rec, here) = lifecycle::accept(&state, &thread, &trec, &body).await?;
            if here {
                super::queue::submit(&state, rec.clone());
            }
            return Ok(Json(record_json(&rec)));
        }
    }
    let (rec, thread, assistant, handle) = match lifecycle::begin(&state, &id, body).await? {
        lifecycle::Begun::Here(rec, thread, assistant, handle) => (rec, thread, assistant, handle),
        // Taken over by another replica before it started here: its record says where it is.
        lifecycle::Begun::Elsewhere(rec) => {
            let now = state.run_store.get(&rec.run_id).await.ok().flatten();
            return Ok(Json(record_json(&now.unwrap_or(rec))));
        }
    };
    let started = state.run_store.get(&rec.run_id).await.ok().flatten();
    let st = state.clone();
    let ended = rec.clone();
    tokio::spawn(async move {
        let _ = super::publish::drive(&st, &ended, assistant, &thread, handle, false).await;
    });
    Ok(Json(record_json(&started.unwrap_or(rec))))
}

fn number(q: &HashMap<String, String>, k: &str, default: usize) -> Result<usize, ApiError> {
    match q.get(k) {
        None => Ok(default),
        Some(v) => v.parse().map_err(|_| {
            ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("{k} `{v}` is not a non-negative integer"),
            )
        }),
    }
}

/// `GET /threads/{thread_id}/runs`: the thread's runs, newest first (`limit`, default 10, at
/// most 1000; `offset`; `status` to keep one status).
pub async fn list(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<Json<Value>, ApiError> {
    let (limit, offset) = (number(&q, "limit", 10)?.min(1000), number(&q, "offset", 0)?);
    let status = match q.get("status") {
        None => None,
        Some(s) => Some(planwright::runs::RunRecordStatus::parse(s).ok_or_else(|| {
            ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!(
                    "status `{s}`: use pending, running, success, error, timeout or interrupted"
                ),
            )
        })?),
    };
    existing(&state, &id).await?;
    let runs = match status {
        None => state.run_store.list_thread(&id, limit, offset).await,
        // Filtered here: a thread's runs are few next to its checkpoints.
        Some(s) => state
            .run_store
            .list_thread(&id, usize::MAX, 0)
            .await
            .map(|all| {
                all.into_iter()
                    .filter(|r| r.status == s)
                    .skip(offset)
                    .take(limit)
                    .collect()
            }),
    }
    .map_err(ApiError::internal)?;
    Ok(Json(Value::Array(runs.iter().map(record_json).collect())))
}

async fn find(state: &AppState, thread: &str, run_id: &str) -> Result<RunRecord, ApiError> {
    state
        .run_store
        .get(run_id)
        .await
        .map_err(ApiError::internal)?
        // On this thread, and the caller's (as the thread was when the auth check read it,
        // unless it changed hands since: a run keeps its thread's owner).
        .filter(|r| {
            r.thread_id == thread
                && super::auth::caller_may_see(&serde_json::json!({ "owner": r.owner }))
        })
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
    find(&state, &thread, &run_id)
        .await
        .map(|r| Json(record_json(&r)))
}

/// `GET /threads/{thread_id}/runs/{run_id}/join`: waits for the run to end, then answers the
/// thread's values (LangGraph's `runs.join`).
pub async fn join(
    State(state): State<Arc<AppState>>,
    Path((thread, run_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    find(&state, &thread, &run_id).await?;
    // The HTTP client's own timeout bounds this; a day is "until it ends".
    live_runs::wait_end(&state, &run_id, std::time::Duration::from_secs(86_400)).await?;
    let (t, rec) = existing(&state, &thread).await?;
    let a = assistants::of(&state, &t, &rec);
    let view = a.view(&t).await.map_err(ApiError::internal)?;
    Ok(Json(view.map(|v| v.values).unwrap_or(Value::Null)))
}

/// `POST /threads/{thread_id}/runs/{run_id}/cancel?action=interrupt|rollback&wait=true|false`.
pub async fn cancel(
    State(state): State<Arc<AppState>>,
    Path((thread, run_id)): Path<(String, String)>,
    Query(q): Query<HashMap<String, String>>,
) -> Result<StatusCode, ApiError> {
    let action = cancel_action(&q)?;
    let wait = match q.get("wait").map(String::as_str) {
        None | Some("false") | Some("0") => false,
        Some("true") | Some("1") => true,
        Some(other) => {
            return Err(ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("wait `{other}`: use true or false"),
            ))
        }
    };
    let run = find(&state, &thread, &run_id).await?;
    cancel::cancel(&state, &run, action, wait).await?;
    Ok(StatusCode::NO_CONTENT)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::auth::{as_caller, Principal};
    use crate::serve::{state, ServeArgs};
    use planwright::runs::RunRecord;

    #[tokio::test]
    async fn a_run_of_a_thread_that_changed_hands_is_absent_to_another_caller() {
        let args = ServeArgs {
            checkpoint: "memory:".into(),
            model: "offline".into(),
            ..ServeArgs::default()
        };
        let st = state(&args).await.unwrap();
        let mut r = RunRecord::pending("r-1", "t", "research", 1);
        r.owner = Some("ann".into());
        st.run_store.insert(r).await.unwrap();
        let user = |name: &str| Principal {
            user: name.into(),
            admin: false,
        };
        let bob = as_caller(user("bob"), find(&st, "t", "r-1")).await;
        assert_eq!(bob.unwrap_err().0, axum::http::StatusCode::NOT_FOUND);
        let ann = as_caller(user("ann"), find(&st, "t", "r-1")).await;
        assert_eq!(ann.unwrap().run_id, "r-1");
        assert!(
            find(&st, "other", "r-1").await.is_err(),
            "another thread's run"
        );
    }
}

/// `POST /threads/{thread_id}/runs/wait`: runs (or resumes) the thread and returns its values.
pub async fn run_wait(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<RunBody>, JsonRejection>,
) -> Result<Response, ApiError> {
    let Json(body) = body?;
    let cancel_on_disconnect = body.cancel_on_disconnect()?;
    let (rec, thread, assistant, handle) = match lifecycle::begin(&state, &id, body).await? {
        lifecycle::Begun::Here(rec, thread, assistant, handle) => (rec, thread, assistant, handle),
        // Another replica took the run over before it started here: its end is the answer.
        lifecycle::Begun::Elsewhere(rec) => {
            let run_id = rec.run_id.clone();
            return live_runs::outcome(&state, &rec)
                .await
                .map(|v| super::stream::located(&id, &run_id, Json(v)));
        }
    };
    let taken = rec.clone();
    let run_id = rec.run_id.clone();
    // Sees whether the run's end here is its end, or it went on on another replica.
    let end = live_runs::watch_end(&state, &rec.run_id);
    // Dropped with this handler's future when the client hangs up first: then it cancels the run.
    let hang_up = cancel_on_disconnect.then(|| super::follow::CancelOnDrop::new(&state, &rec));
    // The run's end is recorded by a task of its own: a client that hangs up does not leave the
    // record `running` for ever.
    let (st, t) = (state.clone(), thread.clone());
    let ended = tokio::spawn(async move {
        super::publish::drive(&st, &rec, assistant, &t, handle, false).await
    });
    let result = ended
        .await
        .map_err(|e| ApiError::internal(format!("the run's task failed: {e}")))?;
    if let Some(g) = hang_up {
        g.disarm();
    }
    if live_runs::ended_elsewhere(&end) {
        // Another replica took the run over (this one was too slow to renew its lease, or its
        // writes were refused): the answer is the run's, wherever it ends.
        return live_runs::outcome(&state, &taken)
            .await
            .map(|v| super::stream::located(&id, &run_id, Json(v)));
    }
    match result {
        Ok(out) if out.status == planwright::RunStatus::Suspended => Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the server is stopping; thread `{id}` is checkpointed and continues when it restarts"),
        )),
        Ok(out) => Ok(super::stream::located(&id, &run_id, Json(out.values))),
        Err(e) => Err(super::start::run_error(&id, e)),
    }
}

/// The `action` of a cancel (`interrupt`, the default, or `rollback`).
fn cancel_action(q: &HashMap<String, String>) -> Result<CancelAction, ApiError> {
    match q.get("action").map(String::as_str) {
        None | Some("interrupt") => Ok(CancelAction::Interrupt),
        Some("rollback") => Ok(CancelAction::Rollback),
        Some(other) => Err(ApiError(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!("action `{other}`: use interrupt or rollback"),
        )),
    }
}

/// `DELETE /threads/{thread_id}/runs/{run_id}`: forgets an ended run (409 for one still pending
/// or running: cancel it first).
pub async fn delete(
    State(state): State<Arc<AppState>>,
    Path((thread, run_id)): Path<(String, String)>,
) -> Result<StatusCode, ApiError> {
    let run = find(&state, &thread, &run_id).await?;
    if !run.status.is_ended() {
        return Err(ApiError::conflict(format!(
            "run `{run_id}` is {}: cancel it before deleting it",
            run.status
        )));
    }
    state
        .run_store
        .delete(&run_id)
        .await
        .map_err(ApiError::internal)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `POST /runs/cancel` body: the runs of one thread by id, or every run of the caller in a status.
#[derive(serde::Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CancelMany {
    #[serde(default)]
    thread_id: Option<String>,
    #[serde(default)]
    run_ids: Option<Vec<String>>,
    /// `pending`, `running` or `all`.
    #[serde(default)]
    status: Option<String>,
}

/// `POST /runs/cancel`: cancels several runs (`action` as for one); 204 once asked of them all.
pub async fn cancel_many(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
    body: Result<Json<CancelMany>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let Json(b) = body?;
    let action = cancel_action(&q)?;
    let runs = match (&b.thread_id, &b.run_ids, b.status.as_deref()) {
        (Some(thread), Some(ids), None) => {
            let mut runs = Vec::with_capacity(ids.len());
            for id in ids {
                runs.push(find(&state, thread, id).await?);
            }
            runs
        }
        (None, None, Some(status @ ("pending" | "running" | "all"))) => {
            let unfinished = state
                .run_store
                .unfinished(usize::MAX)
                .await
                .map_err(ApiError::internal)?;
            let mut runs = Vec::new();
            for r in unfinished {
                let wanted = match status {
                    "pending" => r.status == planwright::runs::RunRecordStatus::Pending,
                    "running" => r.status == planwright::runs::RunRecordStatus::Running,
                    _ => true,
                };
                // The caller's runs only: their thread must be one the caller may see.
                let owner = serde_json::json!({ "owner": r.owner });
                if wanted && super::auth::caller_may_see(&owner) {
                    runs.push(r);
                }
            }
            runs
        }
        (None, None, Some(other)) => {
            return Err(ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("status `{other}`: use pending, running or all"),
            ))
        }
        _ => {
            return Err(ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                "name the runs with `thread_id` and `run_ids`, or give a `status`".to_string(),
            ))
        }
    };
    for run in &runs {
        cancel::cancel(&state, run, action, false).await?;
    }
    Ok(StatusCode::NO_CONTENT)
}
