//! The field planner's state (design: `field-planner.md`, "State") and the records it holds.
//!
//! Almost every field is written by one node per superstep and uses `replace`. Collected values,
//! attempt counters and decomposition attempts are maps merged key by key, and the search history,
//! the reflections and the decision log are appended to, so a checkpoint stores what a step added,
//! not a copy of everything collected so far.

use super::schema::{Decomposition, Schema};
use crate::tools::bm25::Document;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// What the planner does next.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Action {
    /// Search the corpus for the target field.
    Search,
    /// Ask the person for the target field.
    AskUser,
    /// Think about why progress stalls (a model call, noted in `reflections`).
    Reflect,
    /// Run the calculator.
    Calculate,
    /// Stop.
    #[default]
    Finish,
}

impl Action {
    /// The name used in routes, logs and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            Action::Search => "search",
            Action::AskUser => "ask_user",
            Action::Reflect => "reflect",
            Action::Calculate => "calculate",
            Action::Finish => "finish",
        }
    }
}

/// A decision of the planner: an action, the field it is for, its query or question, and why.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct PlannerDecision {
    /// What to do.
    pub action: Action,
    /// The field it is about (search and ask need one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub target: Option<String>,
    /// The search query.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub query: Option<String>,
    /// The question to ask.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub question: Option<String>,
    /// Why.
    pub reasoning: String,
}

impl PlannerDecision {
    /// A decision of `action` about `target`, with reasoning.
    pub fn new(action: Action, target: Option<&str>, reasoning: impl Into<String>) -> Self {
        Self {
            action,
            target: target.map(str::to_string),
            reasoning: reasoning.into(),
            ..Self::default()
        }
    }

    /// A finish decision.
    pub fn finish(reasoning: impl Into<String>) -> Self {
        Self::new(Action::Finish, None, reasoning)
    }

    /// Sets the query.
    #[must_use]
    pub fn query(mut self, q: impl Into<String>) -> Self {
        self.query = Some(q.into());
        self
    }

    /// Sets the question.
    #[must_use]
    pub fn question(mut self, q: impl Into<String>) -> Self {
        self.question = Some(q.into());
        self
    }
}

/// Where the current decision came from; `enforce_policy` runs the full rewrite pipeline on model
/// decisions and only the calculation adjustment on deterministic ones.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Origin {
    /// Made by a rule (bootstrap, calc gate, acquisition task, auto-finish).
    Deterministic,
    /// Made by the model.
    Llm,
}

/// The run's status.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Still working.
    #[default]
    Running,
    /// Finished with every target calculated.
    Ok,
    /// Gave up (a cap, a model failure, or nothing left that could progress).
    Aborted,
}

/// The calculator's last result.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum Calculation {
    /// Not run yet.
    #[default]
    NotRun,
    /// Raw inputs are missing.
    Blocked {
        /// The missing raw fields, in schema order.
        missing: Vec<String>,
    },
    /// A formula failed.
    Error {
        /// Why, naming the formula.
        reason: String,
    },
    /// Every derived field was computed.
    Success {
        /// Derived field values.
        values: BTreeMap<String, f64>,
        /// The raw inputs they were computed from (see [`inputs_fingerprint`]).
        inputs_fingerprint: String,
    },
}

/// A collected value: a number, or text for text fields (`region`, `currency`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum FieldValue {
    /// A number (ratios are in 0..=1).
    Number(f64),
    /// Text.
    Text(String),
}

impl FieldValue {
    /// The number, if it is one.
    pub fn number(&self) -> Option<f64> {
        match self {
            FieldValue::Number(n) => Some(*n),
            FieldValue::Text(_) => None,
        }
    }
}

/// Where a value came from.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Provenance {
    /// Extracted from a corpus document; the quote appears verbatim in it.
    Search {
        /// The document id.
        source_id: String,
        /// The sentence the value was read from.
        quote: String,
        /// The part of the quote the number was read from.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        span: Option<String>,
        /// What was done to the number as written (`× 12 (per month → per year)`, a range's
        /// midpoint, the year picked and why, a currency rate).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        conversions: Vec<crate::field::reading::Conversion>,
        /// The person's answer that settled the reading (which candidate, which currency, the
        /// rate), when the planner had to ask.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        confirmed: Option<Confirmation>,
    },
    /// Given by the person.
    User {
        /// The answer as typed.
        answer: String,
    },
    /// Computed from a decomposition's components.
    Composed {
        /// The decomposition's formula.
        formula: String,
    },
    /// Computed by the calculator.
    Calculated {
        /// The field's formula.
        formula: String,
    },
}

/// A person's confirmation of a reading found in a source: the question as asked and the answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Confirmation {
    /// The question shown.
    pub question: String,
    /// The answer as typed (`yes`, `AUD`, `0.65`).
    pub answer: String,
}

/// A value with its provenance.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Acquired {
    /// The value.
    pub value: FieldValue,
    /// Where it came from.
    pub provenance: Provenance,
}

/// Attempts made for one field.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Attempts {
    /// Searches run.
    pub searches: u32,
    /// Questions asked.
    pub asks: u32,
    /// Decompositions generated for it (successful or not).
    pub decompositions: u32,
}

/// The caps that keep a run finite.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct Caps {
    /// Searches per field.
    pub searches_per_field: u32,
    /// Questions per field.
    pub asks_per_field: u32,
    /// Questions in total.
    pub asks_total: u32,
    /// Calculator runs.
    pub calculations: u32,
    /// Decomposition generations per field.
    pub decompositions_per_field: u32,
}

impl Default for Caps {
    fn default() -> Self {
        Self {
            searches_per_field: 2,
            asks_per_field: 2,
            asks_total: 8,
            calculations: 3,
            decompositions_per_field: 2,
        }
    }
}

/// A search that was run: for duplicate detection.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SearchRecord {
    /// The field searched for.
    pub field: String,
    /// The normalised query (lower-case tokens, sorted, joined by spaces).
    pub query: String,
}

/// Hits waiting for `observe`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Observation {
    /// The field searched for.
    pub field: String,
    /// The query.
    pub query: String,
    /// The hits, best first.
    pub hits: Vec<Document>,
}

/// A question waiting for, or being re-asked after, an answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Question {
    /// The field asked for.
    pub field: String,
    /// The text shown to the person.
    pub question: String,
}

/// A line of the decision log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LogEntry {
    /// The iteration (`tick` count) it was made in.
    pub iteration: u32,
    /// The final action.
    pub action: Action,
    /// The final target.
    pub target: Option<String>,
    /// Who made the decision before any rewrite.
    pub origin: Origin,
    /// The rules that rewrote it, in order.
    pub rewritten_by: Vec<String>,
    /// The final decision's reasoning.
    pub reasoning: String,
}

planwright::state! {
    /// The field planner's state.
    #[derive(PartialEq)]
    pub struct FieldState => FieldUpdate {
        /// The conversation (the thread is `{conversation_id}:planner:v2`).
        replace conversation_id: String,
        /// What the person is sizing.
        replace goal: String,
        /// The running schema: the input schema plus decomposition components as raw fields.
        replace schema: Schema,
        /// The documents search runs over.
        replace corpus: Vec<Document>,
        /// Collected values by field.
        merge values: BTreeMap<String, Acquired>,
        /// Attempts by field.
        merge attempts: BTreeMap<String, Attempts>,
        /// Questions asked in total.
        replace asks_total: u32,
        /// Ticks so far.
        replace iterations: u32,
        /// The tick cap.
        replace max_iters: u32,
        /// Running, ok or aborted.
        replace status: Status,
        /// Decompositions generated by the model.
        replace dynamic_decompositions: Vec<Decomposition>,
        /// The recipe graph: the decomposition used for each requires-components field.
        replace recipes: BTreeMap<String, Decomposition>,
        /// The iteration in which a decomposition was last generated (one fresh one per tick).
        replace decomposed_at: u32,
        /// The calculator's last result.
        replace calculation: Calculation,
        /// Calculator runs so far.
        replace calc_attempts: u32,
        /// The caps.
        replace caps: Caps,
        /// Searches run.
        append search_history: Vec<SearchRecord>,
        /// Hits waiting for `observe`.
        replace last_observation: Option<Observation>,
        /// The current decision.
        replace decision: Option<PlannerDecision>,
        /// Who made it.
        replace decision_origin: Option<Origin>,
        /// The model failed to give a valid decision this tick.
        replace llm_failed: bool,
        /// The rules that rewrote the current decision.
        replace rewritten_by: Vec<String>,
        /// The person's answer, waiting for `observe_user`.
        replace answer: Option<String>,
        /// A question to ask again because its answer was not usable.
        replace reask: Option<Question>,
        /// Figures found in a source that wait for the person (which reading, which currency,
        /// what rate), by field: every question about the field carries one.
        merge findings: BTreeMap<String, crate::field::reading::finding::Finding>,
        /// Notes from `reflect`, rejected extractions and unusable answers.
        append reflections: Vec<String>,
        /// Every decision made, with its rewrites.
        append decisions: Vec<LogEntry>,
    }
}

/// The fingerprint of the raw numeric inputs: calculation results are current while it holds.
pub fn inputs_fingerprint(s: &FieldState) -> String {
    let mut out = String::new();
    for f in s.schema.fields.iter() {
        if f.kind == super::schema::Kind::Raw {
            if let Some(n) = s.values.get(&f.name).and_then(|a| a.value.number()) {
                out.push_str(&format!("{}={:e};", f.name, n));
            }
        }
    }
    out
}
