//! Node cache through real actors: identical calls across conversations are answered from the
//! cache (counted in node stats), keys follow the input, TTLs run on tokio's paused clock,
//! failures and resumed tasks are never answered from it.

mod support;

use planwright::cache::CachePolicy;
use planwright::checkpoint::MemoryCheckpointer;
use planwright::graph::{Route, Send, StateGraph, END, START};
use planwright::{Engine, GraphError, NodeContext, NodeError, NodeOptions, Resume, RetryPolicy};
use planwright::{RunOptions, RunStatus, ThreadId};
use serde_json::json;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::*;

/// `lookup` (async, cached) records `target * 2` and counts its real runs in `calls`.
fn lookup_graph(calls: Arc<AtomicU32>, policy: CachePolicy<Walk>) -> StateGraph<Walk> {
    StateGraph::new("lookup")
        .add_node("lookup", move |s: Arc<Walk>, _ctx: NodeContext| {
            let calls = calls.clone();
            async move {
                calls.fetch_add(1, Ordering::SeqCst);
                Ok(WalkUpdate::default().count(s.target * 2))
            }
        })
        .cache_policy("lookup", policy)
        .add_edge(START, "lookup")
        .add_edge("lookup", END)
}

async fn run(e: &Engine<Walk>, thread: &str, target: u64) -> Arc<Walk> {
    e.run(
        ThreadId::new(thread),
        WalkUpdate::default().target(target),
        RunOptions::default(),
    )
    .await
    .unwrap()
    .state
}

fn stats(e: &Engine<Walk>, node: &str) -> (u64, u64) {
    let s = e.node_stats().into_iter().find(|s| s.node == node).unwrap();
    (s.cache_hits, s.cache_misses)
}

#[tokio::test]
async fn identical_calls_across_conversations_are_answered_from_the_cache() {
    let calls = Arc::new(AtomicU32::new(0));
    let e = Engine::new(
        lookup_graph(calls.clone(), CachePolicy::new())
            .compile()
            .unwrap(),
    )
    .await;
    assert_eq!(run(&e, "a", 21).await.count, 42);
    assert_eq!(
        run(&e, "b", 21).await.count,
        42,
        "the same answer from the cache"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1, "the node ran once");
    assert_eq!(
        run(&e, "c", 5).await.count,
        10,
        "another input runs the node"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 2);
    assert_eq!(stats(&e, "lookup"), (1, 2));
}

#[tokio::test]
async fn a_key_function_decides_which_calls_share_an_answer() {
    let calls = Arc::new(AtomicU32::new(0));
    // Keyed by the target's parity only: 2 and 4 share an answer (the key must cover what the
    // node reads; this one deliberately does not, to show whose answer is shared).
    let policy = CachePolicy::keyed(|s: &Walk, _| format!("{}", s.target % 2));
    let e = Engine::new(lookup_graph(calls.clone(), policy).compile().unwrap()).await;
    assert_eq!(run(&e, "a", 2).await.count, 4);
    assert_eq!(
        run(&e, "b", 4).await.count,
        4,
        "answered with the key's first answer"
    );
    assert_eq!(run(&e, "c", 3).await.count, 6);
    assert_eq!(calls.load(Ordering::SeqCst), 2);
}

#[tokio::test(start_paused = true)]
async fn entries_expire_after_their_ttl_on_paused_time() {
    let calls = Arc::new(AtomicU32::new(0));
    let policy = CachePolicy::new().ttl(Duration::from_secs(60));
    let e = Engine::new(lookup_graph(calls.clone(), policy).compile().unwrap()).await;
    run(&e, "a", 1).await;
    tokio::time::advance(Duration::from_secs(59)).await;
    run(&e, "b", 1).await;
    assert_eq!(calls.load(Ordering::SeqCst), 1, "fresh at 59 s");
    tokio::time::advance(Duration::from_secs(2)).await;
    run(&e, "c", 1).await;
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "expired at 61 s: the node runs again"
    );
    assert_eq!(stats(&e, "lookup"), (1, 2));
}

#[tokio::test]
async fn the_cache_holds_at_most_max_entries() {
    let calls = Arc::new(AtomicU32::new(0));
    let policy = CachePolicy::new().max_entries(2);
    let e = Engine::new(lookup_graph(calls.clone(), policy).compile().unwrap()).await;
    for (i, t) in [1, 2, 3, 1].into_iter().enumerate() {
        run(&e, &format!("t{i}"), t).await;
    }
    assert_eq!(
        calls.load(Ordering::SeqCst),
        4,
        "the oldest entry (1) was evicted by 3"
    );
    run(&e, "again", 3).await;
    assert_eq!(calls.load(Ordering::SeqCst), 4, "3 is still cached");
}

#[tokio::test(start_paused = true)]
async fn failures_are_not_cached_and_a_retry_runs_the_node() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let g = StateGraph::new("flaky")
        .add_node("flaky", move |s: Arc<Walk>, _ctx: NodeContext| {
            let c = c.clone();
            async move {
                if c.fetch_add(1, Ordering::SeqCst) == 0 {
                    return Err(NodeError::retryable("first call fails"));
                }
                Ok(WalkUpdate::default().count(s.target))
            }
        })
        .cache_policy("flaky", CachePolicy::new())
        .node_options(
            "flaky",
            NodeOptions::default().retry(RetryPolicy::exponential(2, Duration::from_millis(10))),
        )
        .add_edge(START, "flaky")
        .add_edge("flaky", END);
    let e = Engine::new(g.compile().unwrap()).await;
    assert_eq!(run(&e, "a", 7).await.count, 7);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the failure was not cached"
    );
    assert_eq!(run(&e, "b", 7).await.count, 7);
    assert_eq!(calls.load(Ordering::SeqCst), 2, "the success was");
}

#[tokio::test]
async fn fan_out_tasks_are_keyed_by_their_send_input_and_sync_nodes_cache_too() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let g = StateGraph::new("fan")
        .add_sync_node(
            "plan",
            |_: &Walk, _: &NodeContext| Ok(WalkUpdate::default()),
        )
        .add_conditional_edges(
            "plan",
            |_: &Walk| {
                Route::Send(vec![
                    Send::new("square", json!(3)),
                    Send::new("square", json!(3)),
                    Send::new("square", json!(4)),
                ])
            },
            ["square"],
        )
        .add_sync_node("square", move |_: &Walk, ctx: &NodeContext| {
            c.fetch_add(1, Ordering::SeqCst);
            let v = ctx.input().and_then(|v| v.as_u64()).unwrap_or(0);
            Ok(WalkUpdate::default().items(vec![v * v]))
        })
        .cache_policy("square", CachePolicy::new())
        .add_edge(START, "plan")
        .add_edge("square", END);
    let e = Engine::new(g.compile().unwrap()).await;
    let s = run(&e, "a", 0).await;
    let mut items = s.items.clone();
    items.sort();
    assert_eq!(items, [9, 9, 16]);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "the second Send(3) was a hit"
    );
    let s = run(&e, "b", 0).await;
    assert_eq!(s.items.len(), 3);
    assert_eq!(
        calls.load(Ordering::SeqCst),
        2,
        "all three hits in another conversation"
    );
    assert_eq!(stats(&e, "square"), (4, 2));
}

#[tokio::test]
async fn a_resumed_task_runs_the_node_instead_of_the_cache() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let g = StateGraph::new("ask")
        .add_sync_node("ask", move |_: &Walk, ctx: &NodeContext| {
            c.fetch_add(1, Ordering::SeqCst);
            let answer = ctx.interrupt(json!("name?"))?;
            Ok(WalkUpdate::default().trace(vec![answer.as_str().unwrap_or("").to_string()]))
        })
        .cache_policy("ask", CachePolicy::new())
        .add_edge(START, "ask")
        .add_edge("ask", END);
    let e = Engine::builder(g.compile().unwrap())
        .checkpointer(Arc::new(MemoryCheckpointer::new()))
        .build()
        .await;
    for (thread, name) in [("a", "ann"), ("b", "bo")] {
        let t = ThreadId::new(thread);
        let out = e
            .run(t.clone(), WalkUpdate::default(), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(
            out.status,
            RunStatus::Interrupted,
            "an interrupt is never cached"
        );
        let out = e
            .resume(t, Resume::Value(json!(name)), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.state.trace, [name], "each answer is its own");
    }
    assert_eq!(calls.load(Ordering::SeqCst), 4);
}

#[test]
fn a_cache_policy_for_an_unknown_node_is_refused_at_compile() {
    let err = StateGraph::<Walk>::new("x")
        .add_sync_node("a", |_: &Walk, _: &NodeContext| Ok(WalkUpdate::default()))
        .cache_policy("b", CachePolicy::new())
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile()
        .err()
        .expect("refused");
    assert!(
        matches!(
            err,
            GraphError::UnknownNodeIn {
                what: "cache_policy",
                ..
            }
        ),
        "{err}"
    );
}
