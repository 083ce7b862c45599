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
use crate::model::policy::{responder, PolicyClient};
use crate::model::{ChatModel, Responder};
use serde_json::{json, Value};
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

fn decision_schema() -> Value {
    json!({"type": "object", "required": ["action", "reasoning"], "properties": {
        "action": {"type": "string", "enum": ["search", "ask_user", "reflect", "calculate", "finish"]},
        "target": {"type": "string"},
        "query": {"type": "string"},
        "question": {"type": "string"},
        "reasoning": {"type": "string"}
    }})
}

fn decomposition_schema() -> Value {
    json!({"type": "object", "required": ["field", "components", "formula"], "properties": {
        "field": {"type": "string"},
        "components": {"type": "array", "items": {"type": "string"}},
        "formula": {"type": "string"},
        "descriptions": {"type": "object"},
        "types": {"type": "object"}
    }})
}

fn extract_schema() -> Value {
    json!({"type": "object", "properties": {"found": {
        "type": ["object", "null"], "required": ["value", "quote", "source_id"], "properties": {
            "value": {"type": "number"}, "quote": {"type": "string"}, "source_id": {"type": "string"}
        }
    }}})
}

fn reflect_schema() -> Value {
    json!({"type": "object", "required": ["note"], "properties": {"note": {"type": "string"}}})
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
        self.client.call("extract", "Read the field's value from the documents: the value (ratios between 0 and 1), the sentence it appears in, verbatim, and the document id; or null when no document gives it.", req, extract_schema())
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
