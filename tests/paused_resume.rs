//! A paused thread's state stays in memory for its resume, and is used only while storage still
//! holds the very head checkpoint it belongs to: a resume in the same engine reads no chain
//! (`Engine::thread_loads`), and a thread changed by another engine (another process) — even with
//! its checkpoint ids reused by a rewind — is loaded from storage.

#[path = "support/backends.rs"]
mod backends;
mod support;

use backends::on_every_backend;
use planwright::checkpoint::{BodyKind, Checkpointer};
use planwright::runtime::Resume;
use planwright::{Engine, RunOptions, RunStatus, ThreadId};
use serde_json::json;
use std::sync::Arc;
use support::*;

async fn engine(cp: Arc<dyn Checkpointer>) -> Engine<Walk> {
    keeping(cp, planwright::runtime::DEFAULT_KEEP_PAUSED).await
}

/// An engine over `cp` keeping at most `kept` paused threads, for a graph that counts to its
/// target and pauses before `done`.
async fn keeping(cp: Arc<dyn Checkpointer>, kept: usize) -> Engine<Walk> {
    Engine::builder(
        counter_graph()
            .interrupt_before(["done"])
            .compile()
            .unwrap(),
    )
    .checkpointer(cp)
    .keep_paused(kept)
    .build()
    .await
}

/// Starts thread `name` counting to `target` on `e`; it pauses before `done`.
async fn paused(e: &Engine<Walk>, name: &str, target: u64) -> ThreadId {
    let t = ThreadId::new(name);
    let out = e
        .run(
            t.clone(),
            WalkUpdate::default().target(target),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    t
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resume_in_the_same_engine_reads_no_chain_and_ends_where_a_full_load_does() {
    on_every_backend("paused", |cp, p| async move {
        let e = engine(cp.clone()).await;
        let t = paused(&e, &format!("{p}/kept"), 3).await;
        // The run's start looked the new thread up in storage; its pause kept it.
        assert_eq!(e.thread_loads().from_storage, 1);
        assert_eq!(e.thread_loads().kept, 1);
        // Reading the state and resuming both use the kept state.
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.next, ["done"]);
        assert_eq!(st.values.count, 3);
        let done = e
            .resume(t.clone(), Resume::Value(json!("ok")), RunOptions::default())
            .await
            .unwrap();
        let loads = e.thread_loads();
        assert_eq!(
            (loads.from_memory, loads.from_storage),
            (2, 1),
            "no chain read for a kept thread"
        );
        assert_eq!(loads.kept, 0, "a finished run's thread is not kept");
        assert_eq!(done.status, RunStatus::Finished);
        assert_eq!(done.state.trace, ["inc1", "inc2", "inc3", "done"]);
        // A fresh engine (nothing kept) loads the same thread from storage to the same state.
        let fresh = engine(cp.clone()).await;
        let stored = fresh.get_state(&t).await.unwrap().unwrap();
        assert_eq!(fresh.thread_loads().from_storage, 1);
        assert_eq!(*stored.values, *done.state);
        assert_eq!(
            Some(stored.checkpoint),
            Some(e.get_state(&t).await.unwrap().unwrap().checkpoint)
        );
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_changed_elsewhere_is_loaded_from_storage() {
    on_every_backend("paused", |cp, p| async move {
        let here = engine(cp.clone()).await;
        let elsewhere = engine(cp.clone()).await;
        let t = paused(&here, &format!("{p}/moved"), 2).await;
        // Another engine resumes and finishes it: the head here is no longer the kept one.
        let theirs = elsewhere
            .resume(t.clone(), Resume::Value(json!("ok")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(theirs.status, RunStatus::Finished);
        let st = here.get_state(&t).await.unwrap().unwrap();
        // The first load was the run's start; the second, this one.
        assert_eq!(here.thread_loads().from_storage, 2, "loaded from storage");
        assert_eq!(here.thread_loads().from_memory, 0);
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
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_head_rewritten_under_the_same_id_is_not_taken_for_the_kept_one() {
    on_every_backend("paused", |cp, p| async move {
        let here = engine(cp.clone()).await;
        let t = paused(&here, &format!("{p}/rewound"), 2).await;
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
        let st = here.get_state(&t).await.unwrap().unwrap();
        // The first load was the run's start; the second, this one.
        assert_eq!(here.thread_loads().from_storage, 2, "loaded from storage");
        assert_eq!(here.thread_loads().from_memory, 0);
        assert_eq!(*st.values, other);
        let done = here
            .resume(t.clone(), Resume::Value(json!("ok")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.state.trace, ["elsewhere", "done"]);
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_engine_keeping_no_paused_thread_loads_every_resume_from_storage() {
    let e = keeping(
        Arc::new(planwright::checkpoint::MemoryCheckpointer::new()),
        0,
    )
    .await;
    let t = paused(&e, "unkept", 1).await;
    assert_eq!(e.thread_loads().kept, 0);
    let done = e
        .resume(t, Resume::Value(json!("ok")), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        e.thread_loads().from_storage,
        2,
        "the start's, then the resume's"
    );
    assert_eq!(done.state.trace, ["inc1", "done"]);
}
