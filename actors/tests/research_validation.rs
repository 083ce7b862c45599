//! Validation names each problem: missing fields, duplicate ids, unknown dependencies, a cycle
//! with its path, unsupported tools, more steps than max_steps, no acceptance criteria.

use planwright_actors::research::constraints::Constraints;
use planwright_actors::research::state::{Criterion, PlanStep, StepParams, StepStatus};
use planwright_actors::research::validate::{validate, PlanProblem};
use std::sync::Arc;

fn step(id: &str, tool: &str, deps: &[&str]) -> PlanStep {
    PlanStep {
        id: id.into(),
        description: format!("do {id}"),
        depends_on: deps.iter().map(|d| d.to_string()).collect(),
        tool: tool.into(),
        params: Arc::new(StepParams {
            query: Some("q".into()),
            dimensions: vec!["cost".into()],
            ..StepParams::default()
        }),
        acceptance_criteria: vec![Criterion::MinSources(1)].into(),
        ..PlanStep::default()
    }
}

fn errors(plan: &[PlanStep], c: &Constraints) -> Vec<String> {
    validate(plan, c).iter().map(ToString::to_string).collect()
}

#[test]
fn a_valid_plan_has_no_problems() {
    let plan = vec![
        step("a", "search", &[]),
        step("b", "compare", &["a"]),
        step("c", "summarize", &["b"]),
    ];
    assert!(validate(&plan, &Constraints::default()).is_empty());
}

#[test]
fn each_problem_is_named() {
    let mut plan = vec![
        step("a", "search", &["c"]),
        step("b", "web_search", &["a", "ghost"]),
        step("c", "summarize", &["b"]),
        step("a", "summarize", &[]),
        PlanStep {
            id: String::new(),
            ..step("x", "search", &[])
        },
        PlanStep {
            acceptance_criteria: Default::default(),
            ..step("e", "search", &[])
        },
    ];
    plan[4].description.clear();
    let c = Constraints {
        max_steps: 4,
        ..Constraints::default()
    };
    let e = errors(&plan, &c);
    let has = |s: &str| assert!(e.iter().any(|x| x.contains(s)), "`{s}` not in {e:#?}");
    has("step #5: missing field `id`");
    has("step #5: missing field `description`");
    has("duplicate step id `a`");
    has("b: depends on unknown step `ghost`");
    has("b: unsupported tool `web_search` (allowed: search, compare, summarize, mcp)");
    has("the plan has 6 steps, more than max_steps = 4");
    has("e: no acceptance criteria");
    has("dependency cycle: a -> c -> b -> a");
}

#[test]
fn tools_outside_allowed_tools_and_missing_params_are_named() {
    let c = Constraints {
        allowed_tools: Some(vec!["search".into()]),
        ..Constraints::default()
    };
    let mut s = step("s", "summarize", &[]);
    let e = errors(&[s.clone()], &c);
    assert_eq!(e, ["s: unsupported tool `summarize` (allowed: search)"]);
    s.tool = "search".into();
    Arc::make_mut(&mut s.params).query = None;
    assert_eq!(
        errors(&[s], &Constraints::default()),
        ["s: tool `search` needs `params.query`"]
    );
    let none = Constraints {
        allowed_tools: Some(vec![]),
        ..Constraints::default()
    };
    let p = validate(&[step("a", "search", &[])], &none);
    assert!(p.iter().any(PlanProblem::is_fatal), "{p:?}");
}

#[test]
fn replaced_steps_do_not_count_and_cannot_be_depended_on() {
    let old = PlanStep {
        status: StepStatus::Replaced,
        ..step("a", "search", &[])
    };
    let plan = vec![
        old,
        step("a2", "search", &[]),
        step("b", "summarize", &["a"]),
    ];
    let c = Constraints {
        max_steps: 2,
        ..Constraints::default()
    };
    assert_eq!(errors(&plan, &c), ["b: depends on unknown step `a`"]);
    assert_eq!(validate(&[], &c), [PlanProblem::Empty]);
}
