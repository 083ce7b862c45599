//! The background checkpoint writer: `async` durability, and group commit for `sync`.
//!
//! One task per engine receives records and task writes in order, batches the records queued at
//! that moment (across conversations) into one `put_many`, and answers flush requests only after
//! everything queued before them is stored. A run waits for its flush when it ends, so `async`
//! durability never reports a run finished before its checkpoints are stored.
//!
//! **Group commit** (for backends that prefer it, `Checkpointer::prefers_group_commit`: SQLite,
//! PostgreSQL).
//! A `sync` run with other runs going sends its record with a reply channel
//! ([`AsyncWriter::put_and_wait`]) and waits for it: records of many conversations that arrive
//! together are committed in one transaction, and each run goes on only once its own record is
//! committed — `sync` still means what it says, with one commit (one `fsync`) per batch instead
//! of one per superstep. Backends that serve several writers at once
//! (`Checkpointer::max_concurrent_batches`: PostgreSQL) get several batches in flight, on
//! disjoint threads. Task writes (the updates of a superstep's parallel tasks, saved as each
//! finishes) take the same path: those queued together are stored in one call
//! (`Checkpointer::put_writes_many`, one transaction on SQLite), and a `sync` run waits for its
//! own.

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
    /// Task writes; with a reply, the run waits for their commit (group commit of `sync`).
    Writes(ThreadId, CheckpointId, Vec<TaskWrite>, Reply),
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

/// A batch being committed: its threads, and its outcome once done.
type InFlight = futures::future::BoxFuture<'static, Vec<(ThreadId, Result<(), CheckpointError>)>>;

/// The writer loop: batches the records queued at each wake-up into one `put_many`, saves task
/// writes in order, and answers flushes after everything queued before them is stored. Up to
/// `Checkpointer::max_concurrent_batches` batches are committed at once, on disjoint threads: a
/// batch that touches a thread of a batch in flight, a task write and a flush wait until every
/// batch in flight is done, so each thread's records still reach storage in order.
async fn run(cp: Arc<dyn Checkpointer>, mut rx: mpsc::UnboundedReceiver<WriterMsg>) {
    use futures::StreamExt;
    let most = cp.max_concurrent_batches().max(1);
    let mut errors: HashMap<ThreadId, RunError> = HashMap::new();
    let mut inflight = futures::stream::FuturesUnordered::<InFlight>::new();
    let mut busy: std::collections::HashSet<ThreadId> = Default::default();
    let mut batch = Vec::new();
    loop {
        tokio::select! {
            biased;
            Some(done) = inflight.next(), if !inflight.is_empty() => {
                settle(done, &mut busy, &mut errors);
                continue;
            }
            n = rx.recv_many(&mut batch, 256), if inflight.len() < most => {
                if n == 0 {
                    break;
                }
            }
        }
        let mut puts = Vec::new();
        let mut msgs = batch.drain(..).peekable();
        while let Some(msg) = msgs.next() {
            match msg {
                WriterMsg::Put(r) => puts.push((r, None)),
                WriterMsg::PutAndWait(r, reply) => puts.push((r, Some(reply))),
                other => {
                    start(&cp, &mut puts, &mut inflight, &mut busy, &mut errors).await;
                    while let Some(done) = inflight.next().await {
                        settle(done, &mut busy, &mut errors);
                    }
                    match other {
                        WriterMsg::Writes(t, c, w, reply) => {
                            // The task writes queued next to these go in the same call (one
                            // transaction where the backend can).
                            let mut group = vec![(t, c, w)];
                            let mut replies = vec![reply];
                            while let Some(WriterMsg::Writes(..)) = msgs.peek() {
                                if let Some(WriterMsg::Writes(t, c, w, reply)) = msgs.next() {
                                    group.push((t, c, w));
                                    replies.push(reply);
                                }
                            }
                            let threads: Vec<ThreadId> =
                                group.iter().map(|(t, _, _)| t.clone()).collect();
                            let results = cp.put_writes_many(group).await;
                            for ((t, r), reply) in threads.into_iter().zip(results).zip(replies) {
                                match reply {
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
                        WriterMsg::Flush(t, reply) => {
                            let _ = reply.send(errors.remove(&t).map_or(Ok(()), Err));
                        }
                        WriterMsg::Put(_) | WriterMsg::PutAndWait(..) => {}
                    }
                }
            }
        }
        drop(msgs);
        start(&cp, &mut puts, &mut inflight, &mut busy, &mut errors).await;
    }
    while let Some(done) = inflight.next().await {
        settle(done, &mut busy, &mut errors);
    }
}

/// Starts committing `puts` as one batch (after the batches in flight, if it shares a thread
/// with one of them).
async fn start(
    cp: &Arc<dyn Checkpointer>,
    puts: &mut Vec<(CheckpointRecord, Reply)>,
    inflight: &mut futures::stream::FuturesUnordered<InFlight>,
    busy: &mut std::collections::HashSet<ThreadId>,
    errors: &mut HashMap<ThreadId, RunError>,
) {
    use futures::StreamExt;
    if puts.is_empty() {
        return;
    }
    if puts.iter().any(|(r, _)| busy.contains(&r.thread_id)) {
        while let Some(done) = inflight.next().await {
            settle(done, busy, errors);
        }
    }
    // A record whose run waits for it cannot be followed by another of its thread before its
    // reply; a record nobody waits for can: its thread is busy until the batch is done.
    busy.extend(
        puts.iter()
            .filter(|(_, reply)| reply.is_none())
            .map(|(r, _)| r.thread_id.clone()),
    );
    let (records, replies): (Vec<CheckpointRecord>, Vec<Reply>) =
        std::mem::take(puts).into_iter().unzip();
    let cp = cp.clone();
    inflight.push(Box::pin(async move {
        let threads: Vec<ThreadId> = records.iter().map(|r| r.thread_id.clone()).collect();
        let results = cp.put_many(records).await;
        let mut outcome = Vec::with_capacity(threads.len());
        for ((t, r), reply) in threads.into_iter().zip(results).zip(replies) {
            match reply {
                // The waiting run gets its own record's result.
                Some(reply) => {
                    let _ = reply.send(r);
                    outcome.push((t, Ok(())));
                }
                None => outcome.push((t, r)),
            }
        }
        outcome
    }));
}

/// Records a finished batch: its threads are free again, and a failed record without a waiting
/// run fails that thread's next flush.
fn settle(
    done: Vec<(ThreadId, Result<(), CheckpointError>)>,
    busy: &mut std::collections::HashSet<ThreadId>,
    errors: &mut HashMap<ThreadId, RunError>,
) {
    for (t, r) in done {
        busy.remove(&t);
        if let Err(e) = r {
            errors.entry(t).or_insert(e.into());
        }
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

    /// Sends task writes to be committed with the other task writes queued, and waits for their
    /// commit.
    pub async fn writes_and_wait(
        &self,
        thread: ThreadId,
        checkpoint: CheckpointId,
        writes: Vec<TaskWrite>,
    ) -> Result<(), RunError> {
        let (tx, rx) = oneshot::channel();
        self.send(WriterMsg::Writes(thread, checkpoint, writes, Some(tx)))?;
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
