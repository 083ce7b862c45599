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
    SynthesisRequest, ToolChoiceRequest,
};
use crate::model::functions::{function_name, FunctionMessage, FunctionRequest, FunctionSpec};
use crate::model::policy::{responder, shared_schema, PolicyClient};
use crate::model::ModelError;
use crate::model::{ChatModel, Responder};
use crate::research::state::PlanStep;
use crate::tools::mcp::Choice;
use serde::{Deserialize, Serialize};
use serde_json::json;
use std::collections::HashMap;
use std::sync::Arc;

const SYSTEM: &str =
    "You plan and write research briefs from source notes. Use only the notes given; \
cite a note as [note-id]; never invent a note id. Answer with JSON matching the schema.";

/// The instructions of the tool choice (a function-calling conversation of its own).
const TOOL_SYSTEM: &str = "You choose the tool that answers one step of a research plan. Call \
exactly one of the functions, with arguments that fit its schema and come from the step; call \
none when no function fits the step.";

/// The research policy driving a chat model.
pub struct ChatResearchPolicy {
    client: PolicyClient,
    model: Arc<dyn ChatModel>,
}

impl ChatResearchPolicy {
    /// A policy asking `model`.
    pub fn new(model: Arc<dyn ChatModel>) -> Self {
        Self {
            client: PolicyClient::new(model.clone(), SYSTEM),
            model,
        }
    }
}

/// A model error as a policy error: transient ones may be retried.
fn policy_error(e: ModelError) -> PolicyError {
    if e.is_transient() {
        PolicyError::Transient(e.to_string())
    } else {
        PolicyError::Failed(e.to_string())
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

    /// By function calling, when the model calls functions: each tool is a function
    /// (`server__tool`) with its description and input schema, and the model's call names the
    /// tool and its arguments. A model that calls none says no tool fits (the step fails and is
    /// reported); a model that does not call functions leaves the choice to the offline match.
    async fn choose_tool(
        &self,
        req: &ToolChoiceRequest,
    ) -> Result<Option<PolicyReply<Choice>>, PolicyError> {
        if !self.model.calls_functions() || req.tools.is_empty() {
            return Ok(None);
        }
        let functions: Vec<FunctionSpec> = req
            .tools
            .iter()
            .map(|t| FunctionSpec {
                name: function_name(&format!("{}__{}", t.server, t.name)),
                description: t.description.clone(),
                parameters: t.input_schema.clone(),
            })
            .collect();
        let p = &req.step.params;
        let step = json!({"goal": req.goal, "step": {"id": req.step.id,
            "description": req.step.description, "aspect": p.aspect, "query": p.query}});
        let request = FunctionRequest {
            call: "choose_tool".into(),
            messages: vec![
                FunctionMessage::System(TOOL_SYSTEM.into()),
                FunctionMessage::User(step.to_string()),
            ],
            functions,
        };
        let reply = self
            .model
            .chat_with_functions(&request)
            .await
            .map_err(policy_error)?;
        let Some(call) = reply.calls.first() else {
            return Err(PolicyError::Failed(format!(
                "the model called no tool for step `{}`{}",
                req.step.id,
                reply
                    .content
                    .as_deref()
                    .map(|c| format!(": {c}"))
                    .unwrap_or_default()
            )));
        };
        let Some(i) = request.functions.iter().position(|f| f.name == call.name) else {
            return Err(PolicyError::Failed(format!(
                "the model called `{}`, which is not one of the tools",
                call.name
            )));
        };
        let arguments = match serde_json::from_str::<serde_json::Value>(&call.arguments) {
            Ok(serde_json::Value::Object(m)) => m,
            _ => {
                return Err(PolicyError::Failed(format!(
                    "the model's arguments for `{}` are not a JSON object: {}",
                    call.name, call.arguments
                )))
            }
        };
        let tool = &req.tools[i];
        Ok(Some(PolicyReply {
            value: Choice {
                server: tool.server.clone(),
                tool: tool.name.clone(),
                arguments,
                score: 0.0,
            },
            usage: Some(super::TokenUsage {
                prompt_tokens: reply.usage.prompt_tokens,
                completion_tokens: reply.usage.completion_tokens,
            }),
        }))
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
