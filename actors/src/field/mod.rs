//! The field-acquisition planner (see `docs/field-planner.md`; the schema format is
//! `docs/field-schema.md`).
//!
//! A schema lists the numbers needed to size a venture; the planner fills every raw input by
//! searching a corpus, asking the person, or decomposing a hard-to-find number into components,
//! then calculates the targets, with the provenance of every number. The control flow lives in
//! the graph (`tick → prepare → calc_gate → acquire → decide → enforce_policy → action`), each
//! stage in its own node and each rule in its own function; the same stages also compose into the
//! old single `plan` node ([`graph::Topology::Plan`]).

pub mod calculator;
pub mod cli;
pub mod formula;
pub mod graph;
pub mod input;
pub mod numbers;
pub mod output;
pub mod people;
pub mod policy;
pub mod reading;
pub mod rounding;
pub mod routes;
pub mod runner;
pub mod schema;
pub mod stages;
pub mod state;
pub mod view;

pub use graph::{GraphOptions, Topology};
pub use policy::{FieldPolicy, OfflineFieldPolicy};
pub use state::{FieldState, FieldUpdate};

use planwright::{CompiledGraph, GraphError};
use std::sync::Arc;

/// The compiled planner over `policy`.
pub fn graph(
    policy: Arc<dyn FieldPolicy>,
    options: &GraphOptions,
) -> Result<CompiledGraph<FieldState>, GraphError> {
    let env = Arc::new(stages::Env {
        policy,
        model_retry: options.model_retry.clone(),
        mcp: options.mcp.clone(),
    });
    graph::build(env, options)
}
