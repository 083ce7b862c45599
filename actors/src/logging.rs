//! The process's log: the `tracing` events of the libraries and the server, written to stderr,
//! one line each, as text or JSON (`--log-format`).
//!
//! The libraries only emit events; the binary alone decides where they go, so the subscriber is
//! installed here, once, before anything runs. stderr, never stdout: stdout carries what the
//! commands produce (briefs, reports, JSON).
//!
//! Which events pass is `RUST_LOG`'s business (`EnvFilter` syntax: `info`,
//! `warn,planwright_actors::serve=debug`). Without it, `serve` logs at `info` ([`SERVE_DEFAULT`])
//! — its operator wants each run's start and end, takeovers, and every failure with its cause —
//! and the other commands at `warn` ([`CLI_DEFAULT`]): a terminal user of `research` or `acquire`
//! sees problems, never chatter mixed into the command's own messages. A `RUST_LOG` that does
//! not parse is refused with the reason (exit 2), not ignored: a filter that silently logs
//! nothing is what it guards against.

use std::io::IsTerminal;
use tracing_subscriber::filter::{EnvFilter, ParseError};

/// What `serve` logs without `RUST_LOG`: `info` and above, except PostgreSQL's notices
/// (`relation … already exists, skipping` at every start), which the driver logs at `info`.
pub const SERVE_DEFAULT: &str = "info,tokio_postgres=warn";

/// What the other commands log without `RUST_LOG`: warnings and errors.
pub const CLI_DEFAULT: &str = "warn";

/// How log lines are written (`--log-format`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, clap::ValueEnum)]
pub enum LogFormat {
    /// One line per event for people: time, level, target, message, then `field=value` pairs.
    #[default]
    Text,
    /// One JSON object per line for log collectors: `timestamp`, `level`, `target`, `message`,
    /// the event's fields beside them, and `span` (with its fields) when it happened in one.
    Json,
}

/// Why the log could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// `RUST_LOG` holds a directive that does not parse.
    #[error(
        "RUST_LOG `{value}` is not a log filter: {source} (e.g. `info`, `warn,planwright=debug`)"
    )]
    BadFilter {
        /// The variable's value.
        value: String,
        /// What is wrong with it.
        #[source]
        source: ParseError,
    },
    /// `RUST_LOG` is not valid Unicode.
    #[error("RUST_LOG is not valid Unicode")]
    NotUnicode,
    /// Another subscriber was installed first.
    #[error("cannot install the log: {0}")]
    Install(#[source] Box<dyn std::error::Error + Send + Sync>),
}

/// The filter for `rust_log` (the value of `RUST_LOG`) when it holds directives, otherwise for
/// the directives `default`.
pub fn filter(rust_log: Option<&str>, default: &str) -> Result<EnvFilter, LogError> {
    let value = rust_log.map(str::trim).filter(|v| !v.is_empty());
    let dirs = value.unwrap_or(default);
    EnvFilter::builder()
        .parse(dirs)
        .map_err(|source| LogError::BadFilter {
            value: dirs.to_string(),
            source,
        })
}

/// Installs the process's subscriber: `RUST_LOG` (or the directives `default` when it is unset
/// or empty) decides what passes, `format` how it is written, to stderr (in colour only on a
/// terminal).
pub fn init(format: LogFormat, default: &str) -> Result<(), LogError> {
    let rust_log = match std::env::var("RUST_LOG") {
        Ok(v) => Some(v),
        Err(std::env::VarError::NotPresent) => None,
        Err(std::env::VarError::NotUnicode(_)) => return Err(LogError::NotUnicode),
    };
    let builder = tracing_subscriber::fmt()
        .with_env_filter(filter(rust_log.as_deref(), default)?)
        .with_writer(std::io::stderr);
    match format {
        LogFormat::Text => builder
            .with_ansi(std::io::stderr().is_terminal())
            .try_init(),
        LogFormat::Json => builder
            .json()
            .flatten_event(true)
            .with_current_span(true)
            .with_span_list(false)
            .try_init(),
    }
    .map_err(LogError::Install)
}

#[cfg(test)]
mod tests {
    use super::*;

    use tracing_subscriber::filter::LevelFilter;

    #[test]
    fn without_rust_log_the_default_applies() {
        let serve = filter(None, SERVE_DEFAULT).unwrap();
        assert_eq!(serve.max_level_hint(), Some(LevelFilter::INFO));
        let cli = filter(Some("  "), CLI_DEFAULT).unwrap();
        assert_eq!(cli.to_string(), "warn");
    }

    #[test]
    fn rust_log_replaces_the_default() {
        let f = filter(Some("planwright_actors::serve=debug"), CLI_DEFAULT).unwrap();
        assert_eq!(f.to_string(), "planwright_actors::serve=debug");
        let f = filter(Some("error"), SERVE_DEFAULT).unwrap();
        assert_eq!(f.max_level_hint(), Some(LevelFilter::ERROR));
    }

    #[test]
    fn a_rust_log_that_does_not_parse_is_refused_with_its_value() {
        let e = filter(Some("serve=loud"), SERVE_DEFAULT).unwrap_err();
        let msg = e.to_string();
        assert!(
            msg.starts_with("RUST_LOG `serve=loud` is not a log filter"),
            "{msg}"
        );
    }
}
