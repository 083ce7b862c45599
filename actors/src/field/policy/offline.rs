//! The deterministic offline model: the default, so the planner runs with no network.
//!
//! Its decisions are deliberately simple, like a first-draft model's: take the first missing
//! field in schema order, derived or not, and search for it (ask for `user` fields, or once its
//! searches are used up). The policy stage turns those into workable decisions (decompose, redirect
//! a derived field to its inputs, vary a repeated query, respect the caps), and the decision log
//! shows each rewrite. Decomposition and extraction are heuristics over the corpus
//! (`offline_decompose` and `offline_extract` in the policy module).

use super::{
    DecideRequest, DecomposeRequest, ExtractAnswer, ExtractRequest, FieldPolicy, PolicyError,
    PolicyReply, ReflectRequest, Reflection,
};
use crate::field::schema::{Decomposition, Source};
use crate::field::state::{Action, PlannerDecision};

/// The offline model.
#[derive(Clone, Copy, Debug, Default)]
pub struct OfflineFieldPolicy;

/// The offline decision.
pub fn decide(req: &DecideRequest) -> PlannerDecision {
    let Some(name) = req.missing.first() else {
        return PlannerDecision::new(Action::Calculate, None, "every field has a value");
    };
    let field = req.schema.field(name);
    let searches = req.attempts.get(name).map_or(0, |a| a.searches);
    let what = field
        .and_then(|f| f.description.clone())
        .unwrap_or_else(|| name.replace('_', " "));
    let query = match &req.region {
        Some(r) => format!("{what} {r}"),
        None => what.clone(),
    };
    match field.map(|f| f.source) {
        Some(Source::User) => PlannerDecision::new(
            Action::AskUser,
            Some(name),
            format!("`{name}` is the person's to give"),
        )
        .question(format!("What is the {what}?")),
        _ if searches < req.caps.searches_per_field => PlannerDecision::new(
            Action::Search,
            Some(name),
            format!("`{name}` is the first missing field"),
        )
        .query(query),
        _ => PlannerDecision::new(
            Action::AskUser,
            Some(name),
            format!("searching did not find `{name}`"),
        )
        .question(format!("What is the {what}?")),
    }
}

/// The offline reflection.
pub fn reflect(req: &ReflectRequest) -> Reflection {
    let stalled: Vec<String> = req
        .missing
        .iter()
        .map(|m| {
            let a = req.attempts.get(m).copied().unwrap_or_default();
            format!("{m} ({} searches, {} questions)", a.searches, a.asks)
        })
        .collect();
    Reflection {
        note: if stalled.is_empty() {
            "nothing is missing".to_string()
        } else {
            format!("still missing: {}", stalled.join(", "))
        },
    }
}

#[async_trait::async_trait]
impl FieldPolicy for OfflineFieldPolicy {
    fn name(&self) -> &str {
        "offline"
    }

    async fn decide(
        &self,
        req: &DecideRequest,
    ) -> Result<PolicyReply<PlannerDecision>, PolicyError> {
        Ok(PolicyReply::offline(decide(req)))
    }

    async fn decompose(
        &self,
        req: &DecomposeRequest,
    ) -> Result<PolicyReply<Decomposition>, PolicyError> {
        super::offline_decompose::decompose(req)
            .map(PolicyReply::offline)
            .map_err(PolicyError::Failed)
    }

    async fn extract(
        &self,
        req: &ExtractRequest,
    ) -> Result<PolicyReply<ExtractAnswer>, PolicyError> {
        Ok(PolicyReply::offline(super::offline_extract::extract(req)))
    }

    async fn reflect(&self, req: &ReflectRequest) -> Result<PolicyReply<Reflection>, PolicyError> {
        Ok(PolicyReply::offline(reflect(req)))
    }
}
