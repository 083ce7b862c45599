//! An error with its causes, on one line: what a log needs to say why something failed.
//!
//! An error's `Display` often says only what failed ("db error", "checkpoint backend error:
//! cannot open x.sqlite"); the why sits further down its [`source`](std::error::Error::source)
//! chain (connection refused, permission denied, a missing database). [`ErrorChain`] writes the
//! error and every cause after it, separated by `: `, on one line (a cause's own line breaks,
//! such as PostgreSQL's `DETAIL:` line, become spaces: one event, one log line). Many errors in
//! this crate already print their source in their own message, so a cause whose text is already
//! written is skipped instead of being repeated.

use std::error::Error;
use std::fmt;

/// Displays an error followed by each of its causes (`outer: cause: root cause`), skipping a
/// cause whose text the line already holds.
///
/// ```
/// use planwright::ErrorChain;
/// let io = std::io::Error::new(std::io::ErrorKind::PermissionDenied, "permission denied");
/// let e = planwright::checkpoint::CheckpointError::backend("cannot open x.sqlite", io);
/// assert_eq!(
///     ErrorChain(&e).to_string(),
///     "checkpoint backend error: cannot open x.sqlite: permission denied"
/// );
/// ```
#[derive(Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&chain(self.0))
    }
}

impl fmt::Debug for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

/// The error and its causes as one line (what [`ErrorChain`] displays).
pub fn chain(e: &(dyn Error + 'static)) -> String {
    let mut line = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        let text = c.to_string();
        if !text.is_empty() && !line.contains(&text) {
            line.push_str(": ");
            line.push_str(&text);
        }
        cause = c.source();
    }
    if line.contains(['\n', '\r']) {
        line = line
            .split(['\n', '\r'])
            .filter(|l| !l.trim().is_empty())
            .collect::<Vec<_>>()
            .join(" ");
    }
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An error with a message and an optional cause, printing only its own message.
    #[derive(Debug)]
    struct Layer(&'static str, Option<Box<dyn Error + Send + Sync>>);

    impl fmt::Display for Layer {
        fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str(self.0)
        }
    }

    impl Error for Layer {
        fn source(&self) -> Option<&(dyn Error + 'static)> {
            self.1.as_deref().map(|e| e as &(dyn Error + 'static))
        }
    }

    #[test]
    fn every_cause_follows_the_error_in_order() {
        let root = std::io::Error::new(std::io::ErrorKind::ConnectionRefused, "refused");
        let e = Layer(
            "request failed",
            Some(Box::new(Layer("db error", Some(Box::new(root))))),
        );
        assert_eq!(
            ErrorChain(&e).to_string(),
            "request failed: db error: refused"
        );
    }

    #[test]
    fn a_cause_on_several_lines_is_written_on_one() {
        let e = Layer(
            "db error",
            Some(Box::new(std::io::Error::other(
                "FATAL: database \"x\" does not exist\nDETAIL: It seems to have just been dropped.\n",
            ))),
        );
        assert_eq!(
            chain(&e),
            "db error: FATAL: database \"x\" does not exist DETAIL: It seems to have just been dropped."
        );
    }

    #[test]
    fn an_error_without_a_cause_is_its_message() {
        let e = Layer("nothing below", None);
        assert_eq!(chain(&e), "nothing below");
    }

    #[test]
    fn a_cause_the_message_already_holds_is_not_repeated() {
        // thiserror's `{source}` in a message: the cause is printed once, its own cause after it.
        #[derive(Debug, thiserror::Error)]
        #[error("store backend error during put: {source}")]
        struct Outer {
            source: Layer,
        }
        let e = Outer {
            source: Layer(
                "disk I/O error",
                Some(Box::new(std::io::Error::other("no space left on device"))),
            ),
        };
        assert_eq!(
            chain(&e),
            "store backend error during put: disk I/O error: no space left on device"
        );
    }

    #[test]
    fn a_checkpoint_backend_error_shows_its_source() {
        let io = std::io::Error::new(std::io::ErrorKind::NotFound, "no such file");
        let e = crate::checkpoint::CheckpointError::backend("cannot open a.sqlite", io);
        assert!(std::error::Error::source(&e).is_some());
        assert_eq!(
            chain(&e),
            "checkpoint backend error: cannot open a.sqlite: no such file"
        );
        let wrapped = crate::checkpoint::CheckpointError::Unavailable {
            backend: "postgres",
            attempts: 3,
            waited_ms: 150,
            last: Box::new(e),
        };
        assert_eq!(
            chain(&wrapped),
            "postgres unreachable: gave up after 3 attempts over 150 ms: checkpoint backend error: cannot open a.sqlite: no such file"
        );
    }
}
