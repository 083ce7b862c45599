//! The result object of the `acquire` contract: `status`, `targets`, `fields`, `decisions`,
//! `iterations`, and when paused `pending_question` and `thread_id`.
//!
//! Targets and derived fields are evaluated here from the output's own raw values, so every target
//! equals its formula applied to the fields printed beside it, whatever the run's status.

use super::calculator;
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

fn number(v: Option<f64>) -> Value {
    v.map_or(Value::Null, |n| json!(n))
}

/// The JSON result. `pending` is the paused question (`{"field", "question"}`) and its thread.
pub fn output_json(s: &FieldState, pending: Option<(&Value, &str)>) -> Value {
    let derived = derived_values(s);
    let mut fields = Map::new();
    for f in &s.schema.fields {
        let entry = if f.kind == Kind::Derived {
            let v = derived.get(&f.name).copied().flatten();
            json!({
                "value": number(v),
                "provenance": v.map(|_| json!({"kind": "calculated", "formula": f.formula})),
            })
        } else {
            match s.values.get(&f.name) {
                Some(a) => json!({"value": a.value, "provenance": provenance(&a.provenance)}),
                None => json!({"value": null, "provenance": null}),
            }
        };
        fields.insert(f.name.clone(), entry);
    }
    let targets: Map<String, Value> = s
        .schema
        .targets
        .iter()
        .map(|t| {
            let v = match s.schema.field(t).map(|f| f.kind) {
                Some(Kind::Derived) => derived.get(t).copied().flatten(),
                _ => s.values.get(t).and_then(|a| a.value.number()),
            };
            (t.clone(), number(v))
        })
        .collect();
    let status = match (pending, s.status) {
        (Some(_), _) => "interrupted",
        (None, Status::Ok) => "ok",
        (None, Status::Aborted) => "aborted",
        (None, Status::Running) => "running",
    };
    let mut out = json!({
        "status": status,
        "targets": targets,
        "fields": fields,
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
