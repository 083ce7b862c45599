//! Offline replanning: each failed step replaced by a better-aimed one, dependents rewired,
//! complete steps untouched.
//!
//! A failed search is replaced by one whose query adds related words of its section (a small
//! fixed vocabulary below) and whose `covers` criterion accepts those words as alternatives
//! ("staffing|agents|headcount"); pending comparisons are widened the same way. A failed compare
//! gets an extra search for the dimensions it missed. When the widened search still finds
//! nothing, the next assessment sees no progress and stops the run for review.

use super::offline_draft::{goal_topic, search_step};
use super::ReplanRequest;
use crate::research::lexicon::synonyms;
use crate::research::state::{Criterion, PlanStep, StepStatus};
use crate::research::text;
use std::collections::HashMap;
use std::sync::Arc;

/// The id a replacement of `id` gets in replan `n`.
fn replacement_id(id: &str, n: u32, plan: &[PlanStep]) -> String {
    let base = id.split("_r").next().unwrap_or(id);
    let mut candidate = format!("{base}_r{n}");
    let mut k = 2;
    while plan.iter().any(|s| s.id == candidate) {
        candidate = format!("{base}_r{n}_{k}");
        k += 1;
    }
    candidate
}

/// The section terms a search step must cover.
fn covered_terms(step: &PlanStep) -> Vec<String> {
    step.acceptance_criteria
        .iter()
        .flat_map(|c| match c {
            Criterion::Covers(t) => t.clone(),
            Criterion::MinSources(_) => Vec::new(),
        })
        .collect()
}

/// The plan revised after failures: each failed step replaced, dependents rewired, complete
/// steps untouched.
pub fn revise_plan(req: &ReplanRequest) -> Vec<PlanStep> {
    let n = req.replan_count + 1;
    let topic = goal_topic(&req.goal, &req.constraints.required_sections);
    let mut plan: Vec<PlanStep> = Vec::with_capacity(req.plan.len() + 2);
    let mut renamed: HashMap<String, String> = HashMap::new();
    // Section term -> the same term with its related words as alternatives.
    let mut widened_terms: HashMap<String, String> = HashMap::new();
    for step in req.plan.iter() {
        if step.status != StepStatus::Failed {
            plan.push(step.clone());
            continue;
        }
        let mut old = step.clone();
        old.status = StepStatus::Replaced;
        plan.push(old);
        let mut new = step.clone();
        new.id = replacement_id(&step.id, n, &req.plan);
        new.status = StepStatus::Pending;
        match step.tool.as_str() {
            "search" => {
                let mut section = covered_terms(step);
                if section.is_empty() {
                    section = topic.clone();
                }
                let mut words: Vec<String> = Vec::new();
                for s in &section {
                    let widened = widen(s);
                    words.extend(widened.split('|').map(str::to_string));
                    widened_terms.insert(text::primary(s).to_string(), widened);
                }
                words.extend(topic.iter().take(2).cloned());
                let params = Arc::make_mut(&mut new.params);
                if step.params.aspect.is_some() {
                    let widened: Vec<String> = section.iter().map(|s| widen(s)).collect();
                    params.aspect = Some(widened.join("|"));
                }
                params.query = Some(words.join(" "));
                params.limit = Some(step.params.limit.unwrap_or(3) + 2);
                new.acceptance_criteria =
                    widen_criteria(&step.acceptance_criteria, &widened_terms).into();
                new.description = format!(
                    "{} (broadened)",
                    step.description.trim_end_matches(" (broadened)")
                );
            }
            "compare" => {
                let found: Vec<&str> = req
                    .step_results
                    .get(&step.id)
                    .map(|r| {
                        r.findings
                            .iter()
                            .filter_map(|f| f.topic.as_deref())
                            .collect()
                    })
                    .unwrap_or_default();
                let missing: Vec<String> = step
                    .params
                    .dimensions
                    .iter()
                    .filter(|d| !found.contains(&d.as_str()))
                    .cloned()
                    .collect();
                if !missing.is_empty() {
                    let gap_id = format!("{}_gap", new.id);
                    let widened: Vec<String> = missing.iter().map(|m| widen(m)).collect();
                    let names: Vec<&str> = missing.iter().map(|m| text::primary(m)).collect();
                    let mut search = search_step(gap_id.clone(), &names.join(" "), &topic, 1);
                    search.acceptance_criteria =
                        vec![Criterion::MinSources(1), Criterion::Covers(widened.clone())].into();
                    let mut words: Vec<String> = widened
                        .iter()
                        .flat_map(|w| w.split('|').map(str::to_string))
                        .collect();
                    words.extend(topic.iter().take(2).cloned());
                    let params = Arc::make_mut(&mut search.params);
                    params.aspect = Some(widened.join("|"));
                    params.query = Some(words.join(" "));
                    params.limit = Some(5);
                    search.description = format!(
                        "Find notes on {} (gap found by comparison)",
                        names.join(", ")
                    );
                    for (m, w) in missing.iter().zip(&widened) {
                        widened_terms.insert(text::primary(m).to_string(), w.clone());
                    }
                    new.depends_on.push(gap_id);
                    plan.push(search);
                }
            }
            _ => {}
        }
        renamed.insert(step.id.clone(), new.id.clone());
        plan.push(new);
    }
    for step in plan.iter_mut() {
        if step.status == StepStatus::Pending {
            for d in step.depends_on.iter_mut() {
                if let Some(r) = renamed.get(d) {
                    *d = r.clone();
                }
            }
            // Pending comparisons look for a widened section under its related words too.
            if step.tool == "compare" {
                for dim in Arc::make_mut(&mut step.params).dimensions.iter_mut() {
                    if let Some(w) = widened_terms.get(text::primary(dim)) {
                        *dim = w.clone();
                    }
                }
                step.acceptance_criteria =
                    widen_criteria(&step.acceptance_criteria, &widened_terms).into();
            }
        }
    }
    plan
}

/// `term` with its related words as `|` alternatives ("cost|price|pricing|...").
pub fn widen(term: &str) -> String {
    let base = text::primary(term);
    let mut alts: Vec<String> = vec![base.to_string()];
    for s in synonyms(base) {
        if !alts.iter().any(|a| a == s) {
            alts.push(s.to_string());
        }
    }
    alts.join("|")
}

fn widen_criteria(criteria: &[Criterion], widened: &HashMap<String, String>) -> Vec<Criterion> {
    criteria
        .iter()
        .map(|c| match c {
            Criterion::Covers(terms) => Criterion::Covers(
                terms
                    .iter()
                    .map(|t| {
                        widened
                            .get(text::primary(t))
                            .cloned()
                            .unwrap_or_else(|| t.clone())
                    })
                    .collect(),
            ),
            other => other.clone(),
        })
        .collect()
}
