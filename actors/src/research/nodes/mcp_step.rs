//! The `mcp` step: a call to a tool server's tool, whose result becomes evidence of its own.
//!
//! The tool is the one the plan names (`params.tool`, on `params.server` or the first server that
//! has it, with `params.arguments`), or, when the plan names none, the one the policy chooses (a
//! chat model by function calling: `ResearchPolicy::choose_tool`), else the one whose description
//! best fits the step's aspect and query (`crate::tools::mcp::choose`, offline and deterministic). The call
//! has the graph's timeout and retries and stops with the run (`McpTools::call`).
//!
//! The result is kept whole with its provenance (`ToolCall`: server, tool, arguments, content)
//! and cited as `[server:tool:step]`; the step's findings are its sentences that speak to the
//! step's aspect and query, quoted, as a search step's are quoted from notes. Anything that goes
//! wrong (no server, no fitting tool, a timeout, the tool's error, garbage) is the step's error:
//! the planner handles it like any failed step (a replan, or a reported gap).

use crate::research::policy::{ResearchPolicy, TokenUsage, ToolChoiceRequest};
use crate::research::state::{Finding, PlanStep, ToolCall};
use crate::research::text;
use crate::research::tools::ToolOutcome;
use crate::tools::mcp::{arguments_for, choose, citation_id, McpError, McpTools, ToolInfo};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

/// Sentences a step quotes from a tool's result, at most.
pub const MAX_FINDINGS: usize = 3;
/// A sentence longer than this (bytes) is not quoted (a line of data, not a sentence).
const MAX_SENTENCE: usize = 600;

/// The words a step's question is made of: its aspect and query, else its description.
fn question(step: &PlanStep) -> String {
    let p = &step.params;
    let parts: Vec<&str> = [p.aspect.as_deref(), p.query.as_deref()]
        .into_iter()
        .flatten()
        .collect();
    if parts.is_empty() {
        step.description.clone()
    } else {
        parts.join(" ")
    }
}

/// The sentences of `content` a step quotes: those naming most of the question's terms (ties in
/// order), at most [`MAX_FINDINGS`]; when none names any, the first one.
pub fn quoted_sentences<'a>(content: &'a str, question: &str) -> Vec<&'a str> {
    let terms = text::content_terms(question);
    let candidates: Vec<&str> = content
        .lines()
        .map(|l| l.trim().trim_start_matches(['#', '-', '*', '>']).trim())
        .flat_map(text::sentences)
        .filter(|s| s.len() <= MAX_SENTENCE && text::word_count(s) >= 3)
        .collect();
    let mut scored: Vec<(usize, usize, &str)> = candidates
        .iter()
        .enumerate()
        .map(|(i, s)| {
            let n = terms.iter().filter(|t| text::has_word_prefix(s, t)).count();
            (n, i, *s)
        })
        .filter(|(n, ..)| *n > 0)
        .collect();
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let mut out: Vec<&str> = Vec::new();
    for (_, _, s) in scored {
        if !out.contains(&s) {
            out.push(s);
        }
        if out.len() == MAX_FINDINGS {
            break;
        }
    }
    if out.is_empty() {
        out.extend(candidates.first());
    }
    out
}

/// What an `mcp` step did: its outcome (its one source is the call's citation id), the call's
/// provenance, and the tokens a model spent choosing the tool.
#[derive(Debug, Default)]
pub struct McpStep {
    /// The outcome; failed, naming what went wrong, when the call did not give evidence.
    pub outcome: ToolOutcome,
    /// The call, when it returned a usable result.
    pub call: Option<ToolCall>,
    /// Tokens of the policy's tool choice (a chat model's function call).
    pub usage: Option<TokenUsage>,
}

/// Runs an `mcp` step on `tools` until `cancel` resolves. A step that names no tool has
/// `policy` choose one (a chat model by function calling), else the offline match of the step's
/// aspect and query against the tools' descriptions.
pub async fn run(
    tools: Option<&McpTools>,
    policy: &dyn ResearchPolicy,
    goal: &str,
    step: &PlanStep,
    cancel: Pin<&mut (dyn Future<Output = ()> + Send)>,
) -> McpStep {
    let mut usage = None;
    match call(tools, policy, goal, step, cancel, &mut usage).await {
        Ok((outcome, call)) => McpStep {
            outcome,
            call: Some(call),
            usage,
        },
        Err(e) => McpStep {
            outcome: ToolOutcome::failed(e),
            call: None,
            usage,
        },
    }
}

async fn call(
    tools: Option<&McpTools>,
    policy: &dyn ResearchPolicy,
    goal: &str,
    step: &PlanStep,
    cancel: Pin<&mut (dyn Future<Output = ()> + Send)>,
    usage: &mut Option<TokenUsage>,
) -> Result<(ToolOutcome, ToolCall), String> {
    let Some(tools) = tools else {
        return Err(
            "no tool server is connected (give them with --tools mcp+stdio:COMMAND or \
                    --tools mcp+http://HOST:PORT/PATH)"
                .into(),
        );
    };
    let p = &step.params;
    let question = question(step);
    let query = p.query.clone().unwrap_or_else(|| question.clone());
    let (server, tool, arguments, chosen) = match &p.tool {
        Some(name) => {
            let info = tools
                .find(p.server.as_deref(), name)
                .map_err(|e| e.to_string())?;
            let arguments = match &p.arguments {
                Some(a) => a.clone(),
                None => arguments_for(&info.input_schema, &query).ok_or_else(|| {
                    format!(
                        "{}/{} needs arguments a query cannot fill; give them in params.arguments",
                        info.server, info.name
                    )
                })?,
            };
            (info.server.clone(), info.name.clone(), arguments, None)
        }
        None => {
            let candidates: Arc<[ToolInfo]> = tools
                .tools()
                .iter()
                .filter(|t| p.server.as_deref().is_none_or(|s| t.server == s))
                // A tool that writes runs only when a plan names it (and a person approved it).
                .filter(|t| t.read_only != Some(false))
                .cloned()
                .collect();
            let asked = policy
                .choose_tool(&ToolChoiceRequest {
                    goal: goal.to_string(),
                    step: step.clone(),
                    tools: candidates.clone(),
                })
                .await
                .map_err(|e| format!("choosing a tool: {e}"))?;
            match asked {
                Some(reply) => {
                    *usage = reply.usage;
                    let c = reply.value;
                    (c.server, c.tool, c.arguments, Some("model"))
                }
                None => {
                    let c = choose(&candidates, &question, &query)
                        .ok_or_else(|| McpError::NoFittingTool(question.clone()).to_string())?;
                    (c.server, c.tool, c.arguments, Some("description"))
                }
            }
        }
    };
    let content = tools
        .call(&server, &tool, arguments.clone(), cancel)
        .await
        .map_err(|e| e.to_string())?;
    let id = citation_id(&server, &tool, &step.id);
    let call = ToolCall {
        id: id.clone(),
        server: server.clone(),
        tool: tool.clone(),
        arguments: serde_json::Value::Object(arguments),
        content: content.text.as_str().into(),
        chosen_by: chosen.map(str::to_string),
        attempts: content.attempts,
    };
    let findings: Vec<Finding> = quoted_sentences(&call.content, &question)
        .into_iter()
        .map(|s| Finding {
            note_id: id.clone(),
            topic: p.aspect.clone(),
            sentence: Arc::from(s),
            figures: Vec::new(),
        })
        .collect();
    let mut outcome = ToolOutcome {
        output: format!(
            "{server}/{tool}: {} character(s), {} sentence(s) quoted{}",
            call.content.chars().count(),
            findings.len(),
            match chosen {
                Some("model") => " (chosen by the model)",
                Some(_) => " (chosen by its description)",
                None => "",
            }
        ),
        findings,
        ..ToolOutcome::default()
    };
    outcome.push_source(&id);
    Ok((outcome, call))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quotes_the_sentences_on_the_question_best_first() {
        let content = "# Pricing\nThe weather was fine. Support costs fell by 30 percent.\n\
                       - Cost per ticket is 2 EUR for support teams.\nUnrelated line here.";
        let q = quoted_sentences(content, "cost support");
        assert_eq!(
            q,
            [
                "Support costs fell by 30 percent.",
                "Cost per ticket is 2 EUR for support teams."
            ]
        );
        assert_eq!(
            quoted_sentences("Nothing about it here.", "cost"),
            ["Nothing about it here."]
        );
    }

    #[test]
    fn citation_ids_hold_only_citable_characters() {
        assert_eq!(
            citation_id("server-everything", "get.sum", "step_3"),
            "server-everything:get-sum:step_3"
        );
    }
}
