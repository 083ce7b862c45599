//! `prepare_input`: normalize the goal, reject empty or vague goals before any planning call,
//! and initialize the counters and limits from the constraints.

use crate::research::state::{status, HistoryEntry, ResearchState, ResearchUpdate};
use crate::research::text;
use planwright::{NodeContext, NodeError};

/// Fewer topic terms than this makes a goal too vague to plan for.
pub const MIN_TOPIC_TERMS: usize = 2;

/// Collapses whitespace and trims the goal.
pub fn normalize_goal(input: &str) -> String {
    input.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// Why a goal cannot be planned for, if it cannot.
pub fn goal_problem(goal: &str) -> Option<String> {
    if goal.is_empty() {
        return Some("the goal is empty".into());
    }
    let topic = text::topic_terms(goal);
    if topic.len() < MIN_TOPIC_TERMS {
        return Some(format!(
            "the goal is too vague to plan for: it names {} topic term(s) ({}); say what to \
             research, e.g. \"adopting retrieval-augmented generation for customer support\"",
            topic.len(),
            if topic.is_empty() {
                "none".to_string()
            } else {
                topic.join(", ")
            }
        ));
    }
    None
}

/// The node.
pub fn prepare_input(s: &ResearchState, _: &NodeContext) -> Result<ResearchUpdate, NodeError> {
    let goal = normalize_goal(&s.input);
    let c = &s.constraints;
    let u = ResearchUpdate::default()
        .goal(goal.clone())
        .replan_count(0)
        .repair_count(0)
        .max_replans(c.max_replans)
        .max_steps(c.max_steps)
        .approved_plan(!c.require_approval)
        .status(String::new());
    if let Some(problem) = goal_problem(&goal) {
        return Ok(u
            .status(status::NEEDS_REVIEW.to_string())
            .blocked_reason(Some(problem.clone()))
            .execution_history(vec![HistoryEntry::new("input_rejected", problem)]));
    }
    Ok(u.execution_history(vec![HistoryEntry::new(
        "input_prepared",
        format!(
            "goal: {goal}; {} source notes; max_steps {}, max_replans {}, max_parallel_steps {}, \
             approval {}",
            s.source_notes.len(),
            c.max_steps,
            c.max_replans,
            c.max_parallel_steps,
            if c.require_approval {
                "required"
            } else {
                "automatic"
            }
        ),
    )]))
}
