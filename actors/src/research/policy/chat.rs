//! The research policy over any chat model: each call sends its request as JSON with a JSON
//! schema of the answer, through [`model::ask`](crate::model::ask) (schema check, one fed-back
//! retry). Transient model errors (timeouts, rate limits, 5xx) become
//! [`PolicyError::Transient`], which the node's retry policy retries; the rest fail the call.
//! [`responders`] answers the same requests from the offline policy, for the simulator.

use super::offline::draft_plan;
use super::offline_repair::repair;
use super::offline_replan::revise_plan;
use super::offline_report::write_report;
use super::{
    PlanRequest, PolicyError, PolicyReply, RepairRequest, ReplanRequest, Report, ResearchPolicy,
    SynthesisRequest,
};
use crate::model::policy::{responder, shared_schema, PolicyClient};
use crate::model::{ChatModel, Responder};
use crate::research::state::PlanStep;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

const SYSTEM: &str =
    "You plan and write research briefs from source notes. Use only the notes given; \
cite a note as [note-id]; never invent a note id. Answer with JSON matching the schema.";

/// The research policy driving a chat model.
pub struct ChatResearchPolicy {
    client: PolicyClient,
}

impl ChatResearchPolicy {
    /// A policy asking `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            client: PolicyClient::new(model, SYSTEM),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Plan {
    steps: Vec<PlanStep>,
}

shared_schema! {
    fn plan_schema() {
        json!({
            "type": "object",
            "required": ["steps"],
            "properties": {"steps": {"type": "array", "items": {
                "type": "object",
                "required": ["id", "description", "depends_on", "tool", "acceptance_criteria"],
                "properties": {
                    "id": {"type": "string"},
                    "description": {"type": "string"},
                    "depends_on": {"type": "array", "items": {"type": "string"}},
                    "tool": {"type": "string"},
                    "params": {"type": "object"},
                    "acceptance_criteria": {"type": "array"},
                    "optional": {"type": "boolean"},
                    "status": {"type": "string"}
                }
            }}}
        })
    }
}

shared_schema! {
    fn report_schema() {
        json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}})
    }
}

#[async_trait::async_trait]
impl ResearchPolicy for ChatResearchPolicy {
    fn name(&self) -> &str {
        self.client.name()
    }

    async fn create_plan(
        &self,
        req: &PlanRequest,
    ) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        let r: PolicyReply<Plan> = self
            .client
            .call("create_plan", "Write a dependency-aware plan of steps for the goal, using the listed tools; every step needs acceptance criteria. Give each search step the section it serves in params.aspect (one of the required sections) and write its params.query yourself: the aspect's words plus the few terms of the goal that distinguish its subject, not the whole goal.", req, plan_schema())
            .await?;
        Ok(PolicyReply {
            value: r.value.steps,
            usage: r.usage,
        })
    }

    async fn repair_plan(
        &self,
        req: &RepairRequest,
    ) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        let r: PolicyReply<Plan> = self
            .client
            .call(
                "repair_plan",
                "The plan failed validation with the listed errors. Return a corrected plan.",
                req,
                plan_schema(),
            )
            .await?;
        Ok(PolicyReply {
            value: r.value.steps,
            usage: r.usage,
        })
    }

    async fn replan(&self, req: &ReplanRequest) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        let r: PolicyReply<Plan> = self
            .client
            .call("replan", "Some steps failed or left gaps. Return the revised plan; keep complete steps exactly as they are.", req, plan_schema())
            .await?;
        Ok(PolicyReply {
            value: r.value.steps,
            usage: r.usage,
        })
    }

    async fn synthesize_report(
        &self,
        req: &SynthesisRequest,
    ) -> Result<PolicyReply<Report>, PolicyError> {
        self.client.call("synthesize_report", "Write the brief in Markdown, one `## ` section per input section, in order. An aspect section holds only sentences about that aspect, each ending with the [note-id] it comes from. A comparison section goes dimension by dimension: the figures each source gives (rounded, with units and currency), where the sources agree, where they conflict, and which give no figure. Cite only the listed sources, and only for what the cited note itself says: every sentence is checked against the note it cites, and a sentence the note does not support is removed. If draft_reason is set, start with a line saying the brief is a draft and why, and mark each section without findings as a gap. List open gaps under `## Unresolved questions`.", req, report_schema())
            .await
    }
}

/// The offline policy's answers by call kind, for [`SimulatedModel`](crate::model::SimulatedModel).
pub fn responders() -> HashMap<String, Responder> {
    HashMap::from([
        (
            "create_plan".to_string(),
            responder(|q: &PlanRequest| {
                Ok(Plan {
                    steps: draft_plan(q),
                })
            }),
        ),
        (
            "repair_plan".to_string(),
            responder(|q: &RepairRequest| Ok(Plan { steps: repair(q) })),
        ),
        (
            "replan".to_string(),
            responder(|q: &ReplanRequest| {
                Ok(Plan {
                    steps: revise_plan(q),
                })
            }),
        ),
        (
            "synthesize_report".to_string(),
            responder(|q: &SynthesisRequest| Ok(write_report(q))),
        ),
    ])
}
