//! `review_plan`: approval of the plan before it runs.
//!
//! Without `require_approval` (and with no side-effecting tool in the plan) the plan is approved
//! automatically. Otherwise the node pauses the run with the plan as the interrupt payload and
//! accepts exactly three resume values: `{"action": "approve"}`, `{"action": "deny", "reason":
//! text}` and `{"action": "edit", "plan": [steps]}`. Anything else pauses the run again with an
//! `error` naming the three, so the thread stays paused until a valid answer arrives.

use crate::research::constraints::Constraints;
use crate::research::plan::preserve_completed;
use crate::research::state::{
    status, HistoryEntry, PlanStep, ResearchState, ResearchUpdate, StepStatus,
};
use crate::research::tools;
use planwright::{NodeContext, NodeError};
use serde_json::{json, Value};

/// The three accepted resume values, as shown in rejections.
pub const ACCEPTED: &str = r#"{"action": "approve"}, {"action": "deny", "reason": "..."} or {"action": "edit", "plan": [steps]}"#;

/// A reviewer's answer.
#[derive(Clone, Debug, PartialEq)]
pub enum ReviewDecision {
    /// Run the plan.
    Approve,
    /// Stop; the reason is kept.
    Deny(String),
    /// Replace the plan (validated again).
    Edit(Vec<PlanStep>),
}

/// Why a resume value was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("resume value rejected ({problem}); expected {ACCEPTED}")]
pub struct ReviewError {
    /// What is wrong with the value.
    pub problem: String,
}

fn reject(problem: impl Into<String>) -> ReviewError {
    ReviewError {
        problem: problem.into(),
    }
}

/// Parses a resume value into a decision.
pub fn parse_review(value: &Value) -> Result<ReviewDecision, ReviewError> {
    let action = value
        .get("action")
        .and_then(Value::as_str)
        .ok_or_else(|| reject(format!("no \"action\" string in {value}")))?;
    match action {
        "approve" => Ok(ReviewDecision::Approve),
        "deny" => {
            let reason = value
                .get("reason")
                .and_then(Value::as_str)
                .map(str::trim)
                .filter(|r| !r.is_empty())
                .unwrap_or("no reason given");
            Ok(ReviewDecision::Deny(reason.to_string()))
        }
        "edit" => {
            let plan = value
                .get("plan")
                .filter(|p| p.is_array())
                .ok_or_else(|| reject("\"edit\" needs a \"plan\" array"))?;
            let steps: Vec<PlanStep> = serde_json::from_value(plan.clone())
                .map_err(|e| reject(format!("the edited plan is malformed: {e}")))?;
            Ok(ReviewDecision::Edit(steps))
        }
        other => Err(reject(format!("unknown action \"{other}\""))),
    }
}

/// Whether the plan must be approved by a person: when the constraints ask for it, or when a step
/// uses a tool with side effects (looked up in `catalog`).
pub fn needs_approval_in(
    plan: &[PlanStep],
    constraints: &Constraints,
    catalog: &[tools::ToolSpec],
) -> bool {
    constraints.require_approval
        || plan.iter().any(|s| {
            s.status == StepStatus::Pending
                && catalog.iter().any(|t| t.name == s.tool && t.side_effects)
        })
}

/// [`needs_approval_in`] with the local tool catalog.
pub fn needs_approval(plan: &[PlanStep], constraints: &Constraints) -> bool {
    needs_approval_in(plan, constraints, tools::CATALOG)
}

/// [`needs_approval`], and also when a pending `mcp` step names a tool its server declares
/// `readOnlyHint: false` (a tool that writes: `write_file`, `move_file`, …).
pub fn needs_approval_with(
    plan: &[PlanStep],
    constraints: &Constraints,
    mcp: Option<&crate::tools::mcp::McpTools>,
) -> bool {
    needs_approval(plan, constraints)
        || mcp.is_some_and(|m| {
            plan.iter().any(|s| {
                s.status == StepStatus::Pending
                    && s.tool == "mcp"
                    && s.params.tool.as_deref().is_some_and(|t| {
                        m.find(s.params.server.as_deref(), t)
                            .is_ok_and(|info| info.read_only == Some(false))
                    })
            })
        })
}

/// The interrupt payload: the plan and how to answer.
pub fn payload(s: &ResearchState, error: Option<&str>) -> Value {
    let mut p = json!({
        "plan": s.plan,
        "actions": ["approve", "deny", "edit"],
        "message": format!("Approve, deny or edit the plan: {ACCEPTED}"),
    });
    if let Some(e) = error {
        p["error"] = json!(e);
    }
    p
}

/// The node (without tool servers).
pub fn review_plan(s: &ResearchState, ctx: &NodeContext) -> Result<ResearchUpdate, NodeError> {
    review_plan_with(None, s, ctx)
}

/// The node over the graph's tool servers: a step calling a tool that writes needs approval.
pub fn review_plan_with(
    mcp: Option<&crate::tools::mcp::McpTools>,
    s: &ResearchState,
    ctx: &NodeContext,
) -> Result<ResearchUpdate, NodeError> {
    let u = ResearchUpdate::default();
    if !needs_approval_with(&s.plan, &s.constraints, mcp) {
        return Ok(u
            .approved_plan(true)
            .review_decision(Some("auto".into()))
            .execution_history(vec![HistoryEntry::new(
                "plan_reviewed",
                "approved automatically",
            )]));
    }
    if s.approved_plan {
        return Ok(u
            .review_decision(Some("approved".into()))
            .execution_history(vec![HistoryEntry::new(
                "plan_reviewed",
                "the reviewer's edited plan is valid: approved",
            )]));
    }
    let Some(value) = ctx.resume_value() else {
        return Err(NodeError::Interrupt(payload(s, None)));
    };
    match parse_review(value) {
        Ok(ReviewDecision::Approve) => Ok(u
            .approved_plan(true)
            .review_decision(Some("approved".into()))
            .execution_history(vec![HistoryEntry::new(
                "plan_reviewed",
                "approved by the reviewer",
            )])),
        Ok(ReviewDecision::Deny(reason)) => Ok(u
            .approved_plan(false)
            .review_decision(Some("denied".into()))
            .status(status::NEEDS_REVIEW.to_string())
            .blocked_reason(Some(format!("the reviewer denied the plan: {reason}")))
            .execution_history(vec![HistoryEntry::new(
                "plan_reviewed",
                format!("denied by the reviewer: {reason}"),
            )])),
        Ok(ReviewDecision::Edit(mut plan)) => {
            let restored = preserve_completed(&s.plan, &mut plan);
            for step in plan.iter_mut() {
                if !matches!(step.status, StepStatus::Complete | StepStatus::Replaced) {
                    step.status = StepStatus::Pending;
                }
            }
            let mut detail = format!(
                "edited by the reviewer ({} steps); validating again",
                plan.len()
            );
            if !restored.is_empty() {
                detail.push_str(&format!("; kept complete steps {}", restored.join(", ")));
            }
            Ok(u.approved_plan(true)
                .review_decision(Some("edited".into()))
                .repair_count(0)
                .execution_history(vec![HistoryEntry::new("plan_reviewed", detail)])
                .plan(plan.into()))
        }
        Err(e) => Err(NodeError::Interrupt(payload(s, Some(&e.to_string())))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_the_three_answers_and_names_them_on_anything_else() {
        assert_eq!(
            parse_review(&json!({"action": "approve"})),
            Ok(ReviewDecision::Approve)
        );
        assert_eq!(
            parse_review(&json!({"action": "deny", "reason": "too broad"})),
            Ok(ReviewDecision::Deny("too broad".into()))
        );
        assert!(matches!(
            parse_review(&json!({"action": "edit", "plan": [{"id": "a"}]})),
            Ok(ReviewDecision::Edit(p)) if p.len() == 1
        ));
        for bad in [
            json!("yes"),
            json!({"action": "edit"}),
            json!({"action": "maybe"}),
        ] {
            let e = parse_review(&bad).unwrap_err().to_string();
            assert!(
                e.contains("approve") && e.contains("deny") && e.contains("edit"),
                "{e}"
            );
        }
    }

    #[test]
    fn side_effecting_tools_need_approval_even_without_the_constraint() {
        let catalog = [tools::ToolSpec {
            name: "post",
            description: "posts a message",
            side_effects: true,
        }];
        let step = |tool: &str| PlanStep {
            id: "a".into(),
            tool: tool.into(),
            ..PlanStep::default()
        };
        let c = Constraints::default();
        assert!(needs_approval_in(&[step("post")], &c, &catalog));
        assert!(!needs_approval_in(&[step("search")], &c, &catalog));
        assert!(!needs_approval(&[step("search")], &c));
    }
}
