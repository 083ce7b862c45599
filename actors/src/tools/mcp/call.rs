//! A tool call's time limits: each attempt has a timeout, transient failures (a timeout, a
//! transport error) are retried with exponential backoff, and the run's cancellation ends the
//! call at once, whether an attempt is in flight or the call is waiting to retry.
//!
//! The backoff has no jitter: steps calling the same server run as separate tasks that started
//! at different times anyway, and a fixed schedule lets paused-time tests check it exactly.

use super::McpError;
use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

/// Timeout and retries of every tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CallPolicy {
    /// Time allowed per attempt.
    pub timeout: Duration,
    /// Attempts in all (at least one).
    pub attempts: u32,
    /// Wait before the second attempt; doubled before each further one.
    pub backoff: Duration,
    /// Time allowed to start a server and list its tools.
    pub connect_timeout: Duration,
}

impl Default for CallPolicy {
    fn default() -> Self {
        Self {
            timeout: Duration::from_secs(30),
            attempts: 3,
            backoff: Duration::from_millis(500),
            connect_timeout: Duration::from_secs(60),
        }
    }
}

impl CallPolicy {
    /// The wait before attempt `n + 1` (after attempt `n`, from 1).
    pub fn backoff_after(&self, n: u32) -> Duration {
        self.backoff
            .saturating_mul(2u32.saturating_pow(n.saturating_sub(1)))
    }
}

/// How one attempt failed.
#[derive(Debug)]
pub enum AttemptError {
    /// Worth another attempt (transport trouble).
    Transient(String),
    /// Not worth another attempt: the call ends with this error.
    Lasting(McpError),
}

/// Runs `attempt` under `policy` until it succeeds, fails for good, runs out of attempts, or
/// `cancel` resolves. Returns the value and the number of attempts made.
pub async fn with_retries<T, F, Fut>(
    policy: &CallPolicy,
    server: &str,
    tool: &str,
    mut cancel: Pin<&mut (dyn Future<Output = ()> + Send)>,
    mut attempt: F,
) -> Result<(T, u32), McpError>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, AttemptError>>,
{
    let attempts = policy.attempts.max(1);
    let cancelled = || McpError::Cancelled {
        server: server.to_string(),
        tool: tool.to_string(),
    };
    let mut last = None;
    for n in 1..=attempts {
        let outcome = tokio::select! {
            biased;
            () = &mut cancel => return Err(cancelled()),
            r = tokio::time::timeout(policy.timeout, attempt()) => r,
        };
        match outcome {
            Ok(Ok(v)) => return Ok((v, n)),
            Ok(Err(AttemptError::Lasting(e))) => return Err(e),
            Ok(Err(AttemptError::Transient(detail))) => last = Some(Err(detail)),
            Err(_) => last = Some(Ok(())),
        }
        if n < attempts {
            tokio::select! {
                biased;
                () = &mut cancel => return Err(cancelled()),
                () = tokio::time::sleep(policy.backoff_after(n)) => {}
            }
        }
    }
    Err(match last {
        Some(Err(detail)) => McpError::Call {
            server: server.to_string(),
            tool: tool.to_string(),
            attempts,
            detail,
        },
        _ => McpError::Timeout {
            server: server.to_string(),
            tool: tool.to_string(),
            after: policy.timeout,
            attempts,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicU32, Ordering};
    use std::sync::Arc;
    use tokio::time::Instant;

    fn policy() -> CallPolicy {
        CallPolicy {
            timeout: Duration::from_secs(2),
            attempts: 3,
            backoff: Duration::from_millis(100),
            connect_timeout: Duration::from_secs(5),
        }
    }

    fn never() -> Pin<Box<dyn Future<Output = ()> + Send>> {
        Box::pin(std::future::pending())
    }

    #[tokio::test(start_paused = true)]
    async fn a_hanging_tool_times_out_each_attempt_with_backoff_between() {
        let calls = Arc::new(AtomicU32::new(0));
        let start = Instant::now();
        let c = calls.clone();
        let err = with_retries::<(), _, _>(&policy(), "s", "t", never().as_mut(), || {
            c.fetch_add(1, Ordering::SeqCst);
            std::future::pending()
        })
        .await
        .unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 3);
        // 3 timeouts of 2 s, and waits of 100 ms and 200 ms between them.
        assert_eq!(start.elapsed(), Duration::from_millis(6_300));
        assert!(
            matches!(err, McpError::Timeout { attempts: 3, .. }),
            "{err}"
        );
        assert_eq!(err.to_string(), "s/t: no answer within 2s (3 attempt(s))");
    }

    #[tokio::test(start_paused = true)]
    async fn a_transient_failure_is_retried_and_a_later_success_returned() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let (v, n) = with_retries(&policy(), "s", "t", never().as_mut(), || {
            let k = c.fetch_add(1, Ordering::SeqCst);
            async move {
                if k < 2 {
                    Err(AttemptError::Transient("connection reset".into()))
                } else {
                    Ok(k)
                }
            }
        })
        .await
        .unwrap();
        assert_eq!((v, n), (2, 3));
    }

    #[tokio::test(start_paused = true)]
    async fn a_lasting_error_is_not_retried() {
        let calls = Arc::new(AtomicU32::new(0));
        let c = calls.clone();
        let err = with_retries::<(), _, _>(&policy(), "s", "t", never().as_mut(), || {
            c.fetch_add(1, Ordering::SeqCst);
            async {
                Err(AttemptError::Lasting(McpError::ToolError {
                    server: "s".into(),
                    tool: "t".into(),
                    message: "no such file".into(),
                }))
            }
        })
        .await
        .unwrap_err();
        assert_eq!(calls.load(Ordering::SeqCst), 1);
        assert_eq!(err.to_string(), "s/t returned an error: no such file");
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_to_the_end_name_the_last_error() {
        let err = with_retries::<(), _, _>(&policy(), "s", "t", never().as_mut(), || async {
            Err(AttemptError::Transient("connection reset".into()))
        })
        .await
        .unwrap_err();
        assert_eq!(
            err.to_string(),
            "s/t: the call failed (3 attempt(s)): connection reset"
        );
    }

    #[tokio::test(start_paused = true)]
    async fn cancellation_ends_the_call_in_flight_and_while_waiting_to_retry() {
        for cancel_at in [Duration::from_millis(500), Duration::from_millis(2_050)] {
            let start = Instant::now();
            let cancel: Pin<Box<dyn Future<Output = ()> + Send>> =
                Box::pin(tokio::time::sleep(cancel_at));
            let mut cancel = cancel;
            let err = with_retries::<(), _, _>(&policy(), "s", "t", cancel.as_mut(), || {
                std::future::pending()
            })
            .await
            .unwrap_err();
            assert!(matches!(err, McpError::Cancelled { .. }), "{err}");
            assert_eq!(start.elapsed(), cancel_at);
        }
    }
}
