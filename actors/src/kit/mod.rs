//! The planner kit: the one seam between planners and the apps that run them (`research`,
//! `acquire`, `serve`, `load`).
//!
//! Three things every app did for itself before: turn a `--model` spec into a planner's policy
//! ([`policy`]), open the checkpointer a `--checkpoint` URL names ([`checkpointer`]), and decide
//! what a request means on an existing thread — start, continue, resume or report ([`decide`]),
//! with the errors that decision can raise ([`RunnerError`]). A planner plugs in by implementing
//! [`Policies`] for its policy trait; it never imports another planner, and no app imports a CLI
//! module.

mod checkpoint;
mod input_file;
mod policy;
mod thread;

pub use checkpoint::{checkpointer, ensure_parent_dir, OpenError};
pub use input_file::{read_capped, read_input, InputFileError, MAX_INPUT_BYTES};
pub use policy::{policy, policy_for, Policies};
pub use thread::{decide, drive, Decision, RunnerError, Start};
