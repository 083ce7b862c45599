//! Replanning: a recoverable missing-evidence result triggers a replan that keeps completed steps
//! and their results; replans are bounded by `max_replans` and `max_steps`; a replan that gains
//! nothing ends in `needs_review` with the reason.

mod research_support;

use planwright_actors::research::state::{Criterion, PlanStep, StepStatus};
use planwright_actors::research::OfflineResearchPolicy;
use proptest::prelude::*;
use research_support::*;
use serde_json::json;
use std::sync::Arc;

fn plan_with_a_gap() -> Vec<PlanStep> {
    vec![
        search(
            "cost",
            "solar battery cost",
            &[],
            vec![Criterion::MinSources(1)],
        ),
        // No note says "degradation"; the offline replan widens it to nothing better.
        search(
            "life",
            "solar battery degradation",
            &[],
            vec![
                Criterion::Covers(vec!["lifetime".into()]),
                Criterion::MinSources(1),
            ],
        ),
        summarize("sum", &["cost", "life"]),
    ]
}

#[tokio::test]
async fn missing_evidence_triggers_a_replan_that_keeps_completed_results() {
    let broadened = {
        let p = plan_with_a_gap();
        vec![
            PlanStep {
                status: StepStatus::Complete,
                ..p[0].clone()
            },
            PlanStep {
                status: StepStatus::Replaced,
                ..p[1].clone()
            },
            search(
                "life2",
                "solar battery lifetime cycles",
                &[],
                vec![Criterion::Covers(vec!["lifetime".into()])],
            ),
            summarize("sum", &["cost", "life2"]),
        ]
    };
    let policy = ScriptedPolicy::new()
        .plan(plan_with_a_gap())
        .replan(broadened);
    let out = run(
        policy,
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.status, "ok", "{:?}", s.blocked_reason);
    assert_eq!(s.replan_count, 1);
    // `cost` ran once and its result survived; `life` is replaced but its result kept on record.
    let runs = |id: &str| {
        s.execution_history
            .iter()
            .filter(|h| h.event == "step_executed" && h.step_id.as_deref() == Some(id))
            .count()
    };
    assert_eq!(runs("cost"), 1, "completed work is not redone");
    assert!(s.step_results["cost"].met);
    assert!(!s.step_results["life"].met);
    assert_eq!(s.step("life").unwrap().status, StepStatus::Replaced);
    assert_eq!(s.step("life2").unwrap().status, StepStatus::Complete);
    assert!(
        s.knowledge_gaps.is_empty(),
        "resolved by the replan: {:?}",
        s.knowledge_gaps
    );
}

#[tokio::test]
async fn a_replan_that_drops_a_completed_step_gets_it_back() {
    let p = plan_with_a_gap();
    let careless = vec![search(
        "life2",
        "solar battery lifetime",
        &[],
        vec![Criterion::MinSources(1)],
    )];
    let policy = ScriptedPolicy::new().plan(p).replan(careless);
    let out = run(
        policy,
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.step("cost").unwrap().status, StepStatus::Complete);
    let replanned = s
        .execution_history
        .iter()
        .find(|h| h.event == "replanned")
        .unwrap();
    assert!(
        replanned.detail.contains("kept complete steps cost"),
        "{}",
        replanned.detail
    );
}

#[tokio::test]
async fn a_replan_without_progress_ends_in_needs_review_with_the_reason() {
    // Without the one note on lifetime, the offline replan broadens `life` and still finds none.
    let notes: Vec<_> = battery_notes()
        .into_iter()
        .filter(|n| &*n.id != "b3")
        .collect();
    let policy = ScriptedPolicy::new().plan(plan_with_a_gap());
    let out = run(
        policy,
        input(BATTERY_GOAL, json!({"max_replans": 5}), Some(notes)),
    )
    .await;
    let s = &out.state;
    assert_eq!(s.status, "needs_review");
    assert_eq!(
        s.replan_count, 1,
        "stopped at the first fruitless replan, not after five"
    );
    let reason = s.blocked_reason.as_deref().unwrap();
    assert!(
        reason.contains("made no progress") && reason.contains("life_r1"),
        "{reason}"
    );
    assert!(
        s.knowledge_gaps.iter().any(|g| g.contains("lifetime")),
        "{:?}",
        s.knowledge_gaps
    );
    assert_eq!(s.final_output["status"], "needs_review");
}

#[tokio::test]
async fn max_replans_zero_stops_at_the_first_failure() {
    let policy = ScriptedPolicy::new().plan(plan_with_a_gap());
    let out = run(
        policy,
        input(
            BATTERY_GOAL,
            json!({"max_replans": 0}),
            Some(battery_notes()),
        ),
    )
    .await;
    assert_eq!(out.state.status, "needs_review");
    assert_eq!(out.state.replan_count, 0);
    assert!(out
        .state
        .blocked_reason
        .as_deref()
        .unwrap()
        .contains("replanning exhausted"));
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// Whatever the limits and the goal's coverage, a run ends, within max_replans replans,
    /// every plan within max_steps steps, and at most max_steps × (max_replans + 1) executions.
    #[test]
    fn replanning_is_bounded(
        max_replans in 0u32..4,
        max_steps in 1u32..7,
        sections in proptest::sample::subsequence(vec!["cost", "risks", "staffing", "compliance", "latency"], 1..4),
    ) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let s = rt.block_on(async {
            let req = input(
                "Should our customer support adopt retrieval-augmented generation",
                json!({"max_replans": max_replans, "max_steps": max_steps, "required_sections": sections}),
                None,
            );
            run(Arc::new(OfflineResearchPolicy), req).await.state
        });
        prop_assert!(["ok", "needs_review"].contains(&s.status.as_str()), "{}", s.status);
        prop_assert!(s.replan_count <= max_replans);
        let active = s.plan.iter().filter(|p| p.status != StepStatus::Replaced).count();
        prop_assert!(s.status != "ok" || active <= max_steps as usize);
        let executed = s.execution_history.iter().filter(|h| h.event == "step_executed").count();
        prop_assert!(executed <= (max_steps * (max_replans + 1)) as usize, "{executed} executions");
    }
}
