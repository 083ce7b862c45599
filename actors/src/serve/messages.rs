//! Streamed message chunks (`NodeContext::stream_chunk`) as the LangGraph Server sends them:
//!
//! - `stream_mode: "messages-tuple"`: one `messages` event per chunk, `[chunk, metadata]` with an
//!   `AIMessageChunk` (`{"type", "id", "content"}`) and the node that streamed it;
//! - `stream_mode: "messages"`: per message, `messages/metadata` (`{id: {"metadata": …}}`) at its
//!   first chunk, `messages/partial` (`[message so far]`) at each chunk, and `messages/complete`
//!   (`[whole message]`) when the task that streamed it finishes.

use planwright::{RunEvent, TaskId};
use serde_json::{json, Value};
use std::collections::BTreeMap;

struct Open {
    task: TaskId,
    content: String,
}

/// Turns run events into `messages` SSE events, remembering each open message.
#[derive(Default)]
pub struct Messages {
    tuple: bool,
    full: bool,
    open: BTreeMap<String, Open>,
}

fn metadata(node: &str, task: TaskId) -> Value {
    json!({"langgraph_node": node, "langgraph_step": task.step, "langgraph_task": task.to_string()})
}

fn message(id: &str, content: &str) -> Value {
    json!({"type": "ai", "id": id, "content": content})
}

impl Messages {
    /// For the request's stream modes.
    pub fn new(modes: &[String]) -> Self {
        Self {
            tuple: modes.iter().any(|m| m == "messages-tuple"),
            full: modes.iter().any(|m| m == "messages"),
            open: BTreeMap::new(),
        }
    }

    /// The SSE events (name, data) `ev` gives.
    pub fn on_event(&mut self, ev: &RunEvent) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        match ev {
            RunEvent::Message {
                node,
                task,
                message_id,
                chunk,
            } => {
                if self.tuple {
                    out.push((
                        "messages",
                        json!([
                            {"type": "AIMessageChunk", "id": message_id, "content": chunk},
                            metadata(node, *task),
                        ]),
                    ));
                }
                if self.full {
                    let open = self.open.entry(message_id.clone()).or_insert_with(|| {
                        out.push((
                            "messages/metadata",
                            json!({ message_id.clone(): {"metadata": metadata(node, *task)} }),
                        ));
                        Open {
                            task: *task,
                            content: String::new(),
                        }
                    });
                    open.content.push_str(chunk);
                    out.push((
                        "messages/partial",
                        json!([message(message_id, &open.content)]),
                    ));
                }
            }
            RunEvent::NodeFinished { task, .. } if self.full => {
                let done: Vec<String> = self
                    .open
                    .iter()
                    .filter(|(_, o)| o.task == *task)
                    .map(|(id, _)| id.clone())
                    .collect();
                for id in done {
                    if let Some(o) = self.open.remove(&id) {
                        out.push(("messages/complete", json!([message(&id, &o.content)])));
                    }
                }
            }
            _ => {}
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn chunk(task: TaskId, id: &str, c: &str) -> RunEvent {
        RunEvent::Message {
            node: "write".into(),
            task,
            message_id: id.into(),
            chunk: c.into(),
        }
    }

    fn finished(task: TaskId) -> RunEvent {
        RunEvent::NodeFinished {
            node: "write".into(),
            task,
            attempt: 1,
            duration_us: 1,
            queued_us: 0,
            error: None,
        }
    }

    #[test]
    fn messages_tuple_mode_sends_each_chunk_with_its_metadata() {
        let t = TaskId { step: 3, index: 1 };
        let mut m = Messages::new(&["messages-tuple".into()]);
        let out = m.on_event(&chunk(t, "m1", " world"));
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, "messages");
        assert_eq!(
            out[0].1[0],
            json!({"type": "AIMessageChunk", "id": "m1", "content": " world"})
        );
        assert_eq!(out[0].1[1]["langgraph_node"], "write");
        assert_eq!(out[0].1[1]["langgraph_step"], 3);
        assert!(m.on_event(&finished(t)).is_empty());
    }

    #[test]
    fn messages_mode_sends_metadata_partials_and_the_complete_message() {
        let t = TaskId { step: 1, index: 0 };
        let mut m = Messages::new(&["messages".into()]);
        let names =
            |v: Vec<(&'static str, Value)>| v.into_iter().map(|(n, _)| n).collect::<Vec<_>>();
        assert_eq!(
            names(m.on_event(&chunk(t, "m1", "Hello"))),
            ["messages/metadata", "messages/partial"]
        );
        let out = m.on_event(&chunk(t, "m1", " world"));
        assert_eq!(
            out[0].1,
            json!([{"type": "ai", "id": "m1", "content": "Hello world"}])
        );
        let other = TaskId { step: 1, index: 1 };
        assert!(
            m.on_event(&finished(other)).is_empty(),
            "another task's end"
        );
        let out = m.on_event(&finished(t));
        assert_eq!(
            out,
            vec![(
                "messages/complete",
                json!([{"type": "ai", "id": "m1", "content": "Hello world"}])
            )]
        );
        assert!(m.on_event(&finished(t)).is_empty(), "completed once");
    }

    #[test]
    fn no_messages_mode_sends_nothing() {
        let mut m = Messages::new(&["values".into()]);
        assert!(m
            .on_event(&chunk(TaskId { step: 0, index: 0 }, "m", "x"))
            .is_empty());
    }
}
