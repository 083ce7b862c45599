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
    SynthesisRequest, TokenUsage,
};
use crate::model::{ask, ChatMessage, ChatModel, ChatRequest, ModelError, Responder};
use crate::research::state::PlanStep;
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

const SYSTEM: &str =
    "You plan and write research briefs from source notes. Use only the notes given; \
cite a note as [note-id]; never invent a note id. Answer with JSON matching the schema.";

/// The research policy driving a chat model.
pub struct ChatResearchPolicy {
    model: Arc<dyn ChatModel>,
    name: String,
}

impl ChatResearchPolicy {
    /// A policy asking `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        let name = format!("chat:{}", model.name());
        Self { model, name }
    }

    async fn call<Q: Serialize, T: DeserializeOwned>(
        &self,
        call: &str,
        instruction: &str,
        req: &Q,
        schema: Value,
    ) -> Result<PolicyReply<T>, PolicyError> {
        let input = serde_json::to_value(req)
            .map_err(|e| PolicyError::Failed(format!("{call}: request does not encode: {e}")))?;
        let chat = ChatRequest {
            call: call.to_string(),
            messages: vec![
                ChatMessage::system(SYSTEM),
                ChatMessage::user(format!("{instruction}\n\nInput:\n{input}")),
            ],
            schema,
            input,
        };
        match ask::<T>(&*self.model, chat).await {
            Ok((value, usage)) => Ok(PolicyReply {
                value,
                usage: Some(TokenUsage {
                    prompt_tokens: usage.prompt_tokens,
                    completion_tokens: usage.completion_tokens,
                }),
            }),
            Err(e) if e.is_transient() => Err(PolicyError::Transient(format!("{call}: {e}"))),
            Err(e) => Err(PolicyError::Failed(format!("{call}: {e}"))),
        }
    }
}

#[derive(Serialize, Deserialize)]
struct Plan {
    steps: Vec<PlanStep>,
}

fn plan_schema() -> Value {
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

fn report_schema() -> Value {
    json!({"type": "object", "required": ["text"], "properties": {"text": {"type": "string"}}})
}

#[async_trait::async_trait]
impl ResearchPolicy for ChatResearchPolicy {
    fn name(&self) -> &str {
        &self.name
    }

    async fn create_plan(
        &self,
        req: &PlanRequest,
    ) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        let r: PolicyReply<Plan> = self
            .call("create_plan", "Write a dependency-aware plan of steps for the goal, using the listed tools; every step needs acceptance criteria.", req, plan_schema())
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
        self.call("synthesize_report", "Write the brief in Markdown, one section per input section, citing only the listed sources; list open gaps as unresolved questions.", req, report_schema())
            .await
    }
}

fn responder<Q: DeserializeOwned + 'static, A: Serialize + 'static>(f: fn(&Q) -> A) -> Responder {
    Arc::new(move |req: &ChatRequest| {
        let q: Q =
            serde_json::from_value(req.input.clone()).map_err(|e| ModelError::Malformed {
                call: req.call.clone(),
                detail: format!("simulator input does not decode: {e}"),
            })?;
        serde_json::to_value(f(&q)).map_err(|e| ModelError::Config(format!("offline answer: {e}")))
    })
}

/// The offline policy's answers by call kind, for [`SimulatedModel`](crate::model::SimulatedModel).
pub fn responders() -> HashMap<String, Responder> {
    HashMap::from([
        (
            "create_plan".to_string(),
            responder(|q: &PlanRequest| Plan {
                steps: draft_plan(q),
            }),
        ),
        (
            "repair_plan".to_string(),
            responder(|q: &RepairRequest| Plan { steps: repair(q) }),
        ),
        (
            "replan".to_string(),
            responder(|q: &ReplanRequest| Plan {
                steps: revise_plan(q),
            }),
        ),
        (
            "synthesize_report".to_string(),
            responder(|q: &SynthesisRequest| write_report(q)),
        ),
    ])
}
