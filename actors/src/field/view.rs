//! Read-only questions about a [`FieldState`]: what is missing, what can still be done for a
//! field, the next acquisition task, default queries and questions. Stages and rules build their
//! decisions from these; nothing here changes state.

use super::formula;
use super::reading::finding::Finding;
use super::rounding::unit_for_people;
use super::schema::{Field, Kind, Source, ValueType};
use super::state::{
    inputs_fingerprint, Action, Calculation, FieldState, FieldValue, PlannerDecision,
};
use std::collections::BTreeSet;

/// What acquiring a field takes next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Task {
    /// Search the corpus for the field.
    Search(String),
    /// Ask the person for the field.
    Ask(String),
    /// The field needs a decomposition that does not exist yet.
    Decompose(String),
}

impl Task {
    /// The field the task is about.
    pub fn field(&self) -> &str {
        match self {
            Task::Search(f) | Task::Ask(f) | Task::Decompose(f) => f,
        }
    }
}

/// The field's declaration in the running schema.
pub fn field<'a>(s: &'a FieldState, name: &str) -> Option<&'a Field> {
    s.schema.field(name)
}

/// True when the field has a value.
pub fn has_value(s: &FieldState, name: &str) -> bool {
    s.values.contains_key(name)
}

/// True for a derived field.
pub fn is_derived(s: &FieldState, name: &str) -> bool {
    field(s, name).is_some_and(|f| f.kind == Kind::Derived)
}

/// The fields a formula uses (none when it does not parse: the calculator reports that).
pub fn formula_fields(text: &str) -> Vec<String> {
    formula::parse(text).map(|e| e.fields()).unwrap_or_default()
}

/// The raw fields the targets need, through derived formulas, in schema order. A
/// requires-components field counts as one raw input; its components are reached through
/// [`task_for`].
pub fn needed_raw(s: &FieldState) -> Vec<String> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<String> = s.schema.targets.clone();
    while let Some(n) = stack.pop() {
        if !seen.insert(n.clone()) {
            continue;
        }
        if let Some(f) = field(s, &n) {
            if f.kind == Kind::Derived {
                stack.extend(formula_fields(f.formula.as_deref().unwrap_or("")));
            }
        }
    }
    s.schema
        .fields
        .iter()
        .filter(|f| f.kind == Kind::Raw && seen.contains(&f.name))
        .map(|f| f.name.clone())
        .collect()
}

/// The derived fields the targets need (the targets themselves included).
pub fn needed_derived(s: &FieldState) -> BTreeSet<String> {
    let mut seen = BTreeSet::new();
    let mut stack: Vec<String> = s.schema.targets.clone();
    while let Some(n) = stack.pop() {
        if let Some(f) = field(s, &n).filter(|f| f.kind == Kind::Derived) {
            if seen.insert(n.clone()) {
                stack.extend(formula_fields(f.formula.as_deref().unwrap_or("")));
            }
        }
    }
    seen
}

/// The needed raw fields without a value, in schema order.
pub fn missing_inputs(s: &FieldState) -> Vec<String> {
    needed_raw(s)
        .into_iter()
        .filter(|f| !has_value(s, f))
        .collect()
}

/// Searches made for a field.
pub fn searches(s: &FieldState, name: &str) -> u32 {
    s.attempts.get(name).map_or(0, |a| a.searches)
}

/// Questions asked for a field.
pub fn asks(s: &FieldState, name: &str) -> u32 {
    s.attempts.get(name).map_or(0, |a| a.asks)
}

/// True when a raw field may still be searched for.
pub fn can_search(s: &FieldState, name: &str) -> bool {
    field(s, name).is_some_and(|f| {
        f.kind == Kind::Raw
            && !f.requires_components
            && f.source != Source::User
            && f.value_type != ValueType::Text
            && searches(s, name) < s.caps.searches_per_field
    })
}

/// True when the person may still be asked for a field (per-field and total caps).
pub fn can_ask(s: &FieldState, name: &str) -> bool {
    field(s, name).is_some_and(|f| {
        f.kind == Kind::Raw
            && !f.requires_components
            && asks(s, name) < s.caps.asks_per_field
            && s.asks_total < s.caps.asks_total
    })
}

/// True when asking for a web field is premature: searches for it remain.
pub fn ask_is_premature(s: &FieldState, name: &str) -> bool {
    field(s, name).is_some_and(|f| f.source == Source::Web) && can_search(s, name)
}

/// What acquiring `name` takes next, or `None` when it has a value or nothing more can be done.
pub fn task_for(s: &FieldState, name: &str) -> Option<Task> {
    task_in(s, name, &mut BTreeSet::new())
}

fn task_in(s: &FieldState, name: &str, seen: &mut BTreeSet<String>) -> Option<Task> {
    if has_value(s, name) || !seen.insert(name.to_string()) {
        return None;
    }
    let f = field(s, name)?;
    if f.kind == Kind::Derived {
        return formula_fields(f.formula.as_deref().unwrap_or(""))
            .iter()
            .find_map(|i| task_in(s, i, seen));
    }
    if f.requires_components {
        return match s.recipes.get(name) {
            Some(r) => r.components.iter().find_map(|c| task_in(s, c, seen)),
            None if decompositions(s, name) < s.caps.decompositions_per_field => {
                Some(Task::Decompose(name.to_string()))
            }
            None => None,
        };
    }
    match f.source {
        Source::User => can_ask(s, name).then(|| Task::Ask(name.to_string())),
        Source::Web | Source::Either => {
            if can_search(s, name) {
                Some(Task::Search(name.to_string()))
            } else if can_ask(s, name) {
                Some(Task::Ask(name.to_string()))
            } else {
                None
            }
        }
    }
}

/// Decomposition generations made for a field.
pub fn decompositions(s: &FieldState, name: &str) -> u32 {
    s.attempts.get(name).map_or(0, |a| a.decompositions)
}

/// The first task among the missing inputs, skipping `except`.
pub fn next_task_except(s: &FieldState, except: &[&str]) -> Option<Task> {
    missing_inputs(s)
        .iter()
        .filter_map(|f| task_for(s, f))
        .find(|t| !except.contains(&t.field()))
}

/// The first task among the missing inputs.
pub fn next_task(s: &FieldState) -> Option<Task> {
    next_task_except(s, &[])
}

/// Normalises a query for duplicate detection: lower-case tokens, sorted, deduplicated.
pub fn normalise_query(q: &str) -> String {
    let mut t = crate::tools::bm25::tokenize(q);
    t.sort();
    t.dedup();
    t.join(" ")
}

/// True when this (field, query) was searched already.
pub fn is_duplicate_search(s: &FieldState, name: &str, query: &str) -> bool {
    let q = normalise_query(query);
    s.search_history
        .iter()
        .any(|r| r.field == name && r.query == q)
}

/// The region, when known (added to queries).
pub fn region(s: &FieldState) -> Option<String> {
    s.values.get("region").and_then(|a| match &a.value {
        super::state::FieldValue::Text(t) => Some(t.clone()),
        super::state::FieldValue::Number(_) => None,
    })
}

/// The query variants for a field: its description, then its name and unit; the region is added
/// to each. The first variant not searched yet is the default query.
pub fn query_variants(s: &FieldState, name: &str) -> Vec<String> {
    let words = name.replace('_', " ");
    let f = field(s, name);
    let mut out = Vec::new();
    if let Some(d) = f.and_then(|f| f.description.clone()) {
        out.push(d);
    }
    out.push(match f.and_then(|f| f.unit.clone()) {
        Some(u) => format!("{words} {}", u.replace('/', " per ")),
        None => words.clone(),
    });
    if out.len() < 2 {
        out.push(format!("{words} number"));
    }
    let region = region(s);
    out.into_iter()
        .map(|q| match &region {
            Some(r) => format!("{q} {r}"),
            None => q,
        })
        .collect()
}

/// The default query: the first variant not searched yet for the field.
pub fn default_query(s: &FieldState, name: &str) -> String {
    let variants = query_variants(s, name);
    variants
        .iter()
        .find(|q| !is_duplicate_search(s, name, q))
        .unwrap_or(&variants[0])
        .clone()
}

/// The default question for a field. A unit of money names the run's currency once it is known
/// (`in AUD/year`, not `in currency/year`), as the output does.
pub fn default_question(s: &FieldState, name: &str) -> String {
    let f = field(s, name);
    let what = f
        .and_then(|f| f.description.clone())
        .unwrap_or_else(|| name.replace('_', " "));
    match f.map(|f| f.value_type) {
        Some(ValueType::Ratio) => {
            format!("What is the {what} ({name}), as a share between 0 and 1 or a percentage?")
        }
        Some(ValueType::Text) => format!("What is the {what} ({name})?"),
        _ => match f.and_then(|f| f.unit.as_ref()) {
            Some(u) => {
                let u = unit_for_people(&s.schema, name, run_currency(s).as_deref())
                    .unwrap_or_else(|| u.clone());
                format!("What is the {what} ({name}, in {u})?")
            }
            None => format!("What is the {what} ({name}), as a number?"),
        },
    }
}

/// The run's currency: the `currency` field's text, once it has one.
fn run_currency(s: &FieldState) -> Option<String> {
    s.values.get("currency").and_then(|a| match &a.value {
        FieldValue::Text(c) if !c.trim().is_empty() => Some(c.trim().to_string()),
        _ => None,
    })
}

/// The figure found for a field that waits for the person (none once the field has a value).
pub fn finding<'a>(s: &'a FieldState, name: &str) -> Option<&'a Finding> {
    s.findings.get(name).filter(|_| !has_value(s, name))
}

/// The question shown for a field: `proposed` (or the default question), made to carry what
/// was found — a question about a figure from a source quotes it (the source, the sentence, the
/// figure as read), and a question about a field that searching found nothing for says so.
pub fn shown_question(s: &FieldState, name: &str, proposed: Option<&str>) -> String {
    let base = proposed.map_or_else(|| default_question(s, name), str::to_string);
    match finding(s, name) {
        Some(f) if base.contains(&f.quote) => base,
        Some(f) => f.question(&default_question(s, name)),
        None => match searches(s, name) {
            0 => base,
            _ if base.starts_with(NOTHING_FOUND) => base,
            n => format!(
                "{NOTHING_FOUND} `{name}` in the sources ({n} search{}). {base}",
                if n == 1 { "" } else { "es" }
            ),
        },
    }
}

/// How a question about a field nothing was found for begins.
pub const NOTHING_FOUND: &str = "Nothing was found for";

/// The decision carrying out a search or ask task (`None` for a decomposition task).
pub fn decision_for(s: &FieldState, task: &Task, reasoning: &str) -> Option<PlannerDecision> {
    match task {
        Task::Search(f) => Some(
            PlannerDecision::new(Action::Search, Some(f), reasoning).query(default_query(s, f)),
        ),
        Task::Ask(f) => Some(
            PlannerDecision::new(Action::AskUser, Some(f), reasoning)
                .question(default_question(s, f)),
        ),
        Task::Decompose(_) => None,
    }
}

/// True when the calculation succeeded on the current inputs.
pub fn calculation_current(s: &FieldState) -> bool {
    matches!(&s.calculation, Calculation::Success { inputs_fingerprint: fp, .. } if *fp == inputs_fingerprint(s))
}

/// True when every needed raw input has a value.
pub fn all_inputs_collected(s: &FieldState) -> bool {
    missing_inputs(s).is_empty()
}
