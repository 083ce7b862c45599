//! Routing through real actors: loops, labels, unknown labels.

mod support;

use planwright::{Engine, RunOptions, RunStatus, ThreadId};
use support::*;

#[tokio::test]
async fn conditional_loop_runs_until_the_router_says_finish() {
    let engine = Engine::new(counter_graph().compile().unwrap()).await;
    let out = engine
        .run(
            ThreadId::new("t"),
            WalkUpdate::default().target(3),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Finished);
    assert_eq!(out.state.count, 3);
    assert_eq!(out.state.trace, vec!["inc1", "inc2", "inc3", "done"]);
    assert_eq!(out.node_executions, 4);
    assert_eq!(out.steps, 4);
}
