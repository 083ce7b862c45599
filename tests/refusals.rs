//! Request refusals are separate from run failures: what the engine refuses before anything
//! runs is a `RunError::Refused(Refusal)` naming the situation, and nothing is written; a run
//! that fails is any other `RunError`.

mod support;

use planwright::graph::{StateGraph, END, START};
use planwright::runtime::Resume;
use planwright::{
    CheckpointId, Engine, NodeContext, NodeError, Refusal, RunError, RunOptions, RunStatus,
    ThreadId,
};
use serde_json::json;
use support::*;

fn refusal(e: RunError) -> Refusal {
    match e {
        RunError::Refused(r) => r,
        other => panic!("expected a refusal, got {other}"),
    }
}

#[tokio::test]
async fn each_situation_has_its_refusal() {
    let e = Engine::new(
        counter_graph()
            .interrupt_before(["done"])
            .compile()
            .unwrap(),
    )
    .await;
    let t = ThreadId::new("t");
    let nothing = e.continue_run(t.clone(), RunOptions::default()).await;
    assert_eq!(
        refusal(nothing.unwrap_err()),
        Refusal::NothingToContinue(t.clone())
    );
    let not_paused = e
        .resume(t.clone(), Resume::Value(json!(1)), RunOptions::default())
        .await;
    assert_eq!(
        refusal(not_paused.unwrap_err()),
        Refusal::NotInterrupted(t.clone())
    );
    let out = e
        .run(
            t.clone(),
            WalkUpdate::default().target(1),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    let again = e
        .run(t.clone(), WalkUpdate::default(), RunOptions::default())
        .await;
    assert_eq!(refusal(again.unwrap_err()), Refusal::Interrupted(t.clone()));
    let cont = e.continue_run(t.clone(), RunOptions::default()).await;
    assert_eq!(refusal(cont.unwrap_err()), Refusal::Interrupted(t.clone()));
    let bad = e
        .run(
            ThreadId::new("u"),
            WalkUpdate::default(),
            RunOptions::default().step_limit(0),
        )
        .await;
    assert!(matches!(refusal(bad.unwrap_err()), Refusal::BadOptions(_)));
    let unknown = e
        .update_state(&ThreadId::new("nobody"), WalkUpdate::default(), "inc")
        .await;
    assert_eq!(
        refusal(unknown.unwrap_err()),
        Refusal::UnknownThread(ThreadId::new("nobody"))
    );
    let history = e.history(&t, 10).await;
    assert_eq!(
        refusal(history.unwrap_err()),
        Refusal::NoCheckpointer("thread history")
    );
    let branch = e.branch(&t, CheckpointId(1)).await.unwrap_err();
    assert!(matches!(refusal(branch), Refusal::NoCheckpointer(_)));
    // Refusals changed nothing: the thread is still paused and resumes.
    let done = e
        .resume(t.clone(), Resume::Value(json!("ok")), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(done.state.trace, ["inc1", "done"]);
}

#[tokio::test]
async fn a_failing_node_is_a_run_error_not_a_refusal() {
    let g = StateGraph::<Walk>::new("fails")
        .add_sync_node("boom", |_: &Walk, _: &NodeContext| {
            Err(NodeError::fatal("no disk"))
        })
        .add_edge(START, "boom")
        .add_edge("boom", END)
        .compile()
        .unwrap();
    let e = Engine::new(g).await;
    let err = e
        .run(
            ThreadId::new("f"),
            WalkUpdate::default(),
            RunOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(err.refusal().is_none(), "{err}");
    assert!(matches!(err, RunError::NodeFailed { .. }), "{err}");
}
