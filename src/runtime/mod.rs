//! The runtime: the pure superstep machine, node actors, supervisors and the engine.

pub mod body_codec;
mod commit_window;
mod engine;
mod error;
mod histogram;
mod node_actor;
mod paused;
mod per_run;
mod persist;
mod saved;
mod shared;
mod stats;
pub mod step;
pub mod subgraph;
mod superseded;
pub mod superstep;
mod supervisor;
mod writer;

pub use commit_window::CommitWindow;
pub use engine::{CheckpointInfo, Engine, EngineBuilder, Resume, ThreadState};
pub use error::{Refusal, RunError};
pub use paused::{ThreadLoads, DEFAULT_KEEP_PAUSED};
pub use persist::Durability;
pub use shared::{
    BusyPolicy, CheckpointCounters, MigrationHook, RunHandle, RunOptions, RunOutcome,
};
pub use stats::NodeStatsSnapshot;
