//! Deterministic local tools the planners' nodes call.

pub mod bm25;
