//! Simulated tool latency: how long a tool call takes when a load test gives tools the latency of
//! a web search (`load --tools sim:p50=400ms,p99=2s`). The local tools answer in microseconds;
//! with a latency, a plan's parallel steps show what they buy.

use std::time::Duration;

/// How long a tool call takes before the tool runs (on tokio's clock, so paused-time tests see it).
pub trait ToolLatency: Send + Sync {
    /// The delay of one call of `tool` (zero: as fast as the local tool).
    fn delay(&self, tool: &str) -> Duration;
}
