//! How a thread's position looks on the wire, as the official SDKs read it: the state object
//! (`values`, `next`, `tasks[].interrupts`, `interrupts`, `checkpoint`, `parent_checkpoint`,
//! `metadata`, `created_at`), which `GET /threads/{id}/state`, the state at a checkpoint and every
//! history entry share, and a thread's pending interrupts keyed by task (`thread.interrupts`).
//! `useStream` restores a pending interrupt after a reload from these fields. Pure functions of
//! what the handlers read.

use super::assistant::ThreadView;
use planwright::checkpoint::CheckpointMetadata;
use planwright::{CheckpointId, Interrupt};
use serde_json::{json, Map, Value};

/// An interrupt as the API writes it.
pub fn interrupt_json(i: &Interrupt) -> Value {
    json!({"value": i.value, "id": i.id.0})
}

/// The id of the `index`-th pending task of a thread at superstep `step`: the runtime's task id
/// (`step.index`), the one the `tasks`, `checkpoints` and `debug` stream modes carry, so a client
/// matches `tasks[].id`, `thread.interrupts`' keys and streamed tasks.
pub fn task_id(step: u64, index: usize) -> String {
    planwright::TaskId {
        step,
        index: index as u32,
    }
    .to_string()
}

/// The pending tasks: one per node to run next, with the interrupts it raised.
pub fn tasks_json(v: &ThreadView) -> Value {
    v.next
        .iter()
        .enumerate()
        .map(|(i, name)| {
            let interrupts: Vec<Value> = v
                .interrupts
                .iter()
                .filter(|x| &x.node == name)
                .map(interrupt_json)
                .collect();
            json!({
                "id": task_id(v.step, i), "name": name, "path": ["__pregel_pull", name],
                "error": null, "interrupts": interrupts, "checkpoint": null, "state": null,
            })
        })
        .collect()
}

/// The pending interrupts keyed by the id of the task that raised them (`thread.interrupts`).
pub fn interrupts_by_task(v: &ThreadView) -> Value {
    let mut out = Map::new();
    for (i, name) in v.next.iter().enumerate() {
        let list: Vec<Value> = v
            .interrupts
            .iter()
            .filter(|x| &x.node == name)
            .map(interrupt_json)
            .collect();
        if !list.is_empty() {
            out.insert(task_id(v.step, i), Value::Array(list));
        }
    }
    Value::Object(out)
}

/// A checkpoint reference.
pub fn checkpoint_ref(thread: &str, cp: CheckpointId) -> Value {
    json!({"thread_id": thread, "checkpoint_id": cp.0.to_string(), "checkpoint_ns": "", "checkpoint_map": null})
}

/// A checkpoint's metadata as the API shows it; a time-travel branch names the checkpoint it
/// went back to (`branched_from`, as a checkpoint id string).
pub fn metadata_json(m: &CheckpointMetadata) -> Value {
    let mut out = json!({"step": m.step, "source": m.source, "writes": m.nodes});
    if let Some(at) = m.extra.get("branched_from").and_then(Value::as_u64) {
        out["branched_from"] = json!(at.to_string());
    }
    out
}

/// Where a checkpoint sits: its parent and its metadata (from the checkpointer's listing).
pub struct Placed<'a> {
    /// The parent checkpoint.
    pub parent: Option<CheckpointId>,
    /// The checkpoint's metadata.
    pub metadata: &'a CheckpointMetadata,
}

/// The state object of `thread` at the position `v` (`None`: nothing stored yet).
pub fn state_json(thread: &str, v: Option<&ThreadView>, placed: Option<Placed<'_>>) -> Value {
    let Some(v) = v else {
        return json!({
            "values": {}, "next": [], "tasks": [], "interrupts": [], "checkpoint": null,
            "parent_checkpoint": null, "metadata": {}, "created_at": null,
        });
    };
    let (parent, metadata, created_at) = match placed {
        Some(p) => (
            p.parent.map(|c| checkpoint_ref(thread, c)),
            metadata_json(p.metadata),
            json!(super::time::rfc3339(p.metadata.created_at_ms)),
        ),
        None => (None, json!({"step": v.step}), Value::Null),
    };
    json!({
        "values": v.values,
        "next": v.next,
        "tasks": tasks_json(v),
        "interrupts": v.interrupts.iter().map(interrupt_json).collect::<Vec<_>>(),
        "checkpoint": v.checkpoint.map(|c| checkpoint_ref(thread, c)),
        "parent_checkpoint": parent,
        "metadata": metadata,
        "created_at": created_at,
    })
}

/// True when `v` holds every key of `wanted` with the same value, objects compared key by key
/// (the `metadata` and `values` filters of thread search and history).
pub fn json_contains(v: &Value, wanted: &Value) -> bool {
    match (v, wanted) {
        (Value::Object(have), Value::Object(want)) => want
            .iter()
            .all(|(k, w)| have.get(k).is_some_and(|h| json_contains(h, w))),
        _ => v == wanted,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use planwright::ids::InterruptId;

    fn view(next: &[&str], paused: &[&str]) -> ThreadView {
        ThreadView {
            values: json!({"x": 1}),
            next: next.iter().map(|s| s.to_string()).collect(),
            interrupts: paused
                .iter()
                .enumerate()
                .map(|(i, n)| Interrupt {
                    id: InterruptId(format!("i{i}")),
                    node: n.to_string(),
                    value: json!({"ask": n}),
                    index: 0,
                })
                .collect(),
            checkpoint: Some(CheckpointId(7)),
            step: 3,
            failed: false,
        }
    }

    #[test]
    fn each_pending_task_carries_its_own_interrupts_under_an_id_the_thread_shares() {
        let v = view(&["a", "b", "c"], &["b", "c"]);
        let tasks = tasks_json(&v);
        assert_eq!(tasks[0]["interrupts"], json!([]));
        assert_eq!(tasks[1]["interrupts"][0]["value"], json!({"ask": "b"}));
        assert_eq!(tasks[2]["interrupts"][0]["id"], "i1");
        let by_task = interrupts_by_task(&v);
        let keys: Vec<&String> = by_task.as_object().unwrap().keys().collect();
        assert_eq!(
            keys,
            [
                tasks[1]["id"].as_str().unwrap(),
                tasks[2]["id"].as_str().unwrap()
            ]
        );
    }

    #[test]
    fn a_thread_without_checkpoints_has_an_empty_state_of_the_same_shape() {
        let empty = state_json("t", None, None);
        let full = state_json("t", Some(&view(&["a"], &[])), None);
        let keys = |v: &Value| v.as_object().unwrap().keys().cloned().collect::<Vec<_>>();
        assert_eq!(keys(&empty), keys(&full));
        assert_eq!(full["checkpoint"]["checkpoint_id"], "7");
    }
}
