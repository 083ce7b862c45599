//! The planner's stages, one file per graph node, and what they share.
//!
//! Every stage is `async fn(&Env, &FieldState, &NodeContext) -> Result<FieldUpdate, NodeError>`:
//! the same functions are the nodes of the staged graph and, called in sequence, the single `plan`
//! node of the old topology (see `graph`). Rules are plain functions of the state, so
//! each can be tested on a small state without running anything. A stage makes at most one model
//! call, through [`Env::call`], whose answer is memoised in the task: a retry or a crash after the
//! call does not repeat it.

pub mod acquire;
pub mod actions;
pub mod calc_gate;
pub mod decide;
pub mod enforce;
pub mod prepare;
pub mod tick;
pub mod user;

use super::policy::{FieldPolicy, PolicyError, PolicyReply};
use super::state::{FieldState, FieldUpdate, LogEntry, Origin, PlannerDecision};
use planwright::{NodeContext, NodeError, RetryPolicy};
use std::future::Future;
use std::sync::Arc;

/// What the stages share: the model and the retry policy of its calls.
pub struct Env {
    /// The model.
    pub policy: Arc<dyn FieldPolicy>,
    /// Retries of one model call on transient errors (timeouts, rate limits, 5xx), with backoff.
    pub model_retry: RetryPolicy,
    /// Tool servers a search also asks (none by default; `acquire --tools`).
    pub mcp: Option<Arc<crate::tools::mcp::McpTools>>,
}

impl Env {
    /// Runs a model call once per task under memo `key`. Transient errors are retried here, per
    /// call, with the retry policy's backoff: every call gets the same budget whichever node it
    /// sits in, so the staged graph and the single `plan` node behave alike. The final answer or
    /// error is saved and returned again on a later attempt of the task, never asked twice; each
    /// model call is journaled as an effect of the task (`crate::model::journaled`), so a crash
    /// before the task's commit does not ask again either. Token usage goes into the run's events as a custom `model_usage` event.
    pub async fn call<T, F, Fut>(
        &self,
        ctx: &NodeContext,
        key: &str,
        mut work: F,
    ) -> Result<Result<T, String>, NodeError>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnMut() -> Fut,
        Fut: Future<Output = Result<PolicyReply<T>, PolicyError>>,
    {
        let retry = &self.model_retry;
        let call = ctx.memo(key, || async move {
            let mut attempt = 1;
            loop {
                match work().await {
                    Ok(reply) => {
                        if let Some(u) = reply.usage {
                            ctx.emit(serde_json::json!({"model_usage": {
                                "call": key,
                                "prompt_tokens": u.prompt_tokens,
                                "completion_tokens": u.completion_tokens,
                            }}));
                        }
                        return Ok(Ok(reply.value));
                    }
                    Err(PolicyError::Transient(_)) if attempt < retry.max_attempts => {
                        tokio::time::sleep(retry.backoff(attempt, rand::random::<f64>())).await;
                        attempt += 1;
                    }
                    Err(e) => return Ok(Err(format!("{e} (attempt {attempt})"))),
                }
            }
        });
        crate::model::journaled(ctx, call).await
    }
}

/// The result of a stage.
pub type StageResult = Result<FieldUpdate, NodeError>;

/// `s` with `update` applied: stages that make several changes in turn see their own writes.
pub fn applied(s: &FieldState, update: &FieldUpdate) -> Result<FieldState, NodeError> {
    let mut next = s.clone();
    planwright::reducer::apply_one(&mut next, update.clone())
        .map_err(|e| NodeError::Fatal(e.to_string()))?;
    Ok(next)
}

/// The update that makes `decision` final: sets it with its origin and logs it.
pub fn decided(
    s: &FieldState,
    decision: PlannerDecision,
    origin: Origin,
    rewritten_by: Vec<String>,
) -> FieldUpdate {
    let entry = LogEntry {
        iteration: s.iterations,
        action: decision.action,
        target: decision.target.clone(),
        origin,
        rewritten_by: rewritten_by.clone(),
        reasoning: decision.reasoning.clone(),
    };
    FieldUpdate::default()
        .decision(Some(decision))
        .decision_origin(Some(origin))
        .rewritten_by(rewritten_by)
        .decisions(vec![entry])
}
