//! Offline plan repair: mechanical fixes for exactly the problems validation names.
//!
//! Complete and replaced steps are never touched. In order: an empty plan is drafted afresh;
//! missing ids, descriptions, tools, parameters and criteria are filled in; duplicate ids renamed;
//! unknown dependencies dropped; cycles broken (the edge that closes each cycle is removed);
//! unsupported tools swapped for an allowed tool that can do the job, or the step dropped; then,
//! while the plan is longer than `max_steps`, the last two pending searches are merged, else a
//! pending summarize and then a pending compare are dropped. A problem it cannot fix (a `search`
//! step when search is not allowed) is left for validation to report again.

use super::offline_draft::{draft_plan, goal_topic};
use super::{PlanRequest, RepairRequest};
use crate::research::state::{Criterion, PlanStep, StepStatus};
use crate::research::validate::{allowed_tools, find_cycle};
use std::collections::HashSet;
use std::sync::Arc;

fn pending(s: &PlanStep) -> bool {
    s.status == StepStatus::Pending
}

fn active(s: &PlanStep) -> bool {
    s.status != StepStatus::Replaced
}

/// Repairs a plan (see the module docs).
pub fn repair(req: &RepairRequest) -> Vec<PlanStep> {
    let c = &req.constraints;
    if !req.plan.iter().any(active) {
        let mut plan = req.plan.to_vec();
        plan.extend(draft_plan(&PlanRequest {
            goal: req.goal.clone(),
            constraints: c.clone(),
            notes: req.notes.clone(),
            tools: Default::default(),
        }));
        return repair_steps(plan, req);
    }
    repair_steps(req.plan.to_vec(), req)
}

fn repair_steps(mut plan: Vec<PlanStep>, req: &RepairRequest) -> Vec<PlanStep> {
    let c = &req.constraints;
    let allowed = allowed_tools(c);
    let topic = goal_topic(&req.goal, &c.required_sections);
    // Ids: fill missing, rename duplicates.
    let mut used: HashSet<String> = HashSet::new();
    let mut next = 1;
    for s in plan.iter_mut() {
        if s.id.trim().is_empty() || used.contains(&s.id) {
            let base = if s.id.trim().is_empty() {
                "step".to_string()
            } else {
                s.id.clone()
            };
            let mut id = format!("{base}_{next}");
            while used.contains(&id) || req.plan.iter().any(|p| p.id == id) {
                next += 1;
                id = format!("{base}_{next}");
            }
            s.id = id;
        }
        used.insert(s.id.clone());
    }
    for s in plan.iter_mut().filter(|s| pending(s)) {
        if s.tool.trim().is_empty() {
            s.tool = if s.params.query.is_some() {
                "search"
            } else if !s.params.dimensions.is_empty() {
                "compare"
            } else {
                "summarize"
            }
            .into();
        }
        if s.tool == "search"
            && s.params
                .query
                .as_deref()
                .is_none_or(|q| q.trim().is_empty())
        {
            Arc::make_mut(&mut s.params).query = Some(if s.description.trim().is_empty() {
                topic.join(" ")
            } else {
                s.description.clone()
            });
        }
        if s.tool == "compare" && s.params.dimensions.is_empty() {
            Arc::make_mut(&mut s.params).dimensions = if c.dimensions.is_empty() {
                c.required_sections.clone()
            } else {
                c.dimensions.clone()
            };
            if s.params.dimensions.is_empty() {
                s.tool = "summarize".into();
            }
        }
        if s.description.trim().is_empty() {
            s.description = match s.tool.as_str() {
                "search" => format!(
                    "Find notes for \"{}\"",
                    s.params.query.as_deref().unwrap_or_default()
                ),
                "compare" => format!(
                    "Compare the findings along {}",
                    s.params.dimensions.join(", ")
                ),
                _ => "Summarize the most relevant findings".to_string(),
            };
        }
        if s.acceptance_criteria.is_empty() {
            s.acceptance_criteria = Arc::new(match s.tool.as_str() {
                "search" => vec![Criterion::MinSources(c.min_sources)],
                "compare" => vec![Criterion::Covers(s.params.dimensions.clone())],
                _ => vec![Criterion::MinSources(1)],
            });
        }
    }
    // Unknown dependencies.
    let ids: HashSet<String> = plan
        .iter()
        .filter(|s| active(s))
        .map(|s| s.id.clone())
        .collect();
    for s in plan.iter_mut().filter(|s| pending(s)) {
        s.depends_on.retain(|d| ids.contains(d));
        let mut seen = HashSet::new();
        s.depends_on.retain(|d| seen.insert(d.clone()));
    }
    break_cycles(&mut plan);
    // Unsupported tools: swap or drop.
    let mut i = 0;
    while i < plan.len() {
        let s = &plan[i];
        if pending(s) && !allowed.contains(&s.tool.as_str()) && s.tool != "search" {
            let swap = match s.tool.as_str() {
                "compare" if allowed.contains(&"summarize") => Some("summarize"),
                "summarize" if allowed.contains(&"compare") && !s.params.dimensions.is_empty() => {
                    Some("compare")
                }
                _ => None,
            };
            match swap {
                Some(tool) => {
                    let s = &mut plan[i];
                    s.tool = tool.into();
                    s.acceptance_criteria = vec![Criterion::MinSources(1)].into();
                    s.description = format!("{} (with {tool})", s.description);
                }
                None => {
                    drop_step(&mut plan, i);
                    continue;
                }
            }
        }
        i += 1;
    }
    fit_to_max(&mut plan, c.max_steps as usize);
    plan
}

/// Breaks every cycle: in each, removes a dependency on a step that comes later in the plan (the
/// suspicious edge in a plan written in order), or else the edge that closes the cycle.
fn break_cycles(plan: &mut [PlanStep]) {
    loop {
        let active_steps: Vec<&PlanStep> = plan.iter().filter(|s| active(s)).collect();
        let Some(cycle) = find_cycle(&active_steps) else {
            return;
        };
        if cycle.len() < 2 {
            return;
        }
        let pos = |id: &str| plan.iter().position(|s| active(s) && s.id == id);
        let edges: Vec<(String, String)> = cycle
            .windows(2)
            .map(|w| (w[0].clone(), w[1].clone()))
            .collect();
        let Some((from, to)) = edges
            .iter()
            .find(|(a, b)| pos(b) > pos(a))
            .or(edges.last())
            .cloned()
        else {
            return;
        };
        let Some(step) = plan.iter_mut().find(|s| active(s) && s.id == from) else {
            return;
        };
        step.depends_on.retain(|d| *d != to);
    }
}

/// Removes step `i`; its dependents inherit its dependencies.
fn drop_step(plan: &mut Vec<PlanStep>, i: usize) {
    let removed = plan.remove(i);
    for s in plan.iter_mut() {
        if s.depends_on.contains(&removed.id) {
            s.depends_on.retain(|d| d != &removed.id);
            for d in &removed.depends_on {
                if !s.depends_on.contains(d) {
                    s.depends_on.push(d.clone());
                }
            }
        }
    }
}

/// Merges step `from` into step `into` (both searches): queries, topic filters and criteria
/// combined; dependents of `from` now wait for `into`.
fn merge_searches(plan: &mut Vec<PlanStep>, into: usize, from: usize) {
    let src = plan[from].clone();
    let dst = &mut plan[into];
    let q = format!(
        "{} {}",
        dst.params.query.as_deref().unwrap_or_default(),
        src.params.query.as_deref().unwrap_or_default()
    );
    let mut words: Vec<&str> = Vec::new();
    for w in q.split_whitespace() {
        if !words.contains(&w) {
            words.push(w);
        }
    }
    let params = Arc::make_mut(&mut dst.params);
    params.query = Some(words.join(" "));
    params.aspect = match (params.aspect.take(), src.params.aspect.clone()) {
        (Some(a), Some(b)) => Some(format!("{a}|{b}")),
        (a, b) => a.or(b),
    };
    for t in &src.params.require_any {
        if !params.require_any.contains(t) {
            params.require_any.push(t.clone());
        }
    }
    params.limit = Some((params.limit.unwrap_or(3) + src.params.limit.unwrap_or(3)).min(8));
    let mut covers: Vec<String> = Vec::new();
    let mut min = 0;
    for c in dst
        .acceptance_criteria
        .iter()
        .chain(src.acceptance_criteria.iter())
    {
        match c {
            Criterion::Covers(t) => {
                for x in t {
                    if !covers.contains(x) {
                        covers.push(x.clone());
                    }
                }
            }
            Criterion::MinSources(n) => min = min.max(*n),
        }
    }
    let mut criteria = vec![Criterion::MinSources(min.max(1))];
    if !covers.is_empty() {
        criteria.push(Criterion::Covers(covers));
    }
    dst.acceptance_criteria = criteria.into();
    dst.description = format!("{}; and {}", dst.description, src.description);
    let into_id = dst.id.clone();
    plan.remove(from);
    for s in plan.iter_mut() {
        if s.depends_on.contains(&src.id) {
            s.depends_on.retain(|d| d != &src.id);
            if s.id != into_id && !s.depends_on.contains(&into_id) {
                s.depends_on.push(into_id.clone());
            }
        }
    }
}

fn fit_to_max(plan: &mut Vec<PlanStep>, max: usize) {
    loop {
        if plan.iter().filter(|s| active(s)).count() <= max {
            return;
        }
        let searches: Vec<usize> = (0..plan.len())
            .filter(|&i| pending(&plan[i]) && plan[i].tool == "search")
            .collect();
        if searches.len() >= 2 {
            let n = searches.len();
            merge_searches(plan, searches[n - 2], searches[n - 1]);
            continue;
        }
        let droppable = ["summarize", "compare"].iter().find_map(|tool| {
            (0..plan.len())
                .rev()
                .find(|&i| pending(&plan[i]) && plan[i].tool == *tool)
        });
        match droppable {
            Some(i) => drop_step(plan, i),
            None => return,
        }
    }
}
