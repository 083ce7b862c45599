//! The `acquire` assistant's input, resume values and values: the field-acquisition planner over
//! HTTP. Input `{"schema": {...}, "corpus": [...], "goal": "...", "rates": {...}}` (corpus
//! optional: the bundled corpus, i.e. the three fixture scenarios' documents; rates optional:
//! exchange rates the person gives); every question pauses the run with an interrupt
//! `{"field", "question", "found", "searches"}` (`found`: the source, quote and value as read
//! that the question is about, `null` when nothing was found; `searches`: how many searches were
//! made for the field), answered by a run with `command: {"resume": "answer"}`; the values carry
//! the keys of `acquire --json`.

use crate::field::input::{bundled_corpus, initial_update, parse_corpus, InputError};
use crate::field::output;
use crate::field::runner::AcquireRun;
use crate::field::schema::{Schema, SchemaError};
use crate::field::state::Status;
use crate::field::{FieldState, FieldUpdate};
use planwright::{Interrupt, RunOutcome, RunStatus, ThreadId};
use serde::Deserialize;
use serde_json::{json, Value};

/// Why an `acquire` run request was refused.
#[derive(Debug, thiserror::Error)]
pub enum AcquireRequestError {
    /// Not the input's shape.
    #[error("malformed acquire input: {0}")]
    Malformed(String),
    /// The schema or the corpus is malformed.
    #[error("acquire input: {0}")]
    Input(#[from] InputError),
    /// A resume value that cannot be an answer.
    #[error("the answer to an acquire question must be text (a JSON string or number), not {0}")]
    BadAnswer(String),
}

/// The run input.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AcquireInput {
    /// The schema (validated before anything runs).
    schema: Value,
    /// The corpus: `[{"id", "title", "text"}]`; absent or `null`: the bundled corpus.
    #[serde(default)]
    corpus: Option<Value>,
    /// What is being sized.
    #[serde(default)]
    goal: Option<String>,
    /// Exchange rates the person gives, `{"USD/EUR": 0.92}`: a price in another currency than
    /// the schema's is converted only at a rate given here or stated by a document.
    #[serde(default)]
    rates: std::collections::BTreeMap<String, f64>,
}

/// Checks a run input and turns it into the first update of `thread`.
pub fn initial(thread: &ThreadId, input: Value) -> Result<FieldUpdate, AcquireRequestError> {
    let input: AcquireInput =
        serde_json::from_value(input).map_err(|e| AcquireRequestError::Malformed(e.to_string()))?;
    let schema: Schema = serde_json::from_value(input.schema)
        .map_err(|e| InputError::Schema(SchemaError::Malformed(e.to_string())))?;
    schema.validate().map_err(InputError::Schema)?;
    let corpus = match input.corpus {
        None | Some(Value::Null) => bundled_corpus()?,
        Some(v @ Value::Array(_)) => parse_corpus(&v.to_string())?,
        Some(other) => {
            return Err(InputError::Corpus(format!(
                "expected a JSON array of {{\"id\", \"title\", \"text\"}}, not {other}"
            ))
            .into())
        }
    };
    let mut corpus = corpus;
    let rates = input
        .rates
        .iter()
        .map(|(pair, r)| crate::field::input::parse_rate(&format!("{pair}={r}")))
        .collect::<Result<Vec<_>, _>>()?;
    corpus.extend(crate::field::input::rates_document(&rates));
    let goal = input.goal.unwrap_or_default();
    Ok(initial_update(thread.as_str(), &goal, schema, corpus))
}

/// Checks a resume value: an answer is text (a string, or a number written as one).
pub fn answer(resume: &Value) -> Result<Value, AcquireRequestError> {
    match resume {
        Value::String(_) => Ok(resume.clone()),
        Value::Number(n) => Ok(json!(n.to_string())),
        other => Err(AcquireRequestError::BadAnswer(other.to_string())),
    }
}

fn interrupts_json(list: &[Interrupt]) -> Value {
    list.iter()
        .map(|i| json!({"value": i.value, "id": i.id.0}))
        .collect()
}

/// A thread's values between runs (or mid-run): the `acquire --json` keys; `status` is
/// `running` while the planner has not finished.
pub fn thread_values(state: &FieldState, pending: Option<&Value>, thread: &ThreadId) -> Value {
    let mut v = output::output_json(state, pending.map(|p| (p, thread.as_str())));
    v["thread_id"] = json!(thread.as_str());
    v
}

/// A run's result as values: the `acquire --json` keys (status `ok`, `aborted` or
/// `interrupted`), plus `__interrupt__` when paused.
pub fn values(out: &RunOutcome<FieldState>) -> Value {
    match out.status {
        RunStatus::Finished | RunStatus::Interrupted => {
            let pending = if out.status == RunStatus::Interrupted {
                out.interrupts.first().map(|i| i.value.clone())
            } else {
                None
            };
            let run = AcquireRun {
                thread: out.thread_id.clone(),
                state: out.state.clone(),
                pending,
                action: "served",
            };
            let mut v = run.output_json();
            if out.status == RunStatus::Interrupted {
                v["__interrupt__"] = interrupts_json(&out.interrupts);
            }
            v
        }
        // Cancelled or suspended: the planner has not finished.
        _ => thread_values(&out.state, None, &out.thread_id),
    }
}

/// True when the planner gave up.
pub fn failed(state: &FieldState) -> bool {
    state.status == Status::Aborted
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCHEMA: &str = include_str!("../../../fixtures/field/dental.schema.json");

    fn schema() -> Value {
        serde_json::from_str(SCHEMA).unwrap_or(Value::Null)
    }

    fn err(input: Value) -> String {
        match initial(&ThreadId::new("t"), input) {
            Ok(_) => "accepted".into(),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn inputs_are_checked_before_running() {
        let t = ThreadId::new("t");
        assert!(initial(&t, json!({"schema": schema(), "goal": "dental"})).is_ok());
        let mut bad = schema();
        bad["fields"][6]["formula"] = json!("clinics * price");
        assert_eq!(
            err(json!({"schema": bad})),
            "acquire input: schema: formula of `tam` names unknown field `price`"
        );
        assert!(err(json!({"schema": {"name": 3}}))
            .starts_with("acquire input: schema: malformed schema"));
        assert!(err(json!({"goal": "x"}))
            .starts_with("malformed acquire input: missing field `schema`"));
        assert!(err(json!({"schema": schema(), "extra": 1})).contains("unknown field `extra`"));
        assert!(err(json!({"schema": schema(), "corpus": {"id": "a"}}))
            .starts_with("acquire input: corpus: expected a JSON array"));
        assert_eq!(
            err(
                json!({"schema": schema(), "corpus": [{"id": "a", "title": "", "text": ""}, {"id": "a", "title": "", "text": ""}]})
            ),
            "acquire input: corpus: document id `a` appears twice"
        );
        assert!(
            err(json!({"schema": schema(), "rates": {"USD-EUR": 0.9}})).contains("FROM/TO=RATE")
        );
        assert!(err(json!({"schema": schema(), "rates": {"USD/EUR": -1}})).contains("FROM/TO=RATE"));
        let u = initial(
            &t,
            json!({"schema": schema(), "corpus": [], "rates": {"USD/EUR": 0.9}}),
        );
        let corpus = u.unwrap().corpus.expect("a corpus");
        assert_eq!(corpus[0].id, "user-rates");
        assert_eq!(corpus[0].text, "1 USD = 0.9 EUR.");
    }

    #[test]
    fn answers_are_text() {
        assert_eq!(answer(&json!("Nordland")).ok(), Some(json!("Nordland")));
        assert_eq!(answer(&json!(0.05)).ok(), Some(json!("0.05")));
        assert!(answer(&json!({"action": "approve"}))
            .unwrap_err()
            .to_string()
            .contains("must be text"));
    }
}
