//! Stopping runs: a cancel (interrupt or rollback) of a pending or running run, here or on
//! another replica, and the room a multitask strategy makes on a busy thread before a new run.
//! A run running here is stopped through its assistant; one another replica runs, through its
//! record (the replica sees the request at its next lease renewal).

use super::errors::ApiError;
use super::live_runs::{forget, wait_end};
use super::start_writes::writes_from_json;
use super::{start, AppState};
use planwright::runs::{now_ms, RunChange, RunRecord, RunRecordStatus as S};
use planwright::ThreadId;
use std::time::Duration;

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
                    state.live.ask_cancel(&rec.run_id);
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
