//! Tools the planners' nodes call: deterministic local ones (`bm25`), and the tool servers a run
//! is given, over the Model Context Protocol (`mcp`).

pub mod bm25;
pub mod mcp;
