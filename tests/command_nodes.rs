//! Command nodes: a node returns its update together with where to go next (`Command::goto`),
//! checked against the targets it declared, drawn in the diagram, and kept with its pending write
//! so a restart mid-superstep routes as the finished task said.

#[path = "support/backends.rs"]
mod backends;
mod support;

use backends::on_every_backend;
use planwright::graph::{GraphError, Route, Send, StateGraph, END, START};
use planwright::runtime::Resume;
use planwright::{
    Command, Engine, NodeContext, NodeError, RunError, RunOptions, RunStatus, ThreadId,
};
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use support::*;

fn mark(name: &'static str) -> impl Fn(&Walk, &NodeContext) -> Result<WalkUpdate, NodeError> {
    move |_: &Walk, _: &NodeContext| Ok(WalkUpdate::default().trace(vec![name.into()]))
}

/// `triage` picks the next node from the input's `target`: 1 → billing, 2 → tech, 3 → both,
/// 4 → two `tech` tasks with their own input, 5 → END, 6 → a node it did not declare.
fn helpdesk() -> StateGraph<Walk> {
    StateGraph::new("helpdesk")
        .add_sync_command_node(
            "triage",
            ["billing", "tech", END],
            |s: &Walk, _: &NodeContext| {
                let update = WalkUpdate::default().trace(vec!["triage".into()]);
                Ok(match s.target {
                    1 => Command::goto(update, "billing"),
                    2 => Command::goto(update, "tech"),
                    3 => Command::goto(update, Route::Many(vec!["billing".into(), "tech".into()])),
                    4 => Command::goto(
                        update,
                        Route::Send(vec![
                            Send::new("tech", json!(1)),
                            Send::new("tech", json!(2)),
                        ]),
                    ),
                    5 => Command::goto(update, END),
                    6 => Command::goto(update, "sales"),
                    _ => Command::update(update),
                })
            },
        )
        .add_sync_node("billing", mark("billing"))
        .add_sync_node("tech", |_: &Walk, ctx: &NodeContext| {
            let label = match ctx.input() {
                Some(n) => format!("tech {n}"),
                None => "tech".into(),
            };
            Ok(WalkUpdate::default().trace(vec![label]))
        })
        .add_sync_node("sales", mark("sales"))
        .add_edge(START, "triage")
        .add_edge(START, "sales")
        .add_edge("billing", END)
        .add_edge("tech", END)
        .add_edge("sales", END)
}

async fn trace_for(target: u64) -> Result<Vec<String>, RunError> {
    let e = Engine::new(helpdesk().compile().unwrap()).await;
    let out = e
        .run(
            ThreadId::new("t"),
            WalkUpdate::default().target(target),
            RunOptions::default(),
        )
        .await?;
    Ok(out.state.trace.clone())
}

#[tokio::test]
async fn a_command_node_goes_where_its_goto_says() {
    assert_eq!(trace_for(1).await.unwrap(), ["triage", "sales", "billing"]);
    assert_eq!(trace_for(2).await.unwrap(), ["triage", "sales", "tech"]);
    assert_eq!(
        trace_for(3).await.unwrap(),
        ["triage", "sales", "billing", "tech"]
    );
    assert_eq!(
        trace_for(4).await.unwrap(),
        ["triage", "sales", "tech 1", "tech 2"]
    );
    assert_eq!(trace_for(5).await.unwrap(), ["triage", "sales"]);
    // No goto: only the node's plain edges (it has none), so its branch ends.
    assert_eq!(trace_for(0).await.unwrap(), ["triage", "sales"]);
}

#[tokio::test]
async fn a_goto_outside_the_declared_targets_fails_the_run_naming_them() {
    let err = trace_for(6).await.unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(err, RunError::UnknownLabel { ref node, ref label, .. } if node == "triage" && label == "sales"),
        "{msg}"
    );
    assert!(msg.contains("billing, tech, __end__"), "{msg}");
}

#[tokio::test]
async fn an_async_command_node_routes_too() {
    let g = StateGraph::new("async")
        .add_command_node(
            "pick",
            ["b"],
            |_s: Arc<Walk>, _ctx: NodeContext| async move {
                Ok(Command::goto(
                    WalkUpdate::default().trace(vec!["pick".into()]),
                    "b",
                ))
            },
        )
        .add_sync_node("b", mark("b"))
        .add_edge(START, "pick")
        .add_edge("b", END);
    let e = Engine::new(g.compile().unwrap()).await;
    let out = e
        .run(
            ThreadId::new("a"),
            WalkUpdate::default(),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.state.trace, ["pick", "b"]);
}

#[test]
fn command_targets_are_checked_at_compile_time_and_drawn() {
    let diagram = helpdesk().compile().unwrap().mermaid().to_string();
    for edge in [
        "triage -.-> billing",
        "triage -.-> tech",
        "triage -.-> __end__",
    ] {
        assert!(diagram.contains(edge), "{edge} missing from\n{diagram}");
    }
    let unknown = StateGraph::<Walk>::new("bad")
        .add_sync_command_node("a", ["ghost"], |_: &Walk, _: &NodeContext| {
            Ok(Command::update(WalkUpdate::default()))
        })
        .add_edge(START, "a")
        .compile()
        .err()
        .expect("an unknown target is refused");
    assert!(
        matches!(unknown, GraphError::UnknownNode { ref missing, .. } if missing == "ghost"),
        "{unknown}"
    );
    let none = StateGraph::<Walk>::new("bad")
        .add_sync_command_node("a", [], |_: &Walk, _: &NodeContext| {
            Ok(Command::update(WalkUpdate::default()))
        })
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile()
        .err()
        .expect("a command node without targets is refused");
    assert!(
        matches!(none, GraphError::CommandWithoutTargets(_)),
        "{none}"
    );
    let cached = StateGraph::<Walk>::new("bad")
        .add_sync_command_node("a", [END], |_: &Walk, _: &NodeContext| {
            Ok(Command::update(WalkUpdate::default()))
        })
        .cache_policy("a", planwright::cache::CachePolicy::new())
        .add_edge(START, "a")
        .compile()
        .err()
        .expect("a cached command node is refused");
    assert!(matches!(cached, GraphError::CachedCommand(_)), "{cached}");
    // Reachability counts command targets: `b` is reached only through the goto.
    StateGraph::<Walk>::new("reach")
        .add_sync_command_node("a", ["b"], |_: &Walk, _: &NodeContext| {
            Ok(Command::update(WalkUpdate::default()))
        })
        .add_sync_node("b", mark("b"))
        .add_edge(START, "a")
        .add_edge("b", END)
        .compile()
        .expect("b is reachable through a's goto, and END through b");
}

/// `route` (a command node, counted) and `ask` (interrupts) run in one superstep.
fn route_and_ask(route_runs: Arc<AtomicU32>) -> StateGraph<Walk> {
    StateGraph::new("route-and-ask")
        .add_sync_command_node(
            "route",
            ["billing", "tech"],
            move |_: &Walk, _: &NodeContext| {
                route_runs.fetch_add(1, Ordering::SeqCst);
                Ok(Command::goto(
                    WalkUpdate::default().trace(vec!["route".into()]),
                    "tech",
                ))
            },
        )
        .add_sync_node("ask", |_: &Walk, ctx: &NodeContext| {
            let answer = ctx.interrupt(json!("ok?"))?;
            Ok(WalkUpdate::default().trace(vec![format!("ask={answer}")]))
        })
        .add_sync_node("billing", mark("billing"))
        .add_sync_node("tech", mark("tech"))
        .add_edge(START, "route")
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .add_edge("billing", END)
        .add_edge("tech", END)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_command_tasks_goto_survives_a_restart() {
    on_every_backend("command", |cp, p| async move {
        let runs = Arc::new(AtomicU32::new(0));
        let t = ThreadId::new(format!("{p}/command"));
        {
            let e = Engine::builder(route_and_ask(runs.clone()).compile().unwrap())
                .checkpointer(cp.clone())
                .build()
                .await;
            let out = e
                .run(t.clone(), WalkUpdate::default(), RunOptions::default())
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Interrupted, "{p}");
            e.shutdown().await;
        }
        let e = Engine::builder(route_and_ask(runs.clone()).compile().unwrap())
            .checkpointer(cp.clone())
            .build()
            .await;
        let done = e
            .resume(
                t.clone(),
                Resume::Value(json!("yes")),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(done.status, RunStatus::Finished, "{p}");
        assert_eq!(
            done.state.trace,
            ["route", "ask=\"yes\"", "tech"],
            "{p}: the restored goto still routes to tech"
        );
        assert_eq!(runs.load(Ordering::SeqCst), 1, "{p}: route ran once");
    })
    .await;
}
