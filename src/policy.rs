//! Per-node limits: timeouts, retry policies, concurrency and mailbox sizes.

use crate::node::NodeError;
use std::time::Duration;

/// Which failures a retry policy retries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RetryOn {
    /// `Retryable`, `Timeout` and `Panicked` failures (the default).
    Transient,
    /// Every failure except interrupts and cancellation.
    AnyFailure,
    /// Only `Timeout` failures.
    TimeoutsOnly,
}

/// How a failed node is retried: attempts, exponential backoff with jitter, and which errors.
#[derive(Clone, Debug, PartialEq)]
pub struct RetryPolicy {
    /// Attempts in all, including the first (1 = no retry).
    pub max_attempts: u32,
    /// The wait before the second attempt.
    pub initial_backoff: Duration,
    /// Multiplier applied per further attempt.
    pub multiplier: f64,
    /// Upper bound on one wait.
    pub max_backoff: Duration,
    /// Apply full jitter (a uniform draw in `[0, backoff]`) so retries of many conversations spread out.
    pub jitter: bool,
    /// Which errors retry.
    pub retry_on: RetryOn,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        Self::none()
    }
}

impl RetryPolicy {
    /// No retries: one attempt.
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            initial_backoff: Duration::from_millis(100),
            multiplier: 2.0,
            max_backoff: Duration::from_secs(10),
            jitter: true,
            retry_on: RetryOn::Transient,
        }
    }

    /// `attempts` attempts in all with exponential backoff from `initial`.
    pub fn exponential(attempts: u32, initial: Duration) -> Self {
        Self {
            max_attempts: attempts.max(1),
            initial_backoff: initial,
            ..Self::none()
        }
    }

    /// The same policy without jitter (deterministic waits).
    pub fn without_jitter(mut self) -> Self {
        self.jitter = false;
        self
    }

    /// The same policy retrying other errors.
    pub fn retry_on(mut self, on: RetryOn) -> Self {
        self.retry_on = on;
        self
    }

    /// Whether `error` after attempt `attempt` (from 1) is retried.
    pub fn should_retry(&self, error: &NodeError, attempt: u32) -> bool {
        if attempt >= self.max_attempts {
            return false;
        }
        match error {
            NodeError::Interrupt(_) | NodeError::Cancelled => false,
            NodeError::Retryable(_) | NodeError::Panicked(_) => {
                self.retry_on != RetryOn::TimeoutsOnly
            }
            NodeError::Timeout(_) => true,
            NodeError::Fatal(_) => self.retry_on == RetryOn::AnyFailure,
        }
    }

    /// The wait before attempt `attempt + 1`, given a uniform draw `unit` in `[0, 1)` for jitter.
    pub fn backoff(&self, attempt: u32, unit: f64) -> Duration {
        let exp = self
            .multiplier
            .max(1.0)
            .powi(attempt.saturating_sub(1).min(63) as i32);
        let base = self.initial_backoff.as_secs_f64() * exp;
        let capped = base.min(self.max_backoff.as_secs_f64());
        let wait = if self.jitter {
            capped * unit.clamp(0.0, 1.0)
        } else {
            capped
        };
        Duration::from_secs_f64(wait.max(0.0))
    }
}

/// Limits of one node, set when the graph is built.
#[derive(Clone, Debug, PartialEq)]
pub struct NodeOptions {
    /// Abort an attempt that runs longer than this.
    pub timeout: Option<Duration>,
    /// Retry failed attempts.
    pub retry: RetryPolicy,
    /// Tasks of this node running at once, across every conversation of the graph.
    pub concurrency: usize,
    /// Capacity of the node actor's mailbox.
    pub mailbox: usize,
    /// The node's external calls are safe to repeat: its `NodeContext::effect` calls run every
    /// time the task runs and journal nothing (default false: each call happens once per task).
    pub repeat_effects: bool,
}

impl Default for NodeOptions {
    fn default() -> Self {
        Self {
            timeout: None,
            retry: RetryPolicy::none(),
            concurrency: 1024,
            mailbox: 4096,
            repeat_effects: false,
        }
    }
}

impl NodeOptions {
    /// Sets the timeout.
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    /// Sets the retry policy.
    pub fn retry(mut self, p: RetryPolicy) -> Self {
        self.retry = p;
        self
    }

    /// Sets the concurrency limit (at least 1).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.concurrency = n.max(1);
        self
    }

    /// Sets the mailbox capacity (at least 1).
    pub fn mailbox(mut self, n: usize) -> Self {
        self.mailbox = n.max(1);
        self
    }

    /// Opts the node out of once-only effects: its calls are safe to repeat (a read, a
    /// search, an idempotent upsert), so `NodeContext::effect` calls them every time the task
    /// runs, with their keys, and journals nothing — no storage round trip per call. Model
    /// calls of the planners go through `effect` too: a node opted out pays for a completion
    /// again after a crash.
    pub fn repeat_effects(mut self) -> Self {
        self.repeat_effects = true;
        self
    }
}
