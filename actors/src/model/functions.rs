//! Function calling: a conversation in which the model may answer with calls of functions it was
//! given (name, description, JSON Schema of the arguments), and the calls' results go back into
//! the conversation as messages of their own.
//!
//! This is apart from [`ChatRequest`](super::ChatRequest), whose answer is one JSON value checked
//! against a schema: a function call's arguments are checked by whoever runs the function (a
//! tool server checks its own input schema), and a model may call none. The OpenAI-compatible
//! client speaks it (`tools`, `tool_calls`, `role: tool` messages); other models say they do not
//! ([`ChatModel::calls_functions`](super::ChatModel::calls_functions)), and a planner then
//! chooses without them.

use super::Usage;
use serde_json::{json, Value};

/// A function the model may call.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionSpec {
    /// Its name (letters, digits, `_`, `-`; at most 64 characters, as OpenAI requires).
    pub name: String,
    /// What it does.
    pub description: String,
    /// The JSON Schema of its arguments (an object schema).
    pub parameters: Value,
}

/// A call the model asked for.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionCall {
    /// The call's id, which its result message names.
    pub id: String,
    /// The function.
    pub name: String,
    /// Its arguments, as the JSON text the model wrote.
    pub arguments: String,
}

/// A message of a function-calling conversation.
#[derive(Clone, Debug, PartialEq)]
pub enum FunctionMessage {
    /// Instructions.
    System(String),
    /// The asker.
    User(String),
    /// The model: text, calls, or both.
    Assistant {
        /// Its text, if any.
        content: Option<String>,
        /// The calls it asked for.
        calls: Vec<FunctionCall>,
    },
    /// A call's result.
    Result {
        /// The call's id.
        call_id: String,
        /// What the function returned.
        content: String,
    },
}

impl FunctionMessage {
    /// The message as OpenAI's chat completions API writes it.
    pub fn to_openai(&self) -> Value {
        match self {
            FunctionMessage::System(c) => json!({"role": "system", "content": c}),
            FunctionMessage::User(c) => json!({"role": "user", "content": c}),
            FunctionMessage::Assistant { content, calls } => {
                let mut m = json!({"role": "assistant", "content": content});
                if !calls.is_empty() {
                    m["tool_calls"] = calls
                        .iter()
                        .map(|c| {
                            json!({"id": c.id, "type": "function",
                                   "function": {"name": c.name, "arguments": c.arguments}})
                        })
                        .collect();
                }
                m
            }
            FunctionMessage::Result { call_id, content } => {
                json!({"role": "tool", "tool_call_id": call_id, "content": content})
            }
        }
    }
}

/// A function-calling request.
#[derive(Clone, Debug, PartialEq)]
pub struct FunctionRequest {
    /// The call kind (for statistics and logs), e.g. `choose_tool`.
    pub call: String,
    /// The conversation so far.
    pub messages: Vec<FunctionMessage>,
    /// The functions the model may call.
    pub functions: Vec<FunctionSpec>,
}

/// The model's turn.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct FunctionReply {
    /// Its text, if any.
    pub content: Option<String>,
    /// The calls it asked for (empty: it called none).
    pub calls: Vec<FunctionCall>,
    /// Tokens used.
    pub usage: Usage,
}

impl FunctionReply {
    /// The reply as the assistant message to put back into the conversation.
    pub fn message(&self) -> FunctionMessage {
        FunctionMessage::Assistant {
            content: self.content.clone(),
            calls: self.calls.clone(),
        }
    }
}

/// `name` as a function name: characters other than letters, digits, `_` and `-` become `_`,
/// cut to 64 characters.
pub fn function_name(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_written_as_openai_reads_them() {
        let call = FunctionCall {
            id: "call_1".into(),
            name: "kb__search".into(),
            arguments: r#"{"query":"cost"}"#.into(),
        };
        let assistant = FunctionMessage::Assistant {
            content: None,
            calls: vec![call],
        };
        assert_eq!(
            assistant.to_openai(),
            json!({"role": "assistant", "content": null, "tool_calls": [{"id": "call_1",
                "type": "function", "function": {"name": "kb__search", "arguments": "{\"query\":\"cost\"}"}}]})
        );
        let result = FunctionMessage::Result {
            call_id: "call_1".into(),
            content: "1,200 USD".into(),
        };
        assert_eq!(
            result.to_openai(),
            json!({"role": "tool", "tool_call_id": "call_1", "content": "1,200 USD"})
        );
        assert_eq!(function_name("kb/search.pricing"), "kb_search_pricing");
    }
}
