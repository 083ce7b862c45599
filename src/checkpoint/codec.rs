//! How the SQL backends spell record fields as column values, in one place so SQLite and
//! PostgreSQL store the same thing.

use super::{BodyKind, CheckpointError, CheckpointMetadata, WriteKind};
use crate::ids::ThreadId;

/// Column value of a body kind.
pub fn kind_str(k: BodyKind) -> &'static str {
    match k {
        BodyKind::Snapshot => "snapshot",
        BodyKind::Delta => "delta",
    }
}

/// Body kind from its column value.
pub fn parse_kind(thread: &ThreadId, s: &str) -> Result<BodyKind, CheckpointError> {
    match s {
        "snapshot" => Ok(BodyKind::Snapshot),
        "delta" => Ok(BodyKind::Delta),
        other => Err(corrupt(thread, format!("unknown body kind `{other}`"))),
    }
}

/// Column value of a write kind.
pub fn write_kind_str(k: WriteKind) -> &'static str {
    k.as_str()
}

/// Write kind from its column value.
pub fn parse_write_kind(thread: &ThreadId, s: &str) -> Result<WriteKind, CheckpointError> {
    WriteKind::from_name(s).ok_or_else(|| corrupt(thread, format!("unknown write kind `{s}`")))
}

/// Metadata as stored (JSON text).
pub fn metadata_json(m: &CheckpointMetadata) -> Result<String, CheckpointError> {
    crate::json::to_string(m).map_err(|e| CheckpointError::backend("metadata", e))
}

/// Metadata from its stored JSON text.
pub fn parse_metadata(thread: &ThreadId, s: &str) -> Result<CheckpointMetadata, CheckpointError> {
    serde_json::from_str(s).map_err(|e| corrupt(thread, format!("metadata: {e}")))
}

/// Thread metadata from its stored JSON text (`None` column: `null`).
pub fn parse_value(
    thread: &ThreadId,
    s: Option<&str>,
) -> Result<serde_json::Value, CheckpointError> {
    match s {
        None => Ok(serde_json::Value::Null),
        Some(s) => {
            serde_json::from_str(s).map_err(|e| corrupt(thread, format!("thread metadata: {e}")))
        }
    }
}

/// A stored id (SQL integers are signed) as a checkpoint id.
pub fn id_from_sql(thread: &ThreadId, v: i64) -> Result<crate::ids::CheckpointId, CheckpointError> {
    u64::try_from(v)
        .map(crate::ids::CheckpointId)
        .map_err(|_| corrupt(thread, format!("negative checkpoint id {v}")))
}

/// A checkpoint id as an SQL integer.
pub fn id_to_sql(id: crate::ids::CheckpointId) -> Result<i64, CheckpointError> {
    i64::try_from(id.0)
        .map_err(|_| CheckpointError::backend_msg(format!("checkpoint id {} too large", id.0)))
}

fn corrupt(thread: &ThreadId, reason: String) -> CheckpointError {
    CheckpointError::Corrupt {
        thread: thread.clone(),
        reason,
    }
}
