//! Faults and load through real actors: a panicking node among healthy conversations, 1,000
//! concurrent conversations, tiny bounded mailboxes under load (no deadlock), graceful shutdown.

mod support;

use planwright::graph::{Route, Send, StateGraph, END, START};
use planwright::{
    Engine, NodeContext, NodeError, NodeOptions, RetryPolicy, RunError, RunOptions, RunStatus,
    ThreadId,
};
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;
use support::*;

/// `work` panics when the conversation's target is 13 (on every attempt when `always`, else only
/// on the first), then `inc` loops to the target.
fn panicky_graph(always: bool) -> StateGraph<Walk> {
    let attempts = Arc::new(dashmap::DashMap::<u64, u32>::new());
    StateGraph::new("panicky")
        .add_node("work", move |s: Arc<Walk>, _ctx: NodeContext| {
            let attempts = attempts.clone();
            async move {
                tokio::task::yield_now().await;
                let mut n = attempts.entry(s.target).or_insert(0);
                *n += 1;
                if s.target == 13 && (always || *n == 1) {
                    panic!("node bug for target 13");
                }
                Ok(WalkUpdate::default().trace(vec!["work".into()]))
            }
        })
        .node_options(
            "work",
            NodeOptions::default().retry(
                RetryPolicy::exponential(2, Duration::from_millis(5))
                    .retry_on(planwright::policy::RetryOn::AnyFailure),
            ),
        )
        .add_sync_node("inc", |s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().count(s.count + 1))
        })
        .add_edge(START, "work")
        .add_edge("work", "inc")
        .add_conditional_edges(
            "inc",
            |s: &Walk| Route::to(if s.count >= s.target { "end" } else { "again" }),
            [("again", "inc"), ("end", END)],
        )
}

async fn run_100(engine: &Engine<Walk>) -> Vec<Result<planwright::RunOutcome<Walk>, RunError>> {
    let runs = (1..=100u64).map(|t| {
        engine.run(
            ThreadId::new(format!("c{t}")),
            WalkUpdate::default().target(t),
            RunOptions::default(),
        )
    });
    futures::future::join_all(runs).await
}

#[tokio::test(start_paused = true)]
async fn a_panicking_node_fails_only_its_conversation_and_is_restarted() {
    let engine = Engine::new(panicky_graph(true).compile().unwrap()).await;
    let results = run_100(&engine).await;
    for (i, r) in results.iter().enumerate() {
        let target = i as u64 + 1;
        if target == 13 {
            let err = r.as_ref().expect_err("conversation 13 fails");
            assert!(
                matches!(err, RunError::NodeFailed { node, attempts: 2, message } if node == "work" && message.contains("node bug")),
                "{err}"
            );
        } else {
            let out = r.as_ref().expect("healthy conversation finishes");
            assert_eq!(out.state.count, target);
            assert_eq!(out.state.trace, ["work"]);
        }
    }
    let work = engine
        .node_stats()
        .into_iter()
        .find(|s| s.node == "work")
        .unwrap();
    assert_eq!(work.panics, 2, "both attempts of conversation 13 panicked");
    // The node actor still serves new conversations after the panics.
    let out = engine
        .run(
            ThreadId::new("after"),
            WalkUpdate::default().target(2),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.state.count, 2);
}

#[tokio::test(start_paused = true)]
async fn a_panic_is_retried_per_policy() {
    let engine = Engine::new(panicky_graph(false).compile().unwrap()).await;
    let results = run_100(&engine).await;
    for (i, r) in results.iter().enumerate() {
        let out = r.as_ref().expect("every conversation finishes");
        assert_eq!(out.state.count, i as u64 + 1);
    }
}

#[tokio::test]
async fn a_thousand_concurrent_conversations_end_with_exactly_the_expected_state() {
    let engine = Engine::new(counter_graph().compile().unwrap()).await;
    let runs = (0..1000u64).map(|t| {
        engine.run(
            ThreadId::new(format!("c{t}")),
            WalkUpdate::default().target(t % 17 + 1),
            RunOptions::default(),
        )
    });
    let results = futures::future::join_all(runs).await;
    for (t, r) in results.into_iter().enumerate() {
        let out = r.unwrap();
        let target = t as u64 % 17 + 1;
        let mut expected: Vec<String> = (1..=target).map(|i| format!("inc{i}")).collect();
        expected.push("done".into());
        assert_eq!(out.status, RunStatus::Finished);
        assert_eq!(out.state.count, target);
        assert_eq!(out.state.trace, expected);
        assert_eq!(out.node_executions, target + 1);
    }
    assert_eq!(engine.active_runs(), 0);
}

/// Fan-out of 8 `Send`s per conversation into async nodes with a mailbox of 1 and a concurrency of
/// 1, joined by `join`: every supervisor blocks on full mailboxes all the time.
fn squeezed_graph() -> StateGraph<Walk> {
    StateGraph::new("squeezed")
        .add_sync_node("split", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default())
        })
        .add_conditional_edges(
            "split",
            |_: &Walk| Route::Send((0..8).map(|i| Send::new("work", json!(i))).collect()),
            ["work"],
        )
        .add_node("work", |_s: Arc<Walk>, ctx: NodeContext| async move {
            tokio::time::sleep(Duration::from_millis(1)).await;
            let i = ctx.input().and_then(|v| v.as_u64()).unwrap_or(99);
            Ok(WalkUpdate::default().items(vec![i]))
        })
        .node_options("work", NodeOptions::default().mailbox(1).concurrency(1))
        .node_options("split", NodeOptions::default().mailbox(1))
        .add_sync_node("join", |s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().count(s.items.len() as u64))
        })
        .node_options("join", NodeOptions::default().mailbox(1))
        .add_edge(START, "split")
        .add_edge("work", "join")
        .add_edge("join", END)
}

#[tokio::test(start_paused = true)]
async fn full_bounded_mailboxes_under_load_never_deadlock() {
    let engine = Engine::new(squeezed_graph().compile().unwrap()).await;
    let runs = (0..300u64).map(|t| {
        engine.run(
            ThreadId::new(format!("c{t}")),
            WalkUpdate::default(),
            RunOptions::default(),
        )
    });
    let all = tokio::time::timeout(Duration::from_secs(3600), futures::future::join_all(runs))
        .await
        .expect("no deadlock: every run ends");
    for r in all {
        let out = r.unwrap();
        assert_eq!(out.state.items, (0..8).collect::<Vec<u64>>(), "task order");
        assert_eq!(out.state.count, 8);
    }
    let work = engine
        .node_stats()
        .into_iter()
        .find(|s| s.node == "work")
        .unwrap();
    assert_eq!(work.executions, 300 * 8);
}

#[tokio::test(start_paused = true)]
async fn shutdown_lets_in_flight_nodes_finish_and_refuses_new_runs() {
    let graph = StateGraph::<Walk>::new("slow")
        .add_node("slow", sleeper("slow", 500))
        .add_sync_node("after", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().trace(vec!["after".into()]))
        })
        .add_edge(START, "slow")
        .add_edge("slow", "after")
        .add_edge("after", END)
        .compile()
        .unwrap();
    let engine = Engine::new(graph).await;
    let handles: Vec<_> = futures::future::join_all((0..10).map(|i| {
        engine.start(
            ThreadId::new(format!("c{i}")),
            WalkUpdate::default(),
            RunOptions::default(),
        )
    }))
    .await;
    tokio::time::sleep(Duration::from_millis(100)).await;
    engine.shutdown().await;
    for h in handles {
        let out = h.unwrap().wait().await.unwrap();
        // The in-flight node finished; the run stopped at the next superstep boundary.
        assert_eq!(out.status, RunStatus::Suspended);
        assert_eq!(out.state.trace, ["slow"]);
    }
    let err = engine
        .start(
            ThreadId::new("late"),
            WalkUpdate::default(),
            RunOptions::default(),
        )
        .await
        .err()
        .expect("a shut-down engine refuses runs");
    assert!(
        matches!(err, RunError::Refused(planwright::Refusal::ShuttingDown)),
        "{err}"
    );
}

#[tokio::test]
async fn node_errors_that_are_not_panics_leave_other_conversations_alone() {
    let graph = StateGraph::<Walk>::new("picky")
        .add_sync_node("check", |s: &Walk, _: &NodeContext| {
            if s.target % 2 == 1 {
                Err(NodeError::fatal(format!("odd target {}", s.target)))
            } else {
                Ok(WalkUpdate::default().count(s.target))
            }
        })
        .add_edge(START, "check")
        .add_edge("check", END)
        .compile()
        .unwrap();
    let engine = Engine::new(graph).await;
    for t in 0..20u64 {
        let r = engine
            .run(
                ThreadId::new(format!("c{t}")),
                WalkUpdate::default().target(t),
                RunOptions::default(),
            )
            .await;
        match t % 2 {
            0 => assert_eq!(r.unwrap().state.count, t),
            _ => assert!(r
                .unwrap_err()
                .to_string()
                .contains(&format!("odd target {t}"))),
        }
    }
}

#[tokio::test]
async fn a_panicking_sync_node_restarts_its_actor_and_fails_only_its_conversation() {
    let graph = StateGraph::<Walk>::new("sync-panic")
        .add_sync_node("check", |s: &Walk, _: &NodeContext| {
            if s.target == 42 {
                panic!("sync node bug");
            }
            Ok(WalkUpdate::default().count(s.target))
        })
        .add_edge(START, "check")
        .add_edge("check", END)
        .compile()
        .unwrap();
    let engine = Engine::new(graph).await;
    let runs = (0..100u64).map(|t| {
        engine.run(
            ThreadId::new(format!("c{t}")),
            WalkUpdate::default().target(t),
            RunOptions::default(),
        )
    });
    for (t, r) in futures::future::join_all(runs)
        .await
        .into_iter()
        .enumerate()
    {
        if t == 42 {
            let err = r.expect_err("conversation 42 fails");
            assert!(err.to_string().contains("panicked"), "{err}");
        } else {
            assert_eq!(r.unwrap().state.count, t as u64);
        }
    }
    let out = engine
        .run(
            ThreadId::new("after"),
            WalkUpdate::default().target(7),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.state.count, 7);
}

#[tokio::test(start_paused = true)]
async fn a_slow_node_shows_up_as_queueing_on_that_node_only() {
    let graph = StateGraph::<Walk>::new("slow-model")
        .add_sync_node(
            "fast",
            |_: &Walk, _: &NodeContext| Ok(WalkUpdate::default()),
        )
        .add_node("model", sleeper("model", 100))
        .node_options("model", NodeOptions::default().concurrency(2))
        .add_edge(START, "fast")
        .add_edge("fast", "model")
        .add_edge("model", END)
        .compile()
        .unwrap();
    let engine = Engine::new(graph).await;
    let t0 = tokio::time::Instant::now();
    let runs = (0..10).map(|i| {
        engine.run(
            ThreadId::new(format!("c{i}")),
            WalkUpdate::default(),
            RunOptions::default(),
        )
    });
    for r in futures::future::join_all(runs).await {
        assert_eq!(r.unwrap().state.trace, ["model"]);
    }
    // Two at a time, 100 ms each: five waves.
    assert_eq!(t0.elapsed(), Duration::from_millis(500));
    let stats = engine.node_stats();
    let model = stats.iter().find(|s| s.node == "model").unwrap();
    let fast = stats.iter().find(|s| s.node == "fast").unwrap();
    // Conversations waited 0, 0, 100, 100, ..., 400, 400 ms for a permit.
    assert_eq!(model.queue_us, 2 * (100 + 200 + 300 + 400) * 1000);
    assert_eq!(model.work_us, 10 * 100 * 1000);
    assert_eq!(fast.queue_us, 0);
    assert_eq!(model.mailbox_depth, 0, "drained");
}
