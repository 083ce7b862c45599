//! Parallel ready steps: each step is its own task, starts when its own dependencies finish (not
//! when a wave does), at most `max_parallel_steps` at once; `execution_history` shows the overlap.
//! Steps never run before their dependencies complete.

mod research_support;

use planwright::{NodeContext, RunOptions, ThreadId};
use planwright_actors::research::nodes::execute::{execute_step, runnable};
use planwright_actors::research::nodes::Env;
use planwright_actors::research::state::{Criterion, PlanStep, ResearchState, StepStatus};
use planwright_actors::research::{
    initial_update, GraphOptions, OfflineResearchPolicy, TokioClock,
};
use research_support::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

fn times(s: &ResearchState, id: &str) -> (u64, u64) {
    let h = s
        .execution_history
        .iter()
        .find(|h| h.event == "step_executed" && h.step_id.as_deref() == Some(id))
        .unwrap_or_else(|| panic!("{id} did not run"));
    (h.started_ms.unwrap(), h.ended_ms.unwrap())
}

/// a, b, c independent; d after a; e after d and b.
fn diamond() -> Vec<PlanStep> {
    let c1 = || vec![Criterion::MinSources(1)];
    vec![
        search("a", "solar battery cost", &[], c1()),
        search("b", "solar battery lifetime", &[], c1()),
        search("c", "solar battery warranty", &[], c1()),
        summarize("d", &["a"]),
        summarize("e", &["d", "b"]),
    ]
}

async fn run_timed(plan: Vec<PlanStep>, max_parallel: u32) -> ResearchState {
    let policy = ScriptedPolicy::new().plan(plan);
    let options = GraphOptions {
        clock: Arc::new(TokioClock::new()),
        step_latency: Duration::from_millis(100),
        ..GraphOptions::default()
    };
    let e = engine(policy, options).await;
    let req = input(
        BATTERY_GOAL,
        json!({"max_parallel_steps": max_parallel}),
        Some(battery_notes()),
    );
    let out = e
        .run(
            ThreadId::new("p"),
            initial_update(req).unwrap(),
            RunOptions::default(),
        )
        .await
        .unwrap();
    (*out.state).clone()
}

#[tokio::test(start_paused = true)]
async fn ready_steps_overlap_and_each_starts_when_its_own_dependencies_finish() {
    let s = run_timed(diamond(), 4).await;
    assert_eq!(s.status, "ok", "{:?}", s.blocked_reason);
    let (a, b, c, d, e) = (
        times(&s, "a"),
        times(&s, "b"),
        times(&s, "c"),
        times(&s, "d"),
        times(&s, "e"),
    );
    // a, b, c run at once.
    assert_eq!(a.0, b.0);
    assert_eq!(b.0, c.0);
    assert!(a.0 < b.1 && b.0 < a.1, "a and b overlap: {a:?} {b:?}");
    // d starts the moment a ends; e the moment d ends (b ended long before).
    assert_eq!(d.0, a.1);
    assert_eq!(e.0, d.1);
    assert!(d.1 - d.0 >= 100 && e.1 - e.0 >= 100);
    // One batch: a single selection ran all five.
    assert_eq!(
        s.execution_history
            .iter()
            .filter(|h| h.event == "steps_selected")
            .count(),
        1
    );
}

#[tokio::test(start_paused = true)]
async fn max_parallel_steps_bounds_how_many_run_at_once() {
    let s = run_timed(diamond(), 1).await;
    assert_eq!(s.status, "ok");
    let mut spans: Vec<(u64, u64)> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|id| times(&s, id))
        .collect();
    spans.sort();
    for w in spans.windows(2) {
        assert!(
            w[1].0 >= w[0].1,
            "no overlap with max_parallel_steps = 1: {spans:?}"
        );
    }
    let s = run_timed(diamond(), 2).await;
    let spans: Vec<(u64, u64)> = ["a", "b", "c", "d", "e"]
        .iter()
        .map(|id| times(&s, id))
        .collect();
    for &(start, _) in &spans {
        let running = spans
            .iter()
            .filter(|(s0, e0)| *s0 <= start && start < *e0)
            .count();
        assert!(running <= 2, "{running} at once at {start}: {spans:?}");
    }
}

#[tokio::test(start_paused = true)]
async fn steps_run_only_after_their_dependencies_complete() {
    let s = run_timed(diamond(), 4).await;
    for step in s.plan.iter() {
        let (start, _) = times(&s, &step.id);
        for dep in &step.depends_on {
            let (_, dep_end) = times(&s, dep);
            assert!(
                dep_end <= start,
                "{} started at {start} before {dep} ended at {dep_end}",
                step.id
            );
        }
    }
}

#[tokio::test]
async fn a_step_whose_dependency_is_incomplete_is_not_executed() {
    // Calling execute_step directly for `d` while `a` is still pending: no tool runs.
    let mut s = planwright_actors::research::initial_state(input(
        BATTERY_GOAL,
        json!({}),
        Some(battery_notes()),
    ))
    .unwrap();
    s.goal = BATTERY_GOAL.into();
    s.plan = diamond().into();
    let env = Arc::new(Env {
        policy: Arc::new(OfflineResearchPolicy),
        clock: Arc::new(TokioClock::new()),
        step_latency: Duration::ZERO,
        tool_latency: None,
        model_attempts: 1,
        mcp: None,
    });
    let ctx = NodeContext::detached("execute_step").with_input(json!({"step": "d"}));
    let u = execute_step(env.clone(), Arc::new(s.clone()), ctx)
        .await
        .unwrap();
    let r = &u.step_results.unwrap()["d"];
    assert!(r.blocked && !r.met && r.sources.is_empty(), "{r:?}");
    assert!(r
        .error
        .as_deref()
        .unwrap()
        .contains("dependencies not complete: a"));
    assert_eq!(u.execution_history.unwrap()[0].event, "step_blocked");
    // The selection never puts a step before its dependencies, and waits for failed ones.
    assert_eq!(runnable(&s), ["a", "b", "c", "d", "e"]);
    s.plan.to_mut()[0].status = StepStatus::Failed;
    assert_eq!(runnable(&s), ["b", "c"]);
}
