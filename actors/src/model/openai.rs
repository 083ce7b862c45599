//! A client for OpenAI-compatible chat completion servers (OpenAI, vLLM, llama.cpp server,
//! Ollama): JSON-schema structured output, a per-request timeout, retries with exponential
//! backoff and jitter on 429 and 5xx (honouring `Retry-After`, in seconds or as an HTTP date) and
//! on transport failures, no retry on other 4xx, and a concurrency limit per provider.

use super::{ChatModel, ChatReply, ChatRequest, ModelError, Usage};
use rand::Rng;
use serde_json::{json, Value};
use std::time::Duration;
use tokio::sync::Semaphore;

/// Settings of the HTTP provider.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenAiConfig {
    /// Base URL, up to and including `/v1`.
    pub base_url: String,
    /// Bearer token (`None` for local servers that need none).
    pub api_key: Option<String>,
    /// Model name.
    pub model: String,
    /// Limit for one request, including reading the answer.
    pub timeout: Duration,
    /// Retries after the first attempt.
    pub max_retries: u32,
    /// First backoff; doubles each retry, with jitter, capped at 30 s.
    pub initial_backoff: Duration,
    /// Requests in flight at once.
    pub max_concurrency: usize,
}

impl OpenAiConfig {
    /// Defaults for `model` at `base_url`.
    pub fn new(base_url: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            base_url: base_url.into(),
            api_key: None,
            model: model.into(),
            timeout: Duration::from_secs(60),
            max_retries: 4,
            initial_backoff: Duration::from_millis(500),
            max_concurrency: 16,
        }
    }

    /// From `OPENAI_BASE_URL` (default `https://api.openai.com/v1`), `OPENAI_API_KEY` and
    /// `PLANWRIGHT_MODEL` (required).
    pub fn from_env() -> Result<Self, ModelError> {
        let model = std::env::var("PLANWRIGHT_MODEL")
            .ok()
            .filter(|m| !m.trim().is_empty())
            .ok_or_else(|| {
                ModelError::Config(
                "set PLANWRIGHT_MODEL to the model name (and OPENAI_BASE_URL for a local server)"
                    .into(),
            )
            })?;
        let base = std::env::var("OPENAI_BASE_URL")
            .unwrap_or_else(|_| "https://api.openai.com/v1".to_string());
        let mut cfg = Self::new(base, model);
        cfg.api_key = std::env::var("OPENAI_API_KEY")
            .ok()
            .filter(|k| !k.is_empty());
        Ok(cfg)
    }
}

/// The HTTP provider.
pub struct OpenAiModel {
    pub(super) cfg: OpenAiConfig,
    pub(super) client: reqwest::Client,
    pub(super) limit: Semaphore,
    name: String,
}

impl OpenAiModel {
    /// A client for `cfg`.
    pub fn new(cfg: OpenAiConfig) -> Result<Self, ModelError> {
        if !(cfg.base_url.starts_with("http://") || cfg.base_url.starts_with("https://")) {
            return Err(ModelError::Config(format!(
                "OPENAI_BASE_URL `{}` is not an http(s) URL",
                cfg.base_url
            )));
        }
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| ModelError::Config(format!("HTTP client: {e}")))?;
        Ok(Self {
            name: format!("openai:{}", cfg.model),
            limit: Semaphore::new(cfg.max_concurrency.max(1)),
            client,
            cfg,
        })
    }

    pub(super) fn body(&self, req: &ChatRequest) -> Value {
        json!({
            "model": self.cfg.model,
            "messages": req.messages,
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": schema_name(&req.call), "schema": &*req.schema, "strict": true}
            }
        })
    }

    /// A function-calling request's body: the conversation, and the functions as `tools`.
    pub(super) fn functions_body(&self, req: &super::functions::FunctionRequest) -> Value {
        let tools: Vec<Value> = req
            .functions
            .iter()
            .map(|f| {
                json!({"type": "function", "function": {
                    "name": f.name, "description": f.description, "parameters": f.parameters}})
            })
            .collect();
        let messages: Vec<Value> = req.messages.iter().map(|m| m.to_openai()).collect();
        json!({"model": self.cfg.model, "messages": messages, "tools": tools, "tool_choice": "auto"})
    }

    /// One attempt: the reply, or an error with the wait a retry should respect. The call's
    /// idempotency key, when it has one, goes as `Idempotency-Key` (the same on every attempt).
    async fn attempt(
        &self,
        body: &Value,
        idempotency: Option<&str>,
    ) -> Result<ChatReply, ModelError> {
        self.attempt_as(body, idempotency, parse_reply).await
    }

    /// One attempt, its answer read by `parse`.
    async fn attempt_as<T>(
        &self,
        body: &Value,
        idempotency: Option<&str>,
        parse: fn(&str) -> Result<T, ModelError>,
    ) -> Result<T, ModelError> {
        let url = format!(
            "{}/chat/completions",
            self.cfg.base_url.trim_end_matches('/')
        );
        let mut request = with_idempotency_key(self.client.post(url).json(body), idempotency);
        if let Some(key) = &self.cfg.api_key {
            request = request.bearer_auth(key);
        }
        let exchange = async {
            let resp = request.send().await.map_err(transport)?;
            let status = resp.status().as_u16();
            let retry_after = resp
                .headers()
                .get(reqwest::header::RETRY_AFTER)
                .and_then(|v| v.to_str().ok())
                .and_then(parse_retry_after);
            let text = resp.text().await.map_err(transport)?;
            Ok::<_, ModelError>((status, retry_after, text))
        };
        let (status, retry_after, text) = tokio::time::timeout(self.cfg.timeout, exchange)
            .await
            .map_err(|_| ModelError::Timeout(self.cfg.timeout))??;
        match status {
            200..=299 => parse(&text),
            429 => Err(ModelError::RateLimited { retry_after }),
            _ => Err(ModelError::Server {
                status,
                body: text.chars().take(300).collect(),
            }),
        }
    }

    /// Says at once (a warning) that a call failed and how long it will keep trying: the first
    /// failure of a call only; the retries after it are logged at debug.
    pub(super) fn announce_retries(&self, call: &str, error: &ModelError) {
        let most: Duration = (0..self.cfg.max_retries)
            .map(|r| {
                self.cfg
                    .initial_backoff
                    .saturating_mul(1u32 << r.min(16))
                    .min(Duration::from_secs(30))
            })
            .sum();
        tracing::warn!(
            call,
            "the model server at {} failed ({error}); retrying {} times over at most {:.1}s",
            self.cfg.base_url,
            self.cfg.max_retries,
            most.as_secs_f64()
        );
    }

    pub(super) fn backoff(&self, retry: u32, error: &ModelError) -> Duration {
        let base = self
            .cfg
            .initial_backoff
            .saturating_mul(1u32 << retry.min(16))
            .min(Duration::from_secs(30));
        let jittered = base.mul_f64(0.5 + rand::rng().random::<f64>() * 0.5);
        match error {
            ModelError::RateLimited {
                retry_after: Some(after),
            } => jittered.max(*after),
            _ => jittered,
        }
    }
}

/// A transport failure with its causes: reqwest's own message names the URL but not why
/// (`connection refused`, `dns error`), which is in its source chain.
pub(super) fn transport(e: reqwest::Error) -> ModelError {
    let mut m = e.to_string();
    let mut src = std::error::Error::source(&e);
    while let Some(s) = src {
        let s_text = s.to_string();
        if !m.contains(&s_text) {
            m.push_str(&format!(": {s_text}"));
        }
        src = s.source();
    }
    ModelError::Transport(m)
}

fn schema_name(call: &str) -> String {
    let name: String = call
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    if name.is_empty() {
        "answer".into()
    } else {
        name
    }
}

/// `Retry-After` as seconds or as an HTTP date.
pub(crate) fn parse_retry_after(v: &str) -> Option<Duration> {
    if let Ok(secs) = v.trim().parse::<u64>() {
        return Some(Duration::from_secs(secs));
    }
    let when = httpdate::parse_http_date(v.trim()).ok()?;
    Some(
        when.duration_since(std::time::SystemTime::now())
            .unwrap_or(Duration::ZERO),
    )
}

fn parse_reply(text: &str) -> Result<ChatReply, ModelError> {
    let bad = |what: &str| ModelError::Server {
        status: 200,
        body: format!(
            "unexpected response ({what}): {}",
            text.chars().take(200).collect::<String>()
        ),
    };
    let v: Value = serde_json::from_str(text).map_err(|_| bad("not JSON"))?;
    let message = &v["choices"][0]["message"];
    if let Some(reason) = message["refusal"].as_str() {
        return Err(ModelError::Refused {
            reason: reason.to_string(),
        });
    }
    let content = message["content"]
        .as_str()
        .ok_or_else(|| bad("no choices[0].message.content"))?;
    Ok(ChatReply {
        content: content.to_string(),
        usage: Usage {
            prompt_tokens: v["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
            completion_tokens: v["usage"]["completion_tokens"].as_u64().unwrap_or(0),
        },
    })
}

/// A function-calling answer: `choices[0].message`'s text and `tool_calls`.
fn parse_function_reply(text: &str) -> Result<super::functions::FunctionReply, ModelError> {
    let bad = |what: &str| ModelError::Server {
        status: 200,
        body: format!(
            "unexpected response ({what}): {}",
            text.chars().take(200).collect::<String>()
        ),
    };
    let v: Value = serde_json::from_str(text).map_err(|_| bad("not JSON"))?;
    let message = &v["choices"][0]["message"];
    if !message.is_object() {
        return Err(bad("no choices[0].message"));
    }
    if let Some(reason) = message["refusal"].as_str() {
        return Err(ModelError::Refused {
            reason: reason.to_string(),
        });
    }
    let mut calls = Vec::new();
    for c in message["tool_calls"].as_array().into_iter().flatten() {
        let f = &c["function"];
        let (Some(name), Some(arguments)) = (f["name"].as_str(), f["arguments"].as_str()) else {
            return Err(bad(
                "a tool call without function.name and function.arguments",
            ));
        };
        calls.push(super::functions::FunctionCall {
            id: c["id"].as_str().unwrap_or_default().to_string(),
            name: name.to_string(),
            arguments: arguments.to_string(),
        });
    }
    Ok(super::functions::FunctionReply {
        content: message["content"].as_str().map(str::to_string),
        calls,
        usage: Usage {
            prompt_tokens: v["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
            completion_tokens: v["usage"]["completion_tokens"].as_u64().unwrap_or(0),
        },
    })
}

#[async_trait::async_trait]
impl ChatModel for OpenAiModel {
    fn calls_functions(&self) -> bool {
        true
    }

    /// Function calling with the same limits as [`ChatModel::chat`]: the concurrency limit, the
    /// timeout, and retries of transient errors with backoff.
    async fn chat_with_functions(
        &self,
        req: &super::functions::FunctionRequest,
    ) -> Result<super::functions::FunctionReply, ModelError> {
        let _permit =
            self.limit.acquire().await.map_err(|_| {
                ModelError::Config("the provider's concurrency limiter closed".into())
            })?;
        let body = self.functions_body(req);
        let mut retry = 0;
        loop {
            match self.attempt_as(&body, None, parse_function_reply).await {
                Ok(reply) => return Ok(reply),
                Err(e) if e.is_transient() && retry < self.cfg.max_retries => {
                    if retry == 0 {
                        self.announce_retries(&req.call, &e);
                    }
                    tokio::time::sleep(self.backoff(retry, &e)).await;
                    retry += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    fn name(&self) -> &str {
        &self.name
    }

    /// Yes, unless configured with no retries: timeouts, rate limits, 5xx and transport errors
    /// are retried here (`max_retries`, exponential backoff honouring `Retry-After`).
    fn retries_transient_errors(&self) -> bool {
        self.cfg.max_retries > 0
    }

    async fn chat(&self, req: &ChatRequest) -> Result<ChatReply, ModelError> {
        let _permit =
            self.limit.acquire().await.map_err(|_| {
                ModelError::Config("the provider's concurrency limiter closed".into())
            })?;
        let body = self.body(req);
        let mut retry = 0;
        loop {
            match self.attempt(&body, req.idempotency_key.as_deref()).await {
                Ok(reply) => return Ok(reply),
                Err(e) if e.is_transient() && retry < self.cfg.max_retries => {
                    if retry == 0 {
                        self.announce_retries(&req.call, &e);
                    }
                    let wait = self.backoff(retry, &e);
                    tracing::debug!(call = %req.call, error = %e, ?wait, "retrying model call");
                    tokio::time::sleep(wait).await;
                    retry += 1;
                }
                Err(e) => return Err(e),
            }
        }
    }

    async fn chat_streaming(
        &self,
        req: &ChatRequest,
        on_chunk: &super::OnChunk<'_>,
    ) -> Result<ChatReply, ModelError> {
        self.stream(req, on_chunk).await
    }
}

/// `request` with the `Idempotency-Key` header when the call has a key
/// (`NodeContext::effect` hands one to each journaled call; see `crate::model::journaled`).
pub(super) fn with_idempotency_key(
    request: reqwest::RequestBuilder,
    key: Option<&str>,
) -> reqwest::RequestBuilder {
    match key {
        Some(key) => request.header("Idempotency-Key", key),
        None => request,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_in_seconds_or_as_a_date() {
        assert_eq!(parse_retry_after("3"), Some(Duration::from_secs(3)));
        let later = std::time::SystemTime::now() + Duration::from_secs(120);
        let d = parse_retry_after(&httpdate::fmt_http_date(later)).unwrap();
        assert!(
            d > Duration::from_secs(100) && d <= Duration::from_secs(120),
            "{d:?}"
        );
        assert_eq!(parse_retry_after("soon"), None);
    }

    #[test]
    fn backoff_doubles_with_jitter_and_honours_retry_after() {
        let mut cfg = OpenAiConfig::new("http://x", "m");
        cfg.initial_backoff = Duration::from_millis(100);
        let m = OpenAiModel::new(cfg).unwrap();
        let server = ModelError::Server {
            status: 500,
            body: String::new(),
        };
        for retry in 0..4 {
            let full = Duration::from_millis(100 << retry);
            let d = m.backoff(retry, &server);
            assert!(d >= full / 2 && d <= full, "retry {retry}: {d:?}");
        }
        let limited = ModelError::RateLimited {
            retry_after: Some(Duration::from_secs(7)),
        };
        assert!(m.backoff(0, &limited) >= Duration::from_secs(7));
        assert!(m.backoff(40, &server) <= Duration::from_secs(30), "capped");
    }

    #[test]
    fn replies_refusals_and_junk() {
        let ok = parse_reply(r#"{"choices":[{"message":{"content":"{\"a\":1}"}}],"usage":{"prompt_tokens":7,"completion_tokens":3}}"#).unwrap();
        assert_eq!(ok.content, "{\"a\":1}");
        assert_eq!(
            ok.usage,
            Usage {
                prompt_tokens: 7,
                completion_tokens: 3
            }
        );
        let refused = parse_reply(r#"{"choices":[{"message":{"content":null,"refusal":"no"}}]}"#)
            .unwrap_err();
        assert_eq!(
            refused,
            ModelError::Refused {
                reason: "no".into()
            }
        );
        assert!(matches!(
            parse_reply("<html>").unwrap_err(),
            ModelError::Server { status: 200, .. }
        ));
    }
}
