//! The routers: pure functions of the state returning a label. Every decision was written into
//! the state by the node before (statuses, `plan_errors`, `blocked_reason`, `review_decision`,
//! `selected_steps`); a router only reads it.

use super::nodes::execute::batch;
use super::state::{ResearchState, StepStatus};
use planwright::Route;

/// After `prepare_input`: plan, or stop on an empty or vague goal.
pub fn after_prepare(s: &ResearchState) -> Route {
    if s.blocked_reason.is_some() {
        Route::to("needs_review")
    } else {
        Route::to("plan")
    }
}

/// After a node that calls the model (`create_plan`, `repair_plan`, `replan`): validate, or stop
/// on a model error.
pub fn after_model_call(s: &ResearchState) -> Route {
    if s.blocked_reason.is_some() {
        Route::to("failed")
    } else {
        Route::to("validate")
    }
}

/// After `validate_plan`: review a valid plan, repair while attempts remain, else stop.
pub fn after_validate(s: &ResearchState) -> Route {
    if s.plan_errors.is_empty() {
        Route::to("valid")
    } else if s.blocked_reason.is_some() {
        Route::to("needs_review")
    } else {
        Route::to("repair")
    }
}

/// After `review_plan`: run an approved plan, validate an edited one, stop on a denial.
pub fn after_review(s: &ResearchState) -> Route {
    match s.review_decision.as_deref() {
        Some("denied") => Route::to("denied"),
        Some("edited") => Route::to("edited"),
        _ if s.approved_plan => Route::to("approved"),
        _ => Route::to("denied"),
    }
}

/// After `select_next_step`: run the selected steps dependency-driven, or write the brief when
/// nothing is left to run.
pub fn after_select(s: &ResearchState) -> Route {
    if s.selected_steps.is_empty() {
        Route::to("done")
    } else {
        Route::Dag(batch(s))
    }
}

/// After `assess_progress`: stop, replan, run more, or synthesize.
pub fn after_assess(s: &ResearchState) -> Route {
    if s.blocked_reason.is_some() {
        Route::to("needs_review")
    } else if s.active_steps().any(|st| st.status == StepStatus::Failed) {
        Route::to("replan")
    } else if s.active_steps().any(|st| st.status == StepStatus::Pending) {
        Route::to("continue")
    } else {
        Route::to("synthesize")
    }
}
