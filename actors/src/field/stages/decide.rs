//! `decide`: the model's decision, and nothing else. A call that fails (after the model client's
//! own repair attempt and the node's retries of transient errors) sets `llm_failed` and a finish
//! decision: the run ends, and `enforce_policy`'s calculation adjustment never turns that finish
//! back into a loop.

use super::{decided, Env, StageResult};
use crate::field::policy::DecideRequest;
use crate::field::schema::Kind;
use crate::field::state::{FieldState, FieldUpdate, Origin, PlannerDecision};
use crate::field::view;
use planwright::NodeContext;

/// What the model is told.
pub fn request(s: &FieldState) -> DecideRequest {
    DecideRequest {
        goal: s.goal.clone(),
        schema: s.schema.clone(),
        missing: s
            .schema
            .fields
            .iter()
            .filter(|f| !f.core && !view::has_value(s, &f.name))
            .filter(|f| f.kind == Kind::Derived || !is_component_of_complete(s, &f.name))
            .map(|f| f.name.clone())
            .collect(),
        attempts: s.attempts.clone(),
        caps: s.caps,
        region: view::region(s),
        recent_decisions: s.decisions.iter().rev().take(5).rev().cloned().collect(),
        reflections: s.reflections.iter().rev().take(3).rev().cloned().collect(),
    }
}

fn is_component_of_complete(s: &FieldState, name: &str) -> bool {
    s.recipes
        .iter()
        .any(|(f, r)| r.components.iter().any(|c| c == name) && view::has_value(s, f))
}

/// The `decide` node.
pub async fn decide(env: &Env, s: &FieldState, ctx: &NodeContext) -> StageResult {
    let req = request(s);
    let answer = env
        .call(ctx, "decide", || async { env.policy.decide(&req).await })
        .await?;
    Ok(match answer {
        Ok(d) => FieldUpdate::default()
            .decision(Some(d))
            .decision_origin(Some(Origin::Llm)),
        Err(e) => decided(
            s,
            PlannerDecision::finish(format!("the model gave no valid decision: {e}")),
            Origin::Llm,
            Vec::new(),
        )
        .llm_failed(true),
    })
}
