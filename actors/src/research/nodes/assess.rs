//! `assess_progress`: mark each executed step, collect the gaps, and decide whether to go on,
//! replan, synthesize, or stop for review.
//!
//! A step that met its criteria is complete. A step that did not is failed if required (a replan
//! can look for the evidence differently) or skipped if optional (its gap is kept, the brief goes
//! on). A blocked step goes back to pending. The node stops the run (sets `blocked_reason`) when
//! a required step failed and: there are no notes at all (unrecoverable), the last replan gained
//! nothing (stalled), or the replans are used up. The router then only reads the plan's statuses
//! and `blocked_reason`.

use crate::research::plan::Plan;
use crate::research::state::{
    active_steps, status, HistoryEntry, PlanStep, ResearchState, ResearchUpdate, StepResults,
    StepStatus,
};
use planwright::{NodeContext, NodeError};
use std::collections::{BTreeMap, BTreeSet};

/// Progress so far: complete steps plus distinct notes they used. A replan after which this
/// does not grow made no progress.
pub fn progress_score(s: &ResearchState) -> u32 {
    score_of(&s.plan, &s.step_results)
}

/// The open gaps: every unmet criterion of a failed or skipped step.
pub fn gaps(s: &ResearchState) -> Vec<String> {
    gaps_of(&s.plan, &s.step_results)
}

fn score_of(plan: &[PlanStep], results: &StepResults) -> u32 {
    let complete: Vec<&str> = active_steps(plan)
        .filter(|st| st.status == StepStatus::Complete)
        .map(|st| st.id.as_str())
        .collect();
    let notes: BTreeSet<&str> = complete
        .iter()
        .filter_map(|id| results.get(*id))
        .flat_map(|r| r.sources.iter().map(String::as_str))
        .collect();
    (complete.len() + notes.len()) as u32
}

fn gaps_of(plan: &[PlanStep], results: &StepResults) -> Vec<String> {
    let mut out = Vec::new();
    for st in active_steps(plan) {
        if !matches!(st.status, StepStatus::Failed | StepStatus::Skipped) {
            continue;
        }
        let kind = if st.optional { "optional" } else { "required" };
        if let Some(r) = results.get(&st.id) {
            for u in &r.unmet {
                out.push(format!("{} ({kind}: {}): {u}", st.id, st.description));
            }
        }
    }
    out
}

/// The node.
pub fn assess_progress(s: &ResearchState, _: &NodeContext) -> Result<ResearchUpdate, NodeError> {
    // Only the plan's statuses change: the rest of the state is read where it is, and the update
    // carries the statuses alone (`research::plan`); `plan` is the marked copy it is judged on.
    let mut plan = s.plan.to_vec();
    let mut statuses = BTreeMap::new();
    let mut marks = Vec::new();
    for id in &s.selected_steps {
        let (Some(step), Some(r)) = (
            plan.iter_mut().find(|p| &p.id == id),
            s.step_results.get(id),
        ) else {
            continue;
        };
        step.status = if r.met {
            StepStatus::Complete
        } else if r.blocked {
            StepStatus::Pending
        } else if step.optional {
            StepStatus::Skipped
        } else {
            StepStatus::Failed
        };
        statuses.insert(id.clone(), step.status);
        marks.push(format!("{id}: {:?}", step.status).to_lowercase());
    }
    let open = gaps_of(&plan, &s.step_results);
    let score = score_of(&plan, &s.step_results);
    let failed: Vec<&str> = active_steps(&plan)
        .filter(|st| st.status == StepStatus::Failed)
        .map(|st| st.id.as_str())
        .collect();
    let pending = active_steps(&plan).any(|st| st.status == StepStatus::Pending);
    let mut blocked = None;
    let decision = if !failed.is_empty() {
        let why = open.join("; ");
        if s.source_notes.is_empty() {
            blocked = Some("there are no source notes: no replan can find evidence".to_string());
        } else if s.progress_at_replan.is_some_and(|p| score <= p) {
            blocked = Some(format!(
                "replan {} made no progress (still failing: {}): {why}",
                s.replan_count,
                failed.join(", ")
            ));
        } else if s.replan_count >= s.max_replans {
            blocked = Some(format!(
                "replanning exhausted ({} of {} replans used; still failing: {}): {why}",
                s.replan_count,
                s.max_replans,
                failed.join(", ")
            ));
        }
        if blocked.is_some() {
            "needs review"
        } else {
            "replan"
        }
    } else if pending {
        "run the remaining steps"
    } else {
        "synthesize"
    };
    let detail = format!(
        "{}; progress {score}; next: {decision}",
        if marks.is_empty() {
            "nothing executed".to_string()
        } else {
            marks.join(", ")
        }
    );
    let mut u = ResearchUpdate::default()
        .current_step_id(None)
        .knowledge_gaps(open)
        .observations(vec![format!("assessment: {detail}").into()])
        .execution_history(vec![HistoryEntry::new("progress_assessed", detail)])
        .plan(Plan::Statuses(statuses));
    if let Some(reason) = blocked {
        u = u
            .status(status::NEEDS_REVIEW.to_string())
            .blocked_reason(Some(reason));
    }
    Ok(u)
}
