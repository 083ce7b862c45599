//! The background checkpoint writer: `async` durability, and group commit for `sync`.
//!
//! One task per engine receives records and task writes in order, batches the records queued at
//! that moment (across conversations) into one `put_many`, and answers flush requests only after
//! everything queued before them is stored. A run waits for its flush when it ends, so `async`
//! durability never reports a run finished before its checkpoints are stored.
//!
//! **Group commit** (for backends that prefer it, `Checkpointer::prefers_group_commit`: SQLite).
//! A `sync` run with other runs going sends its record with a reply channel
//! ([`AsyncWriter::put_and_wait`]) and waits for it: records of many conversations that arrive
//! together are committed in one transaction, and each run goes on only once its own record is
//! committed — `sync` still means what it says, with one commit (one `fsync`) per batch instead
//! of one per superstep.

use super::error::RunError;
use crate::checkpoint::{CheckpointError, CheckpointRecord, Checkpointer, TaskWrite};
use crate::ids::{CheckpointId, ThreadId};
use std::collections::HashMap;
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};

pub(crate) enum WriterMsg {
    Put(CheckpointRecord),
    /// A record whose run waits for its commit (group commit of `sync` durability).
    PutAndWait(
        CheckpointRecord,
        oneshot::Sender<Result<(), CheckpointError>>,
    ),
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
                WriterMsg::Put(r) => puts.push((r, None)),
                WriterMsg::PutAndWait(r, reply) => puts.push((r, Some(reply))),
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
                        WriterMsg::Put(_) | WriterMsg::PutAndWait(..) => {}
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

    /// Sends `record` to be committed with whatever else is queued, and waits for its commit.
    pub async fn put_and_wait(&self, record: CheckpointRecord) -> Result<(), RunError> {
        let (tx, rx) = oneshot::channel();
        self.send(WriterMsg::PutAndWait(record, tx))?;
        Ok(rx
            .await
            .map_err(|_| RunError::Internal("checkpoint writer stopped".into()))??)
    }

    pub async fn flush(&self, thread: &ThreadId) -> Result<(), RunError> {
        let (tx, rx) = oneshot::channel();
        self.send(WriterMsg::Flush(thread.clone(), tx))?;
        rx.await
            .map_err(|_| RunError::Internal("checkpoint writer stopped".into()))?
    }
}

type Reply = Option<oneshot::Sender<Result<(), CheckpointError>>>;

async fn flush_puts(
    cp: &dyn Checkpointer,
    puts: &mut Vec<(CheckpointRecord, Reply)>,
    errors: &mut HashMap<ThreadId, RunError>,
) {
    if puts.is_empty() {
        return;
    }
    let (records, replies): (Vec<CheckpointRecord>, Vec<Reply>) =
        std::mem::take(puts).into_iter().unzip();
    let threads: Vec<ThreadId> = records.iter().map(|r| r.thread_id.clone()).collect();
    let results = cp.put_many(records).await;
    for ((t, r), reply) in threads.into_iter().zip(results).zip(replies) {
        match reply {
            // The waiting run gets its own record's result.
            Some(reply) => {
                let _ = reply.send(r);
            }
            None => {
                if let Err(e) = r {
                    errors.entry(t).or_insert(e.into());
                }
            }
        }
    }
}
