//! `synthesize_report` and `mark_needs_review`: the two ways a run ends.
//!
//! The brief is written from the complete steps' findings only; its citations are then checked
//! against the evidence (see `citations`), and a sentence citing anything else is removed and
//! reported as a gap. `mark_needs_review` keeps everything (plan, history, errors, gaps) and says
//! why the run stopped.

use super::{emit_usage, policy_failure, streamed, Env};
use crate::research::citations;
use crate::research::output::{evidence, final_output, used_notes, used_tool_calls, Ending};
use crate::research::policy::offline::OVERVIEW;
use crate::research::policy::offline_report::write_report;
use crate::research::policy::{SectionInput, SectionKind, SynthesisRequest};
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
        "mcp" => {
            let topic = step
                .params
                .aspect
                .as_deref()
                .map_or("Tool results".to_string(), |a| title_case(text::primary(a)));
            match (&step.params.server, &step.params.tool) {
                (Some(server), Some(tool)) => format!("{topic} (from {server}/{tool})"),
                _ => format!("{topic} (from the tool servers)"),
            }
        }
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

/// The brief's sections: one per complete step, in plan order, with its findings. For a draft
/// (`draft` true), an aspect whose search did not complete keeps its place, marked as a gap.
pub fn sections(s: &ResearchState, draft: bool) -> Vec<SectionInput> {
    let mut out: Vec<SectionInput> = Vec::new();
    for st in s.active_steps() {
        let kind = match st.tool.as_str() {
            "compare" => SectionKind::Comparison,
            "summarize" => SectionKind::Summary,
            _ => SectionKind::Aspect,
        };
        let result = s.step_results.get(&st.id);
        let title = section_title(st);
        if st.status == StepStatus::Complete {
            let Some(r) = result else { continue };
            out.push(SectionInput {
                title,
                kind,
                findings: r.findings.clone(),
                dimensions: st.params.dimensions.clone(),
                gap: None,
            });
        } else if draft && kind == SectionKind::Aspect && !out.iter().any(|x| x.title == title) {
            let why = match result {
                Some(r) if !r.unmet.is_empty() => r.unmet.join("; "),
                Some(_) => "its search has not completed".to_string(),
                None => "its search did not run".to_string(),
            };
            out.push(SectionInput {
                title,
                kind,
                findings: Vec::new(),
                dimensions: Vec::new(),
                gap: Some(format!("no supported finding yet ({why}).")),
            });
        }
    }
    out
}

/// The aspects of the plan whose search failed or never completed.
fn unsupported_aspects(s: &ResearchState) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for st in s.active_steps() {
        let Some(a) = st.aspect() else { continue };
        let a = text::primary(a).to_string();
        let served = s.active_steps().any(|o| {
            o.status == StepStatus::Complete && o.aspect().is_some_and(|x| text::primary(x) == a)
        });
        if !served && !out.contains(&a) {
            out.push(a);
        }
    }
    out
}

/// What a person must do for the run to finish.
fn next_action(s: &ResearchState) -> String {
    if s.review_decision.as_deref() == Some("denied") {
        return "edit the plan (or approve it) and resume the thread".to_string();
    }
    if s.status == status::FAILED {
        if let Some(last) = s.errors.last() {
            // The cause itself: on a terminal nothing else may have shown it.
            return format!("fix what the model call failed on ({last}), then run the goal again");
        }
    }
    if s.plan.is_empty() {
        return "give a goal the planner can work with (a clear subject, and `required_sections` \
                for what the brief must cover), then run again"
            .to_string();
    }
    let missing = unsupported_aspects(s);
    if missing.is_empty() {
        return "look at the unmet criteria above, adjust the constraints, and run again"
            .to_string();
    }
    let list = missing
        .iter()
        .map(|m| format!("`{m}`"))
        .collect::<Vec<_>>()
        .join(", ");
    format!(
        "add source notes on {list} (or remove {} from `required_sections`) and run the goal again",
        if missing.len() == 1 { "it" } else { "them" }
    )
}

/// The notes and tool results the brief may cite, with their titles (`server/tool` for a tool's).
fn citable(s: &ResearchState) -> Vec<(String, String)> {
    let notes = used_notes(s)
        .into_iter()
        .map(|(id, note, _)| (id.to_string(), note.title.to_string()));
    let calls = used_tool_calls(s)
        .into_iter()
        .map(|(c, _)| (c.id.clone(), format!("{}/{}", c.server, c.tool)));
    notes.chain(calls).collect()
}

/// The node `synthesize_report`.
pub async fn synthesize_report(
    env: Arc<Env>,
    s: Arc<ResearchState>,
    ctx: NodeContext,
) -> Result<ResearchUpdate, NodeError> {
    let ev = evidence(&s);
    let req = SynthesisRequest {
        goal: s.goal.clone(),
        constraints: s.constraints.clone(),
        sections: sections(&s, false),
        knowledge_gaps: s.knowledge_gaps.clone(),
        sources: citable(&s),
        draft_reason: None,
    };
    let call = env.policy.synthesize_report(&req);
    let reply = match streamed(&ctx, "synthesize_report", call).await {
        Ok(r) => r,
        Err(e) => {
            let mut u = policy_failure("synthesize_report", e, &ctx, env.model_attempts)?;
            let blocked = u.blocked_reason.clone().flatten();
            let mut errors = s.errors.clone();
            errors.extend(u.errors.clone().unwrap_or_default());
            let ending = Ending {
                knowledge_gaps: &s.knowledge_gaps,
                blocked_reason: blocked.as_deref(),
                errors: &errors,
            };
            u = u.final_output(final_output(&s, status::FAILED, "", ending));
            return Ok(u);
        }
    };
    let usage = emit_usage(&ctx, "synthesize_report", reply.usage);
    let allowed: HashSet<&str> = ev.iter().map(|e| e.source_id.as_str()).collect();
    // A tool's result is checked as a note of its own.
    let tool_notes: Vec<_> = used_tool_calls(&s)
        .into_iter()
        .map(|(c, _)| c.as_note())
        .collect();
    let (report, removed) = citations::enforce_supported_with(
        &reply.value.text,
        &allowed,
        s.source_notes.corpus(),
        &tool_notes,
    );
    let mut gaps = s.knowledge_gaps.clone();
    gaps.extend(removed.iter().cloned());
    let cited = citations::cited_ids(&report);
    let distinct: HashSet<&str> = cited.into_iter().collect();
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
        .model_usage(usage)
        .final_output(final_output(
            &s,
            status::OK,
            &report,
            Ending {
                knowledge_gaps: &gaps,
                blocked_reason: s.blocked_reason.as_deref(),
                errors: &s.errors,
            },
        ))
        .final_report(report)
        .knowledge_gaps(gaps)
        .status(status::OK.to_string())
        .execution_history(vec![HistoryEntry::new("report_synthesized", detail)]))
}

/// The node `mark_needs_review`: the run stops for a person, with a draft of what is supported
/// (written offline, no model call: the draft must not depend on the model that may have just
/// failed) and a `blocked_reason` that says what the person must do.
pub fn mark_needs_review(s: &ResearchState, _: &NodeContext) -> Result<ResearchUpdate, NodeError> {
    let st = if s.status == status::FAILED {
        status::FAILED
    } else {
        status::NEEDS_REVIEW
    };
    let why = s
        .blocked_reason
        .clone()
        .unwrap_or_else(|| "stopped for review".to_string());
    let reason = format!("{why}. To finish: {}.", next_action(s));
    let sections = sections(s, true);
    let draft = if sections.iter().any(|x| !x.findings.is_empty()) {
        let req = SynthesisRequest {
            goal: s.goal.clone(),
            constraints: s.constraints.clone(),
            sections,
            knowledge_gaps: s.knowledge_gaps.clone(),
            sources: citable(s),
            draft_reason: Some(reason.clone()),
        };
        write_report(&req).text
    } else {
        String::new()
    };
    let ending = Ending {
        knowledge_gaps: &s.knowledge_gaps,
        blocked_reason: Some(&reason),
        errors: &s.errors,
    };
    Ok(ResearchUpdate::default()
        .status(st.to_string())
        .final_output(final_output(s, st, &draft, ending))
        .final_report(draft)
        .blocked_reason(Some(reason.clone()))
        .execution_history(vec![HistoryEntry::new("needs_review", reason)]))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_run_names_the_model_error_in_its_next_action() {
        let s = ResearchState {
            status: status::FAILED.to_string(),
            errors: vec![
                "create_plan: transport error: tcp connect error: Connection refused (os error 111)"
                    .to_string(),
            ],
            ..ResearchState::default()
        };
        let next = next_action(&s);
        assert!(next.contains("Connection refused"), "{next}");
        assert!(!next.contains("errors above"), "{next}");
    }
}
