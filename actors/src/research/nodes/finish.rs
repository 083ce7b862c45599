//! `synthesize_report` and `mark_needs_review`: the two ways a run ends.
//!
//! The brief is written from the complete steps' findings only; its citations are then checked
//! against the evidence (see `citations`), and a sentence citing anything else is removed and
//! reported as a gap. `mark_needs_review` keeps everything (plan, history, errors, gaps) and says
//! why the run stopped.

use super::{emit_usage, policy_failure, Env};
use crate::research::citations;
use crate::research::output::{evidence, final_output};
use crate::research::policy::offline::OVERVIEW;
use crate::research::policy::{SectionInput, SynthesisRequest};
use crate::research::state::{
    status, Criterion, HistoryEntry, PlanStep, ResearchState, ResearchUpdate, StepStatus,
};
use crate::research::text;
use planwright::{NodeContext, NodeError};
use std::collections::HashSet;
use std::sync::Arc;

fn title_case(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}

fn section_title(step: &PlanStep) -> String {
    match step.tool.as_str() {
        "compare" => "Comparison".into(),
        "summarize" => "Summary".into(),
        _ => {
            let covers: Vec<String> = step
                .acceptance_criteria
                .iter()
                .flat_map(|c| match c {
                    Criterion::Covers(t) => t.clone(),
                    Criterion::MinSources(_) => Vec::new(),
                })
                .collect();
            if covers.is_empty() {
                title_case(OVERVIEW)
            } else {
                let names: Vec<&str> = covers.iter().map(|c| text::primary(c)).collect();
                title_case(&names.join(" and "))
            }
        }
    }
}

/// The brief's sections: one per complete step, in plan order, with its findings.
pub fn sections(s: &ResearchState) -> Vec<SectionInput> {
    s.active_steps()
        .filter(|st| st.status == StepStatus::Complete)
        .filter_map(|st| {
            let r = s.step_results.get(&st.id)?;
            Some(SectionInput {
                title: section_title(st),
                findings: r.findings.clone(),
            })
        })
        .collect()
}

/// The node `synthesize_report`.
pub async fn synthesize_report(
    env: Arc<Env>,
    s: Arc<ResearchState>,
    ctx: NodeContext,
) -> Result<ResearchUpdate, NodeError> {
    let ev = evidence(&s);
    let sources: Vec<(String, String)> = ev
        .iter()
        .filter_map(|e| {
            s.source_notes
                .iter()
                .find(|n| n.id == e.source_id)
                .map(|n| (n.id.clone(), n.title.clone()))
        })
        .collect();
    let req = SynthesisRequest {
        goal: s.goal.clone(),
        constraints: s.constraints.clone(),
        sections: sections(&s),
        knowledge_gaps: s.knowledge_gaps.clone(),
        sources,
    };
    let reply = match env.policy.synthesize_report(&req).await {
        Ok(r) => r,
        Err(e) => {
            let mut u = policy_failure("synthesize_report", e, &ctx, env.model_attempts)?;
            let mut view = (*s).clone();
            view.blocked_reason = u.blocked_reason.clone().flatten();
            view.errors.extend(u.errors.clone().unwrap_or_default());
            u = u.final_output(final_output(&view, status::FAILED, ""));
            return Ok(u);
        }
    };
    emit_usage(&ctx, "synthesize_report", reply.usage);
    let allowed: HashSet<String> = ev.iter().map(|e| e.source_id.clone()).collect();
    let (report, removed) = citations::enforce(&reply.value.text, &allowed);
    let mut gaps = s.knowledge_gaps.clone();
    gaps.extend(removed.iter().cloned());
    let mut view = (*s).clone();
    view.knowledge_gaps = gaps.clone();
    let cited = citations::cited_ids(&report);
    let distinct: HashSet<&String> = cited.iter().collect();
    let mut detail = format!(
        "{} words citing {} note(s); {} open gap(s)",
        text::word_count(&report),
        distinct.len(),
        gaps.len()
    );
    if !removed.is_empty() {
        detail.push_str(&format!(
            "; removed {} unsupported sentence(s)",
            removed.len()
        ));
    }
    Ok(ResearchUpdate::default()
        .final_output(final_output(&view, status::OK, &report))
        .final_report(report)
        .knowledge_gaps(gaps)
        .status(status::OK.to_string())
        .execution_history(vec![HistoryEntry::new("report_synthesized", detail)]))
}

/// The node `mark_needs_review`.
pub fn mark_needs_review(s: &ResearchState, _: &NodeContext) -> Result<ResearchUpdate, NodeError> {
    let st = if s.status == status::FAILED {
        status::FAILED
    } else {
        status::NEEDS_REVIEW
    };
    let reason = s
        .blocked_reason
        .clone()
        .unwrap_or_else(|| "stopped for review".to_string());
    let mut view = s.clone();
    view.blocked_reason = Some(reason.clone());
    Ok(ResearchUpdate::default()
        .status(st.to_string())
        .final_output(final_output(&view, st, ""))
        .blocked_reason(Some(reason.clone()))
        .execution_history(vec![HistoryEntry::new("needs_review", reason)]))
}
