//! The planner kit: the one seam between planners and the apps that run them (`research`,
//! `acquire`, `serve`, `load`).
//!
//! What every app needs alike: turn a `--model` spec into a planner's policy ([`policy`]), open
//! the checkpointer a `--checkpoint` URL names, or the command's default under [`DEFAULT_DIR`]
//! ([`open_checkpointer`]), decide what a request means on an existing thread — start, continue,
//! resume or report ([`decide`]), with the errors that decision can raise ([`RunnerError`]) — and
//! print the command line that answers a paused thread ([`resume_command`]). A planner plugs in by implementing
//! [`Policies`] for its policy trait; it never imports another planner, and no app imports a CLI
//! module.

mod checkpoint;
mod input_file;
mod policy;
mod resume_command;
mod thread;

pub use checkpoint::{
    checkpointer, open_checkpointer, prepare_default, Access, OpenError, ACQUIRE_CHECKPOINT,
    DEFAULT_DIR, RESEARCH_CHECKPOINT, SERVE_CHECKPOINT,
};
pub use input_file::{read_capped, read_input, InputFileError, MAX_INPUT_BYTES};
pub use policy::{policy, policy_for, Policies};
pub use resume_command::{resume_command, shell_quote, unless_default};
pub use thread::{decide, drive, Decision, RunnerError, Start};
