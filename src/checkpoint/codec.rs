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
    match k {
        WriteKind::Update => "update",
        WriteKind::Interrupt => "interrupt",
        WriteKind::Error => "error",
        WriteKind::Memo => "memo",
        WriteKind::Resume => "resume",
    }
}

/// Write kind from its column value.
pub fn parse_write_kind(thread: &ThreadId, s: &str) -> Result<WriteKind, CheckpointError> {
    Ok(match s {
        "update" => WriteKind::Update,
        "interrupt" => WriteKind::Interrupt,
        "error" => WriteKind::Error,
        "memo" => WriteKind::Memo,
        "resume" => WriteKind::Resume,
        other => return Err(corrupt(thread, format!("unknown write kind `{other}`"))),
    })
}

/// Metadata as stored (JSON text).
pub fn metadata_json(m: &CheckpointMetadata) -> Result<String, CheckpointError> {
    serde_json::to_string(m).map_err(|e| CheckpointError::Backend(format!("metadata: {e}")))
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
        .map_err(|_| CheckpointError::Backend(format!("checkpoint id {} too large", id.0)))
}

fn corrupt(thread: &ThreadId, reason: String) -> CheckpointError {
    CheckpointError::Corrupt {
        thread: thread.clone(),
        reason,
    }
}

/// Parses a duration: `500ms`, `5s`, `2m`, `3h`, `7d`, or a bare number of seconds. Used by the
/// URL options and by [`Retention::parse`](super::Retention::parse).
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    let s = s.trim();
    let (num, unit) = match s.find(|c: char| !c.is_ascii_digit() && c != '.') {
        Some(i) => s.split_at(i),
        None => (s, "s"),
    };
    let n: f64 = num
        .parse()
        .ok()
        .filter(|n: &f64| n.is_finite() && *n >= 0.0)?;
    let secs = match unit {
        "ms" => n / 1000.0,
        "s" => n,
        "m" => n * 60.0,
        "h" => n * 3600.0,
        "d" => n * 86400.0,
        _ => return None,
    };
    std::time::Duration::try_from_secs_f64(secs).ok()
}

#[cfg(test)]
mod tests {
    use super::parse_duration;
    use std::time::Duration;

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("5"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(parse_duration("2d"), Some(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("1y"), None);
    }
}
