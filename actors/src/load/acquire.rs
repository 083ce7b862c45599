//! `load --graph acquire`: field-acquisition conversations over the three fixture scenarios
//! (`fixtures/field/{dental,coffee,bikes}`) in turn, each with its schema and corpus. Every
//! question pauses the conversation; the load driver answers it from the scenario's answers, or,
//! for a question the answers do not cover, with something plausible for the field's type
//! (`Nordland` for text, `0.1` for a ratio, `100` for a number), so questions are asked and
//! answered under load and every conversation finishes. Every other round of the three scenarios
//! keeps only the answers for core fields (region, currency) and answers the rest plausibly, so
//! conversations of one scenario do not all end with the same numbers.

use super::driver::Workload;
use super::LoadError;
use crate::field::input::{initial_update, parse_answers, parse_corpus};
use crate::field::schema::{Schema, ValueType};
use crate::field::stages::user::answer_text;
use crate::field::FieldState;
use crate::tools::bm25::Document;
use planwright::runtime::Resume;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

/// The bundled scenarios: name, schema, corpus, answers.
const FIXTURES: [(&str, &str, &str, &str); 3] = [
    (
        "dental",
        include_str!("../../../fixtures/field/dental.schema.json"),
        include_str!("../../../fixtures/field/dental.corpus.json"),
        include_str!("../../../fixtures/field/dental.answers.json"),
    ),
    (
        "coffee",
        include_str!("../../../fixtures/field/coffee.schema.json"),
        include_str!("../../../fixtures/field/coffee.corpus.json"),
        include_str!("../../../fixtures/field/coffee.answers.json"),
    ),
    (
        "bikes",
        include_str!("../../../fixtures/field/bikes.schema.json"),
        include_str!("../../../fixtures/field/bikes.corpus.json"),
        include_str!("../../../fixtures/field/bikes.answers.json"),
    ),
];

/// The nodes that may call the model.
pub const MODEL_NODES: [&str; 6] = [
    "prepare",
    "acquire",
    "decide",
    "enforce_policy",
    "observe",
    "reflect",
];

/// One scenario: what a conversation starts with and how its questions are answered.
#[derive(Clone, Debug)]
pub struct Scenario {
    /// The fixture's name.
    pub name: &'static str,
    /// Its schema.
    pub schema: Schema,
    /// Its corpus.
    pub corpus: Vec<Document>,
    /// Answers by field.
    pub answers: BTreeMap<String, String>,
}

impl Scenario {
    /// What is being sized.
    pub fn goal(&self) -> String {
        format!("Size the {} market", self.schema.name)
    }

    /// The answer to a question about `field`: the scenario's, else a plausible one for the
    /// field's type (a component of a decomposition generated during the run is not in the
    /// schema: the question says whether it wants a share).
    pub fn answer(&self, field: &str, question: &str) -> String {
        if let Some(a) = self.answers.get(field) {
            return a.clone();
        }
        let declared = self.schema.field(field).map(|f| f.value_type).or_else(|| {
            self.schema
                .decompositions
                .iter()
                .find(|d| d.components.iter().any(|c| c == field))
                .map(|d| d.types.get(field).copied().unwrap_or_default())
        });
        let ty = declared.unwrap_or(if question.contains("share between 0 and 1") {
            ValueType::Ratio
        } else {
            ValueType::Number
        });
        match ty {
            ValueType::Text => "Nordland",
            ValueType::Ratio => "0.1",
            ValueType::Number => "100",
        }
        .to_string()
    }

    /// The answer to an interrupt payload `{"field", "question"}`.
    pub fn answer_payload(&self, payload: &Value) -> String {
        let field = payload.get("field").map(answer_text).unwrap_or_default();
        let question = payload.get("question").map(answer_text).unwrap_or_default();
        self.answer(&field, &question)
    }

    /// The scenario with only the answers for core fields (the rest answered plausibly).
    pub fn core_answers_only(&self) -> Scenario {
        let mut s = self.clone();
        s.answers
            .retain(|k, _| self.schema.field(k).is_some_and(|f| f.core));
        s
    }

    /// The `serve` run input of this scenario (`acquire` assistant).
    pub fn run_input(&self) -> Value {
        json!({"schema": self.schema, "corpus": self.corpus, "goal": self.goal()})
    }
}

/// The bundled scenarios, parsed and checked.
pub fn scenarios() -> Result<Vec<Scenario>, LoadError> {
    FIXTURES
        .iter()
        .map(|(name, schema, corpus, answers)| {
            let bad = |e: &dyn std::fmt::Display| {
                LoadError::Usage(format!("bundled acquire scenario `{name}`: {e}"))
            };
            let schema = Schema::from_json(schema).map_err(|e| bad(&e))?;
            let corpus = parse_corpus(corpus).map_err(|e| bad(&e))?;
            let answers = parse_answers(answers, Some(&schema)).map_err(|e| bad(&e))?;
            Ok(Scenario {
                name,
                schema,
                corpus,
                answers,
            })
        })
        .collect()
}

/// The conversations' scenarios in turn: the three bundled ones, then the same with only their
/// core answers. Conversation `i` runs entry `i % 6`.
pub fn rotation() -> Result<Vec<Scenario>, LoadError> {
    let full = scenarios()?;
    let core: Vec<Scenario> = full.iter().map(Scenario::core_answers_only).collect();
    Ok(full.into_iter().chain(core).collect())
}

/// Reads a scenario from files: a schema and a corpus, and optionally answers (questions they do
/// not cover are answered plausibly by type).
pub fn from_files(
    schema: &std::path::Path,
    corpus: &std::path::Path,
    answers: Option<&std::path::Path>,
) -> Result<Scenario, LoadError> {
    let read = |p: &std::path::Path| {
        std::fs::read_to_string(p).map_err(|e| LoadError::Usage(format!("{}: {e}", p.display())))
    };
    let bad = |p: &std::path::Path, e: &dyn std::fmt::Display| {
        LoadError::Usage(format!("{}: {e}", p.display()))
    };
    let schema_v = Schema::from_json(&read(schema)?).map_err(|e| bad(schema, &e))?;
    let corpus_v = parse_corpus(&read(corpus)?).map_err(|e| bad(corpus, &e))?;
    let answers_v = match answers {
        Some(a) => parse_answers(&read(a)?, Some(&schema_v)).map_err(|e| bad(a, &e))?,
        None => BTreeMap::new(),
    };
    Ok(Scenario {
        name: "custom",
        schema: schema_v,
        corpus: corpus_v,
        answers: answers_v,
    })
}

/// The workload: conversation `i` runs entry `i % 6` of [`rotation`].
pub fn workload(
    conversations: usize,
    concurrency: usize,
    thread_prefix: String,
    on_done: Arc<dyn Fn() + Send + Sync>,
) -> Result<Workload<FieldState>, LoadError> {
    Ok(workload_of(
        rotation()?,
        conversations,
        concurrency,
        thread_prefix,
        on_done,
    ))
}

/// The workload over `scenarios`: conversation `i` runs entry `i % len`.
pub fn workload_of(
    scenarios: Vec<Scenario>,
    conversations: usize,
    concurrency: usize,
    thread_prefix: String,
    on_done: Arc<dyn Fn() + Send + Sync>,
) -> Workload<FieldState> {
    let scenarios = Arc::new(scenarios);
    let input = {
        let (scenarios, prefix) = (scenarios.clone(), thread_prefix.clone());
        move |i: usize| {
            let s = &scenarios[i % scenarios.len()];
            // The conversation id is the thread id the driver gives conversation `i`.
            initial_update(
                &format!("{prefix}-{i}"),
                &s.goal(),
                s.schema.clone(),
                s.corpus.clone(),
            )
        }
    };
    let answer = move |i: usize, pending: &[planwright::Interrupt]| {
        let s = &scenarios[i % scenarios.len()];
        let first = pending.first()?;
        Some(Resume::Value(json!(s.answer_payload(&first.value))))
    };
    Workload {
        graph: "acquire".into(),
        conversations,
        concurrency,
        thread_prefix,
        input: Arc::new(input),
        answer: Arc::new(answer),
        model_nodes: MODEL_NODES
            .iter()
            .map(|n| n.to_string())
            .collect::<HashSet<_>>(),
        on_done,
        steps: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn questions_are_answered_from_the_scenario_or_by_type() {
        let all = scenarios().expect("the bundled scenarios parse");
        assert_eq!(all.len(), 3);
        let dental = &all[0];
        assert_eq!(dental.answer("region", "Which region?"), "Nordland");
        assert_eq!(dental.answer("obtainable_share", ""), "0.05");
        // Not in the answers: by the declared type.
        assert_eq!(dental.answer("serviceable_share", ""), "0.1");
        assert_eq!(dental.answer("annual_price", ""), "100");
        assert_eq!(dental.answer("population", ""), "100");
        // Unknown to the schema: by the question.
        assert_eq!(
            dental.answer(
                "churn",
                "What is the churn (churn), as a share between 0 and 1 or a percentage?"
            ),
            "0.1"
        );
        assert_eq!(
            dental.answer_payload(&json!({"field": "currency", "question": "Which currency?"})),
            "EUR"
        );
        let bikes = &all[2];
        assert_eq!(bikes.answer("lease_price", ""), "1,800");
        assert_eq!(bikes.run_input()["schema"]["name"], bikes.schema.name);
        let core = bikes.core_answers_only();
        assert_eq!(core.answer("region", ""), "Rivertown");
        assert_eq!(core.answer("lease_price", ""), "100");
        let rotation = rotation().expect("rotation");
        assert_eq!(rotation.len(), 6);
        assert_eq!(rotation[3].answer("obtainable_share", ""), "0.1");
    }
}
