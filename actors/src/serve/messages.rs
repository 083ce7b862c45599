//! Messages as the LangGraph Server streams them: the chunks nodes stream
//! (`NodeContext::stream_chunk`, a model's tokens as they come) and the messages nodes return in
//! their updates.
//!
//! - `stream_mode: "messages-tuple"`: one `messages` event per chunk, `[chunk, metadata]` with an
//!   `AIMessageChunk` (`{"type", "id", "content"}`) and the node that streamed it;
//! - `stream_mode: "messages"`: per message, `messages/metadata` (`{id: {"metadata": …}}`) at its
//!   first chunk, `messages/partial` (`[message so far]`) at each chunk, and `messages/complete`
//!   (`[whole message]`) when the task that streamed it finishes.
//!
//! A message a node returns (as LangGraph's message handler finds them: the update itself, or a
//! value of the update's keys, or an item of a list there, that is an object with `content` and a
//! message `type` or a `role`) is sent whole — `[message, metadata]` under `messages-tuple`,
//! `messages/metadata` then `messages/complete` under `messages` — unless its id was streamed as
//! chunks or sent before. A message without an `id` gets one made from its type and content, so
//! a node that returns the whole conversation again does not send it twice.

use planwright::{RunEvent, TaskId};
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};

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
    /// Ids of the messages sent (whole or as chunks).
    seen: HashSet<String>,
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
            seen: HashSet::new(),
        }
    }

    /// The SSE events of the messages in `update`, the update task `task` of `node` returned
    /// (unknown when the run's events began after the task started).
    pub fn on_output(
        &mut self,
        node: &str,
        task: Option<TaskId>,
        update: &Value,
    ) -> Vec<(&'static str, Value)> {
        let mut out = Vec::new();
        if !self.tuple && !self.full {
            return out;
        }
        let mut found = Vec::new();
        find_messages(update, &mut found);
        let meta = match task {
            Some(t) => metadata(node, t),
            None => json!({"langgraph_node": node}),
        };
        for m in found {
            let m = as_message(m);
            let id = m["id"].as_str().unwrap_or_default().to_string();
            if !self.seen.insert(id.clone()) {
                continue;
            }
            if self.tuple {
                out.push(("messages", json!([m, meta])));
            }
            if self.full {
                out.push(("messages/metadata", json!({ id: {"metadata": meta} })));
                out.push(("messages/complete", json!([m])));
            }
        }
        out
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
                self.seen.insert(message_id.clone());
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

/// The message types of LangChain's message JSON (`type`), and the chunk types.
const MESSAGE_TYPES: [&str; 12] = [
    "ai",
    "human",
    "system",
    "tool",
    "function",
    "chat",
    "developer",
    "AIMessageChunk",
    "HumanMessageChunk",
    "SystemMessageChunk",
    "ToolMessageChunk",
    "ChatMessageChunk",
];

fn is_message(v: &Value) -> bool {
    let Some(o) = v.as_object() else {
        return false;
    };
    let typed = o
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| MESSAGE_TYPES.contains(&t));
    o.contains_key("content") && (typed || o.get("role").is_some_and(Value::is_string))
}

/// The messages in a node's update, where LangGraph's message handler looks: the update, each
/// value of its keys, each item of a list there.
fn find_messages<'a>(update: &'a Value, found: &mut Vec<&'a Value>) {
    let mut look = |v: &'a Value| {
        if is_message(v) {
            found.push(v);
        } else if let Value::Array(items) = v {
            found.extend(items.iter().filter(|i| is_message(i)));
        }
    };
    match update {
        Value::Object(m) if !is_message(update) => m.values().for_each(&mut look),
        other => look(other),
    }
}

/// A message as LangChain's JSON has it: a `type` (from `role` when it has none: `user` is
/// `human`, `assistant` is `ai`) and an `id`.
fn as_message(m: &Value) -> Value {
    let mut m = m.clone();
    if m.get("type").and_then(Value::as_str).is_none() {
        let kind = match m["role"].as_str().unwrap_or_default() {
            "user" => "human",
            "assistant" => "ai",
            other => other,
        }
        .to_string();
        m["type"] = kind.into();
    }
    if m.get("id").and_then(Value::as_str).is_none() {
        use std::hash::{Hash, Hasher};
        // Fixed keys: the same message has the same id in every process.
        let mut h = std::hash::DefaultHasher::new();
        m["type"].to_string().hash(&mut h);
        m["content"].to_string().hash(&mut h);
        m["id"] = format!("msg-{:016x}", h.finish()).into();
    }
    m
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
    fn messages_a_node_returns_are_sent_whole_once() {
        let t = TaskId { step: 2, index: 0 };
        let mut m = Messages::new(&["messages-tuple".into()]);
        let update = json!({"messages": [
            {"role": "assistant", "content": "Hi there"},
            {"type": "ai", "id": "m7", "content": "streamed"},
        ], "count": 3});
        m.on_event(&chunk(t, "m7", "streamed"));
        let out = m.on_output("chat", Some(t), &update);
        assert_eq!(out.len(), 1, "the streamed one is not sent again: {out:?}");
        assert_eq!(out[0].0, "messages");
        assert_eq!(out[0].1[0]["type"], "ai");
        assert_eq!(out[0].1[0]["content"], "Hi there");
        assert!(out[0].1[0]["id"].as_str().unwrap().starts_with("msg-"));
        assert_eq!(out[0].1[1]["langgraph_node"], "chat");
        assert!(
            m.on_output("chat", Some(t), &update).is_empty(),
            "the whole list again"
        );
        let mut full = Messages::new(&["messages".into()]);
        let one = json!({"type": "human", "id": "h1", "content": "q"});
        let out = full.on_output("ask", Some(t), &one);
        assert_eq!(
            out.iter().map(|(n, _)| *n).collect::<Vec<_>>(),
            ["messages/metadata", "messages/complete"]
        );
        assert_eq!(out[1].1, json!([one]));
        assert!(Messages::new(&["values".into()])
            .on_output("ask", Some(t), &one)
            .is_empty());
        assert!(m.on_output("n", None, &json!({"plan": [1, 2]})).is_empty());
    }

    #[test]
    fn no_messages_mode_sends_nothing() {
        let mut m = Messages::new(&["values".into()]);
        assert!(m
            .on_event(&chunk(TaskId { step: 0, index: 0 }, "m", "x"))
            .is_empty());
    }
}
