//! What this process knows of its runs, and how a run's end is recorded. Kept in memory only
//! what cannot be stored: who waits for a run to end (`join`, a cancel with `wait`, a
//! rollback), which run each thread of this process is running, cancels asked before a run's
//! engine started, runs another replica took over, and each run's stream control until
//! [`super::publish::drive`] takes it. A run's end goes to its record first ([`end`],
//! [`finished`]), then wakes its watchers.
//!
//! Below the flows that start, cancel and recover runs ([`super::lifecycle`],
//! [`super::cancel`], [`super::recovery`]): they and the publisher call down into it.

use super::assistant::Outcome;
use super::assistants;
use super::errors::ApiError;
use super::AppState;
use axum::http::StatusCode;
use dashmap::{DashMap, DashSet};
use planwright::runs::{now_ms, RunChange, RunRecord, RunRecordStatus as S};
use planwright::{EventSwitch, RunStatus, ThreadId};
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// This process's runs that have not ended, and its clients following whole threads.
#[derive(Default)]
pub struct LiveRuns {
    /// Run id → its final status once it has one (watchers wait on it).
    ends: DashMap<String, watch::Sender<Option<S>>>,
    /// Thread id → the run this process is executing on it.
    by_thread: DashMap<String, String>,
    /// Runs cancelled between their record saying `running` and their engine run starting.
    cancel_asked: DashSet<String>,
    /// Runs this process stopped because another replica took them over: their end here is
    /// not theirs to record.
    abandoned: DashSet<String>,
    /// Run id → how its event stream is controlled, until [`super::publish::drive`] takes it.
    streams: DashMap<String, StreamControl>,
    /// The threads clients of this process follow whole, and the runs accepted on them.
    pub thread_followers: Arc<super::thread_followers::Followers>,
}

/// A run's event stream as [`super::publish::drive`] controls it: the engine's switch for it,
/// and the receiver of followers' requests for it, subscribed before the run starts so that no
/// request is missed.
pub struct StreamControl {
    /// Whether the whole stream is published from the run's start: the run is resumable, or a
    /// client of this process follows its thread.
    pub from_start: bool,
    /// On: the engine builds the run's events.
    pub switch: EventSwitch,
    /// Changes when a follower asks for the stream (`RunEventLog::watch_requests`).
    pub asked: planwright::runs::events::LogWatch,
}

impl StreamControl {
    /// For `rec`: switched on from the start when the run is resumable or its thread followed.
    pub fn of(state: &AppState, rec: &RunRecord) -> Self {
        let from_start = resumable(rec) || state.live.thread_followers.follows(&rec.thread_id);
        Self {
            from_start,
            switch: EventSwitch::new(from_start),
            asked: state.events.watch_requests(&rec.run_id),
        }
    }
}

impl LiveRuns {
    /// How `run_id`'s event stream is controlled (once: whoever publishes the run holds it).
    pub fn take_stream(&self, run_id: &str) -> Option<StreamControl> {
        self.streams.remove(run_id).map(|(_, s)| s)
    }

    /// Whether this process has `run_id` in hand: accepted, queued or executing here (from before
    /// its lease is claimed until its end is recorded). The keeper never takes such a run over.
    pub fn knows(&self, run_id: &str) -> bool {
        self.ends.contains_key(run_id)
    }

    /// The run this process is executing on `thread`, if any.
    pub fn running_on(&self, thread: &str) -> Option<String> {
        self.by_thread.get(thread).map(|r| r.clone())
    }

    /// Whether the run this process executes on `thread` is one it stopped because another
    /// replica took it over (its copy here has not ended yet).
    pub fn abandoned_on(&self, thread: &str) -> bool {
        self.by_thread
            .get(thread)
            .is_some_and(|run| self.abandoned.contains(run.as_str()))
    }

    /// Takes `run_id` in hand: from now on its watchers here wait for the end this process
    /// records.
    pub fn expect_end(&self, run_id: &str) {
        self.ends.insert(run_id.to_string(), watch::channel(None).0);
    }

    /// Lets `run_id` go without an end: another replica has it, and its watchers here follow
    /// its record there.
    pub fn let_go(&self, run_id: &str) {
        self.ends.remove(run_id);
    }

    /// Records that this process executes `run_id` on `thread`, its stream controlled by
    /// `control` until the publisher takes it.
    pub fn executing(&self, thread: &str, run_id: &str, control: StreamControl) {
        self.streams.insert(run_id.to_string(), control);
        self.by_thread
            .insert(thread.to_string(), run_id.to_string());
    }

    /// Asks `run_id` to stop as soon as its engine run starts here (a cancel came first).
    pub fn ask_cancel(&self, run_id: &str) {
        self.cancel_asked.insert(run_id.to_string());
    }

    /// Whether a cancel of `run_id` was asked before its engine run started (answered once).
    pub fn cancel_was_asked(&self, run_id: &str) -> bool {
        self.cancel_asked.remove(run_id).is_some()
    }
}

/// A 503 naming storage and what could not be done. The store's error, whose causes name
/// databases, hosts and SQL, is logged (at error, with its whole chain) and not told the client.
pub fn storage(what: &str, e: impl std::error::Error + 'static) -> ApiError {
    tracing::error!(error = %planwright::ErrorChain(&e), "storage unreachable: {what}");
    ApiError(
        StatusCode::SERVICE_UNAVAILABLE,
        format!("storage unreachable: {what}"),
    )
}

/// The record status a run's result ends it with.
pub fn status_of(result: &Result<Outcome, planwright::RunError>) -> S {
    match result {
        Ok(out) if matches!(out.status, RunStatus::Interrupted | RunStatus::Cancelled) => {
            S::Interrupted
        }
        Ok(out) if out.status == RunStatus::Suspended => S::Running,
        Ok(out) if matches!(out.values["status"].as_str(), Some("failed" | "aborted")) => S::Error,
        Ok(_) => S::Success,
        Err(planwright::RunError::Cancelled) => S::Interrupted,
        Err(_) => S::Error,
    }
}

/// Records how the run of `rec` ended, wakes whoever waits for it, and counts it.
pub async fn finished(
    state: &AppState,
    rec: &RunRecord,
    result: &Result<Outcome, planwright::RunError>,
) -> S {
    if taken_over(state, &rec.run_id, result) {
        // Another replica took the run over: its record is that replica's to end, and its
        // watchers here follow the record to that end (nothing is sent them).
        state.live.abandoned.remove(&rec.run_id);
        state.live.ends.remove(&rec.run_id);
        forget(state, &rec.run_id, &rec.thread_id, S::Running);
        return S::Running;
    }
    let status = status_of(result);
    if status == S::Running {
        // The server is stopping and checkpointed the run: it stays running for the next start
        // (of this process, or of another replica at once: the lease is released).
        forget(state, &rec.run_id, &rec.thread_id, S::Running);
        super::leases::release(state, rec).await;
        return status;
    }
    let error = result.as_ref().err().map(|e| e.to_string());
    let values = result.as_ref().map_or(Value::Null, |o| o.values.clone());
    conclude(state, rec, status, values, error).await;
    status
}

/// Ends the run of `rec` with `status`, however it got there (driven here, or found ended by a
/// restart or a takeover): its `webhook` is told, with the thread's `values`; its record ends
/// ([`end`]); it is counted.
pub async fn conclude(
    state: &AppState,
    rec: &RunRecord,
    status: S,
    values: Value,
    error: Option<String>,
) {
    if let Some(url) = rec.kwargs.get("webhook").and_then(Value::as_str) {
        let mut payload = record_json(rec);
        payload["status"] = json!(status.to_string());
        payload["values"] = values;
        payload["error"] = json!(error);
        super::webhook::spawn(url.to_string(), payload);
    }
    end(state, rec, status, error).await;
    state.runs.count(match status {
        S::Success => "finished",
        S::Interrupted => "interrupted",
        _ => "failed",
    });
}

/// Whether the run's execution here ended because another replica took it over: its writes
/// were refused (fenced), or the keeper stopped it here when its lease went to another replica.
/// Its result here is then not its outcome.
pub fn taken_over(
    state: &AppState,
    run_id: &str,
    result: &Result<Outcome, planwright::RunError>,
) -> bool {
    let fenced = matches!(
        result,
        Err(planwright::RunError::Checkpoint(
            planwright::checkpoint::CheckpointError::Fenced { .. }
        ))
    );
    fenced || state.live.abandoned.contains(run_id)
}

/// Watches how this process's execution of `run_id` ends, for [`ended_elsewhere`]: taken before
/// the run is driven.
pub fn watch_end(state: &AppState, run_id: &str) -> Option<watch::Receiver<Option<S>>> {
    state.live.ends.get(run_id).map(|tx| tx.subscribe())
}

/// Whether the run [`watch_end`] watched, once driven to its end here, went on on another
/// replica (it was taken over): nothing was sent to its watchers.
pub fn ended_elsewhere(end: &Option<watch::Receiver<Option<S>>>) -> bool {
    end.as_ref().is_some_and(|rx| rx.borrow().is_none())
}

/// What `runs/wait` answers for a run that goes on, or ended, on another replica: waits for its
/// end wherever it runs, then answers the thread's values as a run's own end does — with
/// `__interrupt__` when it paused — or its error when it failed. A store that cannot tell the
/// outcome is a 503 naming storage, never a guess.
pub async fn outcome(state: &AppState, rec: &RunRecord) -> Result<Value, ApiError> {
    let status = wait_end(state, &rec.run_id, Duration::from_secs(86_400)).await?;
    let missing = || {
        ApiError::not_found(format!(
            "run `{}` was deleted before it ended (rolled back)",
            rec.run_id
        ))
    };
    let Some(status) = status else {
        return Err(missing());
    };
    if matches!(status, S::Error | S::Timeout) {
        let ended = state
            .run_store
            .get(&rec.run_id)
            .await
            .map_err(|e| storage(&format!("the outcome of run `{}`", rec.run_id), e))?
            .ok_or_else(missing)?;
        if let Some(e) = ended.error {
            return Err(ApiError::internal(e));
        }
    }
    let thread = ThreadId::new(&rec.thread_id);
    let a = state.assistants.get(&rec.assistant_id)?;
    let view = a
        .view(&thread)
        .await
        .map_err(|e| storage(&format!("the values of thread `{thread}`"), e))?;
    Ok(view.map_or(Value::Null, |v| {
        let mut values = v.values;
        if !v.interrupts.is_empty() {
            values["__interrupt__"] = json!(v
                .interrupts
                .iter()
                .map(|i| json!({"value": i.value, "id": i.id.0}))
                .collect::<Vec<_>>());
            values["status"] = json!("interrupted");
        }
        values
    }))
}

/// Sets the record's final status (from pending or running) and wakes its watchers.
pub async fn end(state: &AppState, rec: &RunRecord, status: S, error: Option<String>) {
    let mut change = RunChange::at(now_ms());
    change.error = error;
    if let Err(e) = state
        .run_store
        .transition(&rec.run_id, &[S::Pending, S::Running], status, change)
        .await
    {
        tracing::error!(run_id = rec.run_id, error = %e, "a run's end could not be recorded");
    }
    forget(state, &rec.run_id, &rec.thread_id, status);
}

pub fn forget(state: &AppState, run_id: &str, thread: &str, status: S) {
    if let Some((_, tx)) = state.live.ends.remove(run_id) {
        let _ = tx.send(Some(status));
    }
    state.live.by_thread.remove_if(thread, |_, r| r == run_id);
    state.live.cancel_asked.remove(run_id);
}

/// Waits until the run has ended (or, for a run of this process stopped by a shutdown, is left
/// for the next start), at most `limit`; its status then, `None` if it has no record.
pub async fn wait_end(
    state: &AppState,
    run_id: &str,
    limit: Duration,
) -> Result<Option<S>, ApiError> {
    let local = state.live.ends.get(run_id).map(|tx| tx.subscribe());
    let wait = async {
        if let Some(mut rx) = local {
            if let Ok(s) = rx.wait_for(|s| s.is_some()).await {
                return Ok(*s);
            }
        }
        // Not (or no longer) this process's: the record tells (a store that cannot: 503).
        loop {
            match state
                .run_store
                .get(run_id)
                .await
                .map_err(|e| storage(&format!("the outcome of run `{run_id}`"), e))?
            {
                None => return Ok(None),
                Some(r) if r.status.is_ended() => return Ok(Some(r.status)),
                Some(_) => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
    };
    tokio::time::timeout(limit, wait).await.map_err(|_| {
        ApiError(
            StatusCode::GATEWAY_TIMEOUT,
            format!("run `{run_id}` did not end within {limit:?}"),
        )
    })?
}

/// The runs this process is executing, as (thread, run id).
pub fn local_runs(state: &AppState) -> Vec<(String, String)> {
    state
        .live
        .by_thread
        .iter()
        .map(|e| (e.key().clone(), e.value().clone()))
        .collect()
}

/// Cancels this process's execution of `rec` (asked on another replica): the run ends as a
/// local cancel ends it, and its record says so.
pub fn cancel_local(state: &AppState, rec: &RunRecord) {
    if let Some(a) = state.assistants.find(&rec.assistant_id) {
        a.cancel(&ThreadId::new(&rec.thread_id));
    }
}

/// Stops this process's execution of `rec`, which another replica took over, leaving its record
/// alone.
pub async fn abandon(state: &AppState, rec: &RunRecord) {
    state.live.abandoned.insert(rec.run_id.clone());
    let thread = ThreadId::new(&rec.thread_id);
    if let Ok(Some(trec)) = state.checkpointer.thread_metadata(&thread).await {
        assistants::of(state, &thread, &trec).cancel(&thread);
    }
}

/// Whether the run's whole stream is kept (`runs/stream`, or `stream_resumable: true`), as its
/// record's request says.
pub fn resumable(rec: &RunRecord) -> bool {
    rec.kwargs["stream_resumable"] == json!(true)
}

/// A record as the API shows it (LangGraph's `Run`).
pub fn record_json(r: &RunRecord) -> Value {
    let time = super::time::rfc3339;
    let mut v = json!({
        "run_id": r.run_id, "thread_id": r.thread_id, "assistant_id": r.assistant_id,
        "status": r.status.as_str(), "created_at": time(r.created_at),
        "updated_at": time(r.updated_at), "metadata": r.metadata,
        "multitask_strategy": r.multitask_strategy, "kwargs": r.kwargs,
    });
    if let Some(e) = &r.error {
        v["error"] = json!(e);
    }
    v
}
