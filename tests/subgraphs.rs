//! Subgraphs: a compiled graph as a node of another. Its result flows back into the parent, its
//! interrupts pause the parent and are answered through it (across a restart, without redoing
//! finished child nodes), its events stream under its namespace, `subgraph_states` shows it,
//! the run context reaches it, and deleting the parent thread deletes its child threads.

#[path = "support/backends.rs"]
mod backends;
mod support;

use backends::on_every_backend;
use planwright::graph::{StateGraph, END, START};
use planwright::runtime::Resume;
use planwright::{CompiledGraph, Engine, NodeContext, RunEvent, RunOptions, RunStatus, ThreadId};
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use support::*;

planwright::state! {
    /// The child graph's own state.
    pub struct Inner => InnerUpdate {
        replace topic: String,
        append steps: Vec<String>,
    }
}

/// `draft` (counted) → `review` (asks until the answer is "ok", one question per call) → END.
fn child(drafts: Arc<AtomicU32>, asks: bool) -> CompiledGraph<Inner> {
    StateGraph::new("child")
        .add_sync_node("draft", move |s: &Inner, ctx: &NodeContext| {
            drafts.fetch_add(1, Ordering::SeqCst);
            let who = ctx.context::<String>().cloned().unwrap_or_default();
            Ok(InnerUpdate::default().steps(vec![format!("draft {} {who}", s.topic)]))
        })
        .add_sync_node("review", move |_: &Inner, ctx: &NodeContext| {
            if !asks {
                return Ok(InnerUpdate::default().steps(vec!["reviewed".into()]));
            }
            let mut question = json!("approve?");
            loop {
                let answer = ctx.interrupt(question)?;
                if answer == json!("ok") {
                    return Ok(InnerUpdate::default().steps(vec![format!("reviewed {answer}")]));
                }
                question = json!(format!("{answer} is not ok: approve?"));
            }
        })
        .add_edge(START, "draft")
        .add_edge("draft", "review")
        .add_edge("review", END)
        .compile()
        .unwrap()
}

/// `prep` → `write` (the child graph) → `publish` → END.
fn parent(drafts: Arc<AtomicU32>, asks: bool) -> StateGraph<Walk> {
    StateGraph::new("parent")
        .add_sync_node("prep", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().trace(vec!["prep".into()]))
        })
        .add_subgraph(
            "write",
            child(drafts, asks),
            |s: &Walk| InnerUpdate::default().topic(format!("topic{}", s.target)),
            |c: &Inner| WalkUpdate::default().trace(c.steps.clone()),
        )
        .add_sync_node("publish", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().trace(vec!["publish".into()]))
        })
        .add_edge(START, "prep")
        .add_edge("prep", "write")
        .add_edge("write", "publish")
        .add_edge("publish", END)
}

#[tokio::test]
async fn a_subgraph_runs_as_a_node_and_its_result_flows_back() {
    let drafts = Arc::new(AtomicU32::new(0));
    let g = parent(drafts.clone(), false).compile().unwrap();
    assert!(
        g.mermaid().contains("%% subgraphs: write"),
        "{}",
        g.mermaid()
    );
    let e = Engine::new(g).await;
    let out = e
        .run(
            ThreadId::new("p"),
            WalkUpdate::default().target(7),
            RunOptions::default().context("ann".to_string()),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Finished);
    assert_eq!(
        out.state.trace,
        ["prep", "draft topic7 ann", "reviewed", "publish"],
        "the child saw the parent's input and the run context"
    );
    assert_eq!(drafts.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn a_subgraphs_events_stream_under_its_namespace() {
    let e = Engine::new(parent(Arc::default(), false).compile().unwrap()).await;
    let mut h = e
        .start(
            ThreadId::new("ev"),
            WalkUpdate::default(),
            RunOptions::streaming(),
        )
        .await
        .unwrap();
    let mut rx = h.events.take().unwrap();
    let out = h.wait().await.unwrap();
    assert_eq!(out.status, RunStatus::Finished);
    let mut seen = Vec::new();
    while let Ok(ev) = rx.try_recv() {
        seen.push(ev);
    }
    let child_nodes: Vec<(String, String)> = seen
        .iter()
        .filter_map(|ev| match ev {
            RunEvent::Subgraph { namespace, inner } => match &**inner {
                RunEvent::NodeStarted { node, .. } => Some((namespace.clone(), node.clone())),
                _ => None,
            },
            _ => None,
        })
        .collect();
    assert_eq!(child_nodes.len(), 2, "{seen:?}");
    assert!(
        child_nodes.iter().all(|(ns, _)| ns.starts_with("write:")),
        "{child_nodes:?}"
    );
    assert_eq!(child_nodes[0].1, "draft");
    assert_eq!(child_nodes[1].1, "review");
    // The child's events come before the parent moves on to `publish`.
    let last_child = seen
        .iter()
        .rposition(|e| matches!(e, RunEvent::Subgraph { .. }))
        .unwrap();
    let publish = seen
        .iter()
        .position(|e| matches!(e, RunEvent::NodeStarted { node, .. } if node == "publish"))
        .unwrap();
    assert!(last_child < publish, "{seen:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interrupts_inside_a_subgraph_pause_the_parent_and_resume_into_it_across_restarts() {
    on_every_backend("subgraph", |cp, p| async move {
        let drafts = Arc::new(AtomicU32::new(0));
        let t = ThreadId::new(format!("{p}/sub"));
        let engine = || async {
            Engine::builder(parent(drafts.clone(), true).compile().unwrap())
                .checkpointer(cp.clone())
                .build()
                .await
        };
        {
            let e = engine().await;
            let out = e
                .run(
                    t.clone(),
                    WalkUpdate::default().target(1),
                    RunOptions::default(),
                )
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Interrupted, "{p}");
            assert_eq!(out.interrupts[0].node, "write");
            assert_eq!(out.interrupts[0].value, json!("approve?"));
            // The parent's state shows where the child stands.
            let subs = e.subgraph_states(&t).await.unwrap();
            assert_eq!(subs.len(), 1, "{p}");
            assert_eq!(subs[0].node, "write");
            assert!(subs[0].thread.as_str().starts_with(&format!("{t}|write:")));
            assert_eq!(subs[0].next, ["review"]);
            assert_eq!(subs[0].values["steps"], json!(["draft topic1 "]));
            assert_eq!(subs[0].interrupts[0].value, json!("approve?"));
            e.shutdown().await;
        }
        // A new process: a wrong answer makes the child ask again, through the parent.
        let e = engine().await;
        let out = e
            .resume(
                t.clone(),
                Resume::Value(json!("meh")),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Interrupted, "{p}");
        assert_eq!(
            out.interrupts[0].value,
            json!("\"meh\" is not ok: approve?")
        );
        e.shutdown().await;
        let e = engine().await;
        let done = e
            .resume(t.clone(), Resume::Value(json!("ok")), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(done.status, RunStatus::Finished, "{p}");
        assert_eq!(
            done.state.trace,
            ["prep", "draft topic1 ", "reviewed \"ok\"", "publish"],
            "{p}"
        );
        assert_eq!(
            drafts.load(Ordering::SeqCst),
            1,
            "{p}: the child's draft ran once"
        );
        assert!(e.subgraph_states(&t).await.unwrap().is_empty());
        // Deleting the parent thread deletes the child thread with it.
        let children = format!("{t}|");
        assert_eq!(cp.list_threads(&children, 10, 0).await.unwrap().len(), 1);
        e.delete_thread(&t).await.unwrap();
        assert!(
            cp.list_threads(&children, 10, 0).await.unwrap().is_empty(),
            "{p}"
        );
    })
    .await;
}
