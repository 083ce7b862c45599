//! Enqueued background runs: `POST /threads/{id}/runs` with `multitask_strategy: "enqueue"` on a
//! busy thread answers at once with a `pending` record; the run starts when the runs before it
//! on the thread have ended, in the order they were submitted (one queue and one worker task per
//! thread with pending runs). A pending run can be cancelled before it starts. The queue is in
//! memory: pending runs do not survive a restart.

use super::assistants::{self, Assistant};
use super::handlers::{start_run, RunBody};
use super::runs::{finished, set_status};
use super::AppState;
use dashmap::DashMap;
use std::sync::Arc;
use tokio::sync::mpsc;

struct Queued {
    run_id: String,
    body: RunBody,
}

/// The per-thread queues of pending runs.
#[derive(Default)]
pub struct RunQueues {
    by_thread: DashMap<String, mpsc::UnboundedSender<Queued>>,
}

/// Queues `body` as run `run_id` on `thread` (its record already says `pending`).
pub fn submit(state: &Arc<AppState>, thread: &str, run_id: String, body: RunBody) {
    let item = Queued { run_id, body };
    let mut entry = state
        .queues
        .by_thread
        .entry(thread.to_string())
        .or_insert_with(|| {
            let (tx, rx) = mpsc::unbounded_channel();
            tokio::spawn(work(state.clone(), thread.to_string(), rx));
            tx
        });
    if let Err(mpsc::error::SendError(item)) = entry.send(item) {
        // The worker just ended: start a new one for this and later runs.
        let (tx, rx) = mpsc::unbounded_channel();
        let _ = tx.send(item);
        *entry = tx;
        tokio::spawn(work(state.clone(), thread.to_string(), rx));
    }
}

async fn work(state: Arc<AppState>, thread: String, mut rx: mpsc::UnboundedReceiver<Queued>) {
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
        run_one(&state, &thread, next).await;
    }
}

async fn run_one(state: &Arc<AppState>, thread: &str, q: Queued) {
    if state.background.status_of(&q.run_id).as_deref() != Some("pending") {
        return; // cancelled while it waited
    }
    match start_run(state, thread, q.body, false).await {
        Ok((_, _, handle)) => {
            set_status(state, &q.run_id, "running");
            let result = handle.wait().await;
            finished(state, &q.run_id, &result);
        }
        Err(e) => {
            tracing::warn!(thread, run = q.run_id, error = %e.1, "a queued run could not start");
            set_status(state, &q.run_id, "error");
            state.background.set_error(&q.run_id, &e.1);
        }
    }
}

/// True when `thread` (of `assistant`) has a run going, so an enqueued run must wait.
pub fn busy(state: &AppState, assistant: Assistant, thread: &planwright::ThreadId) -> bool {
    assistants::is_running(state, assistant, thread)
        || state.queues.by_thread.contains_key(thread.as_str())
}
