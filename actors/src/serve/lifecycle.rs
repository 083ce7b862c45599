//! The life of a run in the server, kept in the run store so a restart knows every run that was
//! going on: **accepted** (a `pending` record holding the request, stored before anything runs),
//! **started** (`running`, with the thread's head and pending writes at that moment, which a
//! rollback restores), **ended** (its final status, [`super::live_runs`]). Every run —
//! background, `wait`, `stream`, queued, recovered — goes through the same three steps.
//!
//! The flows over the records: [`begin`] (a request's run), [`run_queued`] (a queued run's
//! turn, handed here by [`super::queue`]); beside them [`super::cancel`] stops runs and
//! [`super::recovery`] picks them up again. Below them all, [`super::live_runs`] keeps what this
//! process knows of its runs and records their ends.

use super::assistant::AssistantRun;
use super::assistants::AssistantRef;
use super::errors::ApiError;
use super::live_runs::{end, forget, storage, StreamControl};
use super::run_body::RunBody;
use super::start::{self, start_run};
use super::start_writes::snapshot;
use super::AppState;
use planwright::runs::{now_ms, RunChange, RunRecord, RunRecordStatus as S};
use planwright::ThreadId;
use serde_json::Value;
use std::sync::Arc;

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
    state.live.expect_end(&r.run_id);
    // With replicas, this replica holds it from now on: were it to go away before starting the
    // run, another replica would start it.
    let here = super::leases::hold(state, &r)
        .await
        .map_err(ApiError::internal)?;
    if !here {
        // Taken over meanwhile: its end is the other replica's to record and tell.
        state.live.let_go(&r.run_id);
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

/// A run asked for by a request: checks it, makes room on the thread as its strategy says,
/// records it, and starts it — or, when another replica took it over first, says so. A refused
/// request leaves no record.
pub async fn begin(state: &AppState, id: &str, mut body: RunBody) -> Result<Begun, ApiError> {
    body.resolve_assistant(state).await?;
    body.check(state)?;
    let (thread, trec) = start::thread_for_run(state, id, &body).await?;
    super::cancel::make_room(state, &thread, body.strategy()).await?;
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
    // A copy of an earlier run of the thread that this process stopped because another replica
    // took it over goes on until its next superstep boundary (a cancel is cooperative): the
    // claim below fences the thread with a newer token, under which that copy's writes would
    // pass. It is waited for first.
    if state.live.abandoned_on(rec.thread_id.as_str()) {
        if let Some(a) = state.assistants.find(&rec.assistant_id) {
            a.wait_idle(&thread).await;
        }
    }
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
    match super::leases::claim(state, rec).await {
        Ok(true) => {}
        Ok(false) => {
            // Another replica holds it (it took the pending run over while this one froze):
            // that one lets it go when it finds the run started, and a takeover continues it.
            state.live.let_go(&rec.run_id);
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
            state.live.executing(&rec.thread_id, &rec.run_id, control);
            if state.live.cancel_was_asked(&rec.run_id) {
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
            super::leases::release(state, rec).await;
            state.live.let_go(&rec.run_id);
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

/// A queued run's turn ([`super::queue`] calls it, one run of a thread at a time): it waits for
/// the thread's current run, here or on another replica, then starts and is driven to its end.
/// A stored request that no longer passes the checks ends the run as `error` with the reason.
pub fn run_queued(state: &Arc<AppState>, rec: RunRecord) -> futures::future::BoxFuture<'_, ()> {
    Box::pin(async move {
        let mut body: RunBody = match serde_json::from_value(rec.kwargs.clone()) {
            Ok(b) => b,
            Err(e) => {
                let why = format!("its stored request does not decode: {e}");
                end(state, &rec, S::Error, Some(why)).await;
                return;
            }
        };
        // Its record may predate this server's assistants and limits: checked again.
        if let Err(e) = body.check(state) {
            end(state, &rec, S::Error, Some(e.for_record())).await;
            return;
        }
        // Its turn: it waits for the thread's current run (one recovered after a restart, say)
        // before its record says `running`, so a thread has one running record at a time.
        let thread = ThreadId::new(&rec.thread_id);
        if let Some(a) = state.assistants.find(body.assistant()) {
            a.wait_idle(&thread).await;
        }
        // And for a run another replica executes on the thread.
        if let Err(e) = super::cancel::wait_elsewhere(state, &thread).await {
            tracing::warn!(thread_id = rec.thread_id, why = %e.1, "could not see the thread's other runs");
        }
        body.wait_for_thread();
        match launch(state, &rec, body, OnRefusal::Record).await {
            Ok(Some((thread, assistant, handle))) => {
                let _ = super::publish::drive(state, &rec, assistant, &thread, handle, false).await;
            }
            Ok(None) => {
                tracing::info!(
                    thread_id = rec.thread_id,
                    run_id = rec.run_id,
                    "a queued run went to another replica"
                );
            }
            Err(e) => {
                tracing::info!(thread_id = rec.thread_id, run_id = rec.run_id, why = %e.1, "a queued run did not start");
            }
        }
    })
}
