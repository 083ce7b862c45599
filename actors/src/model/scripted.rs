//! A model that answers from a script: a queue of replies per call kind, for tests. It records
//! every request it receives, so tests can check what a policy asked.

use super::{ChatModel, ChatReply, ChatRequest, ModelError, Usage};
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

/// Scripted answers by call kind.
#[derive(Default)]
pub struct ScriptedModel {
    queues: Mutex<HashMap<String, VecDeque<Result<String, ModelError>>>>,
    seen: Mutex<Vec<ChatRequest>>,
}

impl ScriptedModel {
    /// An empty script.
    pub fn new() -> Self {
        Self::default()
    }

    /// Queues a reply (`Ok(content)`) or a failure for the next call of kind `call`.
    pub fn push(&self, call: &str, reply: Result<String, ModelError>) -> &Self {
        self.queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(call.to_string())
            .or_default()
            .push_back(reply);
        self
    }

    /// Queues a JSON answer.
    pub fn push_json(&self, call: &str, value: serde_json::Value) -> &Self {
        self.push(call, Ok(value.to_string()))
    }

    /// Every request received so far.
    pub fn requests(&self) -> Vec<ChatRequest> {
        self.seen.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[async_trait::async_trait]
impl ChatModel for ScriptedModel {
    fn name(&self) -> &str {
        "scripted"
    }

    async fn chat(&self, req: &ChatRequest) -> Result<ChatReply, ModelError> {
        self.seen
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(req.clone());
        let next = self
            .queues
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get_mut(&req.call)
            .and_then(VecDeque::pop_front);
        match next {
            Some(Ok(content)) => Ok(ChatReply {
                usage: Usage {
                    prompt_tokens: estimate_tokens(req),
                    completion_tokens: (content.len() as u64).div_ceil(4),
                },
                content,
            }),
            Some(Err(e)) => Err(e),
            None => Err(ModelError::Config(format!(
                "the script has no answer left for `{}`",
                req.call
            ))),
        }
    }
}

/// A rough prompt token count (4 characters per token), for providers that do not report one.
pub(crate) fn estimate_tokens(req: &ChatRequest) -> u64 {
    let chars: usize = req.messages.iter().map(|m| m.content.len()).sum();
    (chars as u64).div_ceil(4)
}
