//! Deferred nodes through the engine: a join across branches of different lengths runs once,
//! after every branch, and a thread holding a waiting deferred task survives a pause and a
//! restart on every backend.

#[path = "support/backends.rs"]
mod backends;
mod support;

use backends::on_every_backend;
use planwright::graph::{StateGraph, END, START};
use planwright::runtime::Resume;
use planwright::{Engine, NodeContext, RunOptions, RunStatus, ThreadId};
use serde_json::json;
use support::*;

fn step(
    name: &'static str,
) -> impl Fn(&Walk, &NodeContext) -> Result<WalkUpdate, planwright::NodeError> {
    move |_: &Walk, _: &NodeContext| Ok(WalkUpdate::default().trace(vec![name.into()]))
}

/// `short` and `long1 → long2 → long3` both lead to `collect`; with `deferred`, `collect` waits
/// for the long branch.
fn branches(deferred: bool) -> StateGraph<Walk> {
    let g = StateGraph::new("branches")
        .add_sync_node("short", step("short"))
        .add_sync_node("long1", step("long1"))
        .add_sync_node("long2", step("long2"))
        .add_sync_node("long3", step("long3"))
        .add_sync_node("collect", |s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().trace(vec![format!("collect saw {}", s.trace.len())]))
        })
        .add_edge(START, "short")
        .add_edge(START, "long1")
        .add_edge("long1", "long2")
        .add_edge("long2", "long3")
        .add_edge("short", "collect")
        .add_edge("long3", "collect")
        .add_edge("collect", END);
    if deferred {
        g.defer(["collect"])
    } else {
        g
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deferred_join_runs_once_after_the_longest_branch() {
    let run = |graph: StateGraph<Walk>| async move {
        let e = Engine::new(graph.compile().unwrap()).await;
        let out = e
            .run(
                ThreadId::new("t"),
                WalkUpdate::default(),
                RunOptions::default(),
            )
            .await
            .unwrap();
        out.state.trace.clone()
    };
    // Without deferral the join runs as soon as each branch reaches it: twice.
    assert_eq!(
        run(branches(false)).await,
        [
            "short",
            "long1",
            "collect saw 2",
            "long2",
            "long3",
            "collect saw 5"
        ]
    );
    assert_eq!(
        run(branches(true)).await,
        ["short", "long1", "long2", "long3", "collect saw 4"]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_deferred_task_survives_a_pause_and_a_restart() {
    on_every_backend("deferred", |cp, p| async move {
        let graph = || {
            branches(true)
                .interrupt_before(["long3"])
                .compile()
                .unwrap()
        };
        let t = ThreadId::new(format!("{p}/deferred"));
        {
            let e = Engine::builder(graph())
                .checkpointer(cp.clone())
                .build()
                .await;
            let out = e
                .run(t.clone(), WalkUpdate::default(), RunOptions::default())
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Interrupted);
            assert_eq!(out.state.trace, ["short", "long1", "long2"], "{p}");
            e.shutdown().await;
        }
        // A new engine (a new process) sees the waiting join behind the paused node.
        let e = Engine::builder(graph())
            .checkpointer(cp.clone())
            .build()
            .await;
        let st = e.get_state(&t).await.unwrap().unwrap();
        assert_eq!(st.next, ["long3", "collect"], "{p}");
        let done = e
            .resume(t.clone(), Resume::Value(json!("go")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.status, RunStatus::Finished, "{p}");
        assert_eq!(
            done.state.trace,
            ["short", "long1", "long2", "long3", "collect saw 4"],
            "{p}"
        );
        assert!(e.get_state(&t).await.unwrap().unwrap().next.is_empty());
    })
    .await;
}
