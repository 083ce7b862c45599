//! Group commit of `sync` durability: conversations running together have their checkpoints
//! committed in shared batches (`put_many`), and each run still returns only once every one of its
//! checkpoints is stored. A conversation alone writes straight to storage.

mod support;

use async_trait::async_trait;
use planwright::checkpoint::{
    put_batch_by_kind, BatchItem, CheckpointError, CheckpointMetadata, CheckpointRecord,
    Checkpointer, MemoryCheckpointer, TaskWrite, ThreadSummary,
};
use planwright::{CheckpointId, Durability, Engine, RunOptions, RunStatus, ThreadId};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use support::*;

/// Memory storage that counts how records arrive.
#[derive(Default)]
struct Counting {
    inner: MemoryCheckpointer,
    single: AtomicUsize,
    /// Of those, runs' input checkpoints.
    single_inputs: AtomicUsize,
    batches: AtomicUsize,
    largest: AtomicUsize,
    /// Batches it takes at once (`max_concurrent_batches`).
    concurrent: usize,
    in_flight: AtomicUsize,
    most_in_flight: AtomicUsize,
    /// `put_batch` calls, those holding both records and task writes, and their items.
    put_batches: AtomicUsize,
    mixed_batches: AtomicUsize,
    batched_items: AtomicUsize,
}

impl Counting {
    fn taking(concurrent: usize) -> Self {
        Self {
            concurrent,
            ..Self::default()
        }
    }
}

#[async_trait]
impl Checkpointer for Counting {
    fn backend_name(&self) -> &'static str {
        "counting"
    }
    fn prefers_group_commit(&self) -> bool {
        true
    }
    fn max_concurrent_batches(&self) -> usize {
        self.concurrent
    }
    async fn put(&self, r: CheckpointRecord) -> Result<(), CheckpointError> {
        self.single.fetch_add(1, Ordering::Relaxed);
        if r.metadata.source == planwright::checkpoint::CheckpointSource::Input {
            self.single_inputs.fetch_add(1, Ordering::Relaxed);
        }
        self.inner.put(r).await
    }
    async fn put_many(&self, rs: Vec<CheckpointRecord>) -> Vec<Result<(), CheckpointError>> {
        self.batches.fetch_add(1, Ordering::Relaxed);
        self.largest.fetch_max(rs.len(), Ordering::Relaxed);
        let now = self.in_flight.fetch_add(1, Ordering::SeqCst) + 1;
        self.most_in_flight.fetch_max(now, Ordering::SeqCst);
        // Slow enough that records queue up behind a batch, as behind a real commit.
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
        let out = self.inner.put_many(rs).await;
        self.in_flight.fetch_sub(1, Ordering::SeqCst);
        out
    }
    async fn put_batch(&self, items: Vec<BatchItem>) -> Vec<Result<(), CheckpointError>> {
        self.put_batches.fetch_add(1, Ordering::Relaxed);
        self.batched_items.fetch_add(items.len(), Ordering::Relaxed);
        let records = items
            .iter()
            .filter(|i| matches!(i, BatchItem::Record(_)))
            .count();
        if records > 0 && records < items.len() {
            self.mixed_batches.fetch_add(1, Ordering::Relaxed);
        }
        put_batch_by_kind(self, items).await
    }
    async fn put_writes(
        &self,
        t: &ThreadId,
        c: CheckpointId,
        w: Vec<TaskWrite>,
    ) -> Result<(), CheckpointError> {
        self.inner.put_writes(t, c, w).await
    }
    async fn get_writes(
        &self,
        t: &ThreadId,
        c: CheckpointId,
    ) -> Result<Vec<TaskWrite>, CheckpointError> {
        self.inner.get_writes(t, c).await
    }
    async fn head(&self, t: &ThreadId) -> Result<Option<CheckpointId>, CheckpointError> {
        self.inner.head(t).await
    }
    async fn get(
        &self,
        t: &ThreadId,
        id: CheckpointId,
    ) -> Result<CheckpointRecord, CheckpointError> {
        self.inner.get(t, id).await
    }
    async fn load_chain(
        &self,
        t: &ThreadId,
        id: Option<CheckpointId>,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        self.inner.load_chain(t, id).await
    }
    async fn list(
        &self,
        t: &ThreadId,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<(CheckpointId, Option<CheckpointId>, CheckpointMetadata)>, CheckpointError>
    {
        self.inner.list(t, before, limit).await
    }
    async fn list_threads(
        &self,
        prefix: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<ThreadSummary>, CheckpointError> {
        self.inner.list_threads(prefix, limit, offset).await
    }
    async fn set_thread_metadata(
        &self,
        t: &ThreadId,
        m: serde_json::Value,
    ) -> Result<(), CheckpointError> {
        self.inner.set_thread_metadata(t, m).await
    }
    async fn create_thread(
        &self,
        t: &ThreadId,
        m: serde_json::Value,
    ) -> Result<bool, CheckpointError> {
        self.inner.create_thread(t, m).await
    }
    async fn replace_thread_metadata(
        &self,
        t: &ThreadId,
        expected: &serde_json::Value,
        m: serde_json::Value,
    ) -> Result<bool, CheckpointError> {
        self.inner.replace_thread_metadata(t, expected, m).await
    }
    async fn thread_metadata(
        &self,
        t: &ThreadId,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        self.inner.thread_metadata(t).await
    }
    async fn delete_thread(&self, t: &ThreadId) -> Result<(), CheckpointError> {
        self.inner.delete_thread(t).await
    }
    async fn trim(&self, t: &ThreadId, keep_from: CheckpointId) -> Result<u64, CheckpointError> {
        self.inner.trim(t, keep_from).await
    }
    async fn rewind(
        &self,
        t: &ThreadId,
        to: Option<CheckpointId>,
        w: Vec<TaskWrite>,
    ) -> Result<u64, CheckpointError> {
        self.inner.rewind(t, to, w).await
    }
    async fn prune(
        &self,
        t: &ThreadId,
        keep_from: CheckpointId,
        snapshot: Vec<u8>,
    ) -> Result<(), CheckpointError> {
        self.inner.prune(t, keep_from, snapshot).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_sync_runs_commit_together_and_each_returns_only_when_stored() {
    let cp = Arc::new(Counting::default());
    forty_runs(&cp, Durability::Sync).await;
    let (single, batches, largest) = (
        cp.single.load(Ordering::Relaxed),
        cp.batches.load(Ordering::Relaxed),
        cp.largest.load(Ordering::Relaxed),
    );
    eprintln!("{single} single puts, {batches} batches, largest {largest}");
    assert!(largest > 1, "records of several runs shared a commit");
    // A run's input checkpoint, stored by the engine before its supervisor starts, joins the
    // batches too (it used to be committed alone by every run).
    let inputs = cp.single_inputs.load(Ordering::Relaxed);
    assert!(
        inputs < 20,
        "{inputs} of 40 input checkpoints committed alone"
    );
    assert!(
        batches < 40 * 21,
        "fewer commits than checkpoints ({batches})"
    );
    assert_eq!(
        cp.most_in_flight.load(Ordering::SeqCst),
        1,
        "one batch at a time"
    );
}

/// A backend that takes several batches at once gets them, and every thread's records still
/// arrive in order (memory storage refuses a record whose parent is not the head), with `sync`
/// runs waiting for their records and `async` runs not.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_go_in_parallel_where_the_backend_takes_them_and_threads_stay_in_order() {
    for durability in [Durability::Sync, Durability::Async] {
        let cp = Arc::new(Counting::taking(3));
        forty_runs(&cp, durability).await;
        let most = cp.most_in_flight.load(Ordering::SeqCst);
        // `sync` runs each wait for their record, so batches of disjoint threads overlap; `async`
        // runs queue many records of each thread at once, which keeps their batches in turn as
        // often as not: there, only the bound and the order are certain.
        let expected = match durability {
            Durability::Sync => 2..=3,
            _ => 1..=3,
        };
        assert!(
            expected.contains(&most),
            "{durability:?}: {most} batches in flight at most"
        );
    }
}

/// Forty runs of 20 increments at once, each checked complete and in order when it returns.
async fn forty_runs(cp: &Arc<Counting>, durability: Durability) {
    let e = Engine::builder(counter_graph().compile().unwrap())
        .checkpointer(cp.clone())
        .durability(durability)
        .build()
        .await;
    let runs = (0..40).map(|i| {
        let e = e.clone();
        let cp = cp.clone();
        tokio::spawn(async move {
            let t = ThreadId::new(format!("g{i}"));
            let out = e
                .run(
                    t.clone(),
                    WalkUpdate::default().target(20),
                    RunOptions::default(),
                )
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Finished);
            // Every checkpoint is stored when the run returns (input + 20 inc + done).
            let chain = cp.load_chain(&t, None).await.unwrap();
            assert_eq!(chain.last().unwrap().id, CheckpointId(22), "thread g{i}");
        })
    });
    for r in futures::future::join_all(runs).await {
        r.unwrap();
    }
}

#[tokio::test]
async fn a_run_alone_writes_straight_to_storage() {
    let cp = Arc::new(Counting::default());
    let e = Engine::builder(counter_graph().compile().unwrap())
        .checkpointer(cp.clone())
        .durability(Durability::Sync)
        .build()
        .await;
    e.run(
        ThreadId::new("alone"),
        WalkUpdate::default().target(5),
        RunOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(cp.batches.load(Ordering::Relaxed), 0);
    assert!(cp.single.load(Ordering::Relaxed) >= 6);
}

/// The parallel tasks' writes and the checkpoints of conversations running together are stored
/// in the same batches: one commit for whatever is queued at once, not one per kind of item.
/// (Three parallel tasks per run: the one that completes the superstep saves no write, so each
/// run saves two.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn task_writes_and_checkpoints_of_many_runs_share_batches() {
    let cp = Arc::new(Counting::default());
    let graph = planwright::graph::StateGraph::<Walk>::new("fork")
        .add_node("a", sleeper("a", 1))
        .add_node("b", sleeper("b", 2))
        .add_node("d", sleeper("d", 3))
        .add_node("c", sleeper("c", 1))
        .add_edge(planwright::graph::START, "a")
        .add_edge(planwright::graph::START, "b")
        .add_edge(planwright::graph::START, "d")
        .add_edge("a", "c")
        .add_edge("b", "c")
        .add_edge("d", "c")
        .add_edge("c", planwright::graph::END)
        .compile()
        .unwrap();
    // Without a commit window: with one, the staggered runs fall into lockstep behind each
    // window (200 items in 5 batches), so records and task writes never come due together, and
    // the batch-cutting rule this test is about would go unexercised.
    let e = Engine::builder(graph)
        .checkpointer(cp.clone())
        .durability(Durability::Sync)
        .commit_window(planwright::runtime::CommitWindow::OFF)
        .build()
        .await;
    let runs = (0..80).map(|i| {
        let e = e.clone();
        let cp = cp.clone();
        tokio::spawn(async move {
            // Staggered, so that some runs' task writes come due as others' checkpoints do.
            tokio::time::sleep(std::time::Duration::from_millis(i % 3)).await;
            let t = ThreadId::new(format!("fork{i}"));
            let out = e
                .run(t.clone(), WalkUpdate::default(), RunOptions::default())
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Finished);
            assert_eq!(
                out.state.trace.len(),
                4,
                "thread fork{i}: {:?}",
                out.state.trace
            );
            // Stored when the run returns: input, the fork's step and c's.
            let chain = cp.load_chain(&t, None).await.unwrap();
            assert_eq!(chain.last().unwrap().id, CheckpointId(3), "thread fork{i}");
        })
    });
    for r in futures::future::join_all(runs).await {
        r.unwrap();
    }
    let (batches, mixed, items) = (
        cp.put_batches.load(Ordering::Relaxed),
        cp.mixed_batches.load(Ordering::Relaxed),
        cp.batched_items.load(Ordering::Relaxed),
    );
    eprintln!("{batches} batches of {items} items, {mixed} mixed");
    assert!(mixed > 0, "records and task writes shared a batch");
    assert!(
        batches < items,
        "fewer commits than items ({batches} for {items})"
    );
}
