//! Limits and faults through real actors: step limit, timeouts, retries with backoff, cancellation.
//! Time is tokio's paused clock: backoffs and timeouts elapse instantly and exactly.

mod support;

use planwright::graph::{StateGraph, END, START};
use planwright::policy::RetryOn;
use planwright::{
    Engine, NodeContext, NodeError, NodeOptions, RetryPolicy, RunError, RunEvent, RunOptions,
    ThreadId,
};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;
use std::time::Duration;
use support::*;

#[tokio::test]
async fn step_limit_names_the_last_nodes_visited() {
    let graph = counter_graph().step_limit(5).compile().unwrap();
    let engine = Engine::new(graph).await;
    let err = engine
        .run(
            ThreadId::new("t"),
            WalkUpdate::default().target(100),
            RunOptions::default(),
        )
        .await
        .unwrap_err();
    match &err {
        RunError::StepLimit { limit, last_nodes } => {
            assert_eq!(*limit, 5);
            assert!(last_nodes.iter().all(|n| n == "inc"), "{last_nodes:?}");
            assert!(!last_nodes.is_empty());
        }
        other => panic!("expected StepLimit, got {other}"),
    }
    assert!(err.to_string().contains("inc"));
}

/// A graph with one async node `flaky` that fails `failures` times, then succeeds.
fn flaky_graph(failures: u32, calls: Arc<AtomicU32>, options: NodeOptions) -> StateGraph<Walk> {
    StateGraph::new("flaky")
        .add_node("flaky", move |_s: Arc<Walk>, _ctx: NodeContext| {
            let calls = calls.clone();
            async move {
                let n = calls.fetch_add(1, Ordering::SeqCst);
                if n < failures {
                    Err(NodeError::retryable(format!("transient failure {}", n + 1)))
                } else {
                    Ok(WalkUpdate::default().trace(vec!["flaky-ok".into()]))
                }
            }
        })
        .node_options("flaky", options)
        .add_edge(START, "flaky")
        .add_edge("flaky", END)
}

#[tokio::test(start_paused = true)]
async fn retries_back_off_exponentially_then_succeed() {
    let calls = Arc::new(AtomicU32::new(0));
    let policy = RetryPolicy::exponential(4, Duration::from_millis(100)).without_jitter();
    let graph = flaky_graph(3, calls.clone(), NodeOptions::default().retry(policy))
        .compile()
        .unwrap();
    let engine = Engine::new(graph).await;
    let t0 = tokio::time::Instant::now();
    let mut handle = engine
        .start(
            ThreadId::new("t"),
            WalkUpdate::default(),
            RunOptions::streaming(),
        )
        .await
        .unwrap();
    let mut events = handle.events.take().unwrap();
    let out = handle.wait().await.unwrap();
    assert_eq!(out.state.trace, ["flaky-ok"]);
    assert_eq!(calls.load(Ordering::SeqCst), 4);
    // 100 + 200 + 400 ms of backoff, on the paused clock.
    assert_eq!(t0.elapsed(), Duration::from_millis(700));
    let mut attempts = Vec::new();
    while let Ok(e) = events.try_recv() {
        if let RunEvent::NodeFinished { attempt, error, .. } = e {
            attempts.push((attempt, error.is_some()));
        }
    }
    assert_eq!(attempts, [(1, true), (2, true), (3, true), (4, false)]);
}

#[tokio::test(start_paused = true)]
async fn retries_exhausted_fail_the_run_naming_node_and_attempts() {
    let calls = Arc::new(AtomicU32::new(0));
    let policy = RetryPolicy::exponential(3, Duration::from_millis(10));
    let graph = flaky_graph(10, calls.clone(), NodeOptions::default().retry(policy))
        .compile()
        .unwrap();
    let engine = Engine::new(graph).await;
    let err = engine
        .run(
            ThreadId::new("t"),
            WalkUpdate::default(),
            RunOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::NodeFailed { node, attempts: 3, message } if node == "flaky" && message.contains("transient failure 3")),
        "{err}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 3);
}

#[tokio::test(start_paused = true)]
async fn fatal_errors_are_not_retried() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let graph = StateGraph::<Walk>::new("fatal")
        .add_node("boom", move |_s: Arc<Walk>, _ctx: NodeContext| {
            c.fetch_add(1, Ordering::SeqCst);
            async { Err::<WalkUpdate, _>(NodeError::fatal("bad input")) }
        })
        .node_options(
            "boom",
            NodeOptions::default().retry(RetryPolicy::exponential(5, Duration::from_millis(1))),
        )
        .add_edge(START, "boom")
        .add_edge("boom", END)
        .compile()
        .unwrap();
    let engine = Engine::new(graph).await;
    let err = engine
        .run(
            ThreadId::new("t"),
            WalkUpdate::default(),
            RunOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(err, RunError::NodeFailed { attempts: 1, .. }),
        "{err}"
    );
    assert_eq!(calls.load(Ordering::SeqCst), 1);
}

#[tokio::test(start_paused = true)]
async fn a_node_over_its_timeout_fails_and_retries_on_timeouts() {
    let calls = Arc::new(AtomicU32::new(0));
    let c = calls.clone();
    let graph = StateGraph::<Walk>::new("slow")
        .add_node("slow", move |_s: Arc<Walk>, _ctx: NodeContext| {
            let n = c.fetch_add(1, Ordering::SeqCst);
            async move {
                // First attempt hangs far past the timeout; the second is quick.
                let ms = if n == 0 { 60_000 } else { 10 };
                tokio::time::sleep(Duration::from_millis(ms)).await;
                Ok(WalkUpdate::default().trace(vec![format!("slow{n}")]))
            }
        })
        .node_options(
            "slow",
            NodeOptions::default()
                .timeout(Duration::from_secs(1))
                .retry(
                    RetryPolicy::exponential(2, Duration::from_millis(50))
                        .without_jitter()
                        .retry_on(RetryOn::TimeoutsOnly),
                ),
        )
        .add_edge(START, "slow")
        .add_edge("slow", END)
        .compile()
        .unwrap();
    let engine = Engine::new(graph).await;
    let t0 = tokio::time::Instant::now();
    let out = engine
        .run(
            ThreadId::new("t"),
            WalkUpdate::default(),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.state.trace, ["slow1"]);
    assert_eq!(t0.elapsed(), Duration::from_millis(1000 + 50 + 10));
}

#[tokio::test(start_paused = true)]
async fn timeout_without_retry_fails_with_a_timeout_message() {
    let graph = StateGraph::<Walk>::new("slow")
        .add_node("slow", sleeper("slow", 5_000))
        .node_options(
            "slow",
            NodeOptions::default().timeout(Duration::from_millis(200)),
        )
        .add_edge(START, "slow")
        .add_edge("slow", END)
        .compile()
        .unwrap();
    let engine = Engine::new(graph).await;
    let err = engine
        .run(
            ThreadId::new("t"),
            WalkUpdate::default(),
            RunOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunError::NodeFailed { node, message, .. } if node == "slow" && message.contains("timed out")),
        "{err}"
    );
}

#[tokio::test(start_paused = true)]
async fn cancelling_a_run_stops_it_and_frees_the_thread() {
    let graph = StateGraph::<Walk>::new("long")
        .add_node("long", sleeper("long", 3_600_000))
        .add_edge(START, "long")
        .add_edge("long", END)
        .compile()
        .unwrap();
    let engine = Engine::new(graph).await;
    let thread = ThreadId::new("t");
    let handle = engine
        .start(thread.clone(), WalkUpdate::default(), RunOptions::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(engine.is_running(&thread));
    assert!(engine.cancel(&thread));
    let err = handle.wait().await.unwrap_err();
    assert!(matches!(err, RunError::Cancelled), "{err}");
    assert!(!engine.is_running(&thread));
    assert!(!engine.cancel(&thread), "nothing left to cancel");
}

#[tokio::test(start_paused = true)]
async fn a_second_run_on_a_busy_thread_is_rejected_or_queued() {
    let graph = StateGraph::<Walk>::new("long")
        .add_node("long", sleeper("long", 1_000))
        .add_edge(START, "long")
        .add_edge("long", END)
        .compile()
        .unwrap();
    let engine = Engine::new(graph).await;
    let thread = ThreadId::new("t");
    let first = engine
        .start(thread.clone(), WalkUpdate::default(), RunOptions::default())
        .await
        .unwrap();
    let err = engine
        .start(thread.clone(), WalkUpdate::default(), RunOptions::default())
        .await
        .err()
        .expect("busy thread rejects");
    assert!(
        matches!(err, RunError::Refused(planwright::Refusal::ThreadBusy(_))),
        "{err}"
    );
    let queued = engine.start(
        thread.clone(),
        WalkUpdate::default(),
        RunOptions::default().enqueue(),
    );
    let (a, b) = tokio::join!(first.wait(), async { queued.await.unwrap().wait().await });
    assert_eq!(a.unwrap().state.trace, ["long"]);
    // The queued run continued the same thread after the first ended: its trace holds both.
    assert_eq!(b.unwrap().state.trace, ["long", "long"]);
}

#[tokio::test(start_paused = true)]
async fn new_input_after_a_cancel_replaces_the_unfinished_superstep() {
    let graph = StateGraph::<Walk>::new("two")
        .add_sync_node("first", |_s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().trace(vec!["first".into()]))
        })
        .add_node("long", sleeper("long", 60_000))
        .add_edge(START, "first")
        .add_edge("first", "long")
        .add_edge("long", END)
        .compile()
        .unwrap();
    let cp = planwright::checkpoint::connect("memory:").await.unwrap();
    let engine = Engine::builder(graph).checkpointer(cp).build().await;
    let thread = ThreadId::new("t");
    let handle = engine
        .start(
            thread.clone(),
            WalkUpdate::default().count(1),
            RunOptions::default(),
        )
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(10)).await;
    assert!(engine.cancel(&thread));
    assert!(matches!(handle.wait().await, Err(RunError::Cancelled)));
    let left = engine.get_state(&thread).await.unwrap().unwrap();
    assert_eq!(left.next, ["long"], "the cancel left `long` unfinished");
    // Plain new input is refused (the thread could be continued)…
    let err = engine
        .start(
            thread.clone(),
            WalkUpdate::default().count(2),
            RunOptions::default(),
        )
        .await
        .err()
        .expect("refused");
    assert!(err.to_string().contains("unfinished run"), "{err}");
    // …and replacing input starts over from the newest checkpoint's state.
    let out = engine
        .start_replacing(
            thread.clone(),
            WalkUpdate::default().count(2),
            RunOptions::default(),
        )
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    assert_eq!(out.state.count, 2);
    assert_eq!(out.state.trace, ["first", "first", "long"]);
}
