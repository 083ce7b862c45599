//! Turning inputs into a first state: the schema (validated), the corpus (checked), the goal; and
//! re-bootstrapping a conversation whose checkpoint another topology version wrote.

use super::schema::{Schema, SchemaError};
use super::state::{Caps, FieldState, FieldUpdate};
use crate::tools::bm25::Document;
use std::collections::{BTreeMap, BTreeSet};

/// Why an input was refused.
#[derive(Debug, thiserror::Error)]
pub enum InputError {
    /// The schema is malformed.
    #[error("schema: {0}")]
    Schema(#[from] SchemaError),
    /// An exchange rate is malformed.
    #[error("rate: {0}")]
    Rates(String),
    /// The corpus is malformed.
    #[error("corpus: {0}")]
    Corpus(String),
    /// The answers file is malformed.
    #[error("answers: {0}")]
    Answers(String),
}

/// The bundled corpus's sources: the three fixture scenarios' documents.
pub const BUNDLED_CORPORA: [&str; 3] = [
    include_str!("../../../fixtures/field/dental.corpus.json"),
    include_str!("../../../fixtures/field/coffee.corpus.json"),
    include_str!("../../../fixtures/field/bikes.corpus.json"),
];

/// The bundled corpus (what `acquire` and the `acquire` assistant search without a corpus).
pub fn bundled_corpus() -> Result<Vec<Document>, InputError> {
    let mut docs = Vec::new();
    for c in BUNDLED_CORPORA {
        docs.extend(
            parse_corpus(c).map_err(|e| InputError::Corpus(format!("bundled corpus: {e}")))?,
        );
    }
    Ok(docs)
}

/// The default tick cap.
pub const DEFAULT_MAX_ITERS: u32 = 60;

/// Parses a corpus: a JSON array of `{"id", "title", "text"}` with unique, non-empty ids.
pub fn parse_corpus(text: &str) -> Result<Vec<Document>, InputError> {
    let docs: Vec<Document> = serde_json::from_str(text).map_err(|e| {
        InputError::Corpus(format!(
            "expected a JSON array of {{\"id\", \"title\", \"text\"}}: {e}"
        ))
    })?;
    let mut seen = BTreeSet::new();
    for (i, d) in docs.iter().enumerate() {
        if d.id.trim().is_empty() {
            return Err(InputError::Corpus(format!("document {i} has an empty id")));
        }
        if !seen.insert(d.id.as_str()) {
            return Err(InputError::Corpus(format!(
                "document id `{}` appears twice",
                d.id
            )));
        }
    }
    Ok(docs)
}

/// The id of the document holding the exchange rates a person gave (`--rate`, `"rates"`).
pub const USER_RATES: &str = "user-rates";

/// Reads an exchange rate as a person gives it: `USD/EUR=0.92` (1 USD is 0.92 EUR).
pub fn parse_rate(text: &str) -> Result<(String, String, f64), InputError> {
    let bad = || {
        InputError::Rates(format!(
            "`{text}`: give a rate as FROM/TO=RATE with currency codes, e.g. USD/EUR=0.92"
        ))
    };
    let (pair, rate) = text.split_once('=').ok_or_else(bad)?;
    let (from, to) = pair.split_once('/').ok_or_else(bad)?;
    let code = |c: &str| {
        let c = c.trim().to_uppercase();
        (c.len() == 3 && c.chars().all(|x| x.is_ascii_alphabetic())).then_some(c)
    };
    let rate: f64 = rate.trim().parse().map_err(|_| bad())?;
    match (code(from), code(to)) {
        (Some(f), Some(t)) if f != t && rate.is_finite() && rate > 0.0 => Ok((f, t, rate)),
        _ => Err(bad()),
    }
}

/// The rates a person gave, as a document of the corpus: the planner reads rates from documents,
/// so a rate given by a person is cited like any source (`rate from user-rates`).
pub fn rates_document(rates: &[(String, String, f64)]) -> Option<Document> {
    (!rates.is_empty()).then(|| Document {
        id: USER_RATES.into(),
        title: "Exchange rates given by the user".into(),
        text: rates
            .iter()
            .map(|(f, t, r)| format!("1 {f} = {r} {t}."))
            .collect::<Vec<_>>()
            .join(" "),
    })
}

/// Parses answers: a JSON object mapping schema field names (or components of the schema's
/// decompositions, which become fields while the planner runs) to answer text. Without a schema
/// (answers for a thread being resumed, whose schema is in its checkpoint) names are not checked.
pub fn parse_answers(
    text: &str,
    schema: Option<&Schema>,
) -> Result<BTreeMap<String, String>, InputError> {
    let map: serde_json::Map<String, serde_json::Value> = serde_json::from_str(text)
        .map_err(|e| InputError::Answers(format!("expected a JSON object of field → text: {e}")))?;
    let mut out = BTreeMap::new();
    for (k, v) in map {
        let known = schema.is_none_or(|schema| {
            schema.field(&k).is_some()
                || schema
                    .decompositions
                    .iter()
                    .any(|d| d.components.contains(&k))
        });
        if !known {
            return Err(InputError::Answers(format!(
                "`{k}` is not a field of the schema or a component of its decompositions"
            )));
        }
        let text = match v {
            serde_json::Value::String(s) => s,
            serde_json::Value::Number(n) => n.to_string(),
            other => {
                return Err(InputError::Answers(format!(
                    "the answer for `{k}` must be text, not {other}"
                )))
            }
        };
        out.insert(k, text);
    }
    Ok(out)
}

/// The first update of a conversation.
pub fn initial_update(
    conversation_id: &str,
    goal: &str,
    schema: Schema,
    corpus: Vec<Document>,
) -> FieldUpdate {
    FieldUpdate::default()
        .conversation_id(conversation_id.to_string())
        .goal(goal.to_string())
        .schema(schema)
        .corpus(corpus)
        .max_iters(DEFAULT_MAX_ITERS)
        .caps(Caps::default())
}

/// A fresh state for a conversation whose checkpoint was written by another topology version:
/// the prior running schema and dynamic decompositions, and every collected value, kept; the
/// loop's bookkeeping (iterations, decision, calculation, attempts, log) started over.
pub fn rebootstrap(prior: &FieldState) -> FieldState {
    FieldState {
        conversation_id: prior.conversation_id.clone(),
        goal: prior.goal.clone(),
        schema: prior.schema.clone(),
        corpus: prior.corpus.clone(),
        values: prior.values.clone(),
        dynamic_decompositions: prior.dynamic_decompositions.clone(),
        recipes: prior.recipes.clone(),
        max_iters: if prior.max_iters == 0 {
            DEFAULT_MAX_ITERS
        } else {
            prior.max_iters
        },
        caps: prior.caps,
        reflections: vec![format!(
            "re-bootstrapped from a checkpoint of another planner version ({} values kept)",
            prior.values.len()
        )],
        ..FieldState::default()
    }
}
