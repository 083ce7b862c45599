//! `calc_gate`: the calculator's lifecycle as a visible transition. A calculation that succeeded
//! on the current inputs finishes the run; one that stayed blocked or failed until its cap aborts
//! it. Otherwise the run goes on to `acquire`.

use super::{decided, Env, StageResult};
use crate::field::state::{Calculation, FieldState, FieldUpdate, Origin, PlannerDecision, Status};
use crate::field::view;
use planwright::NodeContext;

/// Rule `calculation_cap`: the calculator ran its cap of times and is still blocked or failing.
pub fn calculation_cap(s: &FieldState) -> Option<PlannerDecision> {
    let failing = matches!(
        s.calculation,
        Calculation::Blocked { .. } | Calculation::Error { .. }
    );
    (failing && s.calc_attempts >= s.caps.calculations).then(|| {
        let why = match &s.calculation {
            Calculation::Blocked { missing } => format!("missing {}", missing.join(", ")),
            Calculation::Error { reason } => reason.clone(),
            _ => String::new(),
        };
        PlannerDecision::finish(format!(
            "the calculator ran {} times without success: {why}",
            s.calc_attempts
        ))
    })
}

/// Rule `calculation_done`: the calculation succeeded on the current inputs.
pub fn calculation_done(s: &FieldState) -> Option<PlannerDecision> {
    view::calculation_current(s)
        .then(|| PlannerDecision::finish("every target is calculated from the current inputs"))
}

/// The `calc_gate` node.
pub async fn calc_gate(_env: &Env, s: &FieldState, _ctx: &NodeContext) -> StageResult {
    if let Some(d) = calculation_cap(s) {
        return Ok(decided(s, d, Origin::Deterministic, Vec::new()).status(Status::Aborted));
    }
    Ok(match calculation_done(s) {
        Some(d) => decided(s, d, Origin::Deterministic, Vec::new()),
        None => FieldUpdate::default(),
    })
}
