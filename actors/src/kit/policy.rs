//! Model spec → policy, written once for every planner: a planner names its offline policy, the
//! policy that drives a chat model, and the simulator's offline answers ([`Policies`]); the kit
//! picks one from a [`ModelSpec`], optionally counting model calls for `load`.

use crate::model::{ChatModel, CountedModel, ModelError, ModelSpec, ModelStats, Responder};
use std::collections::HashMap;
use std::sync::Arc;

/// A planner's family of policies. Implemented for the planner's policy trait object (e.g.
/// `dyn ResearchPolicy`), so `kit::policy_for::<dyn ResearchPolicy>("offline")` reads as what it
/// returns.
pub trait Policies {
    /// The planner's policy trait object.
    type Policy: ?Sized + Send + Sync;
    /// The deterministic offline policy (no model call at all).
    fn offline() -> Arc<Self::Policy>;
    /// The policy that asks `model`.
    fn chat(model: Arc<dyn ChatModel>) -> Arc<Self::Policy>;
    /// The offline answers by call kind, for the simulator.
    fn responders() -> HashMap<String, Responder>;
}

/// The policy `spec` names. With `stats`, every model call is counted there (the offline
/// policy calls no model and counts nothing).
pub fn policy<P: Policies + ?Sized>(
    spec: &ModelSpec,
    stats: Option<Arc<ModelStats>>,
) -> Result<Arc<P::Policy>, ModelError> {
    Ok(match spec.build(P::responders())? {
        None => P::offline(),
        Some(model) => match stats {
            Some(stats) => P::chat(Arc::new(CountedModel::new(model, stats))),
            None => P::chat(model),
        },
    })
}

/// The policy a `--model` value names (`offline`, `sim:…`, `openai`); an unknown or malformed
/// value is a [`ModelError::Config`] naming it.
pub fn policy_for<P: Policies + ?Sized>(model: &str) -> Result<Arc<P::Policy>, ModelError> {
    policy::<P>(&model.parse()?, None)
}
