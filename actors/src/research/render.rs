//! Readable output of the `research` command: the plan, progress lines, and the result.

use super::state::{PlanStep, ResearchState, StepStatus};
use planwright::RunEvent;
use serde_json::Value;

/// The plan as a table, one line per active step.
pub fn plan_table(plan: &[PlanStep]) -> String {
    let mut out = String::new();
    for s in plan.iter().filter(|s| s.status != StepStatus::Replaced) {
        let after = if s.depends_on.is_empty() {
            String::new()
        } else {
            format!("  (after {})", s.depends_on.join(", "))
        };
        let status = serde_json::to_value(s.status)
            .ok()
            .and_then(|v| v.as_str().map(str::to_string))
            .unwrap_or_default();
        out.push_str(&format!(
            "  {:<12} {:<9} {:<9} {}{}\n",
            s.id, s.tool, status, s.description, after
        ));
    }
    out
}

/// A progress line for an event, if it deserves one.
pub fn progress(event: &RunEvent) -> Option<String> {
    match event {
        RunEvent::Custom { payload, .. } => {
            if let Some(id) = payload.get("step_started").and_then(Value::as_str) {
                let tool = payload.get("tool").and_then(Value::as_str).unwrap_or("?");
                return Some(format!("  > {id} started ({tool})"));
            }
            let id = payload.get("step_finished").and_then(Value::as_str)?;
            let met = payload.get("met").and_then(Value::as_bool).unwrap_or(false);
            let sources: Vec<&str> = payload
                .get("sources")
                .and_then(Value::as_array)
                .map(|a| a.iter().filter_map(Value::as_str).collect())
                .unwrap_or_default();
            Some(format!(
                "  {} {id} finished: {} note(s) [{}]{}",
                if met { "+" } else { "!" },
                sources.len(),
                sources.join(", "),
                if met { "" } else { " - criteria not met" }
            ))
        }
        RunEvent::StateUpdated { nodes, updates, .. } => {
            let i = nodes
                .iter()
                .position(|n| matches!(n.as_str(), "create_plan" | "repair_plan" | "replan"))?;
            let plan: Vec<PlanStep> =
                serde_json::from_value(updates.get(i)?.get("plan")?.clone()).ok()?;
            Some(format!("Plan from {}:\n{}", nodes[i], plan_table(&plan)))
        }
        _ => None,
    }
}

/// The result, readable.
pub fn result(s: &ResearchState, status: &str) -> String {
    let mut out = String::new();
    if !s.final_report.is_empty() {
        out.push_str(&s.final_report);
        out.push('\n');
    }
    out.push_str(&format!("Plan:\n{}", plan_table(&s.plan)));
    if !s.knowledge_gaps.is_empty() {
        out.push_str("Knowledge gaps:\n");
        for g in &s.knowledge_gaps {
            out.push_str(&format!("  - {g}\n"));
        }
    }
    if !s.plan_errors.is_empty() {
        out.push_str(&format!("Plan errors: {}\n", s.plan_errors.join("; ")));
    }
    if let Some(r) = &s.blocked_reason {
        out.push_str(&format!("Stopped: {r}\n"));
    }
    out.push_str(&format!(
        "Status: {status} (replans: {}, steps run: {})\n",
        s.replan_count,
        s.execution_history
            .iter()
            .filter(|h| h.event == "step_executed")
            .count()
    ));
    out
}
