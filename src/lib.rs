#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

// Lets `state!` name this crate as `::planwright` from inside it too (serde paths cannot use `$crate`).
extern crate self as planwright;

pub mod cache;
pub mod checkpoint;
pub mod context;
pub mod duration;
pub mod error_chain;
pub mod events;
pub mod graph;
pub mod ids;
pub mod json;
pub mod node;
pub mod policy;
pub mod reducer;
pub mod runs;
pub mod runtime;
pub mod state;
pub mod store;

pub use context::RunContext;
pub use error_chain::ErrorChain;
pub use events::{EventSwitch, Interrupt, RunEvent, RunStatus};
pub use graph::{Command, CompiledGraph, GraphError, Route, Send, StateGraph, END, START};
pub use ids::{CheckpointId, NodeId, RunId, TaskId, ThreadId};
pub use node::{NodeContext, NodeError};
pub use policy::{NodeOptions, RetryPolicy};
pub use runtime::{Durability, Engine, Refusal, Resume, RunError, RunOptions, RunOutcome};
pub use state::{State, Update};
