//! Picking runs up again: after a restart ([`recover`] reads the store's index of unfinished
//! runs — its cost grows with the runs in flight, not with the threads stored), and when
//! another replica went away ([`super::replica`] hands its runs here). A running run continues
//! from its thread's last checkpoint; a pending one queues again.

use super::assistants;
use super::errors::ApiError;
use super::live_runs::{conclude, StreamControl};
use super::start::CANCELLED_RUN;
use super::AppState;
use planwright::runs::{now_ms, RunChange, RunRecord, RunRecordStatus as S};
use planwright::ThreadId;
use serde_json::Value;
use std::sync::Arc;

/// Queues a pending run here: one a stopped server left, or a replica that went away had
/// accepted.
pub fn requeue(state: &Arc<AppState>, rec: RunRecord) {
    state.live.expect_end(&rec.run_id);
    super::queue::submit(state, rec);
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
            S::Pending => requeue(state, rec),
            _ => {
                // With replicas, a running run whose lease is live is another replica's.
                match super::leases::claim(state, &rec).await {
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
                    conclude(state, &rec, S::Error, Value::Null, Some(e.for_record())).await;
                }
            }
        }
    }
    Ok(n)
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
        let why = Some("its thread was deleted".into());
        conclude(state, rec, S::Error, Value::Null, why).await;
        return Ok(());
    };
    if trec.get(CANCELLED_RUN).is_some_and(|v| !v.is_null()) {
        // Cancelled by a person: never resumed behind their back.
        conclude(state, rec, S::Interrupted, Value::Null, None).await;
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
        let values = view.map_or(Value::Null, |v| v.values);
        conclude(state, rec, s, values, None).await;
        return Ok(());
    }
    state.live.expect_end(&rec.run_id);
    let control = StreamControl::of(state, rec);
    let mut opts = planwright::RunOptions::default().events_while(control.switch.clone());
    if super::publish::wants_values(&rec.kwargs["stream_mode"]) {
        opts = opts.with_values();
    }
    let handle = match a.start_continue(thread.clone(), opts).await {
        Ok(h) => h,
        // Paused on a question nobody has answered: the run ended there.
        Err(planwright::RunError::Refused(planwright::Refusal::Interrupted(_))) => {
            conclude(state, rec, S::Interrupted, Value::Null, None).await;
            return Ok(());
        }
        Err(e) => {
            state.live.let_go(&rec.run_id);
            return Err(ApiError::internal(e.to_string()));
        }
    };
    state.live.executing(&rec.thread_id, &rec.run_id, control);
    let (st, rec) = (state.clone(), rec.clone());
    tokio::spawn(async move {
        let _ = super::publish::drive(&st, &rec, a, &thread, handle, true).await;
    });
    Ok(())
}
