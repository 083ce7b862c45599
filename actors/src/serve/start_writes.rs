//! A run's start writes: where its thread stood when it started (its head, and the writes
//! pending there), kept in the run's record so a rollback restores exactly that.

use super::errors::ApiError;
use super::AppState;
use planwright::checkpoint::{TaskWrite, WriteKind};
use planwright::{CheckpointId, TaskId, ThreadId};
use serde_json::{json, Value};

/// Where `thread` stands now: its head and the writes pending there (as JSON).
pub async fn snapshot(
    state: &AppState,
    thread: &ThreadId,
) -> Result<(Option<CheckpointId>, Value), ApiError> {
    let head = state
        .checkpointer
        .head(thread)
        .await
        .map_err(ApiError::internal)?;
    let writes = match head {
        Some(h) => state
            .checkpointer
            .get_writes(thread, h)
            .await
            .map_err(ApiError::internal)?,
        None => Vec::new(),
    };
    Ok((head, writes_json(&writes)))
}

fn writes_json(writes: &[TaskWrite]) -> Value {
    Value::Array(
        writes
            .iter()
            .map(|w| {
                json!({
                    "step": w.task.step, "index": w.task.index, "node": w.node,
                    "kind": w.kind.as_str(), "key": w.key,
                    "payload": String::from_utf8_lossy(&w.payload),
                })
            })
            .collect(),
    )
}

/// The writes [`writes_json`] stored; anything else is an error naming the run.
pub fn writes_from_json(run_id: &str, v: &Value) -> Result<Vec<TaskWrite>, ApiError> {
    let bad = |why: String| {
        ApiError::internal(format!(
            "run `{run_id}`: its stored start writes are corrupt ({why}); the thread was not rolled back"
        ))
    };
    let Some(list) = v.as_array() else {
        return if v.is_null() {
            Ok(Vec::new())
        } else {
            Err(bad(format!("not a list: {v}")))
        };
    };
    list.iter()
        .map(|w| {
            let kind = w["kind"]
                .as_str()
                .and_then(WriteKind::from_name)
                .ok_or_else(|| bad(format!("write kind {}", w["kind"])))?;
            let (Some(step), Some(index), Some(node), Some(key), Some(payload)) = (
                w["step"].as_u64(),
                w["index"].as_u64().and_then(|i| u32::try_from(i).ok()),
                w["node"].as_str(),
                w["key"].as_str(),
                w["payload"].as_str(),
            ) else {
                return Err(bad(format!("incomplete write {w}")));
            };
            Ok(TaskWrite {
                task: TaskId { step, index },
                node: node.to_string(),
                kind,
                key: key.to_string(),
                payload: payload.as_bytes().to_vec(),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn start_writes_round_trip_and_corrupt_ones_are_errors() {
        let writes = vec![
            TaskWrite {
                task: TaskId { step: 3, index: 1 },
                node: "ask".into(),
                kind: WriteKind::Interrupt,
                key: String::new(),
                payload: br#"{"id":"i-1","value":"why?"}"#.to_vec(),
            },
            TaskWrite {
                task: TaskId { step: 3, index: 0 },
                node: "plan".into(),
                kind: WriteKind::Memo,
                key: "k".into(),
                payload: b"[1,2]".to_vec(),
            },
        ];
        let v = writes_json(&writes);
        assert_eq!(writes_from_json("r", &v).unwrap(), writes);
        assert!(writes_from_json("r", &Value::Null).unwrap().is_empty());
        let e = writes_from_json("r-9", &json!([{"kind": "nope"}])).unwrap_err();
        assert!(e.1.contains("r-9") && e.1.contains("corrupt"), "{}", e.1);
        assert!(writes_from_json("r", &json!({"a": 1})).is_err());
    }
}
