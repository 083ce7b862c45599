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
