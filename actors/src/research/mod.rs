//! The research-brief planner (seed "Chapter 6: Planning"): plan → validate → (repair) → review →
//! select → execute ready steps in parallel → assess → (replan) → synthesize, or stop for review.
//!
//! The planner runs against source notes only, with deterministic local tools; the judgement calls
//! (plan, repair, replan, write) go through a [`ResearchPolicy`]: the deterministic
//! [`OfflineResearchPolicy`] by default. See `docs/research-planner.md`.
//!
//! For embedders (the HTTP server, the load tester): [`graph()`], [`initial_state`] /
//! [`initial_update`], [`output_json`].

pub mod acceptance;
pub mod budget;
pub mod citations;
pub mod cli;
pub mod clock;
pub mod constraints;
pub mod corpus;
pub mod dictionary;
pub mod eval;
pub mod figures;
pub mod graph;
pub mod input;
pub mod lexicon;
pub mod nodes;
pub mod note_set;
pub mod notes;
pub mod output;
pub mod plan;
pub mod policy;
pub mod progress;
pub mod render;
pub mod routes;
pub mod runner;
pub mod state;
pub mod text;
pub mod tools;
pub mod validate;

pub use clock::{Clock, SystemClock, TokioClock};
pub use constraints::Constraints;
pub use graph::GraphOptions;
pub use input::{initial_state, initial_update, InputError, ResearchInput};
pub use nodes::review::{parse_review, ReviewDecision, ReviewError};
pub use notes::bundled as bundled_notes;
pub use output::output_json;
pub use policy::{OfflineResearchPolicy, ResearchPolicy};
pub use state::{ResearchState, ResearchUpdate};
pub use tools::ToolLatency;

use planwright::{CompiledGraph, GraphError};
use std::sync::Arc;

/// The compiled research planner over `policy`.
pub fn graph(
    policy: Arc<dyn ResearchPolicy>,
    options: GraphOptions,
) -> Result<CompiledGraph<ResearchState>, GraphError> {
    graph::build(policy, options)
}
