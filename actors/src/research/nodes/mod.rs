//! The graph's nodes, one file per stage. Nodes read the state and return an update; the routers
//! in `routes` read what the nodes wrote and pick the next node.

pub mod assess;
pub mod execute;
pub mod finish;
pub mod mcp_step;
pub mod planning;
pub mod prepare;
pub mod review;

use super::policy::{PolicyError, TokenUsage};
use super::state::{status, HistoryEntry, ResearchUpdate};
use planwright::{NodeContext, NodeError};
use serde_json::json;

/// Emits the `model_usage` event of a model call, and returns its record for the state's
/// `model_usage` (empty for the offline policy, which calls no model).
pub(crate) fn emit_usage(
    ctx: &NodeContext,
    call: &str,
    usage: Option<TokenUsage>,
) -> Vec<super::state::CallUsage> {
    let Some(u) = usage else {
        return Vec::new();
    };
    ctx.emit(json!({"model_usage": {
        "call": call,
        "prompt_tokens": u.prompt_tokens,
        "completion_tokens": u.completion_tokens,
    }}));
    vec![super::state::CallUsage {
        call: call.to_string(),
        prompt_tokens: u.prompt_tokens,
        completion_tokens: u.completion_tokens,
    }]
}

/// Runs the policy call `call` of this task: its model calls are journaled as the task's
/// effects ([`crate::model::journaled`]: a takeover or a retry gets the replies already paid
/// for), and when the run streams, its model's answer is streamed token by token
/// (`NodeContext::stream_chunk`) as one message, `{call}-{task}-{attempt}` (a retried task's
/// tokens make a message of their own; a journaled reply is not streamed again). The offline
/// policy calls no model, so it streams nothing.
pub(crate) async fn streamed<F: std::future::Future>(
    ctx: &NodeContext,
    call: &str,
    fut: F,
) -> F::Output {
    let fut = crate::model::journaled(ctx, fut);
    if !ctx.is_streaming() {
        return fut.await;
    }
    let id = format!("{call}-{}-{}", ctx.task_id(), ctx.attempt());
    let node = ctx.clone();
    let sink = std::sync::Arc::new(move |chunk: &str| node.stream_chunk(&id, chunk));
    crate::model::stream_tokens(sink, fut).await
}

/// A policy error: transient errors are retried by the runtime while attempts remain
/// (`NodeError::Retryable`, with the node's backoff); any other, or the last, is recorded in
/// `errors` and `execution_history` and stops the run with status `failed`.
pub(crate) fn policy_failure(
    call: &str,
    e: PolicyError,
    ctx: &NodeContext,
    max_attempts: u32,
) -> Result<ResearchUpdate, NodeError> {
    if matches!(e, PolicyError::Transient(_)) && ctx.attempt() < max_attempts {
        return Err(NodeError::Retryable(e.to_string()));
    }
    let msg = format!("{call}: {e} (attempt {})", ctx.attempt());
    Ok(ResearchUpdate::default()
        .status(status::FAILED.to_string())
        .blocked_reason(Some(msg.clone()))
        .errors(vec![msg.clone()])
        .execution_history(vec![HistoryEntry::new("model_error", msg)]))
}

/// What the nodes share: the policy, the clock, and the limits set when the graph was built.
pub struct Env {
    /// Makes and revises plans, writes the brief.
    pub policy: std::sync::Arc<dyn super::policy::ResearchPolicy>,
    /// Timestamps for `execution_history`.
    pub clock: std::sync::Arc<dyn super::clock::Clock>,
    /// Simulated latency of each step's tool call (zero by default).
    pub step_latency: std::time::Duration,
    /// Simulated latency of tool calls by tool (none by default).
    pub tool_latency: Option<std::sync::Arc<dyn crate::research::tools::ToolLatency>>,
    /// Attempts a model-calling node makes on transient errors.
    pub model_attempts: u32,
    /// The tool servers `mcp` steps call (none by default).
    pub mcp: Option<std::sync::Arc<crate::tools::mcp::McpTools>>,
}
