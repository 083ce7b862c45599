//! `ask_user` and `observe_user`. `ask_user` pauses the run with the question (an interrupt
//! whose payload carries what was found: the source, the quote, the figure as read); the answer
//! resumes it, and `observe_user` checks it: text must not be blank, a number must be a number
//! (`1,800`, `2.5 million`, `40k`), a ratio must lie in 0–1 (`0.05` or `5%`). An answer about a
//! figure found in a source (`yes`, `AUD`, a rate, one of the candidates) settles that figure
//! ([`settle`]): the value is taken from the source with the answer in its provenance, or the next
//! question (the rate) is asked. An unusable answer is noted and the question is asked again
//! while the ask caps allow.

use super::actions::one_more_ask;
use super::actions::{corpus_rates, text_value};
use super::{Env, StageResult};
use crate::field::numbers::readings;
use crate::field::reading::finding::{settle, Settlement};
use crate::field::reading::{verify, FieldReading};
use crate::field::schema::ValueType;
use crate::field::state::{
    Acquired, Confirmation, FieldState, FieldUpdate, FieldValue, PlannerDecision, Provenance,
    Question,
};
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

/// The question's payload: `{"field", "question", "found", "searches"}`. `found` is the figure
/// found in a source that the question is about (source id, quote, the readings as read, why,
/// and the currency or rate open), `null` when there is none; `searches` counts the searches
/// made for the field.
pub fn payload(s: &FieldState, field: &str, question: &str) -> Value {
    json!({
        "field": field,
        "question": question,
        "found": view::finding(s, field),
        "searches": view::searches(s, field),
    })
}

/// The `ask_user` node: pauses with [`payload`]; resumed, it keeps the answer for `observe_user`,
/// the question as shown in the decision, and counts the question.
pub async fn ask_user(_env: &Env, s: &FieldState, ctx: &NodeContext) -> StageResult {
    let d = s
        .decision
        .as_ref()
        .ok_or_else(|| NodeError::fatal("ask_user runs without a decision"))?;
    let field = d.target.clone().unwrap_or_default();
    let question = view::shown_question(s, &field, d.question.as_deref());
    let answer = ctx.interrupt(payload(s, &field, &question))?;
    Ok(FieldUpdate::default()
        .decision(Some(PlannerDecision {
            question: Some(question),
            ..d.clone()
        }))
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
    let asked = d
        .question
        .clone()
        .unwrap_or_else(|| view::default_question(s, &field));
    if let Some(found) = view::finding(s, &field) {
        let currency = text_value(s, "currency");
        match settle(found, &answer, ty, currency.as_deref(), &corpus_rates(s)) {
            Settlement::Take(r) => {
                return Ok(match source_reading(s, found, &r, ty) {
                    Ok(()) => u.values(BTreeMap::from([(
                        field,
                        Acquired {
                            value: FieldValue::Number(r.value),
                            provenance: Provenance::Search {
                                source_id: found.source_id.clone(),
                                quote: found.quote.clone(),
                                span: Some(r.span),
                                conversions: r.conversions,
                                confirmed: Some(Confirmation {
                                    question: asked,
                                    answer,
                                }),
                            },
                        },
                    )])),
                    Err(why) => unusable(u, &field, &asked, &answer, &why),
                });
            }
            Settlement::Ask(next) => {
                let question = next.question(&view::default_question(s, &field));
                return Ok(u
                    .reflections(vec![format!(
                        "`{field}`: the answer \"{answer}\" leaves {}",
                        next.why
                    )])
                    .findings(BTreeMap::from([(field.clone(), next)]))
                    .reask(Some(Question { field, question })));
            }
            Settlement::Unusable(why) => return Ok(unusable(u, &field, &asked, &answer, &why)),
            Settlement::Own => {}
        }
    }
    Ok(match parse_answer(&answer, ty) {
        Ok(value) => u.values(BTreeMap::from([(
            field,
            Acquired {
                value,
                provenance: Provenance::User { answer },
            },
        )])),
        Err(e) => unusable(u, &field, &asked, &answer, &e.to_string()),
    })
}

/// The answer could not be used: noted, and the question asked again with the reason.
fn unusable(u: FieldUpdate, field: &str, asked: &str, answer: &str, why: &str) -> FieldUpdate {
    let question = format!(
        "{} (the answer \"{answer}\" could not be used: {why})",
        asked.split(" (the answer").next().unwrap_or_default()
    );
    u.reflections(vec![format!("answer for `{field}` not usable: {why}")])
        .reask(Some(Question {
            field: field.to_string(),
            question,
        }))
}

/// Checks a reading the answer settled, as any extraction is checked: the quote is in its
/// document, the value follows from the span by the conversions, and it fits the field's type.
fn source_reading(
    s: &FieldState,
    found: &crate::field::reading::finding::Finding,
    r: &FieldReading,
    ty: ValueType,
) -> Result<(), String> {
    let in_corpus = s
        .corpus
        .iter()
        .any(|d| d.id == found.source_id && d.text.contains(&found.quote));
    if !in_corpus {
        return Err(format!(
            "the quote is not in document `{}`",
            found.source_id
        ));
    }
    verify(&found.quote, r)?;
    if r.value < 0.0 || (ty == ValueType::Ratio && r.value > 1.0) {
        return Err(format!("{} does not fit the field", r.value));
    }
    Ok(())
}
