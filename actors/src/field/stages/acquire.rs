//! `acquire`: every deterministic "we know what to do" decision, in order: ask again for an
//! answer that was not usable; acquire what a blocked calculation misses (generating a
//! decomposition for the first blocked field without a recipe, a model call); continue an open
//! decomposition (the fast path); finish once every raw input is collected. With no such decision
//! the run goes to `decide`.

use super::{applied, prepare, Env, StageResult};
use crate::field::state::{Action, Calculation, FieldState, FieldUpdate, Origin, PlannerDecision};
use crate::field::view::{self, Task};
use planwright::NodeContext;

/// Rule `reask_unusable_answer`: the last answer could not be used and the field may be asked again.
pub fn reask(s: &FieldState) -> Option<PlannerDecision> {
    let q = s.reask.as_ref()?;
    (view::can_ask(s, &q.field) && !view::has_value(s, &q.field)).then(|| {
        PlannerDecision::new(
            Action::AskUser,
            Some(&q.field),
            "the last answer was not usable",
        )
        .question(q.question.clone())
    })
}

/// Rule `blocked_calculation_task`: the first search or question among the fields a blocked
/// calculation misses, falling back to the decomposition of the first uncovered one (while a
/// generation is still allowed this tick).
pub fn blocked_calculation_task(s: &FieldState) -> Option<Task> {
    let Calculation::Blocked { missing } = &s.calculation else {
        return None;
    };
    let tasks: Vec<Task> = missing
        .iter()
        .filter_map(|f| view::task_for(s, f))
        .collect();
    let fresh_generation = s.decomposed_at != s.iterations;
    tasks
        .iter()
        .find(|t| !matches!(t, Task::Decompose(_)))
        .or_else(|| tasks.iter().find(|_| fresh_generation))
        .cloned()
}

/// Rule `acquisition_fast_path`: a decomposition is under way (its field has no value, some
/// components do): continue with its next component.
pub fn fast_path(s: &FieldState) -> Option<PlannerDecision> {
    s.recipes.iter().find_map(|(field, r)| {
        let open = !view::has_value(s, field)
            && view::missing_inputs(s).contains(field)
            && r.components.iter().any(|c| view::has_value(s, c));
        if !open {
            return None;
        }
        let task = view::task_for(s, field)?;
        view::decision_for(
            s,
            &task,
            &format!("continuing the decomposition of `{field}`"),
        )
    })
}

/// Rule `auto_finish`: every raw input is collected.
pub fn auto_finish(s: &FieldState) -> Option<PlannerDecision> {
    view::all_inputs_collected(s).then(|| PlannerDecision::finish("every raw input is collected"))
}

fn chosen(d: PlannerDecision) -> FieldUpdate {
    FieldUpdate::default()
        .decision(Some(d))
        .decision_origin(Some(Origin::Deterministic))
}

/// The `acquire` node.
pub async fn acquire(env: &Env, s: &FieldState, ctx: &NodeContext) -> StageResult {
    if let Some(d) = reask(s) {
        return Ok(chosen(d));
    }
    match blocked_calculation_task(s) {
        Some(Task::Decompose(field)) => {
            let u = prepare::generate(env, s, ctx, "acquire.decompose", &field).await?;
            let next = applied(s, &u)?;
            let task = view::task_for(&next, &field);
            let d = task.and_then(|t| {
                view::decision_for(
                    &next,
                    &t,
                    &format!("the calculation is blocked on `{field}`"),
                )
            });
            return Ok(match d {
                Some(d) => u.then(chosen(d)),
                None => u,
            });
        }
        Some(task) => {
            if let Some(d) = view::decision_for(s, &task, "the calculation is blocked on it") {
                return Ok(chosen(d));
            }
        }
        None => {}
    }
    if let Some(d) = fast_path(s).or_else(|| auto_finish(s)) {
        return Ok(chosen(d));
    }
    Ok(FieldUpdate::default())
}
