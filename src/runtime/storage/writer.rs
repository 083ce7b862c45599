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
//! batch cut wherever a task write or a flush came between records would leave the research
//! load at ~2 items per commit. Backends that serve several writers at once
//! (`Checkpointer::max_concurrent_batches`: PostgreSQL) get several batches in flight, on
//! disjoint threads.
//!
//! Under load the writer waits a moment for more items before it commits
//! ([`CommitWindow`](super::CommitWindow), a group-commit window like PostgreSQL's
//! `commit_delay`); a conversation running alone is never delayed.

use super::commit_window::CommitWindow;
use crate::checkpoint::body_codec::Dictionary;
use crate::checkpoint::{BatchItem, CheckpointError, CheckpointRecord, Checkpointer, TaskWrite};
use crate::ids::{CheckpointId, ThreadId};
use crate::runtime::error::RunError;
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
    /// Parallel tasks' updates at a checkpoint, their `Update` payloads still JSON: compressed
    /// by the writer against the dictionary, and not stored at all when the same batch holds the
    /// thread's next checkpoint, which holds them ([`superseded`](super::superseded)). The
    /// reply, if any, is read by the run later, not waited for as it is sent.
    Updates(
        ThreadId,
        CheckpointId,
        Vec<TaskWrite>,
        Option<&'static Dictionary>,
        Reply,
    ),
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
        // Under the simulator the writer is a task of the simulation's own runtime: one thread,
        // simulated time, and an order of events that the seed alone decides.
        #[cfg(feature = "sim")]
        if crate::sim::simulating() {
            tokio::spawn(run(cp, rx, window));
            return Self { tx };
        }
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
    /// Per item of task updates whose payloads are still JSON (`Updates`), how to treat it.
    updates: Vec<Option<Pending>>,
    flushes: Vec<Flush>,
}

/// Task updates whose payloads are still JSON ([`WriterMsg::Updates`]): the dictionary to
/// compress them against, and whether they were already held back once.
#[derive(Clone, Copy)]
struct Pending {
    dict: Option<&'static Dictionary>,
    held: bool,
}

/// An item held back for the next batch ([`Batch::hold_back`]).
type Held = (BatchItem, Reply, Pending);

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
    let mut held: Vec<Held> = Vec::new();
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
            // Held items go out with the next batch, or alone once a window has passed.
            () = tokio::time::sleep(window.window), if !held.is_empty() && w.inflight.len() < most => {}
        }
        // With a batch in flight (a backend that takes several at once), what arrives gathers
        // behind it anyway: the window is for a writer whose storage is idle.
        if w.inflight.is_empty() && window.lingers(previous, queued.len() + held.len()) {
            gather(&mut w, &mut rx, &mut queued, window).await;
        }
        previous = queued.len() + held.len();
        let mut batch = Batch::default();
        for (item, reply, pending) in held.drain(..) {
            batch.push_updates(
                item,
                reply,
                Pending {
                    held: true,
                    ..pending
                },
            );
        }
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
                WriterMsg::Updates(t, c, writes, dict, reply) => batch.push_updates(
                    BatchItem::Writes(t, c, writes),
                    reply,
                    Pending { dict, held: false },
                ),
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
        if !window.window.is_zero() {
            held = batch.hold_back();
        }
        w.start(batch).await;
    }
    let mut last = Batch::default();
    for (item, reply, pending) in held {
        last.push_updates(item, reply, pending);
    }
    w.start(last).await;
    w.drain().await;
}

/// Waits out `window.window`, then takes what arrived meanwhile, up to `window.max_items` queued;
/// batches in flight that finish meanwhile are settled. The writer sleeps through the window
/// rather than waking for each arrival: a wake-up per item is the cost the window is there to
/// save.
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
        self.updates.push(None);
    }

    fn push_updates(&mut self, item: BatchItem, reply: Reply, pending: Pending) {
        self.push(item, reply);
        if let Some(last) = self.updates.last_mut() {
            *last = Some(pending);
        }
    }

    /// Takes out, to go with the next batch, the task updates this batch would store although
    /// their superstep's checkpoint is likely to follow within a window: each not held before,
    /// the last item of its thread in the batch (so no record here supersedes it), and of a
    /// thread this batch answers no flush for. The tasks of a superstep finish apart, so its checkpoint often
    /// arrives in the batch after its first tasks' updates (on the research load half of them
    /// were stored that way); nobody waits for them, and they still reach storage in order, a
    /// window later at most.
    fn hold_back(&mut self) -> Vec<Held> {
        let hold: Vec<bool> = {
            // Per batch (at most `max_items` keys): a fast hash, not a DoS-resistant one.
            let mut last: HashMap<&ThreadId, usize, foldhash::fast::RandomState> =
                HashMap::default();
            for (k, item) in self.items.iter().enumerate() {
                last.insert(thread_of(item), k);
            }
            (0..self.items.len())
                .map(|j| {
                    let t = thread_of(&self.items[j]);
                    matches!(self.updates[j], Some(p) if !p.held)
                        && last.get(t) == Some(&j)
                        && !self.flushes.iter().any(|(f, _)| f == t)
                })
                .collect()
        };
        let mut held = Vec::new();
        self.partition(&hold, |item, reply, pending| {
            if let Some(pending) = pending {
                held.push((item, reply, pending));
            }
        });
        held
    }

    /// Takes out, in one pass and in order, the items `out` marks (removing them one by one
    /// moved the rest of the batch each time: quadratic in a batch of hundreds), handing each
    /// to `taken`.
    fn partition(
        &mut self,
        out: &[bool],
        mut taken: impl FnMut(BatchItem, Reply, Option<Pending>),
    ) {
        let items = std::mem::take(&mut self.items);
        let replies = std::mem::take(&mut self.replies);
        let updates = std::mem::take(&mut self.updates);
        let kept = out.iter().filter(|o| !**o).count();
        self.items.reserve(kept);
        self.replies.reserve(kept);
        self.updates.reserve(kept);
        for (((item, reply), pending), &o) in items.into_iter().zip(replies).zip(updates).zip(out) {
            if o {
                taken(item, reply, pending);
            } else {
                self.items.push(item);
                self.replies.push(reply);
                self.updates.push(pending);
            }
        }
    }

    /// Drops the task updates a record of this batch supersedes
    /// ([`superseded`](super::superseded::superseded)) and compresses
    /// the payloads of the others. Returns the replies of those dropped, each with the index
    /// (among the items left) of the record whose result answers it.
    fn settle_updates(&mut self) -> Vec<(Reply, usize)> {
        let gone = super::superseded::superseded(&self.items, |j| self.updates[j].is_some());
        let mut answered = Vec::with_capacity(gone.len());
        if !gone.is_empty() {
            let mut out = vec![false; self.items.len()];
            for &(j, _) in &gone {
                out[j] = true;
            }
            // Each item's index once the dropped items before it are gone.
            let mut left = Vec::with_capacity(out.len());
            let mut dropped = 0;
            for &o in &out {
                left.push(left.len() - dropped);
                dropped += usize::from(o);
            }
            for &(j, k) in &gone {
                answered.push((std::mem::take(&mut self.replies[j]), left[k]));
            }
            self.partition(&out, |_, _, _| {});
        }
        for (item, pending) in self.items.iter_mut().zip(&self.updates) {
            let (BatchItem::Writes(_, _, writes), Some(dict)) = (item, pending) else {
                continue;
            };
            super::persist::encode_updates(writes, dict.dict);
        }
        answered
    }

    /// Whether `msg` is an item of a thread this batch already holds a flush of.
    fn flushes_thread_of(&self, msg: &WriterMsg) -> bool {
        let thread = match msg {
            WriterMsg::Put(r) | WriterMsg::PutAndWait(r, _) => &r.thread_id,
            WriterMsg::Writes(t, ..) | WriterMsg::Updates(t, ..) => t,
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
    async fn start(&mut self, mut batch: Batch) {
        let answered = batch.settle_updates();
        let Batch {
            items,
            replies,
            flushes,
            ..
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
            for (reply, k) in answered {
                // Superseded: stored as the record that holds the update was.
                let r = match results.get(k) {
                    Some(Ok(())) => Ok(()),
                    Some(Err(e)) => Err(CheckpointError::backend_msg(format!(
                        "the checkpoint holding this task update was not stored: {}",
                        crate::ErrorChain(e)
                    ))),
                    None => Err(CheckpointError::backend_msg(
                        "the batch returned fewer results than items",
                    )),
                };
                if let Some(reply) = reply {
                    let _ = reply.send(r);
                }
            }
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

/// The answer for items sent without waiting ([`WriterMsg::Updates`]), read later.
pub(crate) type Receipt = oneshot::Receiver<Result<(), CheckpointError>>;

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

    /// Sends an update of `t` at checkpoint `at` to the writer; the receipt answers for it.
    fn send_update(w: &AsyncWriter, t: &ThreadId, at: u64, json: &str) -> Receipt {
        let (tx, rx) = oneshot::channel();
        let writes = vec![update(json)];
        w.send(WriterMsg::Updates(
            t.clone(),
            CheckpointId(at),
            writes,
            None,
            Some(tx),
        ))
        .unwrap();
        rx
    }

    fn update(json: &str) -> TaskWrite {
        TaskWrite {
            task: crate::ids::TaskId { step: 1, index: 0 },
            node: "work".into(),
            kind: crate::checkpoint::WriteKind::Update,
            key: String::new(),
            payload: json.as_bytes().to_vec(),
        }
    }

    /// Task updates that share a batch with their superstep's checkpoint are not stored (the
    /// checkpoint holds them) and are answered with its result; others are stored, compressed.
    #[tokio::test(start_paused = true)]
    async fn updates_superseded_in_their_batch_are_answered_by_the_checkpoint() {
        let cp = Arc::new(MemoryCheckpointer::new());
        let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
        cp.put(record(&a, 1, None)).await.unwrap();
        cp.put(record(&b, 1, None)).await.unwrap();
        let w = writer_here(cp.clone(), window(1, 256));
        let long = format!("{{\"trace\":\"{}\"}}", "x".repeat(400));
        let receipts = [send_update(&w, &a, 1, &long), send_update(&w, &b, 1, &long)];
        // `a`'s superstep ends in the same batch; `b`'s does not.
        w.put_and_wait(record(&a, 2, Some(1))).await.unwrap();
        for rx in receipts {
            assert!(rx.await.unwrap().is_ok());
        }
        assert!(cp.get_writes(&a, CheckpointId(1)).await.unwrap().is_empty());
        let kept = cp.get_writes(&b, CheckpointId(1)).await.unwrap();
        assert_eq!(kept.len(), 1);
        assert!(
            kept[0].payload.len() < long.len(),
            "compressed by the writer"
        );
        let json = crate::checkpoint::body_codec::decode(&kept[0].payload).unwrap();
        assert_eq!(&*json, long.as_bytes());

        // The checkpoint refused (its parent is not the head): the superseded update's run hears so.
        let rx = send_update(&w, &a, 5, "{}");
        assert!(w.put_and_wait(record(&a, 6, Some(5))).await.is_err());
        assert!(rx.await.unwrap().is_err());
    }

    /// An update that would be stored alone is held back for one batch: its superstep's
    /// checkpoint, arriving in the next, supersedes it; with nothing coming, it is stored a
    /// window later.
    #[tokio::test(start_paused = true)]
    async fn an_update_waits_one_batch_for_its_checkpoint() {
        let cp = Arc::new(MemoryCheckpointer::new());
        let (a, b) = (ThreadId::new("a"), ThreadId::new("b"));
        cp.put(record(&a, 1, None)).await.unwrap();
        cp.put(record(&b, 1, None)).await.unwrap();
        // No lingering (siblings never reached); the window only bounds the hold.
        let w = writer_here(cp.clone(), window(usize::MAX, 256));
        let start = tokio::time::Instant::now();
        let ra = send_update(&w, &a, 1, "{}");
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        w.put_and_wait(record(&a, 2, Some(1))).await.unwrap();
        assert!(ra.await.unwrap().is_ok());
        assert!(cp.get_writes(&a, CheckpointId(1)).await.unwrap().is_empty());
        assert_eq!(start.elapsed(), std::time::Duration::ZERO);

        let rb = send_update(&w, &b, 1, "{}");
        assert!(rb.await.unwrap().is_ok());
        assert_eq!(start.elapsed(), std::time::Duration::from_secs(3600));
        assert_eq!(cp.get_writes(&b, CheckpointId(1)).await.unwrap().len(), 1);
        // A flush of the thread answers for it: it is not held past one.
        let rb2 = send_update(&w, &b, 1, "{\"n\":2}");
        w.flush(&b).await.unwrap();
        assert_eq!(start.elapsed(), std::time::Duration::from_secs(3600));
        assert!(rb2.await.unwrap().is_ok());
    }

    /// Task updates not held back before, compressed without a dictionary.
    const FRESH: Pending = Pending {
        dict: None,
        held: false,
    };

    fn updates_item(t: &ThreadId, at: u64) -> BatchItem {
        BatchItem::Writes(t.clone(), CheckpointId(at), vec![update("{}")])
    }

    fn thread_and_kind(item: &BatchItem) -> (&str, &str) {
        match item {
            BatchItem::Record(r) => (r.thread_id.as_str(), "record"),
            BatchItem::Writes(t, ..) => (t.as_str(), "writes"),
        }
    }

    /// Several updates of several threads superseded in one batch: each reply goes with the
    /// index its record has once the dropped items are gone, and what stays keeps its order.
    #[test]
    fn superseded_updates_leave_in_one_pass_answered_by_their_records_new_index() {
        let [a, b, c] = ["a", "b", "c"].map(ThreadId::new);
        let mut batch = Batch::default();
        batch.push_updates(updates_item(&a, 1), None, FRESH);
        batch.push_updates(updates_item(&b, 1), None, FRESH);
        batch.push(BatchItem::Record(record(&c, 1, None)), None);
        batch.push(BatchItem::Record(record(&a, 2, Some(1))), None);
        batch.push_updates(updates_item(&b, 1), None, FRESH);
        batch.push_updates(updates_item(&c, 9), None, FRESH);
        batch.push(BatchItem::Record(record(&b, 2, Some(1))), None);
        let answered: Vec<usize> = batch.settle_updates().into_iter().map(|r| r.1).collect();
        assert_eq!(answered, [1, 3, 3]);
        let left: Vec<_> = batch.items.iter().map(thread_and_kind).collect();
        assert_eq!(
            left,
            [
                ("c", "record"),
                ("a", "record"),
                ("c", "writes"),
                ("b", "record")
            ]
        );
        assert_eq!(batch.updates.len(), 4);
        assert_eq!(batch.replies.len(), 4);
        assert!(batch.updates[2].is_some() && batch.updates[1].is_none());
    }

    /// Held back: each thread's last item when it is an update not held before and the batch
    /// flushes nothing of its thread; the held keep their order, and so do the rest.
    #[test]
    fn the_updates_held_back_leave_the_batch_in_order() {
        let [a, b, c] = ["a", "b", "c"].map(ThreadId::new);
        let mut batch = Batch::default();
        batch.push_updates(updates_item(&a, 1), None, FRESH);
        batch.push(BatchItem::Record(record(&c, 1, None)), None);
        batch.push_updates(updates_item(&b, 1), None, FRESH);
        batch.push_updates(
            updates_item(&c, 1),
            None,
            Pending {
                held: true,
                ..FRESH
            },
        );
        batch.push_updates(updates_item(&a, 1), None, FRESH);
        let held: Vec<_> = batch
            .hold_back()
            .iter()
            .map(|(item, _, _)| thread_and_kind(item).0.to_owned())
            .collect();
        assert_eq!(held, ["b", "a"]);
        let left: Vec<_> = batch.items.iter().map(thread_and_kind).collect();
        assert_eq!(left, [("a", "writes"), ("c", "record"), ("c", "writes")]);
        assert_eq!((batch.updates.len(), batch.replies.len()), (3, 3));
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
