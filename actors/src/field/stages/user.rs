//! `ask_user` and `observe_user`. `ask_user` pauses the run with the question (an interrupt);
//! the answer resumes it, and `observe_user` checks it: text must not be blank, a number must be a
//! number (`1,800`, `2.5 million`, `40k`), a ratio must lie in 0–1 (`0.05` or `5%`). An unusable
//! answer is noted and the question is asked again while the ask caps allow.

use super::actions::one_more_ask;
use super::{Env, StageResult};
use crate::field::numbers::readings;
use crate::field::schema::ValueType;
use crate::field::state::{Acquired, FieldState, FieldUpdate, FieldValue, Provenance, Question};
use crate::field::view;
use planwright::{NodeContext, NodeError};
use serde_json::{json, Value};
use std::collections::BTreeMap;

/// Why an answer cannot be used.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum AnswerError {
    /// Nothing was typed.
    #[error("the answer is empty")]
    Empty,
    /// No number in it.
    #[error("`{0}` is not a number")]
    NotANumber(String),
    /// More than one number in it.
    #[error("`{0}` holds more than one number; give one")]
    Ambiguous(String),
    /// A ratio outside 0–1.
    #[error("{0} is not a share between 0 and 1 (or a percentage up to 100%)")]
    RatioOutOfRange(f64),
    /// A negative number.
    #[error("{0} is negative")]
    Negative(f64),
}

/// Reads an answer for a field of type `ty`.
pub fn parse_answer(text: &str, ty: ValueType) -> Result<FieldValue, AnswerError> {
    let t = text.trim();
    if t.is_empty() {
        return Err(AnswerError::Empty);
    }
    if ty == ValueType::Text {
        return Ok(FieldValue::Text(t.to_string()));
    }
    let found = readings(t, ty);
    let v = match found.as_slice() {
        [] => return Err(AnswerError::NotANumber(t.to_string())),
        [one] => one.value,
        _ => return Err(AnswerError::Ambiguous(t.to_string())),
    };
    if t.starts_with('-') {
        return Err(AnswerError::Negative(-v));
    }
    if ty == ValueType::Ratio && !(0.0..=1.0).contains(&v) {
        return Err(AnswerError::RatioOutOfRange(v));
    }
    Ok(FieldValue::Number(v))
}

/// The answer as text: a JSON string as is, anything else as its JSON.
pub fn answer_text(v: &Value) -> String {
    match v {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// The `ask_user` node: pauses with `{"field", "question"}`; resumed, it keeps the answer for
/// `observe_user` and counts the question.
pub async fn ask_user(_env: &Env, s: &FieldState, ctx: &NodeContext) -> StageResult {
    let d = s
        .decision
        .as_ref()
        .ok_or_else(|| NodeError::fatal("ask_user runs without a decision"))?;
    let field = d.target.clone().unwrap_or_default();
    let question = d
        .question
        .clone()
        .unwrap_or_else(|| view::default_question(s, &field));
    let answer = ctx.interrupt(json!({"field": field, "question": question}))?;
    Ok(FieldUpdate::default()
        .answer(Some(answer_text(&answer)))
        .attempts(one_more_ask(s, &field))
        .asks_total(s.asks_total + 1)
        .reask(None))
}

/// The `observe_user` node.
pub async fn observe_user(_env: &Env, s: &FieldState, _ctx: &NodeContext) -> StageResult {
    let Some(d) = &s.decision else {
        return Ok(FieldUpdate::default().answer(None));
    };
    let field = d.target.clone().unwrap_or_default();
    let answer = s.answer.clone().unwrap_or_default();
    let ty = view::field(s, &field).map_or(ValueType::Number, |f| f.value_type);
    let u = FieldUpdate::default().answer(None);
    Ok(match parse_answer(&answer, ty) {
        Ok(value) => u.values(BTreeMap::from([(
            field,
            Acquired {
                value,
                provenance: Provenance::User { answer },
            },
        )])),
        Err(e) => {
            let question = format!(
                "{} (the answer \"{answer}\" could not be used: {e})",
                d.question
                    .clone()
                    .unwrap_or_else(|| view::default_question(s, &field))
                    .split(" (the answer")
                    .next()
                    .unwrap_or_default()
            );
            u.reflections(vec![format!("answer for `{field}` not usable: {e}")])
                .reask(Some(Question { field, question }))
        }
    })
}
