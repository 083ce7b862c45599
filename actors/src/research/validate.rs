//! Plan validation: every problem of a plan, each named, so repair (by a model or the offline
//! planner) knows exactly what to fix.
//!
//! Checks, over the plan's active (not replaced) steps: at least one step; required fields (`id`,
//! `description`, `tool`); unique ids; dependencies that name an active step; no dependency cycle
//! (the cycle's path is given); tools that exist and are allowed; each tool's required parameters;
//! at most `max_steps` steps; acceptance criteria on every step.

use super::constraints::Constraints;
use super::state::{PlanStep, StepStatus};
use super::tools;
use std::collections::HashMap;

/// One problem of a plan.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum PlanProblem {
    /// No active step at all.
    #[error("the plan has no steps")]
    Empty,
    /// A required field is empty.
    #[error("{step}: missing field `{field}`")]
    MissingField {
        /// The step (`id`, or `step #n` without one).
        step: String,
        /// The field.
        field: &'static str,
    },
    /// Two steps share an id.
    #[error("duplicate step id `{0}`")]
    DuplicateId(String),
    /// A dependency names no active step.
    #[error("{step}: depends on unknown step `{dep}`")]
    UnknownDependency {
        /// The step.
        step: String,
        /// The unknown id.
        dep: String,
    },
    /// Steps wait for each other in a circle.
    #[error("dependency cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    /// A tool that does not exist or is not allowed.
    #[error("{step}: unsupported tool `{tool}` (allowed: {allowed})")]
    UnsupportedTool {
        /// The step.
        step: String,
        /// The tool.
        tool: String,
        /// The tools that may be used.
        allowed: String,
    },
    /// A tool parameter the tool needs is missing.
    #[error("{step}: tool `{tool}` needs `params.{param}`")]
    MissingParam {
        /// The step.
        step: String,
        /// The tool.
        tool: String,
        /// The parameter.
        param: &'static str,
    },
    /// More steps than allowed.
    #[error("the plan has {count} steps, more than max_steps = {max}")]
    TooManySteps {
        /// Active steps.
        count: usize,
        /// The limit.
        max: u32,
    },
    /// A step without acceptance criteria.
    #[error("{step}: no acceptance criteria")]
    NoAcceptanceCriteria {
        /// The step.
        step: String,
    },
    /// The constraints allow no tool the planner has: no plan can run.
    #[error("the constraints allow none of the local tools ({0})")]
    NoToolAllowed(String),
}

impl PlanProblem {
    /// A problem no repair can fix (the plan is impossible under the constraints).
    pub fn is_fatal(&self) -> bool {
        matches!(self, Self::NoToolAllowed(_))
    }
}

fn label(step: &PlanStep, index: usize) -> String {
    if step.id.trim().is_empty() {
        format!("step #{}", index + 1)
    } else {
        step.id.clone()
    }
}

/// The tools the constraints allow, by name.
pub fn allowed_tools(constraints: &Constraints) -> Vec<&'static str> {
    tools::CATALOG
        .iter()
        .map(|t| t.name)
        .filter(|t| constraints.allows(t))
        .collect()
}

/// Every problem of `plan` under `constraints`; empty when the plan is valid.
pub fn validate(plan: &[PlanStep], constraints: &Constraints) -> Vec<PlanProblem> {
    let mut problems = Vec::new();
    let allowed = allowed_tools(constraints);
    if allowed.is_empty() {
        let all: Vec<&str> = tools::CATALOG.iter().map(|t| t.name).collect();
        problems.push(PlanProblem::NoToolAllowed(all.join(", ")));
    }
    let active: Vec<(usize, &PlanStep)> = plan
        .iter()
        .enumerate()
        .filter(|(_, s)| s.status != StepStatus::Replaced)
        .collect();
    if active.is_empty() {
        problems.push(PlanProblem::Empty);
        return problems;
    }
    let mut seen: HashMap<&str, usize> = HashMap::new();
    for &(i, s) in &active {
        let step = label(s, i);
        for (field, value) in [
            ("id", &s.id),
            ("description", &s.description),
            ("tool", &s.tool),
        ] {
            if value.trim().is_empty() {
                problems.push(PlanProblem::MissingField {
                    step: step.clone(),
                    field,
                });
            }
        }
        if !s.id.trim().is_empty() {
            let n = seen.entry(s.id.as_str()).or_default();
            *n += 1;
            if *n == 2 {
                problems.push(PlanProblem::DuplicateId(s.id.clone()));
            }
        }
        if !s.tool.trim().is_empty() && !allowed.contains(&s.tool.as_str()) {
            problems.push(PlanProblem::UnsupportedTool {
                step: step.clone(),
                tool: s.tool.clone(),
                allowed: allowed.join(", "),
            });
        }
        let needs = match s.tool.as_str() {
            "search"
                if s.params
                    .query
                    .as_deref()
                    .is_none_or(|q| q.trim().is_empty()) =>
            {
                Some("query")
            }
            "compare" if s.params.dimensions.is_empty() => Some("dimensions"),
            "mcp"
                if s.params.tool.is_none()
                    && s.params
                        .query
                        .as_deref()
                        .is_none_or(|q| q.trim().is_empty()) =>
            {
                Some("query")
            }
            _ => None,
        };
        if let Some(param) = needs {
            problems.push(PlanProblem::MissingParam {
                step: step.clone(),
                tool: s.tool.clone(),
                param,
            });
        }
        if s.acceptance_criteria.is_empty() {
            problems.push(PlanProblem::NoAcceptanceCriteria { step: step.clone() });
        }
        for dep in &s.depends_on {
            if !seen_any(&active, dep) {
                problems.push(PlanProblem::UnknownDependency {
                    step: step.clone(),
                    dep: dep.clone(),
                });
            }
        }
    }
    if active.len() > constraints.max_steps as usize {
        problems.push(PlanProblem::TooManySteps {
            count: active.len(),
            max: constraints.max_steps,
        });
    }
    let steps: Vec<&PlanStep> = active.iter().map(|(_, s)| *s).collect();
    if let Some(cycle) = find_cycle(&steps) {
        problems.push(PlanProblem::Cycle(cycle));
    }
    problems
}

fn seen_any(active: &[(usize, &PlanStep)], id: &str) -> bool {
    active.iter().any(|(_, s)| s.id == id)
}

/// A dependency cycle among `steps`, as a closed path of ids (`a -> b -> a`), if there is one.
/// Unknown dependencies are ignored here (validation reports them separately).
pub fn find_cycle(steps: &[&PlanStep]) -> Option<Vec<String>> {
    // With duplicate ids (reported separately), a dependency means the first step of that id.
    let mut index: HashMap<&str, usize> = HashMap::new();
    for (i, s) in steps.iter().enumerate() {
        index.entry(s.id.as_str()).or_insert(i);
    }
    let deps: Vec<Vec<usize>> = steps
        .iter()
        .map(|s| {
            s.depends_on
                .iter()
                .filter_map(|d| index.get(d.as_str()).copied())
                .collect()
        })
        .collect();
    // 0 = unvisited, 1 = on the path, 2 = done.
    let mut mark = vec![0u8; steps.len()];
    let mut path: Vec<usize> = Vec::new();
    for start in 0..steps.len() {
        if mark[start] != 0 {
            continue;
        }
        // Iterative DFS: (node, next dependency to look at).
        let mut stack = vec![(start, 0usize)];
        mark[start] = 1;
        path.push(start);
        while let Some(&mut (node, ref mut next)) = stack.last_mut() {
            if let Some(&d) = deps[node].get(*next) {
                *next += 1;
                if mark[d] == 1 {
                    let from = path.iter().position(|&p| p == d).unwrap_or(0);
                    let mut cycle: Vec<String> =
                        path[from..].iter().map(|&i| steps[i].id.clone()).collect();
                    cycle.push(steps[d].id.clone());
                    return Some(cycle);
                }
                if mark[d] == 0 {
                    mark[d] = 1;
                    path.push(d);
                    stack.push((d, 0));
                }
            } else {
                mark[node] = 2;
                path.pop();
                stack.pop();
            }
        }
    }
    None
}
