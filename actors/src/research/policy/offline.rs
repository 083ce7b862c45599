//! The deterministic offline planner: plans from the goal, the constraints and the notes, with
//! no model and no network.
//!
//! - **create_plan** drafts one `search` step per sub-question (the required sections, or else the
//!   two tags most common among the notes on the goal's topic, or else an overview), then a
//!   `compare` step along the dimensions and a `summarize` step, each when allowed. The draft does
//!   not trim itself to `max_steps`: fitting a plan to the limits is `repair_plan`'s job, as it
//!   would be for a model's draft.
//! - **repair_plan** fixes exactly what validation finds (see `offline_repair`).
//! - **replan** replaces each failed step by a better-aimed one (see `offline_replan`).
//! - **synthesize_report** assembles the brief from quoted findings (see `offline_report`).

use super::offline_repair::repair;
use super::offline_replan::revise_plan;
use super::offline_report::write_report;
use super::{
    PlanRequest, PolicyError, PolicyReply, RepairRequest, ReplanRequest, Report, ResearchPolicy,
    SynthesisRequest,
};
use crate::research::state::PlanStep;

pub use super::offline_draft::{draft_plan, goal_topic, search_step, sections_for, OVERVIEW};

/// The deterministic offline policy.
#[derive(Clone, Copy, Debug, Default)]
pub struct OfflineResearchPolicy;

#[async_trait::async_trait]
impl ResearchPolicy for OfflineResearchPolicy {
    fn name(&self) -> &str {
        "offline"
    }

    async fn create_plan(
        &self,
        req: &PlanRequest,
    ) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        Ok(PolicyReply::offline(draft_plan(req)))
    }

    async fn repair_plan(
        &self,
        req: &RepairRequest,
    ) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        Ok(PolicyReply::offline(repair(req)))
    }

    async fn replan(&self, req: &ReplanRequest) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        Ok(PolicyReply::offline(revise_plan(req)))
    }

    async fn synthesize_report(
        &self,
        req: &SynthesisRequest,
    ) -> Result<PolicyReply<Report>, PolicyError> {
        Ok(PolicyReply::offline(write_report(req)))
    }
}
