//! The actors that run a graph: one supervisor per running conversation, one node actor per node
//! of the graph, and what an engine's actors share.
//!
//! The supervisor dispatches a superstep's tasks to the node actors, persists through `storage`
//! and emits events; every decision it acts on comes from the step machine (`machine`).

pub(crate) mod histogram;
pub(crate) mod node_actor;
pub(crate) mod shared;
pub(crate) mod stats;
pub(crate) mod supervisor;

pub use stats::NodeStatsSnapshot;
