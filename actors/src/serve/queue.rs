//! Queued runs: `POST /threads/{id}/runs` with `multitask_strategy: "enqueue"` on a busy thread
//! answers at once with a `pending` record; the run starts when the runs before it on the thread
//! have ended, in the order they were submitted (one queue and one worker task per thread with
//! pending runs). The request is kept in the record, so the queue is rebuilt from the run store
//! after a restart ([`super::lifecycle::recover`]). A pending run can be cancelled before it
//! starts: the worker's start is a compare-and-set from `pending`, so exactly one of the two wins.

use super::assistants::AssistantRef;
use super::lifecycle::{self, OnRefusal};
use super::run_body::RunBody;
use super::AppState;
use dashmap::DashMap;
use planwright::runs::{RunRecord, RunRecordStatus};
use std::sync::Arc;
use tokio::sync::mpsc;

/// The per-thread queues of pending runs.
#[derive(Default)]
pub struct RunQueues {
    by_thread: DashMap<String, mpsc::UnboundedSender<RunRecord>>,
}

/// Queues the pending run `rec` on its thread.
pub fn submit(state: &Arc<AppState>, rec: RunRecord) {
    let thread = rec.thread_id.clone();
    let mut entry = state
        .queues
        .by_thread
        .entry(thread.clone())
        .or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(work(state.clone(), thread.clone(), rx));
            tx
        });
    if let Err(mpsc::error::SendError(rec)) = entry.send(rec) {
        // The worker just ended: start a new one for this and later runs.
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(rec);
        *entry = tx;
        tokio::spawn(work(state.clone(), thread, rx));
    }
}

async fn work(state: Arc<AppState>, thread: String, mut rx: mpsc::UnboundedReceiver<RunRecord>) {
    loop {
        let next = match rx.try_recv() {
            Ok(item) => item,
            Err(_) => {
                // Nothing pending: retire, unless a run was queued while we looked.
                state.queues.by_thread.remove(&thread);
                match rx.try_recv() {
                    Ok(item) => item,
                    Err(_) => return,
                }
            }
        };
        run_one(&state, next).await;
    }
}

async fn run_one(state: &Arc<AppState>, rec: RunRecord) {
    let mut body: RunBody = match serde_json::from_value(rec.kwargs.clone()) {
        Ok(b) => b,
        Err(e) => {
            let why = format!("its stored request does not decode: {e}");
            lifecycle::end(state, &rec, RunRecordStatus::Error, Some(why)).await;
            return;
        }
    };
    // Its turn: it waits for the thread's current run (one recovered after a restart, say)
    // before its record says `running`, so a thread has one running record at a time.
    let thread = planwright::ThreadId::new(&rec.thread_id);
    if let Some(a) = state.assistants.find(body.assistant()) {
        a.wait_idle(&thread).await;
    }
    // And for a run another replica executes on the thread.
    if let Err(e) = lifecycle::wait_elsewhere(state, &thread).await {
        tracing::warn!(thread_id = rec.thread_id, why = %e.1, "could not see the thread's other runs");
    }
    body.wait_for_thread();
    match lifecycle::launch(state, &rec, body, OnRefusal::Record).await {
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
}

/// True when `thread` (of `assistant`) has a run going or queued, so an enqueued run must wait.
pub fn busy(state: &AppState, assistant: &AssistantRef, thread: &planwright::ThreadId) -> bool {
    assistant.is_running(thread) || state.queues.by_thread.contains_key(thread.as_str())
}
