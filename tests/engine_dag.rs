//! Dependency-driven fan-out through real actors: a task starts the moment its own dependencies
//! finish, not when a whole wave does; `max_parallel` bounds a batch; results merge in task order.

mod support;

use planwright::graph::{Dag, DagTask, Route, StateGraph, END, START};
use planwright::{Engine, NodeContext, RunOptions, ThreadId};
use serde_json::json;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::*;
use tokio::time::Instant;

type Log = Arc<Mutex<Vec<(String, u64, u64)>>>;

/// `plan` routes a Dag of `tasks` (key, duration ms, dependencies) to `step`, joined by `join`.
fn dag_graph(
    tasks: Vec<(&'static str, u64, Vec<&'static str>)>,
    max: Option<usize>,
    log: Log,
) -> StateGraph<Walk> {
    let t0 = Instant::now();
    StateGraph::new("dag")
        .add_sync_node(
            "plan",
            |_: &Walk, _: &NodeContext| Ok(WalkUpdate::default()),
        )
        .add_conditional_edges(
            "plan",
            move |_: &Walk| {
                Route::Dag(Dag {
                    tasks: tasks
                        .iter()
                        .map(|(k, ms, after)| DagTask {
                            key: k.to_string(),
                            node: "step".into(),
                            input: json!({"key": k, "ms": ms}),
                            after: after.iter().map(|a| a.to_string()).collect(),
                        })
                        .collect(),
                    max_parallel: max,
                })
            },
            ["step"],
        )
        .add_node("step", move |s: Arc<Walk>, ctx: NodeContext| {
            let log = log.clone();
            async move {
                let key = ctx.input().unwrap()["key"].as_str().unwrap().to_string();
                let ms = ctx.input().unwrap()["ms"].as_u64().unwrap();
                let start = t0.elapsed().as_millis() as u64;
                tokio::time::sleep(Duration::from_millis(ms)).await;
                let end = t0.elapsed().as_millis() as u64;
                log.lock().unwrap().push((key.clone(), start, end));
                // What the task saw: its dependencies' traces.
                Ok(WalkUpdate::default().trace(vec![format!("{key}<-{}", s.trace.join("+"))]))
            }
        })
        .add_sync_node("join", |s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().count(s.trace.len() as u64))
        })
        .add_edge(START, "plan")
        .add_edge("step", "join")
        .add_edge("join", END)
}

fn times(log: &Log, key: &str) -> (u64, u64) {
    let l = log.lock().unwrap();
    let e = l.iter().find(|(k, _, _)| k == key).unwrap();
    (e.1, e.2)
}

#[tokio::test(start_paused = true)]
async fn a_ready_task_starts_without_waiting_for_unrelated_slow_siblings() {
    let log: Log = Arc::default();
    let graph = dag_graph(
        vec![
            ("slow", 100, vec![]),
            ("fast", 10, vec![]),
            ("next", 10, vec!["fast"]),
            ("last", 5, vec!["slow", "next"]),
        ],
        None,
        log.clone(),
    )
    .compile()
    .unwrap();
    let engine = Engine::new(graph).await;
    let out = engine
        .run(
            ThreadId::new("t"),
            WalkUpdate::default(),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(times(&log, "slow"), (0, 100));
    assert_eq!(times(&log, "fast"), (0, 10));
    assert_eq!(
        times(&log, "next"),
        (10, 20),
        "starts when `fast` ends, while `slow` runs"
    );
    assert_eq!(times(&log, "last"), (100, 105));
    // Task order, not completion order; each task saw exactly its dependencies' updates.
    assert_eq!(
        out.state.trace,
        [
            "slow<-",
            "fast<-",
            "next<-fast<-",
            "last<-slow<-+fast<-+next<-fast<-"
        ]
    );
    assert_eq!(out.state.count, 4, "join ran once, after every task");
}

#[tokio::test(start_paused = true)]
async fn max_parallel_bounds_a_batch() {
    let log: Log = Arc::default();
    let graph = dag_graph(
        vec![
            ("a", 10, vec![]),
            ("b", 10, vec![]),
            ("c", 10, vec![]),
            ("d", 10, vec![]),
        ],
        Some(2),
        log.clone(),
    )
    .compile()
    .unwrap();
    let engine = Engine::new(graph).await;
    let t0 = Instant::now();
    engine
        .run(
            ThreadId::new("t"),
            WalkUpdate::default(),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(t0.elapsed(), Duration::from_millis(20));
    let l = log.lock().unwrap();
    for t in 0..20 {
        let running = l.iter().filter(|(_, s, e)| *s <= t && t < *e).count();
        assert!(running <= 2, "{running} tasks at {t} ms");
    }
}
