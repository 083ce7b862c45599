//! What the planners' policy traits share: a reply with its token usage, the two kinds of failure,
//! one way to ask a chat model for a policy answer (request as JSON input, JSON schema of the answer,
//! schema check with one fed-back repair), and one way to answer those requests offline for the
//! simulator.

use super::{ask, ChatMessage, ChatModel, ChatRequest, ModelError, Responder};
use serde::{de::DeserializeOwned, Deserialize, Serialize};
use serde_json::Value;
use std::sync::Arc;

/// Tokens a model call used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenUsage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

/// A policy's answer, with the model usage when a model was called.
#[derive(Clone, Debug, PartialEq)]
pub struct PolicyReply<T> {
    /// The answer.
    pub value: T,
    /// Usage, `None` for the offline policy.
    pub usage: Option<TokenUsage>,
}

impl<T> PolicyReply<T> {
    /// An answer that cost no model call.
    pub fn offline(value: T) -> Self {
        Self { value, usage: None }
    }
}

/// Why a policy call failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// Worth retrying (timeout, rate limit, server error).
    #[error("transient model error: {0}")]
    Transient(String),
    /// Retrying will not help (malformed answers after the retry, refusal, configuration).
    #[error("model error: {0}")]
    Failed(String),
}

/// A chat model with the system prompt of one planner's policy: what a `Chat…Policy` wraps.
pub struct PolicyClient {
    model: Arc<dyn ChatModel>,
    system: &'static str,
    name: String,
}

impl PolicyClient {
    /// A client asking `model` with `system` as the system prompt; named `chat:{model}`.
    pub fn new(model: Arc<dyn ChatModel>, system: &'static str) -> Self {
        let name = format!("chat:{}", model.name());
        Self {
            model,
            system,
            name,
        }
    }

    /// `chat:{model name}`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// [`ask_policy`] with this client's model and system prompt.
    pub async fn call<Q: Serialize + Clone + Send + Sync + 'static, T: DeserializeOwned>(
        &self,
        call: &str,
        instruction: &str,
        req: &Q,
        schema: Arc<Value>,
    ) -> Result<PolicyReply<T>, PolicyError> {
        ask_policy(&*self.model, self.system, call, instruction, req, schema).await
    }
}

/// Asks `model` for a policy answer: `req` goes as the request's JSON `input` and in the user
/// message after `instruction`; the answer must match `schema`. Transient model errors (timeouts,
/// rate limits, 5xx) become [`PolicyError::Transient`], which a node's retry policy retries,
/// unless the model has retried them itself ([`ChatModel::retries_transient_errors`]: one layer
/// owns retries); the rest are [`PolicyError::Failed`].
pub async fn ask_policy<Q: Serialize + Clone + Send + Sync + 'static, T: DeserializeOwned>(
    model: &dyn ChatModel,
    system: &str,
    call: &str,
    instruction: &str,
    req: &Q,
    schema: Arc<Value>,
) -> Result<PolicyReply<T>, PolicyError> {
    // JSON text, once, for the prompt and the request: building a `Value` first allocated every
    // field and string of the request, and the prompt serialised that again.
    let input = planwright::json::to_string(req)
        .map_err(|e| PolicyError::Failed(format!("{call}: request does not encode: {e}")))?;
    let chat = ChatRequest {
        call: call.to_string(),
        messages: vec![
            ChatMessage::system(system),
            ChatMessage::user(format!("{instruction}\n\nInput:\n{input}")),
        ],
        schema,
        input,
        typed: model
            .takes_typed_input()
            .then(|| super::TypedInput::new(req.clone())),
        idempotency_key: None,
    };
    match ask::<T>(model, chat).await {
        Ok((value, usage)) => Ok(PolicyReply {
            value,
            usage: Some(TokenUsage {
                prompt_tokens: usage.prompt_tokens,
                completion_tokens: usage.completion_tokens,
            }),
        }),
        Err(e) if e.is_transient() && !model.retries_transient_errors() => {
            Err(PolicyError::Transient(format!("{call}: {e}")))
        }
        Err(e) => Err(PolicyError::Failed(format!("{call}: {e}"))),
    }
}

/// Declares `fn name() -> Arc<serde_json::Value>` returning the JSON schema its block builds,
/// built once per process: a policy's answer schemas do not change between calls, and building
/// one per request was half a percent of a research load's CPU.
macro_rules! shared_schema {
    (fn $name:ident() $body:block) => {
        fn $name() -> std::sync::Arc<serde_json::Value> {
            static SCHEMA: std::sync::LazyLock<std::sync::Arc<serde_json::Value>> =
                std::sync::LazyLock::new(|| std::sync::Arc::new($body));
            SCHEMA.clone()
        }
    };
}
pub(crate) use shared_schema;

/// Most bytes of requests and answers one responder remembers; past it, it starts again empty.
pub const REMEMBERED_BYTES: usize = 512 * 1024;

/// A simulator responder from an offline answer function: takes the request's value
/// ([`ChatRequest::typed`]) or, without one, decodes its `input`; answers it, and encodes the
/// answer. An answer function's error is a malformed reply.
///
/// It remembers answers by `input` (those seen at least twice, up to [`REMEMBERED_BYTES`] of
/// inputs and answers), the JSON the request value serialises to: equal inputs are equal
/// requests, and an answer function is pure, so a repeated request gets the same text without
/// computing it again. A simulated model stands for one that computes elsewhere, and a load's
/// conversations ask the same few questions: computing the offline answers each time would be
/// ~3.5 % of a research load's CPU, none of it the planner's. Failed answers are not remembered. The bound is in bytes: the research
/// planner's `replan` requests carry a conversation's findings and rarely repeat.
pub fn responder<Q: DeserializeOwned + 'static, A: Serialize + 'static>(
    f: impl Fn(&Q) -> Result<A, String> + Send + Sync + 'static,
) -> Responder {
    let memo: std::sync::Mutex<Memo> = Default::default();
    Arc::new(move |req: &ChatRequest| {
        let remembered = memo
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .answers
            .get(req.input.as_str())
            .cloned();
        if let Some(answer) = remembered {
            return Ok(answer.to_string());
        }
        let decoded;
        let q = match req.typed.as_ref().and_then(|t| t.get::<Q>()) {
            Some(q) => q,
            None => {
                decoded =
                    serde_json::from_str::<Q>(&req.input).map_err(|e| ModelError::Malformed {
                        call: req.call.clone(),
                        detail: format!("simulator input does not decode: {e}"),
                    })?;
                &decoded
            }
        };
        let a = f(q).map_err(|detail| ModelError::Malformed {
            call: req.call.clone(),
            detail,
        })?;
        let answer = planwright::json::to_string(&a)
            .map_err(|e| ModelError::Config(format!("offline answer: {e}")))?;
        memo.lock()
            .unwrap_or_else(|p| p.into_inner())
            .remember(&req.input, &answer);
        Ok(answer)
    })
}

/// A responder's remembered answers by request input, and their size; and digests of the inputs
/// seen once, so that only a request seen a second time is remembered (a `replan` request, which
/// carries a conversation's findings, is seldom seen twice: keeping each one held megabytes).
#[derive(Default)]
struct Memo {
    answers: std::collections::HashMap<Box<str>, Arc<str>, foldhash::fast::RandomState>,
    bytes: usize,
    seen_once: std::collections::HashSet<u64, foldhash::fast::RandomState>,
}

/// Most inputs remembered as seen once (8 bytes each).
const SEEN_ONCE: usize = 65_536;

impl Memo {
    fn remember(&mut self, input: &str, answer: &str) {
        use std::hash::BuildHasher;
        let digest = self.seen_once.hasher().hash_one(input);
        if self.seen_once.insert(digest) {
            if self.seen_once.len() > SEEN_ONCE {
                self.seen_once.clear();
            }
            return;
        }
        let bytes = input.len() + answer.len();
        if bytes > REMEMBERED_BYTES {
            return;
        }
        if self.bytes + bytes > REMEMBERED_BYTES {
            self.answers.clear();
            self.bytes = 0;
        }
        if self.answers.insert(input.into(), answer.into()).is_none() {
            self.bytes += bytes;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::model::{ChatReply, ChatRequest};

    /// A model whose every call fails with a refused connection.
    struct Unreachable {
        retries_itself: bool,
    }

    #[async_trait::async_trait]
    impl ChatModel for Unreachable {
        fn name(&self) -> &str {
            "unreachable"
        }
        fn retries_transient_errors(&self) -> bool {
            self.retries_itself
        }
        async fn chat(&self, _: &ChatRequest) -> Result<ChatReply, ModelError> {
            Err(ModelError::Transport("connection refused".into()))
        }
    }

    async fn ask_unreachable(retries_itself: bool) -> PolicyError {
        let model = Unreachable { retries_itself };
        let schema = Arc::new(serde_json::json!({"type": "object"}));
        ask_policy::<_, Value>(&model, "system", "plan", "Plan.", &"goal", schema)
            .await
            .unwrap_err()
    }

    #[tokio::test]
    async fn one_layer_retries_a_transient_error() {
        // The node retries what the model did not.
        assert!(
            matches!(ask_unreachable(false).await, PolicyError::Transient(m) if m.contains("refused"))
        );
        // What the model retried itself is final for the node.
        assert!(
            matches!(ask_unreachable(true).await, PolicyError::Failed(m) if m.contains("plan: transport error: connection refused"))
        );
    }
}
