//! `tick`: the loop's entry. Counts the iteration, clears the last cycle's decision, and makes the
//! two decisions that come before everything else: stop (aborted, or past `max_iters`) and the
//! bootstrap questions for core fields (region, currency), which bypass `enforce_policy`.

use super::{decided, Env, StageResult};
use crate::field::schema::Kind;
use crate::field::state::{Action, FieldState, FieldUpdate, Origin, PlannerDecision, Status};
use crate::field::view;
use planwright::NodeContext;

/// Rule `terminal_cap`: finish when the run is aborted or past its iteration cap; the flag says
/// whether the cap aborts it. `s.iterations` is the new tick's count.
pub fn terminal_cap(s: &FieldState) -> Option<(PlannerDecision, bool)> {
    if s.status == Status::Aborted {
        return Some((PlannerDecision::finish("the run was aborted"), false));
    }
    (s.iterations > s.max_iters).then(|| {
        (
            PlannerDecision::finish(format!(
                "iteration {} is past the cap of {}",
                s.iterations, s.max_iters
            )),
            true,
        )
    })
}

/// Rule `bootstrap_question`: the first core field without a value is asked for before anything
/// else; once its questions are used up the run aborts (`Err` carries the finish decision).
pub fn bootstrap_question(s: &FieldState) -> Option<Result<PlannerDecision, PlannerDecision>> {
    let f = s
        .schema
        .fields
        .iter()
        .find(|f| f.core && f.kind == Kind::Raw && !view::has_value(s, &f.name))?;
    if !view::can_ask(s, &f.name) {
        return Some(Err(PlannerDecision::finish(format!(
            "core field `{}` has no usable answer",
            f.name
        ))));
    }
    let question = match (&s.reask, f.name.as_str()) {
        (Some(q), _) if q.field == f.name => q.question.clone(),
        (_, "region") => "Which region is the market in (country, state or city)?".to_string(),
        (_, "currency") => {
            "Which currency should amounts be in (for example EUR or USD)?".to_string()
        }
        _ => view::default_question(s, &f.name),
    };
    Some(Ok(PlannerDecision::new(
        Action::AskUser,
        Some(&f.name),
        format!("`{}` is needed before anything else", f.name),
    )
    .question(question)))
}

/// The `tick` node.
pub async fn tick(_env: &Env, s: &FieldState, _ctx: &NodeContext) -> StageResult {
    let mut next = s.clone();
    next.iterations += 1;
    let base = FieldUpdate::default()
        .iterations(next.iterations)
        .decision(None)
        .decision_origin(None)
        .llm_failed(false)
        .rewritten_by(Vec::new());
    if let Some((d, aborts)) = terminal_cap(&next) {
        let mut u = base.then(decided(&next, d, Origin::Deterministic, Vec::new()));
        if aborts {
            u = u.status(Status::Aborted);
        }
        return Ok(u);
    }
    Ok(match bootstrap_question(&next) {
        Some(Ok(d)) => base.then(decided(&next, d, Origin::Deterministic, Vec::new())),
        Some(Err(d)) => base
            .then(decided(&next, d, Origin::Deterministic, Vec::new()))
            .status(Status::Aborted),
        None => base,
    })
}
