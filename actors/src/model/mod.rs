//! Models: one chat interface with structured output, and its providers.
//!
//! Planners never talk to a provider directly: each has a small policy trait (what it asks) with
//! an offline implementation and one that drives any [`ChatModel`]. Providers: [`OpenAiModel`]
//! (any OpenAI-compatible server over HTTP), [`SimulatedModel`] (seeded latency, errors and
//! malformed output around the offline answers, for load tests) and [`ScriptedModel`] (queued
//! answers, for tests). [`ask`] turns a chat reply into a typed value: it parses the JSON, checks
//! it against the request's JSON schema, and retries once with the error fed back before giving up
//! with [`ModelError::Malformed`].

mod conforms;
mod error;
pub mod functions;
pub mod lognormal;
mod openai;
mod openai_stream;
pub mod policy;
mod schema;
mod scripted;
mod simulated;
mod spec;
mod stats;

pub use error::ModelError;
pub use openai::{OpenAiConfig, OpenAiModel};
pub use schema::validate;
pub use scripted::ScriptedModel;
pub use simulated::{SimConfig, SimulatedModel};
pub use spec::ModelSpec;
pub use stats::{CountedModel, ModelStats, ModelStatsSnapshot};

use serde::{Deserialize, Serialize};
use std::sync::Arc;

/// Who says a message.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Instructions.
    System,
    /// The asker.
    User,
    /// The model.
    Assistant,
}

/// One chat message.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatMessage {
    /// Who says it.
    pub role: Role,
    /// What is said.
    pub content: String,
}

impl ChatMessage {
    /// A system message.
    pub fn system(content: impl Into<String>) -> Self {
        Self {
            role: Role::System,
            content: content.into(),
        }
    }

    /// A user message.
    pub fn user(content: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: content.into(),
        }
    }
}

/// A structured chat request.
#[derive(Clone, Debug, PartialEq)]
pub struct ChatRequest {
    /// The call kind (`create_plan`, `decide`, ...): for statistics, scripts and the simulator.
    pub call: String,
    /// The conversation.
    pub messages: Vec<ChatMessage>,
    /// JSON Schema of the answer (an object schema), shared: a policy's schemas are built once.
    pub schema: std::sync::Arc<serde_json::Value>,
    /// The structured input the prompt was built from, as JSON text (the same text the prompt
    /// quotes: serialised once). HTTP providers ignore it; the simulator hands it to the offline
    /// responder.
    pub input: String,
    /// The request value `input` was written from, for an in-process model that asks for it
    /// ([`ChatModel::takes_typed_input`]): the simulator's offline responders read it instead of
    /// parsing `input` back (parsing was 3 % of a research load's CPU, work a remote model does
    /// on its own machine). `None` for every other model.
    pub typed: Option<TypedInput>,
    /// The call's idempotency key, when it is journaled ([`journaled`]): HTTP providers send it
    /// as `Idempotency-Key`, the same on every retry of the call. `None` outside a node.
    pub idempotency_key: Option<String>,
}

/// A policy's request value, shared with an in-process model ([`ChatRequest::typed`]).
#[derive(Clone)]
pub struct TypedInput(std::sync::Arc<dyn std::any::Any + Send + Sync>);

impl TypedInput {
    /// Wraps a request value.
    pub fn new<T: std::any::Any + Send + Sync>(value: T) -> Self {
        Self(std::sync::Arc::new(value))
    }

    /// The value, if it is a `T`.
    pub fn get<T: std::any::Any>(&self) -> Option<&T> {
        self.0.downcast_ref()
    }
}

impl std::fmt::Debug for TypedInput {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TypedInput(..)")
    }
}

/// Always equal: the value mirrors [`ChatRequest::input`], which requests are compared by.
impl PartialEq for TypedInput {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl ChatRequest {
    /// The structured input as a JSON value (for responders that read a field or two).
    pub fn input_value(&self) -> Result<serde_json::Value, serde_json::Error> {
        serde_json::from_str(&self.input)
    }
}

/// Tokens a call used.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

impl std::ops::Add for Usage {
    type Output = Usage;
    fn add(self, o: Usage) -> Usage {
        Usage {
            prompt_tokens: self.prompt_tokens + o.prompt_tokens,
            completion_tokens: self.completion_tokens + o.completion_tokens,
        }
    }
}

/// A raw chat reply (journaled as JSON by [`journaled`] calls).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChatReply {
    /// The answer text (JSON when the request had a schema).
    pub content: String,
    /// Tokens used.
    pub usage: Usage,
}

/// Receives the chunks of a streamed answer, in order.
pub type OnChunk<'a> = dyn for<'c> Fn(&'c str) + Send + Sync + 'a;

/// A chat model.
#[async_trait::async_trait]
pub trait ChatModel: Send + Sync {
    /// A short name for reports.
    fn name(&self) -> &str;
    /// One chat completion.
    async fn chat(&self, req: &ChatRequest) -> Result<ChatReply, ModelError>;

    /// Whether this model reads [`ChatRequest::typed`] (an in-process model answering from the
    /// request value); a policy then shares its request value with the request. Default: no.
    fn takes_typed_input(&self) -> bool {
        false
    }

    /// Whether this model retries transient errors itself, with its own backoff, before it
    /// returns one. Then an error it returns has had its retries: a policy reports it as failed,
    /// and the node does not call again (the attempts would multiply, and so would the wait the
    /// model's first warning announced). Default: no, the node's retry policy owns retries.
    fn retries_transient_errors(&self) -> bool {
        false
    }

    /// Whether this model calls functions ([`ChatModel::chat_with_functions`]). Default: no.
    fn calls_functions(&self) -> bool {
        false
    }

    /// One turn of a function-calling conversation: the model's text and the calls it asks for.
    /// The default says the model does not call functions.
    async fn chat_with_functions(
        &self,
        req: &functions::FunctionRequest,
    ) -> Result<functions::FunctionReply, ModelError> {
        Err(ModelError::Config(format!(
            "{} does not call functions ({})",
            self.name(),
            req.call
        )))
    }

    /// One chat completion whose answer is handed to `on_chunk` piece by piece as it arrives
    /// (for a node to stream with `NodeContext::stream_chunk`); the reply is the whole answer.
    /// The default sends the whole answer as one chunk after [`ChatModel::chat`]; the
    /// OpenAI-compatible client streams the server's deltas, the simulator word by word.
    async fn chat_streaming(
        &self,
        req: &ChatRequest,
        on_chunk: &OnChunk<'_>,
    ) -> Result<ChatReply, ModelError> {
        let reply = self.chat(req).await?;
        on_chunk(&reply.content);
        Ok(reply)
    }
}

/// Where the answers of the model calls made inside [`stream_tokens`] go, chunk by chunk.
pub type ChunkSink = Arc<dyn Fn(&str) + Send + Sync>;

tokio::task_local! {
    static CHUNKS: ChunkSink;
    static EFFECTS: planwright::NodeContext;
}

/// Runs `fut` with every model call [`ask`] makes inside it journaled as an effect of the task
/// of `ctx` (`NodeContext::effect`, named `model:{call}`): each call gets an idempotency key,
/// sent to HTTP providers as `Idempotency-Key`, and its reply is stored durably before `ask`
/// goes on, so a task run again — after a crash and a takeover, a retry or a resume — gets the
/// reply its earlier run paid for instead of asking again. Without a journal (an engine without
/// a durable checkpointer) or in a node that opted out (`NodeOptions::repeat_effects`), calls
/// go straight to the model, as outside such a scope: the cost of a node is unchanged.
pub async fn journaled<F: std::future::Future>(ctx: &planwright::NodeContext, fut: F) -> F::Output {
    if !ctx.journals_effects() {
        return fut.await;
    }
    EFFECTS.scope(ctx.clone(), fut).await
}

/// Why a journaled call failed: the model's error, or the journal's.
enum Journaled {
    Model(ModelError),
    Node(planwright::NodeError),
}

impl From<planwright::NodeError> for Journaled {
    fn from(e: planwright::NodeError) -> Self {
        Self::Node(e)
    }
}

/// One call of `model` for `req`, through the task's journal when inside [`journaled`]: the
/// journaled reply when the task made this call before, otherwise the model's (with the call's
/// key in `req.idempotency_key`), journaled before it is returned.
async fn chat_once(model: &dyn ChatModel, req: &mut ChatRequest) -> Result<ChatReply, ModelError> {
    let Ok(ctx) = EFFECTS.try_with(Clone::clone) else {
        return chat_in_scope(model, req).await;
    };
    let name = format!("model:{}", req.call);
    let r = ctx
        .effect(&name, |key| async move {
            req.idempotency_key = Some(key);
            chat_in_scope(model, req).await.map_err(Journaled::Model)
        })
        .await;
    r.map_err(|e| match e {
        Journaled::Model(e) => e,
        // The journal could not be read or written: a storage error, worth a retry.
        Journaled::Node(planwright::NodeError::Retryable(m)) => ModelError::Transport(m),
        Journaled::Node(e) => ModelError::Config(format!("effect journal: {e}")),
    })
}

/// Runs `fut` with the answer of every model call [`ask`] makes inside it streamed to `sink` as
/// it comes ([`ChatModel::chat_streaming`]); outside such a scope `ask` calls
/// [`ChatModel::chat`]. A node streams its model's tokens this way (to
/// `NodeContext::stream_chunk`) without its policy trait carrying a callback.
pub async fn stream_tokens<F: std::future::Future>(sink: ChunkSink, fut: F) -> F::Output {
    CHUNKS.scope(sink, fut).await
}

/// One call of `model`: streamed to the sink of the enclosing [`stream_tokens`], if any.
async fn chat_in_scope(model: &dyn ChatModel, req: &ChatRequest) -> Result<ChatReply, ModelError> {
    match CHUNKS.try_with(Arc::clone) {
        Ok(sink) => model.chat_streaming(req, &*sink).await,
        Err(_) => model.chat(req).await,
    }
}

/// `text` cut into word-sized chunks (each word with the whitespace before it), as a streaming
/// model would send it: the chunks concatenate back to `text`.
pub fn word_chunks(text: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut start = 0;
    let mut in_word = false;
    for (i, c) in text.char_indices() {
        if c.is_whitespace() && in_word {
            out.push(&text[start..i]);
            start = i;
            in_word = false;
        } else if !c.is_whitespace() {
            in_word = true;
        }
    }
    if start < text.len() {
        out.push(&text[start..]);
    }
    out
}

/// An offline answer for one call kind: the JSON text the offline policy answers to a request
/// (text, not a `serde_json::Value`: the answer is written once, straight to what a model's reply
/// carries).
pub type Responder = Arc<dyn Fn(&ChatRequest) -> Result<String, ModelError> + Send + Sync>;

/// Sends `req`, parses the reply as JSON and checks it against `req.schema`. An answer that does
/// not parse or does not match is retried once with the problem fed back to the model; a second
/// failure is [`ModelError::Malformed`]. Usage sums both attempts. Inside [`stream_tokens`] each
/// attempt's answer is streamed as it comes.
pub async fn ask<T: serde::de::DeserializeOwned>(
    model: &dyn ChatModel,
    req: ChatRequest,
) -> Result<(T, Usage), ModelError> {
    let mut req = req;
    let first = chat_once(model, &mut req).await?;
    let problem = match decode::<T>(&first.content, &req.schema) {
        Ok(v) => return Ok((v, first.usage)),
        Err(problem) => problem,
    };
    req.messages.push(ChatMessage {
        role: Role::Assistant,
        content: first.content,
    });
    req.messages.push(ChatMessage::user(format!(
        "Your answer was not valid: {problem}. Answer again with JSON that matches the schema exactly."
    )));
    let second = chat_once(model, &mut req).await?;
    let usage = first.usage + second.usage;
    decode::<T>(&second.content, &req.schema)
        .map(|v| (v, usage))
        .map_err(|detail| ModelError::Malformed {
            call: req.call.clone(),
            detail,
        })
}

/// An answer as its type, or what is wrong with it. A conforming answer (the usual case) is
/// parsed straight into its type; anything else is parsed as a value, validated with every
/// problem named, and converted, which is also what decides when the quick walk cannot
/// (`conforms`).
fn decode<T: serde::de::DeserializeOwned>(
    content: &str,
    schema: &std::sync::Arc<serde_json::Value>,
) -> Result<T, String> {
    let text = content.trim();
    if conforms::conforms(text, schema) {
        if let Ok(answer) = serde_json::from_str(text) {
            return Ok(answer);
        }
    }
    let value: serde_json::Value =
        serde_json::from_str(text).map_err(|e| format!("not JSON ({e})"))?;
    validate(&value, schema).map_err(|errors| errors.join("; "))?;
    serde_json::from_value(value).map_err(|e| format!("does not fit the answer type ({e})"))
}
