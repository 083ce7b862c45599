//! The field planner's model interface: the four calls that need judgement (choose a decision,
//! generate a decomposition, extract a value from search hits, reflect), behind one trait so the
//! deterministic offline model, a scripted model and a chat model are interchangeable.
//!
//! Requests are plain serialisable structs: the chat policy sends them as a request's `input`, and
//! the simulator's [`responders`] hand them back to the offline heuristics.

mod chat;
pub mod offline;
mod offline_decompose;
pub(crate) mod offline_extract;

pub use crate::model::policy::{PolicyError, PolicyReply, TokenUsage};
pub use chat::{responders, ChatFieldPolicy};
pub use offline::OfflineFieldPolicy;
pub use offline_decompose::decompose as decompose_offline;
pub use offline_extract::extract as extract_offline;

use super::schema::{Decomposition, Field, Schema};
use super::state::{Attempts, Caps, LogEntry, PlannerDecision};
use crate::tools::bm25::Document;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// Asks for the next decision.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DecideRequest {
    /// What the person is sizing.
    pub goal: String,
    /// The running schema.
    pub schema: Schema,
    /// Fields without a value (core fields excluded), in schema order.
    pub missing: Vec<String>,
    /// Attempts by field.
    pub attempts: BTreeMap<String, Attempts>,
    /// The caps.
    pub caps: Caps,
    /// The region, when known.
    pub region: Option<String>,
    /// The last decisions (at most five).
    pub recent_decisions: Vec<LogEntry>,
    /// The last reflections (at most three).
    pub reflections: Vec<String>,
}

/// Asks for a decomposition of a hard-to-find field into components that can be found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DecomposeRequest {
    /// What the person is sizing.
    pub goal: String,
    /// The field to decompose.
    pub field: Option<Field>,
    /// Names already used in the schema (components must not reuse them).
    pub existing: Vec<String>,
    /// Corpus documents about the field (BM25 on its description), best first.
    pub hits: Vec<Document>,
}

/// Asks for a field's value in search hits.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ExtractRequest {
    /// The field.
    pub field: Option<Field>,
    /// The hits, best first.
    pub hits: Vec<Document>,
    /// Values already attributed to other fields, as (document id, value): not to be reused.
    pub taken: Vec<(String, f64)>,
    /// The currency the person uses, when known.
    pub currency: Option<String>,
    /// The region the schema is about, when known: numbers for other regions are not taken.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub region: Option<String>,
    /// Exchange rates the corpus states, as (from, to, rate, document id): a price in another
    /// currency is converted only at one of these.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub rates: Vec<(String, String, f64, String)>,
    /// The schema's name and the goal: words that can settle a shared currency sign when the
    /// note and the person's region and currency do not.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub about: String,
}

/// A value read from a document: the reading (value in the field's unit, the span it came from,
/// the conversions made) and the sentence around it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Extraction {
    /// The value (ratios in 0..=1), in the field's unit.
    pub value: f64,
    /// The sentence it was read from, verbatim.
    pub quote: String,
    /// The document id.
    pub source_id: String,
    /// The part of the quote the number was read from (`12 USD per seat per month`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub span: Option<String>,
    /// What was done to the number as written (period, scale, range, percentage, currency, year).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conversions: Vec<crate::field::reading::Conversion>,
}

/// What a person must settle about a quote: several candidates the field's description cannot
/// decide between, or one figure whose currency (or rate) is open — with the source, the quote
/// and the value as read ([`crate::field::reading::finding::Finding`]).
pub type Candidates = crate::field::reading::finding::Finding;

/// The extraction answer: a value, several candidates to ask about, or nothing found.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ExtractAnswer {
    /// The value found, if any.
    pub found: Option<Extraction>,
    /// What a person must settle (when nothing was found for sure): candidates to choose
    /// between, or a figure whose currency or rate is open.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ask: Option<Candidates>,
}

/// Asks for a reflection on stalled progress.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ReflectRequest {
    /// What the person is sizing.
    pub goal: String,
    /// Fields still missing.
    pub missing: Vec<String>,
    /// Attempts by field.
    pub attempts: BTreeMap<String, Attempts>,
    /// The last decisions (at most five).
    pub recent_decisions: Vec<LogEntry>,
}

/// The reflection answer.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reflection {
    /// The note.
    pub note: String,
}

impl crate::kit::Policies for dyn FieldPolicy {
    type Policy = dyn FieldPolicy;
    fn offline() -> std::sync::Arc<Self::Policy> {
        std::sync::Arc::new(OfflineFieldPolicy)
    }
    fn chat(model: std::sync::Arc<dyn crate::model::ChatModel>) -> std::sync::Arc<Self::Policy> {
        std::sync::Arc::new(ChatFieldPolicy::new(model))
    }
    fn responders() -> std::collections::HashMap<String, crate::model::Responder> {
        responders()
    }
}

/// The calls of the field planner that need judgement.
#[async_trait::async_trait]
pub trait FieldPolicy: Send + Sync {
    /// A short name (shown in output).
    fn name(&self) -> &str;
    /// The next decision.
    async fn decide(
        &self,
        req: &DecideRequest,
    ) -> Result<PolicyReply<PlannerDecision>, PolicyError>;
    /// A decomposition of `req.field`.
    async fn decompose(
        &self,
        req: &DecomposeRequest,
    ) -> Result<PolicyReply<Decomposition>, PolicyError>;
    /// The field's value in the hits, if any.
    async fn extract(
        &self,
        req: &ExtractRequest,
    ) -> Result<PolicyReply<ExtractAnswer>, PolicyError>;
    /// A reflection.
    async fn reflect(&self, req: &ReflectRequest) -> Result<PolicyReply<Reflection>, PolicyError>;
}
