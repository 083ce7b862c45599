//! The user-facing result: evidence, `final_output`, and the JSON object `research --json` prints
//! (also what the HTTP server returns).

use super::notes::Note;
use super::state::{Evidence, ResearchState, StepStatus, ToolCall};
use serde_json::{json, Value};
use std::sync::Arc;

/// The notes the complete steps used, in plan order, each with its title and the sentence the
/// step took from it, then the tool servers' results they used, each with its provenance. Every
/// `source_id` names a note in `source_notes` or a complete step's tool call.
pub fn evidence(s: &ResearchState) -> Vec<Evidence> {
    let notes = used_notes(s)
        .into_iter()
        .map(|(id, note, sentence)| Evidence {
            source_id: id.to_string(),
            summary: if sentence.is_empty() {
                note.title.to_string()
            } else {
                format!("{}: {}", note.title, sentence)
            },
            tool_call: None,
        });
    let calls = used_tool_calls(s)
        .into_iter()
        .map(|(call, sentence)| Evidence {
            source_id: call.id.clone(),
            summary: if sentence.is_empty() {
                format!("{}/{}", call.server, call.tool)
            } else {
                format!("{}/{}: {}", call.server, call.tool, sentence)
            },
            tool_call: Some(call.clone()),
        });
    notes.chain(calls).collect()
}

/// The tool calls of the complete steps, in plan order, each with the first sentence the step
/// quoted from it (empty: none).
pub(crate) fn used_tool_calls(s: &ResearchState) -> Vec<(&Arc<ToolCall>, &str)> {
    s.active_steps()
        .filter(|st| st.status == StepStatus::Complete)
        .filter_map(|st| s.step_results.get(&st.id))
        .filter_map(|r| {
            let call = r.tool_call.as_ref()?;
            let sentence = r.findings.first().map(|f| &*f.sentence).unwrap_or_default();
            Some((call, sentence))
        })
        .collect()
}

/// The notes behind [`evidence`] — id, note, the sentence the step took from it (empty: none) —
/// without the summaries, which `final_output` and the brief's citable list do not need.
pub(crate) fn used_notes(s: &ResearchState) -> Vec<(&str, &Note, &str)> {
    let mut out: Vec<(&str, &Note, &str)> = Vec::new();
    for step in s
        .active_steps()
        .filter(|st| st.status == StepStatus::Complete)
    {
        let Some(r) = s.step_results.get(&step.id) else {
            continue;
        };
        for id in &r.sources {
            if out.iter().any(|(seen, ..)| *seen == id.as_str()) {
                continue;
            }
            let Some(note) = s.source_notes.get(id) else {
                continue;
            };
            let sentence = r
                .findings
                .iter()
                .find(|f| &f.note_id == id)
                .map(|f| &*f.sentence)
                .unwrap_or_default();
            out.push((id, note, sentence));
        }
    }
    out
}

/// What a finishing node is about to write over the state it read (gaps, blocked reason,
/// errors), for [`final_output`].
pub struct Ending<'a> {
    /// The gaps the output reports.
    pub knowledge_gaps: &'a [String],
    /// Why the run stopped, if it did.
    pub blocked_reason: Option<&'a str>,
    /// The errors so far.
    pub errors: &'a [String],
}

/// The seed's `final_output`: status, the notes relied on, gaps, and why the run stopped. The
/// brief itself is the state's `final_report`, the plan its `plan`, and each note's evidence
/// sentence is in `step_results` (`output_json` joins them): not copied here, so a conversation's
/// last checkpoint does not hold them twice. `report_words` says how long the brief is. The gaps,
/// blocked reason and errors come from `ending`: what the finishing node writes, not a copy of
/// the whole state made to hold them.
pub fn final_output(s: &ResearchState, status: &str, report: &str, ending: Ending) -> Value {
    let mut sources: Vec<&str> = used_notes(s).into_iter().map(|(id, ..)| id).collect();
    sources.extend(used_tool_calls(s).into_iter().map(|(c, _)| c.id.as_str()));
    json!({
        "status": status,
        "report_words": super::text::word_count(report),
        "sources": sources,
        "knowledge_gaps": ending.knowledge_gaps,
        "blocked_reason": ending.blocked_reason,
        "errors": ending.errors,
    })
}

/// Tokens per model call and for the whole conversation.
pub fn usage(s: &ResearchState) -> Value {
    let prompt: u64 = s.model_usage.iter().map(|u| u.prompt_tokens).sum();
    let completion: u64 = s.model_usage.iter().map(|u| u.completion_tokens).sum();
    json!({
        "calls": s.model_usage,
        "prompt_tokens": prompt,
        "completion_tokens": completion,
        "total_tokens": prompt + completion,
    })
}

/// The full result object with the keys of `research --json`: `status`, `final_report`, `plan`,
/// `step_results`, `evidence`, `knowledge_gaps`, `execution_history`, `replan_count`,
/// `plan_errors`, `blocked_reason` (plus `goal`, `errors` and `usage`: tokens per model call and in
/// all). `status` is given by the caller:
/// the state's own status for a finished run, `interrupted` for a paused one.
pub fn output_json(s: &ResearchState, status: &str) -> Value {
    json!({
        "status": status,
        "goal": s.goal,
        "final_report": s.final_report,
        "plan": s.plan,
        "step_results": s.step_results,
        "evidence": evidence(s),
        "knowledge_gaps": s.knowledge_gaps,
        "execution_history": s.execution_history,
        "replan_count": s.replan_count,
        "plan_errors": s.plan_errors,
        "blocked_reason": s.blocked_reason,
        "errors": s.errors,
        "usage": usage(s),
    })
}
