//! `create_plan`, `validate_plan`, `repair_plan` and `replan`: the nodes that make a plan and keep
//! it valid.

use super::{emit_usage, policy_failure, streamed, Env};
use crate::research::budget;
use crate::research::nodes::assess::progress_score;
use crate::research::nodes::review::needs_approval_with;
use crate::research::plan::preserve_completed;
use crate::research::policy::{PlanRequest, RepairRequest, ReplanRequest};
use crate::research::state::{
    status, HistoryEntry, PlanStep, ResearchState, ResearchUpdate, StepStatus,
};
use crate::research::validate::validate;
use planwright::{NodeContext, NodeError};
use std::sync::Arc;

/// The plan in one line: `id (tool, after a+b), …`, written into one string.
fn summary(plan: &[PlanStep]) -> String {
    let mut out = String::new();
    for s in plan.iter().filter(|s| s.status != StepStatus::Replaced) {
        if !out.is_empty() {
            out.push_str(", ");
        }
        out.push_str(&s.id);
        out.push_str(" (");
        out.push_str(&s.tool);
        for (i, d) in s.depends_on.iter().enumerate() {
            out.push_str(if i == 0 { ", after " } else { "+" });
            out.push_str(d);
        }
        out.push(')');
    }
    out
}

/// Pending is the only status a new or revised step may have; complete and replaced steps keep
/// theirs.
fn normalize_statuses(plan: &mut [PlanStep]) {
    for s in plan.iter_mut() {
        if !matches!(s.status, StepStatus::Complete | StepStatus::Replaced) {
            s.status = StepStatus::Pending;
        }
    }
}

/// The notes a plan (or its repair) carries: the best for the goal and its sections.
fn plan_notes(s: &ResearchState) -> Vec<crate::research::notes::Note> {
    let query = format!("{} {}", s.goal, s.constraints.required_sections.join(" "));
    budget::notes_for_call(s.source_notes.corpus(), &query, s.constraints.note_tokens)
}

/// The node `create_plan`.
pub async fn create_plan(
    env: Arc<Env>,
    s: Arc<ResearchState>,
    ctx: NodeContext,
) -> Result<ResearchUpdate, NodeError> {
    let req = PlanRequest {
        goal: s.goal.clone(),
        constraints: s.constraints.clone(),
        notes: plan_notes(&s).into(),
        tools: env
            .mcp
            .as_ref()
            .map(|m| m.tools().into())
            .unwrap_or_default(),
    };
    match streamed(&ctx, "create_plan", env.policy.create_plan(&req)).await {
        Ok(reply) => {
            let usage = emit_usage(&ctx, "create_plan", reply.usage);
            let mut plan = reply.value;
            for step in plan.iter_mut() {
                step.status = StepStatus::Pending;
            }
            let mut u = ResearchUpdate::default();
            // A plan with a step that has side effects (a tool that writes) needs a person's
            // approval even when the constraints do not ask for it (written only then: the
            // flag `prepare_input` set stands otherwise).
            if s.approved_plan && needs_approval_with(&plan, &s.constraints, env.mcp.as_deref()) {
                u = u.approved_plan(false);
            }
            Ok(u.model_usage(usage)
                .execution_history(vec![HistoryEntry::new(
                    "plan_created",
                    format!(
                        "{} by {}: {}",
                        plan.len(),
                        env.policy.name(),
                        summary(&plan)
                    ),
                )])
                .plan(plan.into()))
        }
        Err(e) => policy_failure("create_plan", e, &ctx, env.model_attempts),
    }
}

/// Whether the current plan may still be repaired.
pub fn repairs_left(s: &ResearchState) -> bool {
    s.repair_count < s.constraints.max_repairs
}

/// The node `validate_plan`.
pub fn validate_plan(s: &ResearchState, _: &NodeContext) -> Result<ResearchUpdate, NodeError> {
    let mut c = s.constraints.clone();
    c.max_steps = s.max_steps;
    let problems = validate(&s.plan, &c);
    let errors: Vec<String> = problems.iter().map(ToString::to_string).collect();
    let mut u = ResearchUpdate::default().plan_errors(errors.clone());
    if errors.is_empty() {
        return Ok(u.execution_history(vec![HistoryEntry::new(
            "plan_validated",
            format!("valid: {}", summary(&s.plan)),
        )]));
    }
    let fatal = problems.iter().any(|p| p.is_fatal());
    let detail = format!("{} problem(s): {}", errors.len(), errors.join("; "));
    u = u.execution_history(vec![HistoryEntry::new("plan_invalid", detail)]);
    if fatal || !repairs_left(s) {
        let why = if fatal {
            "the plan cannot be made valid under these constraints"
        } else {
            "the plan is still invalid after the allowed repairs"
        };
        u = u
            .status(status::NEEDS_REVIEW.to_string())
            .blocked_reason(Some(format!(
                "{why} ({} of {} repairs used): {}",
                s.repair_count,
                s.constraints.max_repairs,
                errors.join("; ")
            )));
    }
    Ok(u)
}

/// The node `repair_plan`.
pub async fn repair_plan(
    env: Arc<Env>,
    s: Arc<ResearchState>,
    ctx: NodeContext,
) -> Result<ResearchUpdate, NodeError> {
    let req = RepairRequest {
        goal: s.goal.clone(),
        constraints: s.constraints.clone(),
        notes: plan_notes(&s).into(),
        plan: s.plan.shared(),
        errors: s.plan_errors.clone(),
    };
    match streamed(&ctx, "repair_plan", env.policy.repair_plan(&req)).await {
        Ok(reply) => {
            let usage = emit_usage(&ctx, "repair_plan", reply.usage);
            let mut plan = reply.value;
            let restored = preserve_completed(&s.plan, &mut plan);
            normalize_statuses(&mut plan);
            let mut detail = format!(
                "repair {} of {}: {}",
                s.repair_count + 1,
                s.constraints.max_repairs,
                summary(&plan)
            );
            if !restored.is_empty() {
                detail.push_str(&format!("; kept complete steps {}", restored.join(", ")));
            }
            Ok(ResearchUpdate::default()
                .model_usage(usage)
                .repair_count(s.repair_count + 1)
                .approved_plan(!needs_approval_with(
                    &plan,
                    &s.constraints,
                    env.mcp.as_deref(),
                ))
                .review_decision(None)
                .execution_history(vec![HistoryEntry::new("plan_repaired", detail)])
                .plan(plan.into()))
        }
        Err(e) => policy_failure("repair_plan", e, &ctx, env.model_attempts),
    }
}

/// The node `replan`.
pub async fn replan(
    env: Arc<Env>,
    s: Arc<ResearchState>,
    ctx: NodeContext,
) -> Result<ResearchUpdate, NodeError> {
    let req = ReplanRequest {
        goal: s.goal.clone(),
        constraints: s.constraints.clone(),
        notes: budget::notes_for_call(
            s.source_notes.corpus(),
            &format!("{} {}", s.goal, s.knowledge_gaps.join(" ")),
            s.constraints.note_tokens,
        )
        .into(),
        plan: s.plan.shared(),
        step_results: s.step_results.clone(),
        knowledge_gaps: s.knowledge_gaps.clone(),
        replan_count: s.replan_count,
    };
    match streamed(&ctx, "replan", env.policy.replan(&req)).await {
        Ok(reply) => {
            let usage = emit_usage(&ctx, "replan", reply.usage);
            let mut plan = reply.value;
            let restored = preserve_completed(&s.plan, &mut plan);
            normalize_statuses(&mut plan);
            let old_ids: Vec<&str> = s.plan.iter().map(|p| p.id.as_str()).collect();
            let replaced: Vec<&str> = plan
                .iter()
                .filter(|p| {
                    p.status == StepStatus::Replaced
                        && s.step(&p.id)
                            .is_some_and(|o| o.status != StepStatus::Replaced)
                })
                .map(|p| p.id.as_str())
                .collect();
            let added: Vec<&str> = plan
                .iter()
                .filter(|p| !old_ids.contains(&p.id.as_str()))
                .map(|p| p.id.as_str())
                .collect();
            let mut detail = format!(
                "replan {} of {}: replaced [{}], added [{}]",
                s.replan_count + 1,
                s.max_replans,
                replaced.join(", "),
                added.join(", ")
            );
            if !restored.is_empty() {
                detail.push_str(&format!("; kept complete steps {}", restored.join(", ")));
            }
            Ok(ResearchUpdate::default()
                .model_usage(usage)
                .replan_count(s.replan_count + 1)
                .progress_at_replan(Some(progress_score(&s)))
                .repair_count(0)
                .plan_errors(Vec::new())
                .approved_plan(!needs_approval_with(
                    &plan,
                    &s.constraints,
                    env.mcp.as_deref(),
                ))
                .review_decision(None)
                .observations(vec![detail.as_str().into()])
                .execution_history(vec![HistoryEntry::new("replanned", detail)])
                .plan(plan.into()))
        }
        Err(e) => policy_failure("replan", e, &ctx, env.model_attempts),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_summary_lists_each_live_step_with_its_tool_and_what_it_waits_for() {
        let step = |id: &str, tool: &str, after: &[&str], status| PlanStep {
            id: id.into(),
            tool: tool.into(),
            depends_on: after.iter().map(|d| d.to_string()).collect(),
            status,
            ..PlanStep::default()
        };
        let plan = [
            step("a", "search", &[], StepStatus::Complete),
            step("old", "search", &[], StepStatus::Replaced),
            step("b", "search", &["a"], StepStatus::Pending),
            step("c", "compare", &["a", "b"], StepStatus::Pending),
        ];
        assert_eq!(
            summary(&plan),
            "a (search), b (search, after a), c (compare, after a+b)"
        );
        assert_eq!(summary(&[]), "");
    }
}
