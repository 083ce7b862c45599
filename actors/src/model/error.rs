//! What can go wrong with a model call, typed so graphs can route on it.

use std::time::Duration;

/// A failed model call.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum ModelError {
    /// No answer within the time limit.
    #[error("the model did not answer within {0:?}")]
    Timeout(Duration),
    /// The provider asked us to slow down.
    #[error("rate limited by the provider{}", .retry_after.map(|d| format!(" (retry after {d:?})")).unwrap_or_default())]
    RateLimited {
        /// The provider's `Retry-After`, when it gave one.
        retry_after: Option<Duration>,
    },
    /// The provider failed (5xx), or rejected the request (4xx).
    #[error("the provider answered HTTP {status}: {body}")]
    Server {
        /// HTTP status.
        status: u16,
        /// The start of the response body.
        body: String,
    },
    /// The model declined to answer.
    #[error("the model refused: {reason}")]
    Refused {
        /// Its stated reason.
        reason: String,
    },
    /// The answer did not parse or did not match the schema, even after feeding the error back.
    #[error("malformed answer to `{call}`: {detail}")]
    Malformed {
        /// The call kind.
        call: String,
        /// What was wrong.
        detail: String,
    },
    /// The connection failed (refused, reset, dropped mid-answer).
    #[error("transport error: {0}")]
    Transport(String),
    /// The provider is not configured correctly (missing model name, bad URL, empty script).
    #[error("model configuration: {0}")]
    Config(String),
}

impl ModelError {
    /// True for errors a retry may fix: timeouts, rate limits, 5xx, transport failures.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Timeout(_) | Self::RateLimited { .. } | Self::Transport(_) => true,
            Self::Server { status, .. } => *status >= 500,
            Self::Refused { .. } | Self::Malformed { .. } | Self::Config(_) => false,
        }
    }

    /// A short name of the kind, for statistics.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::Timeout(_) => "timeout",
            Self::RateLimited { .. } => "rate_limited",
            Self::Server { .. } => "server",
            Self::Refused { .. } => "refused",
            Self::Malformed { .. } => "malformed",
            Self::Transport(_) => "transport",
            Self::Config(_) => "config",
        }
    }
}
