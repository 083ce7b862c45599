//! `enforce_policy`: the decision-rewrite pipeline. For a model decision, in this order:
//! on-demand decomposition of a targeted requires-components field (a model call when it has no
//! recipe), the derived-field redirect, the premature-ask redirect for web fields, the search
//! duplicate/cap fallback, the ask cap, and the calculation adjustment (skipped when the model
//! failed). A deterministic decision gets only the calculation adjustment. The final decision is
//! logged with the names of the rules that rewrote it.

use super::{applied, decided, prepare, Env, StageResult};
use crate::field::state::{Action, FieldState, Origin, PlannerDecision, Status};
use crate::field::view::{self, Task};
use planwright::NodeContext;

/// Rule names, as they appear in `rewritten_by`.
pub mod rule {
    /// A targeted requires-components field is acquired through its components.
    pub const ON_DEMAND_DECOMPOSITION: &str = "on_demand_decomposition";
    /// A search or question about a derived field goes to its inputs.
    pub const DERIVED_FIELD_REDIRECT: &str = "derived_field_redirect";
    /// A question about a web field while its searches remain becomes a search.
    pub const PREMATURE_ASK_FOR_WEB_FIELD: &str = "premature_ask_for_web_field";
    /// A repeated or capped (or pointless) search falls back to another query, a question or
    /// another field.
    pub const SEARCH_DUPLICATE_OR_CAP: &str = "search_duplicate_or_cap";
    /// A question past the caps (or pointless) goes to other work, or finishes.
    pub const ASK_CAP: &str = "ask_cap";
    /// Finish becomes calculate when the targets can be calculated; calculate becomes finish
    /// when they are, and the next acquisition while inputs are missing.
    pub const CALCULATION_ADJUSTMENT: &str = "calculation_adjustment";
}

/// A rewrite rule: the rewritten decision, or `None` when it does not apply.
type Rule = fn(&FieldState, &PlannerDecision) -> Option<PlannerDecision>;

fn acquires(d: &PlannerDecision) -> bool {
    matches!(d.action, Action::Search | Action::AskUser)
}

/// The decision carrying out `task`, else the next task of another field, else finish.
fn task_or_next(s: &FieldState, task: Option<Task>, skip: &str, why: &str) -> PlannerDecision {
    task.and_then(|t| view::decision_for(s, &t, why))
        .or_else(|| view::next_task_except(s, &[skip]).and_then(|t| view::decision_for(s, &t, why)))
        .unwrap_or_else(|| PlannerDecision::finish(format!("{why}; nothing else can progress")))
}

/// The target of an on-demand decomposition: a search or question about a requires-components
/// field without a value.
pub fn on_demand_target(s: &FieldState, d: &PlannerDecision) -> Option<String> {
    let t = d.target.as_deref()?;
    (acquires(d)
        && view::field(s, t).is_some_and(|f| f.requires_components)
        && !view::has_value(s, t))
    .then(|| t.to_string())
}

/// Rule `on_demand_decomposition`, once the field has its recipe (or cannot get one): acquire
/// its next component instead.
pub fn redirect_to_components(s: &FieldState, field: &str) -> PlannerDecision {
    let task = view::task_for(s, field).filter(|t| !matches!(t, Task::Decompose(_)));
    task_or_next(
        s,
        task,
        field,
        &format!("`{field}` is acquired through its components"),
    )
}

/// Rule `derived_field_redirect`.
pub fn derived_field_redirect(s: &FieldState, d: &PlannerDecision) -> Option<PlannerDecision> {
    let t = d.target.as_deref()?;
    if !acquires(d) || !view::is_derived(s, t) {
        return None;
    }
    let task = view::task_for(s, t);
    if task.is_none() && view::all_inputs_collected(s) {
        return Some(PlannerDecision::new(
            Action::Calculate,
            None,
            format!("`{t}` is derived and its inputs are collected"),
        ));
    }
    Some(task_or_next(
        s,
        task,
        t,
        &format!("`{t}` is derived: acquiring its inputs"),
    ))
}

/// Rule `premature_ask_for_web_field`.
pub fn premature_ask_for_web_field(s: &FieldState, d: &PlannerDecision) -> Option<PlannerDecision> {
    let t = d.target.as_deref()?;
    (d.action == Action::AskUser && !view::has_value(s, t) && view::ask_is_premature(s, t)).then(
        || {
            PlannerDecision::new(
                Action::Search,
                Some(t),
                format!("`{t}` is a web field and searches for it remain"),
            )
            .query(view::default_query(s, t))
        },
    )
}

/// Rule `search_duplicate_or_cap`: a search that repeats a query, passes the field's cap, or
/// cannot be run (unknown, collected or unsearchable field) becomes a fresh query for the same
/// field, a question about it, work on another field, or finish.
pub fn search_duplicate_or_cap(s: &FieldState, d: &PlannerDecision) -> Option<PlannerDecision> {
    if d.action != Action::Search {
        return None;
    }
    let t = d.target.clone().unwrap_or_default();
    let query = d
        .query
        .clone()
        .unwrap_or_else(|| view::default_query(s, &t));
    let duplicate = view::is_duplicate_search(s, &t, &query);
    let searchable = !view::has_value(s, &t) && view::can_search(s, &t);
    if searchable && !duplicate {
        return None;
    }
    if searchable {
        let fresh = view::default_query(s, &t);
        if !view::is_duplicate_search(s, &t, &fresh) {
            return Some(
                PlannerDecision::new(Action::Search, Some(&t), format!("a fresh query for `{t}`"))
                    .query(fresh),
            );
        }
    }
    let task = (!view::has_value(s, &t) && view::can_ask(s, &t)).then(|| Task::Ask(t.clone()));
    Some(task_or_next(
        s,
        task,
        &t,
        &format!("no further search for `{t}`"),
    ))
}

/// Rule `ask_cap`: a question past the caps (or about an unknown or collected field) goes to
/// another field's work; with none, the run finishes, aborting when inputs are still missing.
/// The flag says whether it aborts.
pub fn ask_cap(s: &FieldState, d: &PlannerDecision) -> Option<(PlannerDecision, bool)> {
    if d.action != Action::AskUser {
        return None;
    }
    let t = d.target.clone().unwrap_or_default();
    if !view::has_value(s, &t) && view::can_ask(s, &t) {
        return None;
    }
    let why = format!("no further question about `{t}`");
    if let Some(next) =
        view::next_task_except(s, &[&t]).and_then(|n| view::decision_for(s, &n, &why))
    {
        return Some((next, false));
    }
    let complete = view::all_inputs_collected(s);
    let reason = if complete {
        format!("{why}; every input is collected")
    } else {
        format!("{why}; nothing else can progress")
    };
    Some((PlannerDecision::finish(reason), !complete))
}

/// Rule `calculation_adjustment`.
pub fn calculation_adjustment(s: &FieldState, d: &PlannerDecision) -> Option<PlannerDecision> {
    match d.action {
        Action::Finish
            if s.status != Status::Aborted
                && !view::calculation_current(s)
                && view::all_inputs_collected(s)
                && s.calc_attempts < s.caps.calculations =>
        {
            Some(PlannerDecision::new(
                Action::Calculate,
                None,
                "the targets can be calculated before finishing",
            ))
        }
        Action::Calculate if view::calculation_current(s) => Some(PlannerDecision::finish(
            "the calculation is current already",
        )),
        // Calculating with inputs missing would only spend a calculator run.
        Action::Calculate if !view::all_inputs_collected(s) => Some(
            view::next_task(s)
                .and_then(|t| view::decision_for(s, &t, "inputs are missing; acquiring them first"))
                .unwrap_or_else(|| {
                    PlannerDecision::finish("inputs are missing and nothing can progress")
                }),
        ),
        _ => None,
    }
}

/// The `enforce_policy` node.
pub async fn enforce_policy(env: &Env, s: &FieldState, ctx: &NodeContext) -> StageResult {
    let origin = s.decision_origin.unwrap_or(Origin::Deterministic);
    let mut d = s
        .decision
        .clone()
        .unwrap_or_else(|| PlannerDecision::finish("no decision was made"));
    let mut u = crate::field::state::FieldUpdate::default();
    let mut st = s.clone();
    let mut rules: Vec<String> = Vec::new();
    let mut aborts = false;
    if origin == Origin::Llm {
        if let Some(field) = on_demand_target(&st, &d) {
            let may_generate = !st.recipes.contains_key(&field)
                && st.decomposed_at != st.iterations
                && view::decompositions(&st, &field) < st.caps.decompositions_per_field;
            if may_generate {
                let g = prepare::generate(env, &st, ctx, "enforce.decompose", &field).await?;
                st = applied(&st, &g)?;
                u = u.then(g);
            }
            d = redirect_to_components(&st, &field);
            rules.push(rule::ON_DEMAND_DECOMPOSITION.into());
        }
        let pure: [(&str, Rule); 3] = [
            (rule::DERIVED_FIELD_REDIRECT, derived_field_redirect),
            (
                rule::PREMATURE_ASK_FOR_WEB_FIELD,
                premature_ask_for_web_field,
            ),
            (rule::SEARCH_DUPLICATE_OR_CAP, search_duplicate_or_cap),
        ];
        for (name, f) in pure {
            if let Some(n) = f(&st, &d) {
                d = n;
                rules.push(name.into());
            }
        }
        if let Some((n, abort)) = ask_cap(&st, &d) {
            d = n;
            aborts = abort;
            rules.push(rule::ASK_CAP.into());
        }
    }
    if !st.llm_failed {
        if let Some(n) = calculation_adjustment(&st, &d) {
            d = n;
            rules.push(rule::CALCULATION_ADJUSTMENT.into());
        }
    }
    let mut out = u.then(decided(&st, d, origin, rules));
    if aborts {
        out = out.status(Status::Aborted);
    }
    Ok(out)
}
