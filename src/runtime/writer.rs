//! The background checkpoint writer: `async` durability, and group commit for `sync`.
//!
//! One task per engine receives records and task writes in order and stores everything queued at
//! each wake-up — checkpoints and parallel tasks' writes of any conversations, in arrival order —
//! in one `Checkpointer::put_batch` (one transaction on SQLite). Flushes are answered only after
//! everything queued before them is stored. A run waits for its flush when it ends, so `async`
//! durability never reports a run finished before its checkpoints are stored.
//!
//! **Group commit** (for backends that prefer it, `Checkpointer::prefers_group_commit`: SQLite,
//! PostgreSQL).
//! A `sync` run with other runs going sends its record with a reply channel
//! ([`AsyncWriter::put_and_wait`]) and waits for it: items of many conversations that arrive
//! together are committed in one transaction, and each run goes on only once its own item is
//! committed — `sync` still means what it says, with one commit (one `fsync`) per batch instead
//! of one per superstep. Task writes (the updates of a superstep's parallel tasks, saved as each
//! finishes) take the same path ([`AsyncWriter::writes_and_wait`]) and the same batches: a
//! batch was once cut wherever a task write or a flush came between records, which left the
//! research load at ~2 items per commit. Backends that serve several writers at once
//! (`Checkpointer::max_concurrent_batches`: PostgreSQL) get several batches in flight, on
//! disjoint threads.
//!
//! Under load the writer waits a moment for more items before it commits
//! ([`CommitWindow`](super::CommitWindow), a group-commit window like PostgreSQL's
//! `commit_delay`); a conversation running alone is never delayed.

use super::commit_window::CommitWindow;
use super::error::RunError;
use crate::checkpoint::{BatchItem, CheckpointError, CheckpointRecord, Checkpointer, TaskWrite};
use crate::ids::{CheckpointId, ThreadId};
use std::collections::{HashMap, HashSet};
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
    pub fn spawn(cp: Arc<dyn Checkpointer>, window: CommitWindow) -> Self {
        let (tx, rx) = mpsc::unbounded_channel::<WriterMsg>();
        let started = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .and_then(|rt| {
                std::thread::Builder::new()
                    .name("planwright-checkpoint-writer".into())
                    .spawn(move || rt.block_on(run(cp, rx, window)))
            });
        if let Err(e) = started {
            // Without the thread, every queued write fails the run it belongs to when it flushes.
            tracing::error!(error = %e, "cannot start the checkpoint writer thread");
        }
        Self { tx }
    }
}

/// A batch being committed: once done, each item's thread and outcome (`Ok` for an item whose
/// run got its own result), and the flushes to answer after it.
type InFlight = futures::future::BoxFuture<'static, Settled>;

struct Settled {
    outcome: Vec<(ThreadId, Result<(), CheckpointError>)>,
    flushes: Vec<Flush>,
}

type Flush = (ThreadId, oneshot::Sender<Result<(), RunError>>);

/// What one wake-up of the writer collected: the items in arrival order, the reply of each (for
/// a `sync` run that waits), and the flushes that come after them.
#[derive(Default)]
struct Batch {
    items: Vec<BatchItem>,
    replies: Vec<Reply>,
    flushes: Vec<Flush>,
}

/// The writer loop: stores everything queued at each wake-up — records and task writes of any
/// conversations, in arrival order — as one `put_batch` (one transaction on SQLite), and answers
/// flushes after everything queued before them is stored. Up to
/// `Checkpointer::max_concurrent_batches` batches are committed at once, on disjoint threads: a
/// batch that touches a thread with an item in flight that no run waits for, and a flush of such
/// a thread, wait until every batch in flight is done, so each thread's items still reach
/// storage in order. Under load, each batch is gathered for up to `window` ([`CommitWindow`]).
async fn run(
    cp: Arc<dyn Checkpointer>,
    mut rx: mpsc::UnboundedReceiver<WriterMsg>,
    window: CommitWindow,
) {
    use futures::StreamExt;
    let most = cp.max_concurrent_batches().max(1);
    // A batch of at most zero items would read as a closed channel and stop the writer.
    let window = CommitWindow {
        max_items: window.max_items.max(1),
        ..window
    };
    let mut w = Committer {
        cp,
        inflight: Default::default(),
        busy: HashSet::new(),
        errors: HashMap::new(),
    };
    let mut queued = Vec::new();
    let mut previous = 0;
    loop {
        tokio::select! {
            biased;
            Some(done) = w.inflight.next(), if !w.inflight.is_empty() => {
                w.settle(done);
                continue;
            }
            n = rx.recv_many(&mut queued, window.max_items), if w.inflight.len() < most => {
                if n == 0 {
                    break;
                }
            }
        }
        // With a batch in flight (a backend that takes several at once), what arrives gathers
        // behind it anyway: the window is for a writer whose storage is idle.
        if w.inflight.is_empty() && window.lingers(previous, queued.len()) {
            gather(&mut w, &mut rx, &mut queued, window).await;
        }
        previous = queued.len();
        let mut batch = Batch::default();
        for msg in queued.drain(..) {
            if batch.flushes_thread_of(&msg) {
                // An item sent after its thread's flush: the flush answers for what came before
                // it only, so it goes out first.
                w.start(std::mem::take(&mut batch)).await;
            }
            match msg {
                WriterMsg::Put(r) => batch.push(BatchItem::Record(r), None),
                WriterMsg::PutAndWait(r, reply) => batch.push(BatchItem::Record(r), Some(reply)),
                WriterMsg::Writes(t, c, writes, reply) => {
                    batch.push(BatchItem::Writes(t, c, writes), reply)
                }
                WriterMsg::Flush(t, reply) if w.busy.contains(&t) => {
                    // An item of this thread nobody waits for is in flight: answer once
                    // everything before the flush is stored.
                    w.start(std::mem::take(&mut batch)).await;
                    w.drain().await;
                    w.answer(t, reply);
                }
                WriterMsg::Flush(t, reply) => batch.flushes.push((t, reply)),
            }
        }
        w.start(batch).await;
    }
    w.drain().await;
}

/// Waits out `window.window`, then takes what arrived meanwhile, up to `window.max_items` queued;
/// batches in flight that finish meanwhile are settled. The writer sleeps through the window
/// rather than waking for each arrival: a version that woke per message gained far less (its
/// system CPU did not drop; docs/PERFORMANCE.md).
async fn gather(
    w: &mut Committer,
    rx: &mut mpsc::UnboundedReceiver<WriterMsg>,
    queued: &mut Vec<WriterMsg>,
    window: CommitWindow,
) {
    use futures::StreamExt;
    let deadline = tokio::time::Instant::now() + window.window;
    loop {
        tokio::select! {
            biased;
            Some(done) = w.inflight.next(), if !w.inflight.is_empty() => w.settle(done),
            _ = tokio::time::sleep_until(deadline) => break,
        }
    }
    while queued.len() < window.max_items {
        match rx.try_recv() {
            Ok(msg) => queued.push(msg),
            // Empty, or closed: the main loop sees the closed channel on its next receive.
            Err(_) => break,
        }
    }
}

impl Batch {
    fn push(&mut self, item: BatchItem, reply: Reply) {
        self.items.push(item);
        self.replies.push(reply);
    }

    /// Whether `msg` is an item of a thread this batch already holds a flush of.
    fn flushes_thread_of(&self, msg: &WriterMsg) -> bool {
        let thread = match msg {
            WriterMsg::Put(r) | WriterMsg::PutAndWait(r, _) => &r.thread_id,
            WriterMsg::Writes(t, ..) => t,
            WriterMsg::Flush(..) => return false,
        };
        self.flushes.iter().any(|(t, _)| t == thread)
    }
}

fn thread_of(item: &BatchItem) -> &ThreadId {
    match item {
        BatchItem::Record(r) => &r.thread_id,
        BatchItem::Writes(t, ..) => t,
    }
}

/// The writer's commits: the batches in flight, the threads with an item in flight that no run
/// waits for, and the failures of such items, kept for their thread's next flush.
struct Committer {
    cp: Arc<dyn Checkpointer>,
    inflight: futures::stream::FuturesUnordered<InFlight>,
    busy: HashSet<ThreadId>,
    errors: HashMap<ThreadId, RunError>,
}

impl Committer {
    /// Starts committing `batch` (after the batches in flight, if it shares a thread with one of
    /// them). A batch of flushes alone is answered at once.
    async fn start(&mut self, batch: Batch) {
        let Batch {
            items,
            replies,
            flushes,
        } = batch;
        if items.is_empty() {
            for (t, reply) in flushes {
                self.answer(t, reply);
            }
            return;
        }
        if items.iter().any(|i| self.busy.contains(thread_of(i))) {
            self.drain().await;
        }
        // An item whose run waits for it cannot be followed by another of its thread before its
        // reply; an item nobody waits for can: its thread is busy until the batch is done.
        self.busy.extend(
            items
                .iter()
                .zip(&replies)
                .filter(|(_, reply)| reply.is_none())
                .map(|(i, _)| thread_of(i).clone()),
        );
        let cp = self.cp.clone();
        self.inflight.push(Box::pin(async move {
            let threads: Vec<ThreadId> = items.iter().map(|i| thread_of(i).clone()).collect();
            let results = cp.put_batch(items).await;
            let mut outcome = Vec::with_capacity(threads.len());
            for ((t, r), reply) in threads.into_iter().zip(results).zip(replies) {
                match reply {
                    // The waiting run gets its own item's result.
                    Some(reply) => {
                        let _ = reply.send(r);
                        outcome.push((t, Ok(())));
                    }
                    None => outcome.push((t, r)),
                }
            }
            Settled { outcome, flushes }
        }));
    }

    /// Waits for every batch in flight.
    async fn drain(&mut self) {
        use futures::StreamExt;
        while let Some(done) = self.inflight.next().await {
            self.settle(done);
        }
    }

    /// Records a finished batch: its threads are free again, a failed item without a waiting run
    /// fails that thread's next flush, and the flushes queued behind the batch are answered.
    fn settle(&mut self, done: Settled) {
        for (t, r) in done.outcome {
            self.busy.remove(&t);
            if let Err(e) = r {
                self.errors.entry(t).or_insert(e.into());
            }
        }
        for (t, reply) in done.flushes {
            self.answer(t, reply);
        }
    }

    /// Answers a flush of `t`: the first failure of its items nobody waited for, if any.
    fn answer(&mut self, t: ThreadId, reply: oneshot::Sender<Result<(), RunError>>) {
        let _ = reply.send(self.errors.remove(&t).map_or(Ok(()), Err));
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{test_record, BodyKind, MemoryCheckpointer};

    fn record(thread: &ThreadId, id: u64, parent: Option<u64>) -> CheckpointRecord {
        test_record(thread, id, parent, BodyKind::Snapshot)
    }

    /// A flush answers for the items sent before it only: a failing item of the same thread sent
    /// after it (often in the same wake-up of the writer) fails the next flush, not this one.
    #[tokio::test]
    async fn a_flush_answers_for_what_came_before_it() {
        let cp = Arc::new(MemoryCheckpointer::new());
        let w = AsyncWriter::spawn(cp.clone(), CommitWindow::default());
        let t = ThreadId::new("t");
        for _ in 0..20 {
            cp.delete_thread(&t).await.unwrap();
            w.send(WriterMsg::Put(record(&t, 1, None))).unwrap();
            let (first, first_rx) = oneshot::channel();
            w.send(WriterMsg::Flush(t.clone(), first)).unwrap();
            // Its parent is not the head: refused.
            w.send(WriterMsg::Put(record(&t, 3, Some(2)))).unwrap();
            let (second, second_rx) = oneshot::channel();
            w.send(WriterMsg::Flush(t.clone(), second)).unwrap();
            assert!(first_rx.await.unwrap().is_ok());
            assert!(second_rx.await.unwrap().is_err());
            assert_eq!(cp.head(&t).await.unwrap(), Some(CheckpointId(1)));
        }
    }

    /// The writer on the test's own (paused) runtime, so the window's waits are virtual time.
    fn writer_here(cp: Arc<MemoryCheckpointer>, window: CommitWindow) -> AsyncWriter {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(run(cp, rx, window));
        AsyncWriter { tx }
    }

    fn window(siblings: usize, max_items: usize) -> CommitWindow {
        CommitWindow {
            window: std::time::Duration::from_secs(3600),
            siblings,
            max_items,
        }
    }

    async fn flush_after(w: &AsyncWriter, t: &ThreadId) -> std::time::Duration {
        let start = tokio::time::Instant::now();
        w.flush(t).await.unwrap();
        start.elapsed()
    }

    #[tokio::test(start_paused = true)]
    async fn under_load_a_batch_waits_out_the_window_and_takes_what_came() {
        let cp = Arc::new(MemoryCheckpointer::new());
        let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
        // Load is evident (siblings 1): the put and the flush wait a whole window, and `b`'s
        // record, sent after the flush, is committed in the same batch.
        let w = writer_here(cp.clone(), window(1, 256));
        w.send(WriterMsg::Put(record(&a, 1, None))).unwrap();
        let flushed = tokio::spawn({
            let (w, a) = (w.clone(), a.clone());
            async move { flush_after(&w, &a).await }
        });
        tokio::task::yield_now().await;
        w.send(WriterMsg::Put(record(&b, 1, None))).unwrap();
        assert_eq!(flushed.await.unwrap(), std::time::Duration::from_secs(3600));
        assert_eq!(cp.head(&b).await.unwrap(), Some(CheckpointId(1)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_full_batch_is_committed_at_once_and_the_rest_waits() {
        let cp = Arc::new(MemoryCheckpointer::new());
        let a = ThreadId::new("a");
        // Four records, three per batch: the first three are committed without waiting.
        let w = writer_here(cp.clone(), window(1, 3));
        let start = tokio::time::Instant::now();
        for id in 1..=4 {
            w.send(WriterMsg::Put(record(&a, id, (id > 1).then(|| id - 1))))
                .unwrap();
        }
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        assert_eq!(cp.head(&a).await.unwrap(), Some(CheckpointId(3)));
        assert_eq!(start.elapsed(), std::time::Duration::ZERO);
        // The fourth waits out a window with the flush.
        assert_eq!(
            flush_after(&w, &a).await,
            std::time::Duration::from_secs(3600)
        );
        assert_eq!(cp.head(&a).await.unwrap(), Some(CheckpointId(4)));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lone_conversation_is_not_held_by_the_window() {
        let cp = Arc::new(MemoryCheckpointer::new());
        let t = ThreadId::new("t");
        let w = writer_here(cp.clone(), window(4, 256));
        for id in 1..=3 {
            w.send(WriterMsg::Put(record(&t, id, (id > 1).then(|| id - 1))))
                .unwrap();
            assert_eq!(flush_after(&w, &t).await, std::time::Duration::ZERO);
        }
        assert_eq!(cp.head(&t).await.unwrap(), Some(CheckpointId(3)));
    }

    /// `max_items: 0` is taken as 1: the writer keeps committing (a receive of at most zero
    /// messages would look like a closed channel and stop it).
    #[tokio::test(start_paused = true)]
    async fn a_window_of_at_most_zero_items_still_commits() {
        let cp = Arc::new(MemoryCheckpointer::new());
        let t = ThreadId::new("t");
        let w = writer_here(cp.clone(), window(usize::MAX, 0));
        for id in 1..=3 {
            w.send(WriterMsg::Put(record(&t, id, (id > 1).then(|| id - 1))))
                .unwrap();
        }
        assert_eq!(flush_after(&w, &t).await, std::time::Duration::ZERO);
        assert_eq!(cp.head(&t).await.unwrap(), Some(CheckpointId(3)));
    }
}
