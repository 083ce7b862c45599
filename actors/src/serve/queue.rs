//! Queued runs: `POST /threads/{id}/runs` with `multitask_strategy: "enqueue"` on a busy thread
//! answers at once with a `pending` record; the run starts when the runs before it on the thread
//! have ended, in the order they were submitted (one queue and one worker task per thread with
//! pending runs). The request is kept in the record, so the queue is rebuilt from the run store
//! after a restart ([`super::recovery::recover`]). A pending run can be cancelled before it
//! starts: its start is a compare-and-set from `pending`, so exactly one of the two wins.
//!
//! The queue only orders runs; what a run's turn does is the server's ([`RunQueues::new`] is
//! given it: `lifecycle::run_queued`), so the flows that submit runs sit above the queue and
//! the queue never calls up into them by name.

use super::assistants::AssistantRef;
use super::AppState;
use dashmap::DashMap;
use futures::future::BoxFuture;
use planwright::runs::{now_ms, RunRecord};
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// What a queued run's turn does; the queue awaits it before the thread's next run.
pub type Turn = for<'a> fn(&'a Arc<AppState>, RunRecord) -> BoxFuture<'a, ()>;

/// The per-thread queues of pending runs.
pub struct RunQueues {
    by_thread: DashMap<String, mpsc::UnboundedSender<RunRecord>>,
    turn: Turn,
}

impl RunQueues {
    /// Queues whose runs, each in its turn, are given to `turn`.
    pub fn new(turn: Turn) -> Self {
        Self {
            by_thread: DashMap::new(),
            turn,
        }
    }
}

/// Queues the pending run `rec` on its thread, once it is due: a run created with
/// `after_seconds` waits until that long after its record was created, counted from the record,
/// so a restart or a takeover keeps the delay instead of starting the run early.
pub fn submit(state: &Arc<AppState>, rec: RunRecord) {
    let due = due_ms(&rec);
    let now = now_ms();
    if due > now {
        let state = state.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(due - now)).await;
            enqueue(&state, rec);
        });
    } else {
        enqueue(state, rec);
    }
}

/// When `rec` may start (ms since the epoch): its creation plus its request's `after_seconds`.
pub fn due_ms(rec: &RunRecord) -> u64 {
    let delay = rec.kwargs["after_seconds"].as_f64().filter(|s| *s > 0.0);
    rec.created_at + delay.map_or(0, |s| (s * 1000.0) as u64)
}

fn enqueue(state: &Arc<AppState>, rec: RunRecord) {
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
        (state.queues.turn)(&state, next).await;
    }
}

/// True when `thread` (of `assistant`) has a run going or queued, so an enqueued run must wait.
pub fn busy(state: &AppState, assistant: &AssistantRef, thread: &planwright::ThreadId) -> bool {
    assistant.is_running(thread) || state.queues.by_thread.contains_key(thread.as_str())
}
