//! Graphs: declare with [`StateGraph`], validate with `compile()`, run the [`CompiledGraph`].

mod builder;
mod command;
mod compile;
mod compiled;
mod error;
mod mermaid;
mod route;

pub(crate) use builder::SubgraphPart;
pub use builder::{IntoTarget, Router, StateGraph, END, START};
pub use command::Command;
pub use compiled::{CompiledGraph, CompiledNode, CompiledRouter, Target};
pub use error::GraphError;
pub use route::{Dag, DagTask, Route, Send};
