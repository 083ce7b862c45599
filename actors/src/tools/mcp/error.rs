//! What can go wrong with a tool server, each case naming the server (and the tool, for a call),
//! so a person reading a run's errors knows which of several servers to look at.

use std::time::Duration;

/// An MCP client error.
#[derive(Debug, thiserror::Error)]
pub enum McpError {
    /// A `--tools` value that is not a tool server spec.
    #[error("--tools `{spec}`: {reason}")]
    BadSpec {
        /// The value as given.
        spec: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The server's process could not be started.
    #[error("tool server `{server}` ({target}) did not start: {source}")]
    Spawn {
        /// The server's name.
        server: String,
        /// Its spec.
        target: String,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The server started (or the URL answered) but the MCP handshake failed.
    #[error("tool server `{server}` ({target}) does not speak MCP: {detail}")]
    Handshake {
        /// The server's name.
        server: String,
        /// Its spec.
        target: String,
        /// The handshake's error, and the end of the server's stderr when there is one.
        detail: String,
    },
    /// The server did not finish the handshake or the tool listing in time.
    #[error("tool server `{server}` ({target}) did not answer within {after:?} while {doing}")]
    ConnectTimeout {
        /// The server's name.
        server: String,
        /// Its spec.
        target: String,
        /// The time allowed.
        after: Duration,
        /// `connecting` or `listing its tools`.
        doing: &'static str,
    },
    /// `tools/list` failed.
    #[error("tool server `{server}`: listing its tools failed: {detail}")]
    ListTools {
        /// The server's name.
        server: String,
        /// The error.
        detail: String,
    },
    /// A step names a server that is not connected.
    #[error("no tool server `{server}` is connected (connected: {connected})")]
    UnknownServer {
        /// The name asked for.
        server: String,
        /// The connected servers' names.
        connected: String,
    },
    /// A step names a tool no connected server (or not the named one) has.
    #[error("no tool `{tool}` on {servers}")]
    UnknownTool {
        /// The tool asked for.
        tool: String,
        /// Where it was looked for.
        servers: String,
    },
    /// No listed tool fits the step (offline choice).
    #[error("no tool of the connected servers fits the step ({0})")]
    NoFittingTool(String),
    /// Every attempt of a call ran out of time.
    #[error("{server}/{tool}: no answer within {after:?} ({attempts} attempt(s))")]
    Timeout {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// Time allowed per attempt.
        after: Duration,
        /// Attempts made.
        attempts: u32,
    },
    /// The run was cancelled while the call was in flight.
    #[error("{server}/{tool}: cancelled with the run")]
    Cancelled {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
    },
    /// The request failed at the protocol or transport level (after retries when transient).
    #[error("{server}/{tool}: the call failed ({attempts} attempt(s)): {detail}")]
    Call {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// Attempts made.
        attempts: u32,
        /// The error.
        detail: String,
    },
    /// The tool answered with `isError: true`.
    #[error("{server}/{tool} returned an error: {message}")]
    ToolError {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// The error text it returned.
        message: String,
    },
    /// The tool answered with nothing a step can use as evidence.
    #[error("{server}/{tool} returned no usable content: {detail}")]
    Garbage {
        /// The server.
        server: String,
        /// The tool.
        tool: String,
        /// What was wrong with it.
        detail: String,
    },
}

impl McpError {
    /// Whether the error is about the configuration (exit 2 in the commands) rather than a server
    /// that failed.
    pub fn is_bad_input(&self) -> bool {
        matches!(self, McpError::BadSpec { .. })
    }
}
