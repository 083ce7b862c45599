//! The runtime: runs compiled graphs, many conversations at once.
//!
//! Its rooms, each importing only the ones above it in this list:
//! - `error` and `run`: why a run fails or is refused, and the public
//!   types a run is started, followed and resumed with.
//! - [`machine`]: the step machine, every decision that needs no I/O (which task runs, how a
//!   superstep ends, merging, what runs next), as pure functions tested without actors.
//! - `storage`: how a run's position reaches the checkpointer and comes back (durability modes,
//!   the checkpoint writer, paused threads kept in memory).
//! - [`subgraph`]: what an engine knows of the subgraphs it runs, whatever their state types.
//! - `actors`: the supervisor (one per running conversation) and the node actors, with what
//!   they share; they carry out what the machine says.
//! - `engine`: the [`Engine`] that hosts a graph's conversations and its builder.
//!
//! `docs/architecture.md` has the map of the whole crate; `tests/layering.rs` checks it.

mod actors;
mod engine;
mod error;
pub mod machine;
mod run;
mod storage;
pub mod subgraph;

pub use actors::NodeStatsSnapshot;
pub use engine::{Engine, EngineBuilder};
pub use error::{Refusal, RunError};
pub use run::{
    BusyPolicy, CheckpointInfo, Durability, MigrationHook, Resume, RunHandle, RunOptions,
    RunOutcome, ThreadState,
};
pub use storage::{CheckpointCounters, CommitWindow, ThreadLoads, DEFAULT_KEEP_PAUSED};
