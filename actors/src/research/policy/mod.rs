//! The planner's model interface: the four calls that need judgement (create, repair and replan a
//! plan; write the brief), behind one trait so a deterministic offline planner and a chat model are
//! interchangeable.
//!
//! Requests are plain serialisable structs: the chat policy puts them in a model request's `input`,
//! and the simulator's responders hand them back to the offline policy.

mod chat;
pub mod offline;
mod offline_draft;
mod offline_repair;
mod offline_replan;
pub mod offline_report;

pub use crate::research::lexicon::synonyms;
pub use chat::{responders, ChatResearchPolicy};
pub use offline::OfflineResearchPolicy;
pub use offline_replan::widen;

pub use crate::model::policy::{PolicyError, PolicyReply, TokenUsage};

use super::constraints::Constraints;
use super::notes::Note;
use super::state::{Finding, PlanStep, StepResults};
use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Asks for a first plan.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PlanRequest {
    /// The normalized goal.
    pub goal: String,
    /// The constraints.
    pub constraints: Constraints,
    /// The notes the plan will run against (shared: a request is cloned for an in-process model).
    pub notes: Arc<[Note]>,
    /// The tool servers' tools an `mcp` step may call, with their schemas (none without
    /// `--tools`; shared, as the notes).
    #[serde(default, skip_serializing_if = "<[_]>::is_empty")]
    pub tools: Arc<[crate::tools::mcp::ToolInfo]>,
}

/// Asks to fix a plan that failed validation.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RepairRequest {
    /// The normalized goal.
    pub goal: String,
    /// The constraints.
    pub constraints: Constraints,
    /// The notes.
    pub notes: Arc<[Note]>,
    /// The invalid plan (shared with the state it came from).
    pub plan: Arc<Vec<PlanStep>>,
    /// Its problems, each named.
    pub errors: Vec<String>,
}

/// Asks to revise the remaining plan after failures.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ReplanRequest {
    /// The normalized goal.
    pub goal: String,
    /// The constraints.
    pub constraints: Constraints,
    /// The notes.
    pub notes: Arc<[Note]>,
    /// The current plan with statuses; complete steps must be kept as they are (shared with the
    /// state it came from).
    pub plan: Arc<Vec<PlanStep>>,
    /// Results so far.
    pub step_results: StepResults,
    /// The gaps that made a replan necessary.
    pub knowledge_gaps: Vec<String>,
    /// Replans already made.
    pub replan_count: u32,
}

/// A section of the brief, prepared by the graph from completed steps.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SectionInput {
    /// Heading.
    pub title: String,
    /// What the section is.
    #[serde(default)]
    pub kind: SectionKind,
    /// Sentences from notes, each with its note id (a comparison's carry their figures).
    pub findings: Vec<Finding>,
    /// A comparison's dimensions, in order (some may have no finding).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dimensions: Vec<String>,
    /// Why the section has no evidence yet (a draft brief marks the gap where it belongs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gap: Option<String>,
}

/// What a section of the brief is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SectionKind {
    /// One aspect of the goal: sentences about it only.
    #[default]
    Aspect,
    /// The sources side by side along dimensions.
    Comparison,
    /// The strongest findings not quoted above.
    Summary,
}

/// Asks for the brief.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SynthesisRequest {
    /// The normalized goal.
    pub goal: String,
    /// The constraints (audience, length).
    pub constraints: Constraints,
    /// The sections and their findings.
    pub sections: Vec<SectionInput>,
    /// Open gaps, to list as unresolved questions.
    pub knowledge_gaps: Vec<String>,
    /// Ids and titles of the notes that may be cited.
    pub sources: Vec<(String, String)>,
    /// Set when the run stopped for review: the brief is a draft of what is supported, and this
    /// says what a person must do.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_reason: Option<String>,
}

/// The brief as written.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Report {
    /// Markdown text; claims cite notes as `[note-id]`.
    pub text: String,
}

impl crate::kit::Policies for dyn ResearchPolicy {
    type Policy = dyn ResearchPolicy;
    fn offline() -> std::sync::Arc<Self::Policy> {
        std::sync::Arc::new(OfflineResearchPolicy)
    }
    fn chat(model: std::sync::Arc<dyn crate::model::ChatModel>) -> std::sync::Arc<Self::Policy> {
        std::sync::Arc::new(ChatResearchPolicy::new(model))
    }
    fn responders() -> std::collections::HashMap<String, crate::model::Responder> {
        responders()
    }
}

/// Asks which tool server's tool answers a plan step that names none (`mcp` without
/// `params.tool`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ToolChoiceRequest {
    /// The normalized goal.
    pub goal: String,
    /// The step.
    pub step: PlanStep,
    /// The tools it may call, with their schemas.
    pub tools: Arc<[crate::tools::mcp::ToolInfo]>,
}

/// The calls of the research planner that need judgement.
#[async_trait::async_trait]
pub trait ResearchPolicy: Send + Sync {
    /// A short name (shown in history and output).
    fn name(&self) -> &str;
    /// A first, dependency-aware plan for the goal.
    async fn create_plan(
        &self,
        req: &PlanRequest,
    ) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError>;
    /// The plan corrected for the named errors.
    async fn repair_plan(
        &self,
        req: &RepairRequest,
    ) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError>;
    /// The plan revised after failures; complete steps kept.
    async fn replan(&self, req: &ReplanRequest) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError>;
    /// The brief from the sections' findings, citing only the given notes.
    async fn synthesize_report(
        &self,
        req: &SynthesisRequest,
    ) -> Result<PolicyReply<Report>, PolicyError>;
    /// The tool (and its arguments) for an `mcp` step that names none; `None` leaves the choice
    /// to the offline match of the step's aspect against the tools' descriptions (the default;
    /// also what a chat policy does over a model that does not call functions).
    async fn choose_tool(
        &self,
        _req: &ToolChoiceRequest,
    ) -> Result<Option<PolicyReply<crate::tools::mcp::Choice>>, PolicyError> {
        Ok(None)
    }
}
