//! The background checkpoint writer used by `async` durability.
//!
//! One task per engine receives records and task writes in order, batches the records queued at
//! that moment (across conversations) into one `put_many`, and answers flush requests only after
//! everything queued before them is stored. A run waits for its flush when it ends, so `async`
//! durability never reports a run finished before its checkpoints are stored.

use super::error::RunError;
use crate::checkpoint::{CheckpointRecord, Checkpointer, TaskWrite};
use crate::ids::{CheckpointId, ThreadId};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

pub(crate) enum WriterMsg {
    Put(CheckpointRecord),
    Writes(ThreadId, CheckpointId, Vec<TaskWrite>),
    Flush(ThreadId, oneshot::Sender<Result<(), RunError>>),
}

/// Handle to the background writer.
#[derive(Clone)]
pub(crate) struct AsyncWriter {
    tx: mpsc::UnboundedSender<WriterMsg>,
}

impl AsyncWriter {
    /// Starts the writer on a thread of its own (with a single-threaded runtime), so that a
    /// backend whose writes run inline (SQLite) overlaps with the runs instead of taking turns
    /// with them on the caller's workers.
    pub fn spawn(cp: Arc<dyn Checkpointer>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel::<WriterMsg>();
        let started = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|rt| {
                std::thread::Builder::new()
                    .name("planwright-checkpoint-writer".into())
                    .spawn(move || rt.block_on(run(cp, rx)))
            });
        if let Err(e) = started {
            // Without the thread, every queued write fails the run it belongs to when it flushes.
            tracing::error!(error = %e, "cannot start the checkpoint writer thread");
        }
        Self { tx }
    }
}

/// The writer loop: batches the records queued at each wake-up into one `put_many`, saves task
/// writes in order, and answers flushes after everything queued before them is stored.
async fn run(cp: Arc<dyn Checkpointer>, mut rx: mpsc::UnboundedReceiver<WriterMsg>) {
    let mut errors: HashMap<ThreadId, RunError> = HashMap::new();
    let mut batch = Vec::new();
    while rx.recv_many(&mut batch, 256).await > 0 {
        let mut puts = Vec::new();
        for msg in batch.drain(..) {
            match msg {
                WriterMsg::Put(r) => puts.push(r),
                other => {
                    flush_puts(&*cp, &mut puts, &mut errors).await;
                    match other {
                        WriterMsg::Writes(t, c, w) => {
                            if let Err(e) = cp.put_writes(&t, c, w).await {
                                errors.entry(t).or_insert(e.into());
                            }
                        }
                        WriterMsg::Flush(t, reply) => {
                            let _ = reply.send(errors.remove(&t).map_or(Ok(()), Err));
                        }
                        WriterMsg::Put(_) => {}
                    }
                }
            }
        }
        flush_puts(&*cp, &mut puts, &mut errors).await;
    }
}

impl AsyncWriter {
    pub fn send(&self, msg: WriterMsg) -> Result<(), RunError> {
        self.tx
            .send(msg)
            .map_err(|_| RunError::Internal("checkpoint writer stopped".into()))
    }

    pub async fn flush(&self, thread: &ThreadId) -> Result<(), RunError> {
        let (tx, rx) = oneshot::channel();
        self.send(WriterMsg::Flush(thread.clone(), tx))?;
        rx.await
            .map_err(|_| RunError::Internal("checkpoint writer stopped".into()))?
    }
}

async fn flush_puts(
    cp: &dyn Checkpointer,
    puts: &mut Vec<CheckpointRecord>,
    errors: &mut HashMap<ThreadId, RunError>,
) {
    if puts.is_empty() {
        return;
    }
    let threads: Vec<ThreadId> = puts.iter().map(|r| r.thread_id.clone()).collect();
    let results = cp.put_many(std::mem::take(puts)).await;
    for (t, r) in threads.into_iter().zip(results) {
        if let Err(e) = r {
            errors.entry(t).or_insert(e.into());
        }
    }
}
