//! The planner's stages, one file per graph node, and what they share.
//!
//! Every stage is `async fn(&Env, &FieldState, &NodeContext) -> Result<FieldUpdate, NodeError>`:
//! the same functions are the nodes of the staged graph and, called in sequence, the single `plan`
//! node of the old topology (see `graph`). Rules are plain functions of the state (in `rules`), so
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
use planwright::{NodeContext, NodeError};
use std::future::Future;
use std::sync::Arc;

/// What the stages share: the model and the retry budget of its calls.
pub struct Env {
    /// The model.
    pub policy: Arc<dyn FieldPolicy>,
    /// Attempts a model call gets on transient errors (the node's retry policy backs off).
    pub model_attempts: u32,
}

impl Env {
    /// Runs a model call once per task under memo `key`: a transient error is retried by the
    /// runtime while attempts remain; the final answer or error is saved and returned again on a
    /// retry or after a crash, never asked twice. Token usage goes into the run's events as a
    /// custom `model_usage` event.
    pub async fn call<T, F, Fut>(
        &self,
        ctx: &NodeContext,
        key: &str,
        work: F,
    ) -> Result<Result<T, String>, NodeError>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        F: FnOnce() -> Fut,
        Fut: Future<Output = Result<PolicyReply<T>, PolicyError>>,
    {
        let attempts = self.model_attempts;
        ctx.memo(key, || async move {
            match work().await {
                Ok(reply) => {
                    if let Some(u) = reply.usage {
                        ctx.emit(serde_json::json!({"model_usage": {
                            "call": key,
                            "prompt_tokens": u.prompt_tokens,
                            "completion_tokens": u.completion_tokens,
                        }}));
                    }
                    Ok(Ok(reply.value))
                }
                Err(PolicyError::Transient(m)) if ctx.attempt() < attempts => {
                    Err(NodeError::Retryable(m))
                }
                Err(e) => Ok(Err(e.to_string())),
            }
        })
        .await
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
