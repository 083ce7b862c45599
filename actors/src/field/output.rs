//! The result object of the `acquire` contract: `status`, `targets`, `target_list`, `fields`,
//! `exact`, `decisions`, `iterations`, and when paused `pending_question` and `thread_id`.
//!
//! Targets and derived fields are evaluated here from the output's own raw values, so every target
//! equals its formula applied to the fields printed beside it, whatever the run's status. Numbers
//! are rounded at this edge to each field's precision (`field::rounding`: 2 decimals for money);
//! `exact` holds the unrounded value of every number rounding changed. `targets` is an object (by
//! name); `target_list` gives the targets in the schema's order with their unit.

use super::calculator;
use super::rounding;
use super::schema::Kind;
use super::state::{FieldState, Provenance, Status};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;

/// Derived values computable from the state's raw values (`None` where an input is missing or
/// a formula fails).
pub fn derived_values(s: &FieldState) -> BTreeMap<String, Option<f64>> {
    let eval = calculator::evaluate(s);
    s.schema
        .fields
        .iter()
        .filter(|f| f.kind == Kind::Derived)
        .map(|f| (f.name.clone(), eval.values.get(&f.name).copied()))
        .collect()
}

/// The JSON result. `pending` is the paused question (`{"field", "question"}`) and its thread.
pub fn output_json(s: &FieldState, pending: Option<(&Value, &str)>) -> Value {
    let derived = derived_values(s);
    let mut exact_fields = Map::new();
    let mut exact_targets = Map::new();
    // A number rounded to the field's precision; its exact value kept when rounding changed it.
    let rounded = |name: &str, v: Option<f64>, exact: &mut Map<String, Value>| -> Value {
        let Some(x) = v else { return Value::Null };
        let r = rounding::round(x, rounding::decimals(&s.schema, name));
        if r != x {
            exact.insert(name.to_string(), json!(x));
        }
        json!(r)
    };
    let mut fields = Map::new();
    for f in &s.schema.fields {
        let entry = if f.kind == Kind::Derived {
            let v = derived.get(&f.name).copied().flatten();
            json!({
                "value": rounded(&f.name, v, &mut exact_fields),
                "provenance": v.map(|_| json!({"kind": "calculated", "formula": f.formula})),
            })
        } else {
            match s.values.get(&f.name) {
                Some(a) => {
                    let value = match a.value.number() {
                        Some(x) => rounded(&f.name, Some(x), &mut exact_fields),
                        None => json!(a.value),
                    };
                    json!({"value": value, "provenance": provenance(&a.provenance)})
                }
                None => json!({"value": null, "provenance": null}),
            }
        };
        fields.insert(f.name.clone(), entry);
    }
    let currency = s.values.get("currency").and_then(|a| match &a.value {
        super::state::FieldValue::Text(c) if !c.trim().is_empty() => Some(c.trim().to_string()),
        _ => None,
    });
    let mut targets = Map::new();
    let mut target_list = Vec::new();
    for t in &s.schema.targets {
        let v = match s.schema.field(t).map(|f| f.kind) {
            Some(Kind::Derived) => derived.get(t).copied().flatten(),
            _ => s.values.get(t).and_then(|a| a.value.number()),
        };
        let value = rounded(t, v, &mut exact_targets);
        targets.insert(t.clone(), value.clone());
        target_list.push(json!({
            "field": t,
            "value": value,
            "unit": rounding::unit_for_people(&s.schema, t, currency.as_deref()),
        }));
    }
    let status = match (pending, s.status) {
        (Some(_), _) => "interrupted",
        (None, Status::Ok) => "ok",
        (None, Status::Aborted) => "aborted",
        (None, Status::Running) => "running",
    };
    let mut out = json!({
        "status": status,
        "targets": targets,
        "target_list": target_list,
        "fields": fields,
        "exact": {"targets": exact_targets, "fields": exact_fields},
        "decisions": s.decisions.iter().map(|d| json!({
            "iteration": d.iteration,
            "action": d.action.as_str(),
            "target": d.target,
            "origin": d.origin,
            "rewritten_by": d.rewritten_by,
            "reasoning": d.reasoning,
        })).collect::<Vec<_>>(),
        "iterations": s.iterations,
        "reflections": s.reflections,
    });
    if let Some((question, thread)) = pending {
        out["pending_question"] = question.clone();
        out["thread_id"] = json!(thread);
    }
    out
}

fn provenance(p: &Provenance) -> Value {
    serde_json::to_value(p).unwrap_or(Value::Null)
}
