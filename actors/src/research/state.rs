//! The research planner's state: the plan-and-execute loop's fields, and the records it holds.
//!
//! Fields that parallel step tasks write in one superstep (`step_results`, `observations`,
//! `execution_history`) use merge or append reducers; everything else is written by one node per
//! superstep and uses `replace`.

use super::constraints::Constraints;
use super::note_set::NoteSet;
use super::plan::Plan;
pub use super::plan::{Criterion, PlanStep, StepParams, StepStatus};
use serde::{Deserialize, Serialize};
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What a step produced.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct StepResult {
    /// The tool's output, readable.
    pub output: String,
    /// Ids of the notes the step used (every one exists in `source_notes`).
    pub sources: Vec<String>,
    /// Whether every acceptance criterion held.
    pub met: bool,
    /// The criteria that did not hold, each named.
    pub unmet: Vec<String>,
    /// The tool's or the scheduler's error, if the step could not run.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// The step did not run because a dependency was not complete; it waits for another round.
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    pub blocked: bool,
    /// Extracted findings: (note id, sentence), for synthesis.
    pub findings: Vec<Finding>,
    /// When the step started (ms, see `graph::Clock`).
    pub started_ms: u64,
    /// When it ended.
    pub ended_ms: u64,
    /// An `mcp` step's call and what it returned: the evidence's provenance.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<Arc<ToolCall>>,
}

/// A tool server's call whose result is evidence: where it came from, what was asked and what
/// came back. The brief cites it as `[id]`, the way it cites a note.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct ToolCall {
    /// The citation id: `server:tool:step` (letters, digits, `-`, `_`, `:`).
    pub id: String,
    /// The tool server (its name in `--tools`).
    pub server: String,
    /// The tool.
    pub tool: String,
    /// The arguments it was called with.
    pub arguments: serde_json::Value,
    /// The text it returned (cut at `tools::mcp::MAX_TEXT`).
    pub content: Arc<str>,
    /// Who chose the tool when the plan named none: `model` (function calling) or
    /// `description` (the offline match).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chosen_by: Option<String>,
    /// Attempts the call took.
    pub attempts: u32,
}

impl ToolCall {
    /// The call's result as a note (id, `server/tool` as the title, the content as the text):
    /// what acceptance criteria and citation checks read, as they read a note.
    pub fn as_note(&self) -> super::notes::Note {
        super::notes::Note {
            id: self.id.as_str().into(),
            title: format!("{}/{}", self.server, self.tool).into(),
            text: self.content.clone(),
            tags: [].into(),
        }
    }
}

/// A sentence taken from a note.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The note.
    pub note_id: String,
    /// The dimension or section it speaks to, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub topic: Option<String>,
    /// The sentence, verbatim (shared text: copying a state copies no sentence).
    pub sentence: Arc<str>,
    /// The figures the note states on the finding's topic (exact values; the brief rounds them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub figures: Vec<super::figures::Figure>,
}

/// Results by step id, each shared: a dependent step's view of the state, and a replan request,
/// copy the map, not the findings.
pub type StepResults = BTreeMap<String, Arc<StepResult>>;

/// One entry of `execution_history`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct HistoryEntry {
    /// What happened: `input_prepared`, `plan_created`, `plan_validated`, `plan_repaired`,
    /// `plan_reviewed`, `steps_selected`, `step_executed`, `step_blocked`, `progress_assessed`,
    /// `replanned`, `report_synthesized`, `needs_review`, `model_error` (a name written by the
    /// planner is borrowed, not copied, by every view of the state that copies the history).
    pub event: Cow<'static, str>,
    /// The step it concerns.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub step_id: Option<String>,
    /// Start time of a step (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// End time of a step (ms).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub ended_ms: Option<u64>,
    /// Details, readable (shared with the observation that repeats it, and cheap to copy when a
    /// dependent step's view of the state is made).
    #[serde(skip_serializing_if = "is_empty")]
    pub detail: Arc<str>,
}

fn is_empty(s: &Arc<str>) -> bool {
    s.is_empty()
}

impl HistoryEntry {
    /// An entry with an event name and a detail.
    pub fn new(event: &'static str, detail: impl Into<Arc<str>>) -> Self {
        Self {
            event: Cow::Borrowed(event),
            detail: detail.into(),
            ..Self::default()
        }
    }
}

/// An evidence entry of the output: a note, or a tool server's result, the brief relies on.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// The note's id (always an existing note).
    pub source_id: String,
    /// The note's title and the sentence used.
    pub summary: String,
    /// For a tool server's result: the call it came from (server, tool, arguments, content).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_call: Option<Arc<ToolCall>>,
}

/// The tokens one model call used.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallUsage {
    /// The call: `create_plan`, `repair_plan`, `replan` or `synthesize_report`.
    pub call: String,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// How the run ended (the `status` field).
pub mod status {
    /// The brief is done.
    pub const OK: &str = "ok";
    /// The graph stopped for a person to look.
    pub const NEEDS_REVIEW: &str = "needs_review";
    /// A model or tool invocation failed for good.
    pub const FAILED: &str = "failed";
}

planwright::state! {
    /// The research planner's state (the plan-and-execute loop's fields plus bookkeeping).
    pub struct ResearchState => ResearchUpdate {
        /// Original user request.
        replace input: String,
        /// Normalized objective.
        replace goal: String,
        /// Constraints (typed; serialises as an object).
        replace constraints: Constraints,
        /// Notes the executor may use (the bundled corpus is stored by name, see `note_set`).
        replace source_notes: NoteSet,
        /// The plan, in order. Written whole by the planning nodes, and as the statuses of the
        /// steps it assessed by `assess_progress` (see `research::plan`).
        custom(super::plan::write) plan: Plan,
        /// Validation problems of the current plan, each named.
        replace plan_errors: Vec<String>,
        /// Whether the plan may run.
        replace approved_plan: bool,
        /// The first step of the batch being executed.
        replace current_step_id: Option<String>,
        /// Every step of the batch being executed (steps run in parallel, dependency-driven).
        replace selected_steps: Vec<String>,
        /// Result by step id.
        merge step_results: StepResults,
        /// Facts and tool outputs gathered (shared text: a dependent step's view of the state
        /// copies the list, not the text).
        append observations: Vec<Arc<str>>,
        /// Missing evidence and unmet criteria, as of the last assessment.
        replace knowledge_gaps: Vec<String>,
        /// Ordered record of decisions and step executions.
        append execution_history: Vec<HistoryEntry>,
        /// Replans used.
        replace replan_count: u32,
        /// Replans allowed.
        replace max_replans: u32,
        /// Guardrail: steps a plan may have.
        replace max_steps: u32,
        /// Repairs used on the current plan.
        replace repair_count: u32,
        /// Progress score when the last replan was made (no gain afterwards = stalled).
        replace progress_at_replan: Option<u32>,
        /// The reviewer's last decision: `auto`, `approved`, `denied` or `edited`.
        replace review_decision: Option<String>,
        /// Why the graph cannot continue by itself.
        replace blocked_reason: Option<String>,
        /// Model and tool invocation errors, in order.
        append errors: Vec<String>,
        /// Tokens of each model call, in order (none for the offline policy).
        append model_usage: Vec<CallUsage>,
        /// The brief.
        replace final_report: String,
        /// `ok`, `needs_review` or `failed` (empty while running).
        replace status: String,
        /// The user-facing result.
        replace final_output: serde_json::Value,
    }
}

impl ResearchState {
    /// A step of the plan by id.
    pub fn step(&self, id: &str) -> Option<&PlanStep> {
        self.plan.iter().find(|s| s.id == id)
    }

    /// Steps that are part of the current plan (not replaced).
    pub fn active_steps(&self) -> impl Iterator<Item = &PlanStep> {
        active_steps(&self.plan)
    }
}

/// The steps of `plan` that are part of it (not replaced): [`ResearchState::active_steps`] of a
/// plan a node is still marking.
pub fn active_steps(plan: &[PlanStep]) -> impl Iterator<Item = &PlanStep> {
    plan.iter().filter(|s| s.status != StepStatus::Replaced)
}
