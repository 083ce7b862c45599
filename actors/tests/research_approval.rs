//! Approval at `review_plan`: pause with the plan, then approve, deny or edit; anything else is
//! rejected with a message naming the three, and the thread stays paused.

mod research_support;

use planwright::{Engine, Resume, RunOptions, RunStatus, ThreadId};
use planwright_actors::research::runner::{self, RunnerError, Start};
use planwright_actors::research::state::{Criterion, StepStatus};
use planwright_actors::research::{
    initial_update, GraphOptions, OfflineResearchPolicy, ResearchState,
};
use research_support::*;
use serde_json::{json, Value};
use std::sync::Arc;

async fn paused() -> (Engine<ResearchState>, ThreadId) {
    let e = engine(Arc::new(OfflineResearchPolicy), GraphOptions::default()).await;
    let t = ThreadId::new("approval");
    let req = input(
        BATTERY_GOAL,
        json!({"require_approval": true}),
        Some(battery_notes()),
    );
    let out = e
        .run(
            t.clone(),
            initial_update(req).unwrap(),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    let payload = &out.interrupts[0].value;
    assert_eq!(out.interrupts[0].node, "review_plan");
    assert!(
        payload["plan"].as_array().is_some_and(|p| !p.is_empty()),
        "{payload}"
    );
    assert_eq!(payload["actions"], json!(["approve", "deny", "edit"]));
    assert!(
        out.state.step_results.is_empty(),
        "nothing ran before approval"
    );
    (e, t)
}

async fn resume(
    e: &Engine<ResearchState>,
    t: &ThreadId,
    v: Value,
) -> planwright::RunOutcome<ResearchState> {
    e.resume(t.clone(), Resume::Value(v), RunOptions::default())
        .await
        .unwrap()
}

#[tokio::test]
async fn approve_runs_the_plan() {
    let (e, t) = paused().await;
    let out = resume(&e, &t, json!({"action": "approve"})).await;
    assert_eq!(out.status, RunStatus::Finished);
    assert_eq!(out.state.status, "ok");
    assert!(out.state.approved_plan);
    assert_eq!(out.state.review_decision.as_deref(), Some("approved"));
}

#[tokio::test]
async fn deny_ends_in_needs_review_with_the_reason() {
    let (e, t) = paused().await;
    let out = resume(&e, &t, json!({"action": "deny", "reason": "too broad"})).await;
    assert_eq!(out.state.status, "needs_review");
    assert!(!out.state.approved_plan);
    let reason = out.state.blocked_reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("the reviewer denied the plan: too broad. To finish: edit the plan"),
        "{reason}"
    );
    assert!(out.state.step_results.is_empty());
}

#[tokio::test]
async fn an_edited_plan_is_validated_again_then_runs() {
    let (e, t) = paused().await;
    let edited = json!([
        {"id": "only", "description": "find cost notes", "tool": "search",
         "params": {"query": "solar battery cost"}, "acceptance_criteria": [{"min_sources": 1}]}
    ]);
    let out = resume(&e, &t, json!({"action": "edit", "plan": edited})).await;
    let s = &out.state;
    assert_eq!(s.status, "ok", "{:?}", s.blocked_reason);
    assert_eq!(s.plan.len(), 1);
    assert_eq!(s.plan[0].status, StepStatus::Complete);
    let ev = events(s);
    let edit = ev.iter().position(|x| *x == "plan_reviewed").unwrap();
    assert_eq!(ev[edit + 1], "plan_validated", "{ev:?}");
}

#[tokio::test]
async fn an_invalid_edit_is_repaired_and_asks_for_approval_again() {
    let (e, t) = paused().await;
    let edited = json!([{"id": "x", "description": "d", "tool": "search", "params": {"query": "solar battery cost"}}]);
    let out = resume(&e, &t, json!({"action": "edit", "plan": edited})).await;
    assert_eq!(
        out.status,
        RunStatus::Interrupted,
        "the repaired plan is not the one the reviewer wrote"
    );
    assert_eq!(
        out.interrupts[0].value["plan"][0]["acceptance_criteria"],
        json!([{"min_sources": 2}])
    );
    let out = resume(&e, &t, json!({"action": "approve"})).await;
    assert_eq!(out.state.status, "ok");
    assert_eq!(out.state.repair_count, 1);
    assert!(matches!(
        out.state.plan[0].acceptance_criteria[0],
        Criterion::MinSources(2)
    ));
}

#[tokio::test]
async fn any_other_resume_value_is_rejected_and_the_thread_stays_paused() {
    let (e, t) = paused().await;
    // Through the engine: the node pauses again with an error naming the three answers.
    let out = resume(&e, &t, json!({"action": "maybe"})).await;
    assert_eq!(out.status, RunStatus::Interrupted);
    let err = out.interrupts[0].value["error"].as_str().unwrap();
    for word in ["approve", "deny", "edit", "maybe"] {
        assert!(err.contains(word), "{err}");
    }
    // Through the runner: refused before the engine sees it.
    let r = runner::run(&e, t.clone(), Start::Resume(json!("yes")), |_| {}).await;
    match r {
        Err(RunnerError::BadResume(msg)) => {
            let m = msg.to_string();
            assert!(
                m.contains("approve") && m.contains("deny") && m.contains("edit"),
                "{m}"
            );
        }
        other => panic!("expected a rejection, got {other:?}"),
    }
    let ts = e.get_state(&t).await.unwrap().unwrap();
    assert_eq!(ts.interrupts.len(), 1, "still paused");
    // And a valid answer still works afterwards.
    let out = resume(&e, &t, json!({"action": "approve"})).await;
    assert_eq!(out.state.status, "ok");
}

#[tokio::test]
async fn the_runner_reports_a_paused_thread_without_running_it_again() {
    let (e, t) = paused().await;
    let req = input(
        BATTERY_GOAL,
        json!({"require_approval": true}),
        Some(battery_notes()),
    );
    let run = runner::run(
        &e,
        t.clone(),
        Start::Input(Some(Box::new(initial_update(req).unwrap()))),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!(run.status, "interrupted");
    assert_eq!(run.action, "stored");
    let run = runner::run(
        &e,
        t.clone(),
        Start::Resume(json!({"action": "approve"})),
        |_| {},
    )
    .await
    .unwrap();
    assert_eq!((run.status.as_str(), run.action), ("ok", "resumed"));
    let again = runner::run(&e, t, Start::Resume(json!({"action": "approve"})), |_| {}).await;
    assert!(matches!(again, Err(RunnerError::NotPaused(_))), "{again:?}");
}
