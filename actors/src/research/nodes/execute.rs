//! `select_next_step` and `execute_step`: pick the runnable part of the plan and run each step as
//! its own task, dependency-driven.
//!
//! `select_next_step` selects every pending step whose dependencies are complete (or skipped), or
//! are themselves selected; the router turns the selection into a `Route::Dag` whose tasks wait
//! only for their own dependencies, at most `max_parallel_steps` at once. `execute_step` checks,
//! before running anything, that each dependency did complete: a step whose dependency failed is
//! not executed out of order but reported as blocked.

use super::Env;
use crate::research::acceptance;
use crate::research::corpus::Corpus;
use crate::research::state::{HistoryEntry, ResearchState, ResearchUpdate, StepResult, StepStatus};
use crate::research::tools::{self, ToolInput};
use planwright::graph::{Dag, DagTask};
use planwright::{NodeContext, NodeError};
use serde_json::json;
use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::Arc;

/// Whether dependency `dep` is done as far as its dependents are concerned.
fn dep_done(s: &ResearchState, dep: &str) -> bool {
    match s.step(dep).map(|d| d.status) {
        Some(StepStatus::Complete | StepStatus::Skipped) => true,
        Some(StepStatus::Pending) => s.step_results.get(dep).is_some_and(|r| r.met),
        _ => false,
    }
}

/// The steps to run next, in plan order: pending steps whose every dependency is complete,
/// skipped, or selected before them.
pub fn runnable(s: &ResearchState) -> Vec<String> {
    let mut selected: Vec<String> = Vec::new();
    loop {
        let before = selected.len();
        for step in s.active_steps() {
            if step.status != StepStatus::Pending || selected.contains(&step.id) {
                continue;
            }
            let ready = step.depends_on.iter().all(|d| {
                selected.contains(d)
                    || matches!(
                        s.step(d).map(|x| x.status),
                        Some(StepStatus::Complete | StepStatus::Skipped)
                    )
            });
            if ready {
                selected.push(step.id.clone());
            }
        }
        if selected.len() == before {
            break;
        }
    }
    // Plan order, so task order (and the merge of results) follows the plan.
    s.active_steps()
        .filter(|st| selected.contains(&st.id))
        .map(|st| st.id.clone())
        .collect()
}

/// The dependency-driven batch for the selected steps.
pub fn batch(s: &ResearchState) -> Dag {
    let tasks = s
        .selected_steps
        .iter()
        .filter_map(|id| s.step(id))
        .map(|step| DagTask {
            key: step.id.clone(),
            node: "execute_step".into(),
            input: json!({ "step": step.id }),
            after: step
                .depends_on
                .iter()
                .filter(|d| s.selected_steps.contains(d))
                .cloned()
                .collect(),
        })
        .collect();
    Dag {
        tasks,
        max_parallel: Some(s.constraints.max_parallel_steps.max(1) as usize),
    }
}

/// The node `select_next_step`.
pub fn select_next_step(s: &ResearchState, _: &NodeContext) -> Result<ResearchUpdate, NodeError> {
    let selected = runnable(s);
    let detail = if selected.is_empty() {
        "no step left to run".to_string()
    } else {
        format!(
            "{} (at most {} at once)",
            selected.join(", "),
            s.constraints.max_parallel_steps
        )
    };
    Ok(ResearchUpdate::default()
        .current_step_id(selected.first().cloned())
        .execution_history(vec![HistoryEntry::new("steps_selected", detail)])
        .selected_steps(selected))
}

fn step_entry(event: &'static str, id: &str, r: &StepResult, detail: Arc<str>) -> HistoryEntry {
    HistoryEntry {
        event: Cow::Borrowed(event),
        step_id: Some(id.to_string()),
        started_ms: Some(r.started_ms),
        ended_ms: Some(r.ended_ms),
        detail,
    }
}

/// The node `execute_step` (one task per step; input `{"step": id}`).
pub async fn execute_step(
    env: Arc<Env>,
    s: Arc<ResearchState>,
    ctx: NodeContext,
) -> Result<ResearchUpdate, NodeError> {
    let id = ctx
        .input()
        .and_then(|v| v.get("step"))
        .and_then(|v| v.as_str())
        .ok_or_else(|| NodeError::fatal("execute_step needs the input {\"step\": id}"))?
        .to_string();
    let step = s
        .step(&id)
        .ok_or_else(|| NodeError::fatal(format!("execute_step: no step `{id}` in the plan")))?;
    let started = env.clock.now_ms();
    let waiting: Vec<&str> = step
        .depends_on
        .iter()
        .filter(|d| !dep_done(&s, d))
        .map(String::as_str)
        .collect();
    if !waiting.is_empty() {
        let reason = format!(
            "not executed: dependencies not complete: {}",
            waiting.join(", ")
        );
        let r = StepResult {
            output: String::new(),
            met: false,
            blocked: true,
            unmet: vec![reason.clone()],
            error: Some(reason.clone()),
            started_ms: started,
            ended_ms: started,
            ..StepResult::default()
        };
        return Ok(ResearchUpdate::default()
            .execution_history(vec![step_entry("step_blocked", &id, &r, reason.into())])
            .step_results(BTreeMap::from([(id, Arc::new(r))])));
    }
    ctx.emit(json!({"step_started": id, "tool": step.tool}));
    let latency = env.step_latency
        + env
            .tool_latency
            .as_ref()
            .map_or(std::time::Duration::ZERO, |l| l.delay(&step.tool));
    if !latency.is_zero() {
        tokio::time::sleep(latency).await;
    }
    let deps: Vec<&StepResult> = step
        .depends_on
        .iter()
        .filter_map(|d| s.step_results.get(d).map(|r| &**r))
        .collect();
    let mut usage = Vec::new();
    let (out, tool_call) = if step.tool == "mcp" {
        // A tool server's call: it stops with the run.
        let cancel = std::pin::pin!(ctx.cancelled());
        let done =
            super::mcp_step::run(env.mcp.as_deref(), &*env.policy, &s.goal, step, cancel).await;
        usage = super::emit_usage(&ctx, "choose_tool", done.usage);
        (done.outcome, done.call)
    } else {
        let out = tools::run(
            step,
            &ToolInput {
                goal: &s.goal,
                corpus: s.source_notes.corpus(),
                deps,
                aspects: s
                    .active_steps()
                    .filter_map(|st| st.aspect().map(str::to_string))
                    .collect(),
            },
        );
        (out, None)
    };
    let unmet = match (&out.error, &tool_call) {
        (Some(e), _) => vec![format!("tool error: {e}")],
        // The call's result is read as a note of its own.
        (None, Some(call)) => acceptance::check(
            &step.acceptance_criteria,
            &out.sources,
            &Corpus::new(vec![call.as_note()]),
        ),
        (None, None) => acceptance::check(
            &step.acceptance_criteria,
            &out.sources,
            s.source_notes.corpus(),
        ),
    };
    let via = match &tool_call {
        Some(c) => format!("{}/{}", c.server, c.tool),
        None => step.tool.clone(),
    };
    let r = StepResult {
        met: unmet.is_empty(),
        unmet,
        output: out.output,
        sources: out.sources,
        error: out.error,
        blocked: false,
        findings: out.findings,
        started_ms: started,
        ended_ms: env.clock.now_ms(),
        tool_call: tool_call.map(Arc::new),
    };
    ctx.emit(json!({"step_finished": id, "met": r.met, "sources": r.sources}));
    let detail = format!(
        "{} via {}: {} {}(s) [{}]; {}",
        id,
        via,
        r.sources.len(),
        if r.tool_call.is_some() {
            "result"
        } else {
            "note"
        },
        r.sources.join(", "),
        if r.met {
            "criteria met".to_string()
        } else {
            format!("unmet: {}", r.unmet.join("; "))
        }
    );
    // One text for the history entry and the observation.
    let detail: Arc<str> = detail.into();
    let mut history = vec![step_entry("step_executed", &id, &r, detail.clone())];
    if let Some(e) = &r.error {
        history.push(HistoryEntry {
            event: Cow::Borrowed("tool_error"),
            step_id: Some(id.clone()),
            detail: e.as_str().into(),
            ..HistoryEntry::default()
        });
    }
    // `errors` is written only when the tool failed (an empty append changes nothing, and was
    // stored in every step's checkpoint).
    let error = r
        .error
        .as_ref()
        .map(|e| vec![format!("{id}: tool {}: {e}", step.tool)]);
    let mut update = ResearchUpdate::default()
        .observations(vec![detail])
        .execution_history(history)
        .step_results(BTreeMap::from([(id, Arc::new(r))]));
    update.errors = error;
    // Only a model's tool choice has usage (an empty append would be stored for every step).
    update.model_usage = (!usage.is_empty()).then_some(usage);
    Ok(update)
}
