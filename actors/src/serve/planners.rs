//! The two planners as assistants: `research` (the research-brief planner) and `acquire` (the
//! field-acquisition planner), each a [`GraphAssistant`] whose [`GraphIo`] speaks the planner's
//! own JSON (the keys of `research --json` and `acquire --json`). `serve` registers both; an
//! embedder registers its own graphs the same way (examples/serve_my_graph.rs).

use super::acquire;
use super::assistant::{GraphAssistant, GraphIo};
use super::assistants::AssistantRef;
use super::ServeError;
use crate::field::{self, FieldPolicy, FieldState, FieldUpdate};
use crate::kit;
use crate::research::policy::ResearchPolicy;
use crate::research::{self, output_json, parse_review, GraphOptions, ResearchInput};
use crate::research::{ResearchState, ResearchUpdate};
use planwright::checkpoint::Checkpointer;
use planwright::store::Store;
use planwright::{Engine, RunOutcome, RunStatus, ThreadId};
use serde_json::{json, Value};
use std::sync::Arc;

/// The research planner's JSON: input `{"input", "constraints", "source_notes"}` ([`ResearchInput`]), a review decision as
/// resume value, values with the `research --json` keys.
pub struct ResearchIo;

impl GraphIo<ResearchState> for ResearchIo {
    fn input(&self, _thread: &ThreadId, input: Value) -> Result<ResearchUpdate, String> {
        let input: ResearchInput =
            serde_json::from_value(input).map_err(|e| format!("malformed research input: {e}"))?;
        research::initial_update(input).map_err(|e| e.to_string())
    }

    fn resume(&self, value: Value) -> Result<Value, String> {
        parse_review(&value).map_err(|e| e.to_string())?;
        Ok(value)
    }

    fn values(&self, _thread: &ThreadId, s: &ResearchState, _pending: Option<&Value>) -> Value {
        output_json(s, &s.status)
    }

    fn run_values(&self, out: &RunOutcome<ResearchState>) -> Value {
        let status = if out.status == RunStatus::Interrupted {
            "interrupted"
        } else {
            out.state.status.as_str()
        };
        output_json(&out.state, status)
    }

    fn failed(&self, s: &ResearchState) -> bool {
        s.status == "failed"
    }

    fn schemas(&self) -> Value {
        let input = json!({
            "type": "object", "required": ["input"], "additionalProperties": false,
            "properties": {
                "input": {"type": "string", "description": "the research goal"},
                "constraints": {"type": "object", "description": "docs/research-planner.md"},
                "source_notes": {"type": ["array", "null"], "items": {"type": "object"}},
            },
        });
        let keys = [
            "status",
            "goal",
            "final_report",
            "plan",
            "step_results",
            "evidence",
            "knowledge_gaps",
            "execution_history",
            "replan_count",
            "plan_errors",
            "blocked_reason",
            "errors",
            "usage",
        ];
        let props: serde_json::Map<String, Value> =
            keys.iter().map(|k| (k.to_string(), json!({}))).collect();
        let output = json!({"type": "object", "properties": props});
        json!({
            "input_schema": input, "output_schema": output, "state_schema": output,
            "config_schema": {"type": "object", "properties": {}},
            "context_schema": {"type": "object", "properties": {}},
        })
    }
}

/// The field planner's JSON: input `{"schema", "corpus", "goal", "rates"}`, text answers as
/// resume values, values with the `acquire --json` keys; a finished thread keeps its result.
pub struct AcquireIo;

impl GraphIo<FieldState> for AcquireIo {
    fn input(&self, thread: &ThreadId, input: Value) -> Result<FieldUpdate, String> {
        acquire::initial(thread, input).map_err(|e| e.to_string())
    }

    fn resume(&self, value: Value) -> Result<Value, String> {
        acquire::answer(&value).map_err(|e| e.to_string())
    }

    fn values(&self, thread: &ThreadId, s: &FieldState, pending: Option<&Value>) -> Value {
        acquire::thread_values(s, pending, thread)
    }

    fn run_values(&self, out: &RunOutcome<FieldState>) -> Value {
        acquire::values(out)
    }

    fn failed(&self, s: &FieldState) -> bool {
        acquire::failed(s)
    }

    fn takes_input_when_finished(&self) -> bool {
        false
    }

    fn schemas(&self) -> Value {
        let input = json!({
            "type": "object", "required": ["schema"],
            "properties": {
                "schema": {"type": "object", "description": "the fields to acquire (docs/field-schema.md)"},
                "corpus": {"type": ["array", "null"], "items": {"type": "object", "required": ["id", "title", "text"]}},
                "goal": {"type": "string"},
                "rates": {"type": "object", "additionalProperties": {"type": "number"}},
            },
        });
        json!({
            "input_schema": input, "output_schema": {"type": "object"},
            "state_schema": {"type": "object"},
            "config_schema": {"type": "object", "properties": {}},
            "context_schema": {"type": "object", "properties": {}},
        })
    }
}

/// Both planners on `model`, over the server's storage.
pub async fn assistants(
    model: &str,
    checkpointer: &Arc<dyn Checkpointer>,
    store: &Arc<dyn Store>,
) -> Result<Vec<AssistantRef>, ServeError> {
    let usage = |e: crate::model::ModelError| ServeError::Usage(e.to_string());
    let policy = kit::policy_for::<dyn ResearchPolicy>(model).map_err(usage)?;
    let graph = research::graph(policy, GraphOptions::default())
        .map_err(|e| ServeError::Usage(format!("research graph: {e}")))?;
    let research = Engine::builder(graph)
        .checkpointer(checkpointer.clone())
        .store(store.clone())
        .build()
        .await;
    let field_policy = kit::policy_for::<dyn FieldPolicy>(model).map_err(usage)?;
    let field_graph = field::graph(field_policy, &field::GraphOptions::default())
        .map_err(|e| ServeError::Usage(format!("acquire graph: {e}")))?;
    let acquire = Engine::builder(field_graph)
        .checkpointer(checkpointer.clone())
        .migration(field::runner::migration)
        .store(store.clone())
        .build()
        .await;
    Ok(vec![
        Arc::new(GraphAssistant::with_io("research", research, ResearchIo).describe(
            "research-brief planner: plan → validate → execute → assess → replan → synthesize",
        )),
        Arc::new(GraphAssistant::with_io("acquire", acquire, AcquireIo).describe(
            "field-acquisition planner: tick → prepare → calc_gate → acquire → decide → enforce_policy → actions",
        )),
    ])
}
