//! The zstd dictionary the research planner's checkpoints are compressed against, and the
//! sampling that trains and checks it.
//!
//! A research conversation stores eleven checkpoints of a few hundred bytes each: the same keys,
//! event names, statuses and phrases ("note(s) on", "criteria met", "approved by the reviewer")
//! in every conversation. Compressed one by one, such records barely shrink (most stay plain
//! JSON); against a dictionary of those common parts they take a third of their JSON or less.
//!
//! The dictionary (`fixtures/research/checkpoints.zdict`, 16 KiB) is trained by
//! `cargo run --release -p planwright-actors --example research_dictionary` from the checkpoints
//! of the evaluation set's goals on its own corpora (vector search, four-day week, cold chain),
//! never on the bundled corpus that `load` and the README use, so the saving measured there is
//! one a new corpus would see. `tests/research_dictionary.rs` checks it on the bundled goals.
//! A retrained dictionary gets a new id; the graph must then name the old one with
//! `StateGraph::retired_dictionary` for as long as stored threads use it.

use super::input::{initial_update, ResearchInput};
use super::state::ResearchState;
use super::GraphOptions;
use crate::kit;
use planwright::checkpoint::body_codec;
use planwright::checkpoint::{Checkpointer, MemoryCheckpointer};
use planwright::{Engine, Resume, RunOptions, RunStatus, ThreadId};
use std::sync::Arc;

/// The dictionary's bytes (zstd format, with its id).
pub const DICTIONARY: &[u8] = include_bytes!("../../../fixtures/research/checkpoints.zdict");

/// Why sampling failed.
#[derive(Debug, thiserror::Error)]
pub enum SampleError {
    /// A goal's input was refused.
    #[error("goal {0}: {1}")]
    Input(String, super::input::InputError),
    /// The model spec is not one the planner knows.
    #[error("model `{0}`: {1}")]
    Model(String, crate::model::ModelError),
    /// The graph did not compile.
    #[error(transparent)]
    Graph(#[from] planwright::GraphError),
    /// A run failed.
    #[error("goal {0}: {1}")]
    Run(String, planwright::RunError),
    /// A stored record could not be read back.
    #[error("stored record: {0}")]
    Stored(String),
}

/// Runs every goal under every model (`offline`, `sim:…`) on an in-memory checkpointer, approving
/// any plan that waits for approval, and returns the JSON of everything stored: each checkpoint's
/// body and next tasks, and each task write.
pub async fn sample_records(
    goals: &[ResearchInput],
    models: &[&str],
) -> Result<Vec<Vec<u8>>, SampleError> {
    let mut samples = Vec::new();
    for (m, model) in models.iter().enumerate() {
        let policy = kit::policy_for::<dyn super::policy::ResearchPolicy>(model)
            .map_err(|e| SampleError::Model(model.to_string(), e))?;
        let graph = super::graph(policy, GraphOptions::default())?;
        let cp: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new());
        let engine = Engine::<ResearchState>::builder(graph)
            .checkpointer(cp.clone())
            .build()
            .await;
        for (g, goal) in goals.iter().enumerate() {
            let thread = ThreadId::new(format!("sample-{m}-{g}"));
            let update = initial_update(goal.clone())
                .map_err(|e| SampleError::Input(goal.input.clone(), e))?;
            let failed = |e| SampleError::Run(goal.input.clone(), e);
            let mut out = engine
                .run(thread.clone(), update, RunOptions::default())
                .await
                .map_err(failed)?;
            while out.status == RunStatus::Interrupted {
                let approve = Resume::Value(serde_json::json!({"action": "approve"}));
                out = engine
                    .resume(thread.clone(), approve, RunOptions::default())
                    .await
                    .map_err(failed)?;
            }
            samples.extend(stored_json(&*cp, &thread).await?);
        }
        engine.shutdown().await;
    }
    Ok(samples)
}

/// The JSON of every body, next-tasks list and task write stored for `thread`.
async fn stored_json(
    cp: &dyn Checkpointer,
    thread: &ThreadId,
) -> Result<Vec<Vec<u8>>, SampleError> {
    let stored = |e: String| SampleError::Stored(format!("{thread}: {e}"));
    let mut out = Vec::new();
    for (id, _, _) in cp
        .list(thread, None, usize::MAX)
        .await
        .map_err(|e| stored(e.to_string()))?
    {
        let rec = cp
            .get(thread, id)
            .await
            .map_err(|e| stored(e.to_string()))?;
        for bytes in [&rec.body, &rec.next_tasks] {
            out.push(body_codec::decode(bytes).map_err(stored)?.into_owned());
        }
        for w in cp
            .get_writes(thread, id)
            .await
            .map_err(|e| stored(e.to_string()))?
        {
            out.push(body_codec::decode(&w.payload).map_err(stored)?.into_owned());
        }
    }
    Ok(out)
}
