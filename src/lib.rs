#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

// Lets `state!` name this crate as `::planwright` from inside it too (serde paths cannot use `$crate`).
extern crate self as planwright;

/// Whether the simulator turned on the bug switch `$bug` ([`sim::Bug`]) on this thread: a known
/// bug re-introduced in a real code path, to show the simulator catches it. `false` without the
/// `sim` feature, so production builds carry no switch.
macro_rules! sim_bug {
    ($bug:ident) => {{
        #[cfg(feature = "sim")]
        let on = crate::sim::bug(crate::sim::Bug::$bug);
        #[cfg(not(feature = "sim"))]
        let on = false;
        on
    }};
}

pub mod cache;
pub mod checkpoint;
pub mod context;
pub mod duration;
pub mod effect;
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
#[cfg(feature = "sim")]
pub mod sim;
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
