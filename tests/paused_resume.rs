//! A paused thread's state stays in memory for its resume, and is used only while storage still
//! holds the very head checkpoint it belongs to: a resume in the same engine reads no chain, and a
//! thread changed by another engine (another process) — even with its checkpoint ids reused by a
//! rewind — is loaded from storage.

#[path = "support/backends.rs"]
mod backends;
mod support;

use async_trait::async_trait;
use planwright::checkpoint::{
    BodyKind, CheckpointError, CheckpointMetadata, CheckpointRecord, Checkpointer, TaskWrite,
    ThreadSummary,
};
use planwright::runtime::Resume;
use planwright::{CheckpointId, Engine, RunOptions, RunStatus, ThreadId};
use serde_json::json;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use support::*;

/// Storage that counts the chains read from it.
struct ChainReads {
    inner: Arc<dyn Checkpointer>,
    chains: AtomicUsize,
}

impl ChainReads {
    fn over(inner: Arc<dyn Checkpointer>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            chains: AtomicUsize::new(0),
        })
    }
    fn chains(&self) -> usize {
        self.chains.load(Ordering::SeqCst)
    }
}

#[async_trait]
impl Checkpointer for ChainReads {
    fn backend_name(&self) -> &'static str {
        self.inner.backend_name()
    }
    fn prefers_group_commit(&self) -> bool {
        self.inner.prefers_group_commit()
    }
    async fn put(&self, r: CheckpointRecord) -> Result<(), CheckpointError> {
        self.inner.put(r).await
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
        self.chains.fetch_add(1, Ordering::SeqCst);
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

async fn engine(cp: Arc<dyn Checkpointer>) -> Engine<Walk> {
    Engine::builder(
        counter_graph()
            .interrupt_before(["done"])
            .compile()
            .unwrap(),
    )
    .checkpointer(cp)
    .build()
    .await
}

/// The storage backends this runs on: memory and a SQLite file.
async fn backends() -> Vec<Arc<dyn Checkpointer>> {
    vec![
        Arc::new(planwright::checkpoint::MemoryCheckpointer::new()),
        backends::sqlite("paused").await,
    ]
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_in_the_same_engine_reads_no_chain_and_ends_where_a_full_load_does() {
    for storage in backends().await {
        let cp = ChainReads::over(storage);
        let e = engine(cp.clone()).await;
        let t = ThreadId::new("kept");
        let out = e
            .run(
                t.clone(),
                WalkUpdate::default().target(3),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Interrupted);
        let before = cp.chains();
        // Reading the state and resuming both use the kept state.
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.next, ["done"]);
        assert_eq!(st.values.count, 3);
        let done = e
            .resume(t.clone(), Resume::Value(json!("ok")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(cp.chains(), before, "no chain read for a kept thread");
        assert_eq!(done.status, RunStatus::Finished);
        assert_eq!(done.state.trace, ["inc1", "inc2", "inc3", "done"]);
        // A fresh engine (nothing kept) loads the same thread from storage to the same state.
        let fresh = engine(cp.clone()).await;
        let stored = fresh.get_state(&t).await.unwrap().unwrap();
        assert!(cp.chains() > before);
        assert_eq!(*stored.values, *done.state);
        assert_eq!(
            Some(stored.checkpoint),
            Some(e.get_state(&t).await.unwrap().unwrap().checkpoint)
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_changed_elsewhere_is_loaded_from_storage() {
    for storage in backends().await {
        let cp = ChainReads::over(storage);
        let here = engine(cp.clone()).await;
        let elsewhere = engine(cp.clone()).await;
        let t = ThreadId::new("moved");
        here.run(
            t.clone(),
            WalkUpdate::default().target(2),
            RunOptions::default(),
        )
        .await
        .unwrap();
        // Another engine resumes and finishes it: the head here is no longer the kept one.
        let theirs = elsewhere
            .resume(t.clone(), Resume::Value(json!("ok")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(theirs.status, RunStatus::Finished);
        let before = cp.chains();
        let st = here.get_state(&t).await.unwrap().unwrap();
        assert!(cp.chains() > before, "loaded from storage");
        assert_eq!(st.values.trace, ["inc1", "inc2", "done"]);
        assert!(st.next.is_empty());
        assert!(matches!(
            here.resume(
                t.clone(),
                Resume::Value(json!("again")),
                RunOptions::default()
            )
            .await,
            Err(planwright::RunError::Refused(_))
        ));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_rewritten_under_the_same_id_is_not_taken_for_the_kept_one() {
    for storage in backends().await {
        let cp = ChainReads::over(storage);
        let here = engine(cp.clone()).await;
        let t = ThreadId::new("rewound");
        here.run(
            t.clone(),
            WalkUpdate::default().target(2),
            RunOptions::default(),
        )
        .await
        .unwrap();
        // Elsewhere: the head is rewound away and a checkpoint with the same id, the same parent
        // and the same pending tasks is written in its place, holding another state.
        let head = cp.head(&t).await.unwrap().unwrap();
        let mut replaced = cp.get(&t, head).await.unwrap();
        let parent = replaced.parent.unwrap();
        cp.rewind(&t, Some(parent), Vec::new()).await.unwrap();
        let other = Walk {
            count: 40,
            trace: vec!["elsewhere".into()],
            target: 40,
            items: Vec::new(),
        };
        replaced.kind = BodyKind::Snapshot;
        replaced.body = serde_json::to_vec(&other).unwrap();
        cp.put(replaced).await.unwrap();
        assert_eq!(cp.head(&t).await.unwrap(), Some(head));
        let before = cp.chains();
        let st = here.get_state(&t).await.unwrap().unwrap();
        assert!(cp.chains() > before, "loaded from storage");
        assert_eq!(*st.values, other);
        let done = here
            .resume(t.clone(), Resume::Value(json!("ok")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.state.trace, ["elsewhere", "done"]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_keeping_no_paused_thread_loads_every_resume_from_storage() {
    let cp = ChainReads::over(Arc::new(planwright::checkpoint::MemoryCheckpointer::new()));
    let e = Engine::builder(
        counter_graph()
            .interrupt_before(["done"])
            .compile()
            .unwrap(),
    )
    .checkpointer(cp.clone())
    .keep_paused(0)
    .build()
    .await;
    let t = ThreadId::new("unkept");
    e.run(
        t.clone(),
        WalkUpdate::default().target(1),
        RunOptions::default(),
    )
    .await
    .unwrap();
    let before = cp.chains();
    let done = e
        .resume(t, Resume::Value(json!("ok")), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(cp.chains(), before + 1);
    assert_eq!(done.state.trace, ["inc1", "done"]);
}
