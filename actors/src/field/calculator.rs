//! The calculator: every derived field evaluated from the raw values, in dependency order. Used by
//! the `calculate` node (which turns the result into a `Calculation`) and by the output (which
//! prints derived values from the output's own raw values).

use super::formula::{self, FormulaError};
use super::schema::Kind;
use super::state::FieldState;
use std::collections::BTreeMap;

/// What evaluating the derived fields gave.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evaluation {
    /// The derived fields that could be computed.
    pub values: BTreeMap<String, f64>,
    /// Formulas that failed for another reason than a missing input: (field, reason naming it).
    pub errors: Vec<(String, String)>,
}

/// Evaluates every derived field of the running schema from the numeric raw values. Never panics:
/// parse errors, unknown fields and division by zero are reported in [`Evaluation::errors`].
pub fn evaluate(s: &FieldState) -> Evaluation {
    let mut known: BTreeMap<String, Option<f64>> = s
        .schema
        .fields
        .iter()
        .map(|f| {
            let raw = f.kind == Kind::Raw;
            let v = s.values.get(&f.name).and_then(|a| a.value.number());
            (f.name.clone(), v.filter(|_| raw))
        })
        .collect();
    let derived: Vec<_> = s
        .schema
        .fields
        .iter()
        .filter(|f| f.kind == Kind::Derived)
        .collect();
    let mut out = Evaluation::default();
    // Derived fields are acyclic (the schema is validated), so `derived.len()` passes suffice.
    for _ in 0..derived.len() {
        for f in &derived {
            if out.values.contains_key(&f.name) {
                continue;
            }
            let text = f.formula.as_deref().unwrap_or("");
            match formula::evaluate(text, &known) {
                Ok(v) => {
                    out.values.insert(f.name.clone(), v);
                    known.insert(f.name.clone(), Some(v));
                }
                Err(FormulaError::Missing(_)) => {}
                Err(e) => {
                    if !out.errors.iter().any(|(n, _)| *n == f.name) {
                        out.errors
                            .push((f.name.clone(), format!("`{}` = {text}: {e}", f.name)));
                    }
                }
            }
        }
    }
    out
}
