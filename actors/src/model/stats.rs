//! Counters of model calls by call kind: calls, errors by kind, tokens. Shared by every policy and
//! provider of a process; cheap to update from many tasks.

use super::{ModelError, Usage};
use dashmap::DashMap;
use serde::Serialize;
use std::collections::BTreeMap;

#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
struct Counts {
    calls: u64,
    errors: BTreeMap<String, u64>,
    prompt_tokens: u64,
    completion_tokens: u64,
}

/// Model call statistics.
#[derive(Debug, Default)]
pub struct ModelStats {
    by_call: DashMap<String, Counts>,
}

/// A copy of the statistics of one call kind.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ModelStatsSnapshot {
    /// The call kind.
    pub call: String,
    /// Calls made.
    pub calls: u64,
    /// Failed calls by error kind.
    pub errors: BTreeMap<String, u64>,
    /// Prompt tokens.
    pub prompt_tokens: u64,
    /// Completion tokens.
    pub completion_tokens: u64,
}

impl ModelStats {
    /// Records one call's outcome.
    pub fn record(&self, call: &str, outcome: Result<Usage, &ModelError>) {
        let mut c = self.by_call.entry(call.to_string()).or_default();
        c.calls += 1;
        match outcome {
            Ok(u) => {
                c.prompt_tokens += u.prompt_tokens;
                c.completion_tokens += u.completion_tokens;
            }
            Err(e) => *c.errors.entry(e.kind().to_string()).or_default() += 1,
        }
    }

    /// Every call kind's counters, sorted by call kind.
    pub fn snapshot(&self) -> Vec<ModelStatsSnapshot> {
        let mut out: Vec<ModelStatsSnapshot> = self
            .by_call
            .iter()
            .map(|e| ModelStatsSnapshot {
                call: e.key().clone(),
                calls: e.calls,
                errors: e.errors.clone(),
                prompt_tokens: e.prompt_tokens,
                completion_tokens: e.completion_tokens,
            })
            .collect();
        out.sort_by(|a, b| a.call.cmp(&b.call));
        out
    }
}

/// A model that records every call of the model it wraps into [`ModelStats`].
pub struct CountedModel {
    inner: std::sync::Arc<dyn super::ChatModel>,
    stats: std::sync::Arc<ModelStats>,
}

impl CountedModel {
    /// Wraps `inner`, recording into `stats`.
    pub fn new(
        inner: std::sync::Arc<dyn super::ChatModel>,
        stats: std::sync::Arc<ModelStats>,
    ) -> Self {
        Self { inner, stats }
    }
}

#[async_trait::async_trait]
impl super::ChatModel for CountedModel {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn takes_typed_input(&self) -> bool {
        self.inner.takes_typed_input()
    }

    fn retries_transient_errors(&self) -> bool {
        self.inner.retries_transient_errors()
    }

    async fn chat(&self, req: &super::ChatRequest) -> Result<super::ChatReply, ModelError> {
        let r = self.inner.chat(req).await;
        self.stats
            .record(&req.call, r.as_ref().map(|reply| reply.usage));
        r
    }

    async fn chat_streaming(
        &self,
        req: &super::ChatRequest,
        on_chunk: &super::OnChunk<'_>,
    ) -> Result<super::ChatReply, ModelError> {
        let r = self.inner.chat_streaming(req, on_chunk).await;
        self.stats
            .record(&req.call, r.as_ref().map(|reply| reply.usage));
        r
    }

    fn calls_functions(&self) -> bool {
        self.inner.calls_functions()
    }

    async fn chat_with_functions(
        &self,
        req: &super::functions::FunctionRequest,
    ) -> Result<super::functions::FunctionReply, ModelError> {
        let r = self.inner.chat_with_functions(req).await;
        self.stats
            .record(&req.call, r.as_ref().map(|reply| reply.usage));
        r
    }
}
