//! Ids the server makes up for threads, runs, assistants and crons, and the checkpoint ids it
//! reads back.

use super::errors::ApiError;
use planwright::CheckpointId;

/// A fresh id for a thread or a run (a random version-4 UUID).
pub fn new_uuid() -> String {
    planwright::ids::random_uuid()
}

/// Parses a checkpoint id as the API writes it (decimal).
pub fn checkpoint_id(s: &str) -> Result<CheckpointId, ApiError> {
    s.trim().parse::<u64>().map(CheckpointId).map_err(|_| {
        ApiError::bad(format!(
            "checkpoint_id `{s}` is not a checkpoint id of this server (a decimal number)"
        ))
    })
}
