//! Which PostgreSQL failures are worth retrying, and the retry loop with exponential backoff.
//!
//! Every checkpointer operation is safe to run again: reads trivially; task writes, thread
//! metadata, deletes and prunes are idempotent; and a checkpoint write whose commit outcome is
//! unknown (the connection dropped during `COMMIT`) is recognised on retry by its checksum (see
//! `put_in`), so it reports success instead of a conflict with itself. So an operation that failed
//! because the connection dropped, the server restarted or shut the backend down
//! (`pg_terminate_backend`), or no connection could be opened, is retried on a fresh connection
//! from the pool, with exponential backoff (50 ms doubling to 2 s), until `retry_for` has passed;
//! then it fails with [`CheckpointError::Unavailable`] carrying the last error. Errors the server
//! reports about the statement itself (a constraint, a syntax error) are never retried.

use super::super::CheckpointError;
use std::future::Future;
use std::time::Duration;
use tokio::time::Instant;

/// First backoff delay.
const FIRST_BACKOFF: Duration = Duration::from_millis(50);
/// Longest backoff delay.
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// One attempt's failure: worth retrying or not.
#[derive(Debug)]
pub enum Attempt {
    /// The connection or server was unavailable; another attempt may succeed.
    Retry(CheckpointError),
    /// Final.
    Fail(CheckpointError),
}

impl From<CheckpointError> for Attempt {
    fn from(e: CheckpointError) -> Self {
        Attempt::Fail(e)
    }
}

impl From<tokio_postgres::Error> for Attempt {
    fn from(e: tokio_postgres::Error) -> Self {
        if is_transient(&e) {
            Attempt::Retry(db_error(e))
        } else {
            Attempt::Fail(db_error(e))
        }
    }
}

impl From<deadpool_postgres::PoolError> for Attempt {
    fn from(e: deadpool_postgres::PoolError) -> Self {
        use deadpool_postgres::PoolError;
        match e {
            PoolError::Backend(e) => Attempt::from(e),
            PoolError::Timeout(t) => Attempt::Retry(CheckpointError::backend_msg(format!(
                "postgres: no connection within the pool's {t:?} timeout"
            ))),
            other => Attempt::Fail(CheckpointError::backend("postgres pool", other)),
        }
    }
}

/// SQLSTATEs after which the same statement may succeed on another connection.
fn transient_state(code: &str) -> bool {
    code.starts_with("08") // connection exception
        || matches!(
            code,
            "57P01" // admin_shutdown: pg_terminate_backend, server shutdown
                | "57P02" // crash_shutdown
                | "57P03" // cannot_connect_now: starting up
                | "40001" // serialization_failure
                | "40P01" // deadlock_detected
                | "53300" // too_many_connections
        )
}

/// Whether a driver error is about the connection rather than the statement.
pub fn is_transient(e: &tokio_postgres::Error) -> bool {
    match e.code() {
        Some(code) => transient_state(code.code()),
        // No SQLSTATE: the socket closed, an I/O error, a timeout (transient), or a TLS
        // handshake refused, e.g. a certificate that fails verification (final).
        None => e.as_db_error().is_none() && !is_tls_failure(e),
    }
}

/// Whether the error's cause is the TLS layer (a certificate or handshake failure).
fn is_tls_failure(e: &tokio_postgres::Error) -> bool {
    let mut src = std::error::Error::source(e);
    while let Some(s) = src {
        if s.downcast_ref::<native_tls::Error>().is_some() {
            return true;
        }
        src = s.source();
    }
    false
}

/// A driver error as a [`CheckpointError::Database`] with SQLSTATE, message, detail and hint.
pub fn db_error(e: tokio_postgres::Error) -> CheckpointError {
    let (code, message) = match e.as_db_error() {
        Some(db) => {
            let mut m = format!("{}: {}", db.severity(), db.message());
            if let Some(d) = db.detail() {
                m.push_str(&format!(" (detail: {d})"));
            }
            if let Some(h) = db.hint() {
                m.push_str(&format!(" (hint: {h})"));
            }
            if let Some(t) = db.table() {
                m.push_str(&format!(" (table: {t})"));
            }
            (Some(db.code().code().to_string()), m)
        }
        None => {
            // `Display` says only "error connecting to server" / "connection closed"; the source
            // says why (refused, reset, timed out).
            let mut m = e.to_string();
            let mut src = std::error::Error::source(&e);
            while let Some(s) = src {
                m.push_str(&format!(": {s}"));
                src = s.source();
            }
            (e.code().map(|c| c.code().to_string()), m)
        }
    };
    CheckpointError::Database {
        backend: "postgres",
        code,
        message,
        source: Box::new(e),
    }
}

/// Runs `op` (attempt number from 0) until it succeeds, fails for good, or `budget` has passed
/// while it kept failing transiently.
pub async fn with_retry<T, F, Fut>(
    what: &'static str,
    budget: Duration,
    mut op: F,
) -> Result<T, CheckpointError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, Attempt>>,
{
    let start = Instant::now();
    let mut backoff = FIRST_BACKOFF;
    let mut attempt = 0u32;
    loop {
        match op(attempt).await {
            Ok(v) => {
                if attempt > 0 {
                    tracing::info!(
                        op = what,
                        attempts = attempt + 1,
                        "postgres operation recovered"
                    );
                }
                return Ok(v);
            }
            Err(Attempt::Fail(e)) => return Err(e),
            Err(Attempt::Retry(e)) => {
                let waited = start.elapsed();
                if waited + backoff > budget {
                    tracing::error!(op = what, attempts = attempt + 1, error = %crate::ErrorChain(&e), "postgres unreachable; giving up");
                    return Err(CheckpointError::Unavailable {
                        backend: "postgres",
                        attempts: attempt + 1,
                        waited_ms: waited.as_millis() as u64,
                        last: Box::new(e),
                    });
                }
                if attempt == 0 {
                    // Said at once, with how long it lasts: the wait that follows is otherwise silent.
                    tracing::warn!(
                        op = what,
                        retry_for_ms = budget.as_millis() as u64,
                        "PostgreSQL is unreachable ({}); retrying for {}",
                        crate::ErrorChain(&e),
                        human(budget)
                    );
                } else {
                    tracing::debug!(op = what, attempt = attempt + 1, error = %crate::ErrorChain(&e), backoff_ms = backoff.as_millis() as u64, "postgres operation failed; retrying");
                }
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
                attempt += 1;
            }
        }
    }
}

/// A retry budget as the URL's `retry_for` writes it: `30s`, `2m`, `250ms`.
fn human(d: Duration) -> String {
    let ms = d.as_millis();
    if ms % 60_000 == 0 && ms > 0 {
        format!("{}m", ms / 60_000)
    } else if ms % 1000 == 0 {
        format!("{}s", ms / 1000)
    } else {
        format!("{ms}ms")
    }
}

/// [`with_retry`] with every attempt bounded by `op_timeout`: an attempt that gets no answer in
/// time counts as a transient failure (a stalled connection), so it is retried like a dropped one.
pub async fn with_retry_bounded<T, F, Fut>(
    what: &'static str,
    budget: Duration,
    op_timeout: Duration,
    mut op: F,
) -> Result<T, CheckpointError>
where
    F: FnMut(u32) -> Fut,
    Fut: Future<Output = Result<T, Attempt>>,
{
    with_retry(what, budget, move |n| {
        let attempt = op(n);
        async move {
            tokio::time::timeout(op_timeout, attempt)
                .await
                .unwrap_or_else(|_| {
                    Err(Attempt::Retry(CheckpointError::backend_msg(format!(
                        "postgres: no answer within op_timeout ({op_timeout:?})"
                    ))))
                })
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn transient() -> Attempt {
        Attempt::Retry(CheckpointError::backend_msg("connection closed"))
    }

    #[tokio::test(start_paused = true)]
    async fn transient_failures_are_retried_with_backoff_until_they_pass() {
        let start = Instant::now();
        let got = with_retry("t", Duration::from_secs(30), |n| async move {
            if n < 4 {
                Err(transient())
            } else {
                Ok(n)
            }
        })
        .await
        .unwrap();
        assert_eq!(got, 4);
        // 50 + 100 + 200 + 400 ms of backoff, on paused time.
        assert_eq!(start.elapsed(), Duration::from_millis(750));
    }

    #[tokio::test(start_paused = true)]
    async fn a_database_unreachable_for_the_whole_budget_is_a_typed_error() {
        let err =
            with_retry::<(), _, _>("t", Duration::from_secs(10), |_| async { Err(transient()) })
                .await
                .unwrap_err();
        match err {
            CheckpointError::Unavailable {
                attempts,
                waited_ms,
                ..
            } => {
                assert!(waited_ms <= 10_000, "{waited_ms}");
                assert!(attempts > 5, "{attempts}");
            }
            other => panic!("{other}"),
        }
    }

    #[tokio::test(start_paused = true)]
    async fn statement_errors_are_not_retried() {
        let mut calls = 0;
        let err = with_retry::<(), _, _>("t", Duration::from_secs(10), |_| {
            calls += 1;
            async { Err(Attempt::Fail(CheckpointError::backend_msg("syntax"))) }
        })
        .await
        .unwrap_err();
        assert!(matches!(err, CheckpointError::Backend { .. }));
        assert_eq!(calls, 1);
    }

    #[test]
    fn connection_sqlstates_are_transient_and_statement_ones_are_not() {
        for c in ["08006", "08001", "57P01", "40001"] {
            assert!(transient_state(c), "{c}");
        }
        for c in ["23505", "42601", "42P01"] {
            assert!(!transient_state(c), "{c}");
        }
    }
}
