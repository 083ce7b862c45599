//! The planner's local tools: deterministic, read-only functions over the source notes.
//!
//! `search` ranks notes with BM25, `compare` lines findings up along dimensions, `summarize`
//! extracts the most relevant sentences. Every tool returns the ids of the notes it used, and only
//! ids of notes that exist: tools quote sentences, they never write facts of their own. `mcp`
//! calls a tool server's tool (its step runs in `nodes::mcp_step`, which asks the policy); its
//! result is evidence of its own, with provenance.

mod aspect;
mod compare;
mod latency;
mod ranking;
mod search;
mod summarize;

pub use compare::compare;
pub use latency::ToolLatency;
pub use ranking::DEFAULT_LIMIT as SEARCH_DEFAULT_LIMIT;
pub use search::search;
pub use summarize::summarize;

use super::corpus::Corpus;
use super::notes::Note;
use super::state::{Finding, PlanStep, StepResult};

/// A tool the planner knows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ToolSpec {
    /// Its name, as plan steps give it.
    pub name: &'static str,
    /// What it does (shown to the model).
    pub description: &'static str,
    /// Whether running it changes anything outside the run (such tools need approval).
    pub side_effects: bool,
}

/// Every local tool. None has side effects.
pub const CATALOG: &[ToolSpec] = &[
    ToolSpec {
        name: "search",
        description: "BM25 search over the source notes; params: query, require_any (topic \
                      terms a note must mention), limit",
        side_effects: false,
    },
    ToolSpec {
        name: "compare",
        description: "compare the notes found by the step's dependencies along params.dimensions",
        side_effects: false,
    },
    ToolSpec {
        name: "summarize",
        description: "extractive summary of the notes found by the step's dependencies; params: \
                      max_sentences",
        side_effects: false,
    },
    ToolSpec {
        name: "mcp",
        description: "call a tool of a connected MCP tool server (`--tools`); params: server, \
                      tool, arguments — or aspect and query, and the tool whose description \
                      fits them is chosen; its result is cited like a note",
        side_effects: false,
    },
];

/// A tool by name.
pub fn spec(name: &str) -> Option<&'static ToolSpec> {
    CATALOG.iter().find(|t| t.name == name)
}

/// What a tool produced.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutcome {
    /// Readable output.
    pub output: String,
    /// Ids of the notes used, in order of use, without duplicates.
    pub sources: Vec<String>,
    /// Sentences taken from those notes.
    pub findings: Vec<Finding>,
    /// Why the tool could not do its job.
    pub error: Option<String>,
}

impl ToolOutcome {
    /// A failed call.
    pub fn failed(error: impl Into<String>) -> Self {
        Self {
            error: Some(error.into()),
            ..Self::default()
        }
    }

    pub(crate) fn push_source(&mut self, id: &str) {
        if !self.sources.iter().any(|s| s == id) {
            self.sources.push(id.to_string());
        }
    }
}

/// What a tool may look at.
pub struct ToolInput<'a> {
    /// The normalized goal (for relevance).
    pub goal: &'a str,
    /// Every source note, prepared for searching.
    pub corpus: &'a Corpus,
    /// Results of the step's dependencies.
    pub deps: Vec<&'a StepResult>,
    /// The aspects every search step of the plan serves (see [`PlanStep::aspect`]).
    pub aspects: Vec<String>,
}

impl ToolInput<'_> {
    /// The notes the dependencies used, in first-use order.
    pub fn dep_notes(&self) -> Vec<&Note> {
        self.dep_notes_prepared()
            .into_iter()
            .map(|(note, _)| note)
            .collect()
    }

    /// The notes the dependencies used, in first-use order, each with its preparation (its
    /// sentences already split).
    pub fn dep_notes_prepared(&self) -> Vec<(&Note, &crate::research::corpus::Prepared)> {
        let mut ids: Vec<&str> = Vec::new();
        for r in &self.deps {
            for s in &r.sources {
                if !ids.contains(&s.as_str()) {
                    ids.push(s);
                }
            }
        }
        ids.iter()
            .filter_map(|id| self.corpus.position(id))
            .map(|i| (&self.corpus.notes()[i], self.corpus.prepared(i)))
            .collect()
    }
}

/// Runs a step's tool.
pub fn run(step: &PlanStep, input: &ToolInput<'_>) -> ToolOutcome {
    match step.tool.as_str() {
        "search" => search(&step.params, input.corpus, &input.aspects),
        "compare" => compare(&step.params, input),
        "summarize" => summarize(&step.params, input),
        "mcp" => ToolOutcome::failed(
            "`mcp` steps run on the graph's tool servers (nodes::mcp_step::run)",
        ),
        other => ToolOutcome::failed(format!("unknown tool `{other}`")),
    }
}
