//! The life of a run in the server, kept in the run store so a restart knows every run that was
//! going on: **accepted** (a `pending` record holding the request, stored before anything runs),
//! **started** (`running`, with the thread's head and pending writes at that moment, which a
//! rollback restores), **ended** (its final status). Every run — background, `wait`, `stream`,
//! queued, recovered — goes through the same three steps.
//!
//! In memory, only what cannot be stored: who waits for a run to end (`join`, a cancel with
//! `wait`, a rollback) and which run each thread of this process is running. A restarted server
//! rebuilds its work from [`recover`], which reads the store's index of unfinished runs — its
//! cost grows with the runs in flight, not with the threads stored.

use super::assistant::{AssistantRun, Outcome};
use super::assistants::{self, AssistantRef};
use super::errors::ApiError;
use super::run_body::RunBody;
use super::start::{self, start_run, CANCELLED_RUN};
use super::AppState;
use axum::http::StatusCode;
use dashmap::{DashMap, DashSet};
use planwright::checkpoint::{TaskWrite, WriteKind};
use planwright::runs::{now_ms, RunChange, RunRecord, RunRecordStatus as S};
use planwright::{CheckpointId, EventSwitch, RunStatus, TaskId, ThreadId};
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
    fn of(state: &AppState, rec: &RunRecord) -> Self {
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
}

/// What to do with the record of a run whose request is refused when it starts.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum OnRefusal {
    /// Delete it: the client gets the refusal (4xx) and there never was a run.
    Delete,
    /// Keep it as `error` with the reason: a queued run the client already holds a record of.
    Record,
}

/// Stores a pending record of the run `body` asks for on `thread` (whose record is `thread_rec`),
/// held by this replica. With it, whether the run is still this replica's to start: false when
/// another replica took it over before this one could claim it (this one froze in between).
pub async fn accept(
    state: &AppState,
    thread: &ThreadId,
    thread_rec: &Value,
    body: &RunBody,
) -> Result<(RunRecord, bool), ApiError> {
    let mut r = RunRecord::pending(
        super::ids::new_uuid(),
        thread.as_str(),
        body.assistant(),
        now_ms(),
    );
    r.multitask_strategy = body.strategy().to_string();
    r.metadata = body.metadata();
    r.kwargs = serde_json::to_value(body).map_err(ApiError::internal)?;
    r.owner = thread_rec
        .get("owner")
        .and_then(|o| o.as_str())
        .map(String::from);
    let r = state
        .run_store
        .insert(r)
        .await
        .map_err(ApiError::internal)?;
    state.live.thread_followers.accepted(&r.thread_id);
    state
        .live
        .ends
        .insert(r.run_id.clone(), watch::channel(None).0);
    // With replicas, this replica holds it from now on: were it to go away before starting the
    // run, another replica would start it.
    let here = super::replica::hold(state, &r)
        .await
        .map_err(ApiError::internal)?;
    if !here {
        // Taken over meanwhile: its end is the other replica's to record and tell.
        state.live.ends.remove(&r.run_id);
    }
    Ok((r, here))
}

/// Where a run asked for by a request goes on.
pub enum Begun {
    /// Started here, on this replica's engine: its record, thread, assistant and handle.
    Here(RunRecord, ThreadId, AssistantRef, Box<dyn AssistantRun>),
    /// On another replica, which took the run over while this one could not claim it: the
    /// client follows it there ([`outcome`], or the run's stream), and gets its real end.
    Elsewhere(RunRecord),
}

/// Queues a pending run here (one a replica that went away had accepted).
pub fn requeue(state: &Arc<AppState>, rec: RunRecord) {
    state
        .live
        .ends
        .insert(rec.run_id.clone(), watch::channel(None).0);
    super::queue::submit(state, rec);
}

/// A run asked for by a request: checks it, makes room on the thread as its strategy says,
/// records it, and starts it — or, when another replica took it over first, says so. A refused
/// request leaves no record.
pub async fn begin(state: &AppState, id: &str, mut body: RunBody) -> Result<Begun, ApiError> {
    body.resolve_assistant(state).await?;
    body.check(state)?;
    let (thread, trec) = start::thread_for_run(state, id, &body).await?;
    make_room(state, &thread, body.strategy()).await?;
    let (rec, here) = accept(state, &thread, &trec, &body).await?;
    if !here {
        return Ok(Begun::Elsewhere(rec));
    }
    Ok(match launch(state, &rec, body, OnRefusal::Delete).await? {
        Some((t, a, h)) => Begun::Here(rec, t, a, h),
        None => Begun::Elsewhere(rec),
    })
}

/// Marks `rec` running (with where its thread stands) and starts it on its assistant's engine
/// with its events, which [`super::publish::drive`] publishes when the run is resumable or
/// followed.
/// A run cancelled while pending does not start (409). A run another replica took over (it
/// started it, or ended it, while this one could not claim it) is not started here either:
/// `None`, and this replica lets go of its lease.
pub async fn launch(
    state: &AppState,
    rec: &RunRecord,
    body: RunBody,
    on_refusal: OnRefusal,
) -> Result<Option<(ThreadId, AssistantRef, Box<dyn AssistantRun>)>, ApiError> {
    let thread = ThreadId::new(&rec.thread_id);
    let (head, writes) = snapshot(state, &thread).await?;
    let change = RunChange::at(now_ms()).started_from(head, writes);
    let started = state
        .run_store
        .transition(&rec.run_id, &[S::Pending], S::Running, change)
        .await
        .map_err(ApiError::internal)?;
    if !started {
        return not_started(state, rec).await.map(|()| None);
    }
    // With replicas, the run is this replica's from here: its lease, and the thread fenced.
    match super::replica::claim(state, rec).await {
        Ok(true) => {}
        Ok(false) => {
            // Another replica holds it (it took the pending run over while this one froze):
            // that one lets it go when it finds the run started, and a takeover continues it.
            state.live.ends.remove(&rec.run_id);
            return Ok(None);
        }
        Err(e) => {
            let e = ApiError::internal(e);
            end(state, rec, S::Error, Some(e.for_record())).await;
            return Err(e);
        }
    }
    // Every run streams its events to `publish::drive`: all of them when it is resumable, from
    // the moment a client follows it otherwise (until then its events are not even built).
    let control = StreamControl::of(state, rec);
    match start_run(state, &rec.thread_id, body, control.switch.clone()).await {
        Ok((t, a, h)) => {
            state.live.streams.insert(rec.run_id.clone(), control);
            state
                .live
                .by_thread
                .insert(rec.thread_id.clone(), rec.run_id.clone());
            if state.live.cancel_asked.remove(&rec.run_id).is_some() {
                a.cancel(&t);
            }
            Ok(Some((t, a, h)))
        }
        Err(e) => {
            match on_refusal {
                OnRefusal::Delete => {
                    let _ = state.run_store.delete(&rec.run_id).await;
                    forget(state, &rec.run_id, &rec.thread_id, S::Error);
                }
                OnRefusal::Record => end(state, rec, S::Error, Some(e.for_record())).await,
            }
            Err(e)
        }
    }
}

/// Why a pending run did not start here (its record was no longer `pending`): cancelled before
/// it started (409: it never ran; it has no start writes), or taken over by another replica,
/// which started it (`Ok`: this replica lets go of its lease and its client follows the run).
async fn not_started(state: &AppState, rec: &RunRecord) -> Result<(), ApiError> {
    let now = state
        .run_store
        .get(&rec.run_id)
        .await
        .map_err(|e| storage(&format!("run `{}` cannot be read", rec.run_id), e))?;
    match now {
        Some(r) if !(r.status == S::Interrupted && r.start_writes.is_null()) => {
            super::replica::release(state, rec).await;
            state.live.ends.remove(&rec.run_id);
            tracing::info!(
                run_id = rec.run_id,
                thread_id = rec.thread_id,
                status = %r.status,
                "a run this replica recorded was taken over by another; its client follows it there"
            );
            Ok(())
        }
        _ => {
            forget(state, &rec.run_id, &rec.thread_id, S::Interrupted);
            Err(ApiError::conflict(format!(
                "run `{}` was cancelled before it started",
                rec.run_id
            )))
        }
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

/// Where `thread` stands now: its head and the writes pending there (as JSON).
async fn snapshot(
    state: &AppState,
    thread: &ThreadId,
) -> Result<(Option<CheckpointId>, Value), ApiError> {
    let head = state
        .checkpointer
        .head(thread)
        .await
        .map_err(ApiError::internal)?;
    let writes = match head {
        Some(h) => state
            .checkpointer
            .get_writes(thread, h)
            .await
            .map_err(ApiError::internal)?,
        None => Vec::new(),
    };
    Ok((head, writes_json(&writes)))
}

fn writes_json(writes: &[TaskWrite]) -> Value {
    Value::Array(
        writes
            .iter()
            .map(|w| {
                json!({
                    "step": w.task.step, "index": w.task.index, "node": w.node,
                    "kind": w.kind.as_str(), "key": w.key,
                    "payload": String::from_utf8_lossy(&w.payload),
                })
            })
            .collect(),
    )
}

/// The writes [`writes_json`] stored; anything else is an error naming the run.
fn writes_from_json(run_id: &str, v: &Value) -> Result<Vec<TaskWrite>, ApiError> {
    let bad = |why: String| {
        ApiError::internal(format!(
            "run `{run_id}`: its stored start writes are corrupt ({why}); the thread was not rolled back"
        ))
    };
    let Some(list) = v.as_array() else {
        return if v.is_null() {
            Ok(Vec::new())
        } else {
            Err(bad(format!("not a list: {v}")))
        };
    };
    list.iter()
        .map(|w| {
            let kind = w["kind"]
                .as_str()
                .and_then(WriteKind::from_name)
                .ok_or_else(|| bad(format!("write kind {}", w["kind"])))?;
            let (Some(step), Some(index), Some(node), Some(key), Some(payload)) = (
                w["step"].as_u64(),
                w["index"].as_u64().and_then(|i| u32::try_from(i).ok()),
                w["node"].as_str(),
                w["key"].as_str(),
                w["payload"].as_str(),
            ) else {
                return Err(bad(format!("incomplete write {w}")));
            };
            Ok(TaskWrite {
                task: TaskId { step, index },
                node: node.to_string(),
                kind,
                key: key.to_string(),
                payload: payload.as_bytes().to_vec(),
            })
        })
        .collect()
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
        super::replica::release(state, rec).await;
        return status;
    }
    let error = result.as_ref().err().map(|e| e.to_string());
    if let Some(url) = rec.kwargs.get("webhook").and_then(Value::as_str) {
        let mut payload = record_json(rec);
        payload["status"] = json!(status.to_string());
        payload["values"] = result.as_ref().map_or(Value::Null, |o| o.values.clone());
        payload["error"] = json!(error);
        super::webhook::spawn(url.to_string(), payload);
    }
    end(state, rec, status, error).await;
    state.runs.count(match status {
        S::Success => "finished",
        S::Interrupted => "interrupted",
        _ => "failed",
    });
    status
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

fn forget(state: &AppState, run_id: &str, thread: &str, status: S) {
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

/// How long a cancel with `wait`, a rollback, or a multitask strategy waits for a run to stop.
pub const STOP_WAIT: Duration = Duration::from_secs(60);

/// How a cancel treats what the run wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CancelAction {
    /// Stop it; its checkpoints stay, and the thread takes new input or continues from them.
    Interrupt,
    /// Stop it and remove what it wrote and its record: the thread is as before the run.
    Rollback,
}

/// Cancels a pending or running run (see [`CancelAction`]); with `wait`, returns once it stopped.
/// Cancelling an ended run does nothing; rolling one back is refused (409).
pub async fn cancel(
    state: &AppState,
    rec: &RunRecord,
    action: CancelAction,
    wait: bool,
) -> Result<(), ApiError> {
    let rollback = action == CancelAction::Rollback;
    match rec.status {
        S::Pending => {
            let change = RunChange::at(now_ms());
            let won = state
                .run_store
                .transition(&rec.run_id, &[S::Pending], S::Interrupted, change)
                .await
                .map_err(ApiError::internal)?;
            if won {
                forget(state, &rec.run_id, &rec.thread_id, S::Interrupted);
                if rollback {
                    state
                        .run_store
                        .delete(&rec.run_id)
                        .await
                        .map_err(ApiError::internal)?;
                }
                return Ok(());
            }
            // It started meanwhile: cancel it as a running run.
            let now = state
                .run_store
                .get(&rec.run_id)
                .await
                .map_err(ApiError::internal)?
                .ok_or_else(|| ApiError::not_found(format!("run `{}` is gone", rec.run_id)))?;
            Box::pin(cancel(state, &now, action, wait)).await
        }
        S::Running => {
            let thread = ThreadId::new(&rec.thread_id);
            // Recorded before the engine stops the run: a restart in between never resumes it.
            start::mark_cancelled(state, &thread, Some(&rec.run_id)).await?;
            match state.live.running_on(&rec.thread_id) {
                Some(r) if r == rec.run_id => {
                    state.assistants.get(&rec.assistant_id)?.cancel(&thread);
                }
                _ => {
                    state.live.cancel_asked.insert(rec.run_id.clone());
                    // Another replica may be running it: it stops at its next renewal.
                    state
                        .run_store
                        .request_cancel(&rec.run_id)
                        .await
                        .map_err(ApiError::internal)?;
                }
            }
            if wait || rollback {
                wait_end(state, &rec.run_id, STOP_WAIT).await?;
            }
            if rollback {
                roll_back(state, &rec.run_id, &thread).await?;
            }
            Ok(())
        }
        // Cancelling an ended run is a no-op (a retried cancel succeeds); rolling it back is not
        // offered: its thread may have moved on since.
        _ if !rollback => Ok(()),
        ended => Err(ApiError::conflict(format!(
            "run `{}` has ended ({ended}); only a pending or running run can be rolled back",
            rec.run_id
        ))),
    }
}

/// Rewinds `thread` to where the (stopped) run began and deletes the run's record.
async fn roll_back(state: &AppState, run_id: &str, thread: &ThreadId) -> Result<(), ApiError> {
    let Some(rec) = state
        .run_store
        .get(run_id)
        .await
        .map_err(ApiError::internal)?
    else {
        return Ok(());
    };
    let writes = writes_from_json(run_id, &rec.start_writes)?;
    let deleted = state
        .checkpointer
        .rewind(thread, rec.start_checkpoint, writes)
        .await
        .map_err(ApiError::internal)?;
    state
        .run_store
        .delete(run_id)
        .await
        .map_err(ApiError::internal)?;
    start::mark_cancelled(state, thread, None).await?;
    tracing::info!(run_id, thread_id = %thread, checkpoints_deleted = deleted, "run rolled back");
    Ok(())
}

/// Before a run with strategy `interrupt` or `rollback` starts on a busy thread: cancels the
/// thread's current run that way and waits for it to stop.
pub async fn make_room(
    state: &AppState,
    thread: &ThreadId,
    strategy: &str,
) -> Result<(), ApiError> {
    let action = match strategy {
        "interrupt" => CancelAction::Interrupt,
        "rollback" => CancelAction::Rollback,
        "enqueue" => {
            // Its turn comes when a run another replica executes on the thread has ended.
            wait_elsewhere(state, thread).await?;
            return Ok(());
        }
        _ => {
            return match running_elsewhere(state, thread).await? {
                Some(other) => Err(ApiError::conflict(format!(
                    "thread `{thread}` has a run in progress on another replica (`{}`; multitask_strategy reject)",
                    other.run_id
                ))),
                None => Ok(()),
            }
        }
    };
    let Some(run_id) = state.live.running_on(thread.as_str()) else {
        // A run another replica executes is cancelled there (through its record).
        if let Some(other) = running_elsewhere(state, thread).await? {
            cancel(state, &other, action, true).await?;
        }
        return Ok(());
    };
    if let Some(rec) = state
        .run_store
        .get(&run_id)
        .await
        .map_err(ApiError::internal)?
    {
        if !rec.status.is_ended() {
            cancel(state, &rec, action, true).await?;
        }
    }
    Ok(())
}

/// With replicas: the thread's running run that another replica executes, if any.
pub async fn running_elsewhere(
    state: &AppState,
    thread: &ThreadId,
) -> Result<Option<RunRecord>, ApiError> {
    if state.replica.is_none() {
        return Ok(None);
    }
    let local = state.live.running_on(thread.as_str());
    let recent = state
        .run_store
        .list_thread(thread.as_str(), 8, 0)
        .await
        .map_err(ApiError::internal)?;
    Ok(recent
        .into_iter()
        .find(|r| r.status == S::Running && local.as_deref() != Some(r.run_id.as_str())))
}

/// Waits until no other replica executes a run on `thread`.
pub async fn wait_elsewhere(state: &AppState, thread: &ThreadId) -> Result<(), ApiError> {
    while let Some(other) = running_elsewhere(state, thread).await? {
        wait_end(state, &other.run_id, Duration::from_secs(86_400)).await?;
    }
    Ok(())
}

/// On start: picks up every run a stopped server left unfinished, oldest first. A running one
/// continues from its thread's last checkpoint (unless it was cancelled, or its thread has
/// nothing left to do: then its record gets the status the thread shows); a pending one is
/// queued again, in submission order. Returns how many runs it picked up.
pub async fn recover(state: &Arc<AppState>) -> Result<usize, ApiError> {
    let unfinished = state
        .run_store
        .unfinished(usize::MAX)
        .await
        .map_err(ApiError::internal)?;
    let n = unfinished.len();
    let mut continued = std::collections::HashSet::new();
    for mut rec in unfinished {
        // One run per thread continues; a later `running` record of the same thread was
        // waiting for it when the server stopped (its work has not begun): it queues again.
        // (Were the process killed in the instant between the earlier run's end and its record
        // saying so, the later run's work would have begun, and its input would apply twice.)
        if rec.status == S::Running && continued.contains(&rec.thread_id) {
            let change = RunChange::at(now_ms());
            let requeued = state
                .run_store
                .transition(&rec.run_id, &[S::Running], S::Pending, change)
                .await
                .map_err(ApiError::internal)?;
            if requeued {
                rec.status = S::Pending;
            }
        }
        match rec.status {
            S::Pending => {
                state
                    .live
                    .ends
                    .insert(rec.run_id.clone(), watch::channel(None).0);
                super::queue::submit(state, rec);
            }
            _ => {
                // With replicas, a running run whose lease is live is another replica's.
                match super::replica::claim(state, &rec).await {
                    Ok(true) => {}
                    Ok(false) => continue,
                    Err(e) => {
                        tracing::error!(run_id = rec.run_id, error = %e, "a running run could not be claimed; left for later");
                        continue;
                    }
                }
                continued.insert(rec.thread_id.clone());
                if let Err(e) = resume_running(state, &rec).await {
                    tracing::error!(run_id = rec.run_id, error = %e.1, "a running run could not be picked up");
                    end(state, &rec, S::Error, Some(e.for_record())).await;
                }
            }
        }
    }
    Ok(n)
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

/// Continues a `running` run whose process stopped (a restart, or a replica that is gone).
pub async fn resume_running(state: &Arc<AppState>, rec: &RunRecord) -> Result<(), ApiError> {
    let thread = ThreadId::new(&rec.thread_id);
    let Some(trec) = state
        .checkpointer
        .thread_metadata(&thread)
        .await
        .map_err(ApiError::internal)?
    else {
        end(state, rec, S::Error, Some("its thread was deleted".into())).await;
        return Ok(());
    };
    if trec.get(CANCELLED_RUN).is_some_and(|v| !v.is_null()) {
        // Cancelled by a person: never resumed behind their back.
        end(state, rec, S::Interrupted, None).await;
        return Ok(());
    }
    // A run with new input whose process stopped before it stored the input has not begun:
    // its thread is where the run found it. It starts again from its request.
    let head = state
        .checkpointer
        .head(&thread)
        .await
        .map_err(ApiError::internal)?;
    let new_input = !rec.kwargs["input"].is_null();
    if new_input && head == rec.start_checkpoint {
        let requeued = state
            .run_store
            .transition(
                &rec.run_id,
                &[S::Running],
                S::Pending,
                RunChange::at(now_ms()),
            )
            .await
            .map_err(ApiError::internal)?;
        if requeued {
            let mut pending = rec.clone();
            pending.status = S::Pending;
            requeue(state, pending);
        }
        return Ok(());
    }
    let a = assistants::of(state, &thread, &trec);
    let view = a.view(&thread).await.map_err(ApiError::internal)?;
    let status = match &view {
        // Work left (perhaps behind an interrupt its answer already reached): the engine decides.
        Some(v) if !v.next.is_empty() => None,
        Some(v) if !v.interrupts.is_empty() => Some(S::Interrupted),
        Some(v) if v.failed => Some(S::Error),
        _ => Some(S::Success),
    };
    if let Some(s) = status {
        // It reached its end before the server stopped, but the record did not.
        end(state, rec, s, None).await;
        return Ok(());
    }
    state
        .live
        .ends
        .insert(rec.run_id.clone(), watch::channel(None).0);
    let control = StreamControl::of(state, rec);
    let mut opts = planwright::RunOptions::default().events_while(control.switch.clone());
    if super::publish::wants_values(&rec.kwargs["stream_mode"]) {
        opts = opts.with_values();
    }
    let handle = match a.start_continue(thread.clone(), opts).await {
        Ok(h) => {
            state.live.streams.insert(rec.run_id.clone(), control);
            h
        }
        // Paused on a question nobody has answered: the run ended there.
        Err(planwright::RunError::Refused(planwright::Refusal::Interrupted(_))) => {
            end(state, rec, S::Interrupted, None).await;
            return Ok(());
        }
        Err(e) => {
            state.live.ends.remove(&rec.run_id);
            return Err(ApiError::internal(e.to_string()));
        }
    };
    state
        .live
        .by_thread
        .insert(rec.thread_id.clone(), rec.run_id.clone());
    let (st, rec) = (state.clone(), rec.clone());
    tokio::spawn(async move {
        let _ = super::publish::drive(&st, &rec, a, &thread, handle, true).await;
    });
    Ok(())
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_writes_round_trip_and_corrupt_ones_are_errors() {
        let writes = vec![
            TaskWrite {
                task: TaskId { step: 3, index: 1 },
                node: "ask".into(),
                kind: WriteKind::Interrupt,
                key: String::new(),
                payload: br#"{"id":"i-1","value":"why?"}"#.to_vec(),
            },
            TaskWrite {
                task: TaskId { step: 3, index: 0 },
                node: "plan".into(),
                kind: WriteKind::Memo,
                key: "k".into(),
                payload: b"[1,2]".to_vec(),
            },
        ];
        let v = writes_json(&writes);
        assert_eq!(writes_from_json("r", &v).unwrap(), writes);
        assert!(writes_from_json("r", &Value::Null).unwrap().is_empty());
        let e = writes_from_json("r-9", &json!([{"kind": "nope"}])).unwrap_err();
        assert!(e.1.contains("r-9") && e.1.contains("corrupt"), "{}", e.1);
        assert!(writes_from_json("r", &json!({"a": 1})).is_err());
    }
}
