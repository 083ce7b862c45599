//! Streaming from an OpenAI-compatible server: `"stream": true` and the answer read as
//! server-sent events (`data: {choices: [{delta: {content}}]}` … `data: [DONE]`), each content
//! delta handed to the caller as it arrives, usage from the final event
//! (`stream_options.include_usage`).
//!
//! Failures before the first chunk are retried like [`OpenAiModel::chat`]'s (429, 5xx, transport,
//! timeout); once a chunk has been handed over, a failure is returned as it is, never retried
//! here, so a listener never sees an answer's start twice from one call.

use super::openai::{parse_retry_after, transport};
use super::{ChatReply, ChatRequest, ModelError, OnChunk, OpenAiModel, Usage};
use serde_json::{json, Value};

/// What one `data:` line of the stream says.
#[derive(Debug, PartialEq)]
pub(crate) enum StreamEvent {
    /// A piece of the answer.
    Content(String),
    /// A refusal (or a piece of one).
    Refusal(String),
    /// Token usage (the last event when usage is asked for).
    Usage(Usage),
    /// `[DONE]`.
    Done,
}

/// Cuts a byte stream into server-sent-event `data:` payloads, whatever the chunking.
#[derive(Default)]
pub(crate) struct SseLines {
    buf: Vec<u8>,
}

impl SseLines {
    /// The events completed by `bytes`.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Result<Vec<StreamEvent>, ModelError> {
        self.buf.extend_from_slice(bytes);
        let mut out = Vec::new();
        while let Some(end) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=end).collect();
            let line = String::from_utf8_lossy(&line);
            let line = line.trim_end_matches(['\n', '\r']);
            let Some(data) = line.strip_prefix("data:") else {
                continue; // blank separators, comments (`:`), `event:` / `id:` fields
            };
            out.extend(parse_data(data.trim())?);
        }
        Ok(out)
    }
}

fn parse_data(data: &str) -> Result<Vec<StreamEvent>, ModelError> {
    if data == "[DONE]" {
        return Ok(vec![StreamEvent::Done]);
    }
    let v: Value = serde_json::from_str(data).map_err(|_| ModelError::Server {
        status: 200,
        body: format!(
            "unexpected stream event (not JSON): {}",
            data.chars().take(200).collect::<String>()
        ),
    })?;
    let mut out = Vec::new();
    let delta = &v["choices"][0]["delta"];
    if let Some(c) = delta["content"].as_str().filter(|c| !c.is_empty()) {
        out.push(StreamEvent::Content(c.to_string()));
    }
    if let Some(r) = delta["refusal"].as_str().filter(|r| !r.is_empty()) {
        out.push(StreamEvent::Refusal(r.to_string()));
    }
    if v["usage"].is_object() {
        out.push(StreamEvent::Usage(Usage {
            prompt_tokens: v["usage"]["prompt_tokens"].as_u64().unwrap_or(0),
            completion_tokens: v["usage"]["completion_tokens"].as_u64().unwrap_or(0),
        }));
    }
    Ok(out)
}

/// Why an attempt failed, and whether the caller already saw part of the answer.
struct Failed {
    error: ModelError,
    started: bool,
}

impl OpenAiModel {
    /// [`ChatModel::chat_streaming`](super::ChatModel::chat_streaming) over HTTP.
    pub(super) async fn stream(
        &self,
        req: &ChatRequest,
        on_chunk: &OnChunk<'_>,
    ) -> Result<ChatReply, ModelError> {
        let _permit =
            self.limit.acquire().await.map_err(|_| {
                ModelError::Config("the provider's concurrency limiter closed".into())
            })?;
        let mut body = self.body(req);
        body["stream"] = json!(true);
        body["stream_options"] = json!({"include_usage": true});
        let mut retry = 0;
        loop {
            match self
                .stream_attempt(&body, req.idempotency_key.as_deref(), on_chunk)
                .await
            {
                Ok(reply) => return Ok(reply),
                Err(Failed { error, started })
                    if !started && error.is_transient() && retry < self.cfg.max_retries =>
                {
                    if retry == 0 {
                        self.announce_retries(&req.call, &error);
                    }
                    let wait = self.backoff(retry, &error);
                    tracing::debug!(call = %req.call, %error, ?wait, "retrying streamed model call");
                    tokio::time::sleep(wait).await;
                    retry += 1;
                }
                Err(f) => return Err(f.error),
            }
        }
    }

    /// One streamed attempt; the call's idempotency key, when it has one, goes as
    /// `Idempotency-Key`.
    async fn stream_attempt(
        &self,
        body: &Value,
        idempotency: Option<&str>,
        on_chunk: &OnChunk<'_>,
    ) -> Result<ChatReply, Failed> {
        let mut started = false;
        let exchange = async {
            let url = format!(
                "{}/chat/completions",
                self.cfg.base_url.trim_end_matches('/')
            );
            let mut request =
                super::openai::with_idempotency_key(self.client.post(url).json(body), idempotency);
            if let Some(key) = &self.cfg.api_key {
                request = request.bearer_auth(key);
            }
            let mut resp = request.send().await.map_err(transport)?;
            let status = resp.status().as_u16();
            if !(200..=299).contains(&status) {
                let retry_after = resp
                    .headers()
                    .get(reqwest::header::RETRY_AFTER)
                    .and_then(|v| v.to_str().ok())
                    .and_then(parse_retry_after);
                let text = resp.text().await.map_err(transport)?;
                return Err(if status == 429 {
                    ModelError::RateLimited { retry_after }
                } else {
                    ModelError::Server {
                        status,
                        body: text.chars().take(300).collect(),
                    }
                });
            }
            let mut lines = SseLines::default();
            let (mut content, mut refusal, mut usage) =
                (String::new(), String::new(), Usage::default());
            while let Some(bytes) = resp.chunk().await.map_err(transport)? {
                for ev in lines.feed(&bytes)? {
                    match ev {
                        StreamEvent::Content(c) => {
                            started = true;
                            on_chunk(&c);
                            content.push_str(&c);
                        }
                        StreamEvent::Refusal(r) => refusal.push_str(&r),
                        StreamEvent::Usage(u) => usage = u,
                        StreamEvent::Done => {
                            return finish(content, refusal, usage);
                        }
                    }
                }
            }
            Err(ModelError::Transport(
                "the stream ended before `data: [DONE]`".into(),
            ))
        };
        let out = tokio::time::timeout(self.cfg.timeout, exchange).await;
        match out {
            Ok(Ok(reply)) => Ok(reply),
            Ok(Err(error)) => Err(Failed { error, started }),
            Err(_) => Err(Failed {
                error: ModelError::Timeout(self.cfg.timeout),
                started,
            }),
        }
    }
}

fn finish(content: String, refusal: String, usage: Usage) -> Result<ChatReply, ModelError> {
    if !refusal.is_empty() && content.is_empty() {
        return Err(ModelError::Refused { reason: refusal });
    }
    Ok(ChatReply { content, usage })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_parsed_whatever_the_chunking() {
        let stream = concat!(
            ": keep-alive\n\n",
            "data: {\"choices\":[{\"delta\":{\"role\":\"assistant\",\"content\":\"\"}}]}\n\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\"{\\\"a\\\"\"}}]}\r\n\r\n",
            "data: {\"choices\":[{\"delta\":{\"content\":\": 1}\"}}]}\n\n",
            "data: {\"choices\":[],\"usage\":{\"prompt_tokens\":9,\"completion_tokens\":4}}\n\n",
            "data: [DONE]\n\n",
        );
        let want = vec![
            StreamEvent::Content("{\"a\"".into()),
            StreamEvent::Content(": 1}".into()),
            StreamEvent::Usage(Usage {
                prompt_tokens: 9,
                completion_tokens: 4,
            }),
            StreamEvent::Done,
        ];
        for size in [1, 3, 7, stream.len()] {
            let mut p = SseLines::default();
            let mut got = Vec::new();
            for piece in stream.as_bytes().chunks(size) {
                got.extend(p.feed(piece).unwrap());
            }
            assert_eq!(got, want, "chunks of {size} bytes");
        }
    }

    #[test]
    fn junk_in_the_stream_is_an_error_naming_it() {
        let err = SseLines::default().feed(b"data: <html>\n").unwrap_err();
        assert!(err.to_string().contains("<html>"), "{err}");
    }

    #[test]
    fn a_refusal_with_no_content_is_refused() {
        assert_eq!(
            finish(String::new(), "no".into(), Usage::default()).unwrap_err(),
            ModelError::Refused {
                reason: "no".into()
            }
        );
    }
}
