//! The field policy over any chat model: each call sends its request as JSON with a JSON schema of
//! the answer through [`model::ask`](crate::model::ask) (schema check, one fed-back repair
//! attempt). [`responders`] answers the same requests with the offline heuristics, for the
//! simulator (`--model sim:…`).

use super::{
    offline, offline_decompose, offline_extract, DecideRequest, DecomposeRequest, ExtractAnswer,
    ExtractRequest, FieldPolicy, PolicyError, PolicyReply, ReflectRequest, Reflection,
};
use crate::field::schema::Decomposition;
use crate::field::state::PlannerDecision;
use crate::model::policy::{responder, shared_schema, PolicyClient};
use crate::model::{ChatModel, Responder};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

const SYSTEM: &str = "You help size a market by filling the numbers of a schema. Use only the \
documents given; quote sentences verbatim; never invent a document id. Answer with JSON matching \
the schema.";

/// The field policy driving a chat model.
pub struct ChatFieldPolicy {
    client: PolicyClient,
}

impl ChatFieldPolicy {
    /// A policy asking `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            client: PolicyClient::new(model, SYSTEM),
        }
    }
}

shared_schema! {
    fn decision_schema() {
        json!({"type": "object", "required": ["action", "reasoning"], "properties": {
            "action": {"type": "string", "enum": ["search", "ask_user", "reflect", "calculate", "finish"]},
            "target": {"type": "string"},
            "query": {"type": "string"},
            "question": {"type": "string"},
            "reasoning": {"type": "string"}
        }})
    }
}

shared_schema! {
    fn decomposition_schema() {
        json!({"type": "object", "required": ["field", "components", "formula"], "properties": {
            "field": {"type": "string"},
            "components": {"type": "array", "items": {"type": "string"}},
            "formula": {"type": "string"},
            "descriptions": {"type": "object"},
            "types": {"type": "object"}
        }})
    }
}

shared_schema! {
    fn extract_schema() {
        let reading = json!({
            "type": "object", "required": ["value", "span"], "properties": {
                "value": {"type": "number"}, "span": {"type": "string"},
                "conversions": {"type": "array", "items": {"type": "object", "required": ["kind"], "properties": {
                    "kind": {"enum": ["scale", "percent", "range", "period", "currency", "currency-by-context", "currency-by-answer", "year"]},
                    "sign": {"type": "string"}, "currency": {"type": "string"}, "words": {"type": "string"},
                    "basis": {"enum": ["named_in_note", "quote", "note", "language", "your_currency", "your_region", "schema"]},
                    "answer": {"type": "string"},
                    "word": {"type": "string"}, "factor": {"type": "number"},
                    "low": {"type": "number"}, "high": {"type": "number"},
                    "from": {"type": "string"}, "to": {"type": "string"},
                    "rate": {"type": "number"}, "source": {"type": "string"},
                    "year": {"type": "integer"}, "offered": {"type": "array", "items": {"type": "integer"}},
                    "why": {"type": "string"}
                }}}
            }
        });
        json!({"type": "object", "properties": {
            "found": {
                "type": ["object", "null"], "required": ["value", "quote", "source_id", "span"], "properties": {
                    "value": {"type": "number"}, "quote": {"type": "string"}, "source_id": {"type": "string"},
                    "span": {"type": "string"}, "conversions": reading["properties"]["conversions"].clone()
                }
            },
            "ask": {
                "type": ["object", "null"], "required": ["source_id", "quote", "candidates", "why"], "properties": {
                    "source_id": {"type": "string"}, "quote": {"type": "string"},
                    "candidates": {"type": "array", "items": reading}, "why": {"type": "string"},
                    "open": {"type": ["object", "null"], "required": ["kind"], "properties": {
                        "kind": {"enum": ["currency", "rate"]},
                        "sign": {"type": "string"}, "options": {"type": "array", "items": {"type": "string"}},
                        "from": {"type": "string"}, "to": {"type": "string"}
                    }}
                }
            }
        }})
    }
}

/// What the extraction call asks of the model: a reading, not just a number.
const EXTRACT_PROMPT: &str = "Read the field's value from the documents as the field means it. Give `found` with: the value in the field's unit (ratios between 0 and 1); the sentence it appears in, verbatim (`quote`); the document id; the exact words of the quote the number was read from (`span`, e.g. \"12 USD per seat per month\"); and every conversion you made, in order: `period` (from, to, factor: per month → per year is 12), `scale` (word, factor), `range` (low, high: the value is the midpoint), `percent` (÷ 100), `currency` (from, to, rate, source: only at a rate given in `rates`), `year` (year, offered, why), `currency-by-context` (sign, currency, words, basis: a sign several currencies share — `$`, `kr`, `£`, `¥`, `R` — read by the words that settle it: a currency the note names, a place the quote or the note names, the note's language, then `currency` and `region`). When nothing settles such a sign, give `ask` with the one reading and `open` {kind: currency, sign, options}; when the figure's currency differs from `currency` and `rates` has no rate, give `ask` with `open` {kind: rate, from, to}. Never take a figure for another region than `region`, nor a price in another currency than `currency` without a rate. When the quote offers several figures the field's description does not decide between (two years, two regions, two units), give `ask` with the candidates (each a value, span and conversions) and why, instead of guessing; null when no document gives the field.";

shared_schema! {
    fn reflect_schema() {
        json!({"type": "object", "required": ["note"], "properties": {"note": {"type": "string"}}})
    }
}

#[async_trait::async_trait]
impl FieldPolicy for ChatFieldPolicy {
    fn name(&self) -> &str {
        self.client.name()
    }

    async fn decide(
        &self,
        req: &DecideRequest,
    ) -> Result<PolicyReply<PlannerDecision>, PolicyError> {
        self.client.call("decide", "Choose the next action: search the corpus for a missing field, ask the person, reflect, calculate, or finish.", req, decision_schema())
            .await
    }

    async fn decompose(
        &self,
        req: &DecomposeRequest,
    ) -> Result<PolicyReply<Decomposition>, PolicyError> {
        self.client.call("decompose", "The field is rarely published directly. Give components that can be found and a formula (+ - * / and parentheses over the components) that computes it.", req, decomposition_schema())
            .await
    }

    async fn extract(
        &self,
        req: &ExtractRequest,
    ) -> Result<PolicyReply<ExtractAnswer>, PolicyError> {
        self.client
            .call("extract", EXTRACT_PROMPT, req, extract_schema())
            .await
    }

    async fn reflect(&self, req: &ReflectRequest) -> Result<PolicyReply<Reflection>, PolicyError> {
        self.client
            .call(
                "reflect",
                "Progress has stalled. Say briefly what is missing and what to try next.",
                req,
                reflect_schema(),
            )
            .await
    }
}

/// The offline model's answers by call kind, for [`SimulatedModel`](crate::model::SimulatedModel).
pub fn responders() -> HashMap<String, Responder> {
    HashMap::from([
        (
            "decide".to_string(),
            responder(|q: &DecideRequest| Ok(offline::decide(q))),
        ),
        (
            "decompose".to_string(),
            responder(offline_decompose::decompose),
        ),
        (
            "extract".to_string(),
            responder(|q: &ExtractRequest| Ok(offline_extract::extract(q))),
        ),
        (
            "reflect".to_string(),
            responder(|q: &ReflectRequest| Ok(offline::reflect(q))),
        ),
    ])
}
