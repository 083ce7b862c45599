//! The seed's test ideas for the main flow: happy path, repair, repair exhausted, empty input,
//! history, model errors.

mod research_support;

use planwright::RunStatus;
use planwright_actors::research::policy::PolicyError;
use planwright_actors::research::state::{Criterion, PlanStep, StepStatus};
use research_support::*;
use serde_json::json;
use std::sync::Arc;

fn valid_plan() -> Vec<PlanStep> {
    vec![
        search(
            "cost",
            "solar battery cost",
            &[],
            vec![
                Criterion::MinSources(2),
                Criterion::Covers(vec!["cost".into()]),
            ],
        ),
        search(
            "life",
            "solar battery lifetime",
            &[],
            vec![Criterion::MinSources(1)],
        ),
        summarize("sum", &["cost", "life"]),
    ]
}

#[tokio::test]
async fn happy_path_a_valid_plan_runs_every_step_and_ends_ok_with_a_report() {
    let policy = ScriptedPolicy::new().plan(valid_plan());
    let out = run(
        policy.clone(),
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let s = &out.state;
    assert_eq!(out.status, RunStatus::Finished);
    assert_eq!(s.status, "ok");
    assert!(
        s.plan.iter().all(|p| p.status == StepStatus::Complete),
        "{:?}",
        s.plan
    );
    assert_eq!(s.step_results.len(), 3);
    assert!(s
        .step_results
        .values()
        .all(|r| r.met && !r.sources.is_empty()));
    assert!(s.final_report.contains("[b1]"), "{}", s.final_report);
    assert_eq!(s.final_output["status"], "ok");
    assert_eq!(
        s.final_output["report_words"],
        json!(planwright_actors::research::text::word_count(
            &s.final_report
        ))
    );
    assert!(s.knowledge_gaps.is_empty());
    assert_eq!(s.replan_count, 0);
    // create_plan + synthesize_report, nothing else.
    assert_eq!(policy.calls(), 2);
}

#[tokio::test]
async fn an_invalid_plan_is_repaired_then_runs() {
    let mut broken = valid_plan();
    broken[1].tool = String::new(); // missing field
    broken[2].acceptance_criteria = Arc::default(); // no criteria
    let policy = ScriptedPolicy::new().plan(broken).repair(valid_plan());
    let out = run(
        policy,
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.status, "ok");
    assert_eq!(s.repair_count, 1);
    let ev = events(s);
    let invalid = ev.iter().position(|e| *e == "plan_invalid").unwrap();
    assert_eq!(ev[invalid + 1], "plan_repaired");
    assert_eq!(ev[invalid + 2], "plan_validated");
    let detail = &s.execution_history[invalid].detail;
    assert!(detail.contains("life: missing field `tool`"), "{detail}");
    assert!(detail.contains("sum: no acceptance criteria"), "{detail}");
    assert!(s.plan_errors.is_empty(), "cleared after the repair");
}

#[tokio::test]
async fn a_cycle_that_repair_cannot_fix_ends_in_needs_review_after_the_allowed_repairs() {
    let mut cyclic = valid_plan();
    cyclic[0].depends_on = vec!["sum".into()];
    let policy = ScriptedPolicy::new()
        .plan(cyclic.clone())
        .repair(cyclic.clone())
        .repair(cyclic);
    let out = run(
        policy.clone(),
        input(
            BATTERY_GOAL,
            json!({"max_repairs": 2}),
            Some(battery_notes()),
        ),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.status, "needs_review");
    assert_eq!(s.repair_count, 2);
    assert!(
        s.plan_errors
            .iter()
            .any(|e| e.contains("dependency cycle") && e.contains("->")),
        "{:?}",
        s.plan_errors
    );
    let reason = s.blocked_reason.as_deref().unwrap();
    assert!(
        reason.contains("still invalid after the allowed repairs"),
        "{reason}"
    );
    assert!(s.step_results.is_empty(), "nothing executed");
    assert_eq!(events(s).last(), Some(&"needs_review"));
    assert_eq!(s.final_output["status"], "needs_review");
}

#[tokio::test]
async fn unsupported_tools_end_in_needs_review_when_repair_is_exhausted() {
    let mut plan = valid_plan();
    plan[1].tool = "web_search".into();
    let policy = ScriptedPolicy::new().plan(plan.clone()).repair(plan);
    let out = run(
        policy,
        input(
            BATTERY_GOAL,
            json!({"max_repairs": 1}),
            Some(battery_notes()),
        ),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.status, "needs_review");
    assert!(s
        .plan_errors
        .iter()
        .any(|e| e.contains("unsupported tool `web_search`")));
}

#[tokio::test]
async fn the_offline_repair_breaks_a_cycle_and_drops_a_step_with_an_unknown_tool() {
    let mut plan = valid_plan();
    plan[0].depends_on = vec!["sum".into()]; // cost -> sum -> cost
    plan[1].tool = "web_search".into();
    // No scripted repair: the offline policy repairs.
    let out = run(
        ScriptedPolicy::new().plan(plan),
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.status, "ok", "{:?}", s.blocked_reason);
    assert_eq!(s.repair_count, 1);
    assert!(s.step("life").is_none(), "the web_search step was dropped");
    assert!(
        s.step("cost").unwrap().depends_on.is_empty(),
        "the forward edge cost -> sum is gone"
    );
    assert_eq!(s.step("sum").unwrap().depends_on, ["cost"]);
}

#[tokio::test]
async fn empty_input_fails_before_calling_the_planner() {
    let policy = ScriptedPolicy::new();
    // initial_update refuses a blank goal outright...
    assert!(planwright_actors::research::initial_update(input("   ", json!({}), None)).is_err());
    // ...and a goal that is blank after normalization inside the graph stops in prepare_input.
    let mut update =
        planwright_actors::research::initial_update(input("x", json!({}), Some(battery_notes())))
            .unwrap();
    update.input = Some(" \n\t ".into());
    let e = engine(policy.clone(), Default::default()).await;
    let out = e
        .run(planwright::ThreadId::new("t"), update, Default::default())
        .await
        .unwrap();
    assert_eq!(out.state.status, "needs_review");
    let reason = out.state.blocked_reason.clone().unwrap_or_default();
    assert!(
        reason.starts_with("the goal is empty. To finish: give a goal"),
        "{reason}"
    );
    assert_eq!(policy.calls(), 0, "no planning call");
    assert_eq!(events(&out.state), ["input_rejected", "needs_review"]);
}

#[tokio::test]
async fn a_vague_goal_returns_needs_review_before_any_planning_call() {
    let policy = ScriptedPolicy::new();
    let out = run(policy.clone(), input("research stuff", json!({}), None)).await;
    assert_eq!(out.state.status, "needs_review");
    assert!(out
        .state
        .blocked_reason
        .as_deref()
        .unwrap()
        .contains("too vague"));
    assert_eq!(policy.calls(), 0);
}

#[tokio::test]
async fn history_records_planning_validation_execution_assessment_and_replanning() {
    // Lifetime needs a term no note has at first; the replan drops it.
    let plan = vec![
        search(
            "cost",
            "solar battery cost",
            &[],
            vec![Criterion::MinSources(1)],
        ),
        search(
            "rec",
            "solar battery recycling",
            &[],
            vec![Criterion::Covers(vec!["recycling".into()])],
        ),
    ];
    let fixed = vec![
        plan[0].clone(),
        PlanStep {
            status: StepStatus::Replaced,
            ..plan[1].clone()
        },
        search(
            "life",
            "solar battery lifetime",
            &[],
            vec![Criterion::MinSources(1)],
        ),
    ];
    let policy = ScriptedPolicy::new().plan(plan).replan(fixed);
    let out = run(
        policy,
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.status, "ok", "{:?}", s.blocked_reason);
    let ev = events(s);
    for e in [
        "input_prepared",
        "plan_created",
        "plan_validated",
        "plan_reviewed",
        "steps_selected",
        "step_executed",
        "progress_assessed",
        "replanned",
        "report_synthesized",
    ] {
        assert!(ev.contains(&e), "{e} missing from {ev:?}");
    }
    let order = |e: &str| ev.iter().position(|x| *x == e).unwrap();
    assert!(order("plan_created") < order("plan_validated"));
    assert!(order("progress_assessed") < order("replanned"));
    for h in s
        .execution_history
        .iter()
        .filter(|h| h.event == "step_executed")
    {
        assert!(
            h.step_id.is_some() && h.started_ms.is_some() && h.ended_ms.is_some(),
            "{h:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_transient_model_error_is_retried_then_the_run_goes_on() {
    let policy = ScriptedPolicy::new();
    policy
        .plans
        .lock()
        .unwrap()
        .push_back(Err(PolicyError::Transient("timeout".into())));
    policy.plans.lock().unwrap().push_back(Ok(valid_plan()));
    let out = run(
        policy.clone(),
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    assert_eq!(out.state.status, "ok");
    assert!(out.state.errors.is_empty());
}

#[tokio::test(start_paused = true)]
async fn a_lasting_model_error_is_recorded_and_surfaced_with_status_failed() {
    let policy = ScriptedPolicy::new();
    for _ in 0..3 {
        policy
            .plans
            .lock()
            .unwrap()
            .push_back(Err(PolicyError::Transient("rate limited".into())));
    }
    let out = run(
        policy.clone(),
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.status, "failed");
    assert_eq!(policy.calls(), 3, "three attempts");
    assert!(
        s.errors[0].contains("create_plan") && s.errors[0].contains("rate limited"),
        "{:?}",
        s.errors
    );
    assert!(events(s).contains(&"model_error"));
    assert_eq!(s.final_output["status"], "failed");
    assert!(s.final_output["errors"][0]
        .as_str()
        .unwrap()
        .contains("rate limited"));

    let policy = ScriptedPolicy::new();
    policy
        .reports
        .lock()
        .unwrap()
        .push_back(Err(PolicyError::Failed("refused".into())));
    let out = run(
        policy.clone(),
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    assert_eq!(out.state.status, "failed");
    assert!(out.state.final_output["blocked_reason"]
        .as_str()
        .unwrap()
        .contains("synthesize_report"));
    assert!(
        !out.state.final_output["sources"]
            .as_array()
            .unwrap()
            .is_empty(),
        "what was found is kept"
    );
    let _ = Arc::clone(&policy);
}

/// A tool that fails is recorded in `errors` (named by step and tool) and in the history; a step
/// whose tool ran adds nothing to `errors`.
#[tokio::test]
async fn a_failing_tool_is_recorded_in_errors_and_a_working_one_adds_none() {
    let mut broken = search(
        "broken",
        "solar battery cost",
        &[],
        vec![Criterion::MinSources(1)],
    );
    // An aspect with no words to search for: the search tool refuses it.
    Arc::make_mut(&mut broken.params).aspect = Some("--".into());
    broken.optional = true;
    let working = search(
        "cost",
        "solar battery cost",
        &[],
        vec![Criterion::MinSources(1)],
    );
    let policy = ScriptedPolicy::new().plan(vec![broken, working]);
    let out = run(
        policy,
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.errors.len(), 1, "{:?}", s.errors);
    assert!(
        s.errors[0].starts_with("broken: tool search: aspect `--` has no words"),
        "{:?}",
        s.errors
    );
    assert!(events(s).contains(&"tool_error"), "{:?}", events(s));
    assert!(s.step_results["cost"].met, "{:?}", s.step_results["cost"]);
}
