//! Errors a run can end with, and errors the engine's API returns.

use crate::checkpoint::CheckpointError;
use crate::ids::ThreadId;
use crate::reducer::MergeError;

/// Why a run failed — or, as [`RunError::Refused`], why the engine refused the request before
/// anything ran (a [`Refusal`]: the caller's mistake or the thread's situation, never a fault).
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// A router returned a label its conditional edge does not map.
    #[error(
        "router of `{node}` returned label `{label}`, which is not one of its targets ({targets})"
    )]
    UnknownLabel {
        /// The node whose router answered.
        node: String,
        /// The label it returned.
        label: String,
        /// The labels it may return.
        targets: String,
    },
    /// A router sent a task to a node that is not one of its targets.
    #[error("router of `{node}` sent a task to `{target}`, which is not one of its targets")]
    UnknownSendTarget {
        /// The node whose router answered.
        node: String,
        /// The node it sent to.
        target: String,
    },
    /// A dependency-driven batch names an unknown key or has a cycle.
    #[error("router of `{node}` returned a bad dependency batch: {reason}")]
    BadDag {
        /// The node whose router answered.
        node: String,
        /// What is wrong.
        reason: String,
    },
    /// Two tasks wrote one replace-field in a superstep.
    #[error(transparent)]
    Merge(#[from] MergeError),
    /// The run took more supersteps than the graph allows.
    #[error("step limit of {limit} reached; last nodes: {last_nodes:?}")]
    StepLimit {
        /// The limit.
        limit: u64,
        /// The nodes of the last supersteps, most recent last.
        last_nodes: Vec<String>,
    },
    /// A node failed and its retries (if any) are exhausted.
    #[error("node `{node}` failed after {attempts} attempt(s): {message}")]
    NodeFailed {
        /// The node.
        node: String,
        /// Attempts made.
        attempts: u32,
        /// The last error.
        message: String,
    },
    /// The engine refused the request before anything ran or was written.
    #[error(transparent)]
    Refused(#[from] Refusal),
    /// Storage failed.
    #[error(transparent)]
    Checkpoint(#[from] CheckpointError),
    /// A state, update or task list could not be (de)serialised.
    #[error("serialisation failed: {0}")]
    Serde(String),
    /// The stored thread was written by another graph and no migration hook accepted it.
    #[error("thread `{thread}` was written by graph {found}, this graph is {expected}; register a migration hook")]
    FingerprintMismatch {
        /// The thread.
        thread: ThreadId,
        /// This graph's fingerprint.
        expected: String,
        /// The stored fingerprint.
        found: String,
    },
    /// The stored thread was written by another graph and its migration hook refused it.
    #[error("thread `{thread}`: migration refused: {reason}")]
    MigrationRefused {
        /// The thread.
        thread: ThreadId,
        /// The hook's reason.
        reason: String,
    },
    /// The run was cancelled.
    #[error("run was cancelled")]
    Cancelled,
    /// An internal channel closed unexpectedly (an actor died).
    #[error("internal error: {0}")]
    Internal(String),
}

/// Why the engine refused a request before anything ran or was written: the caller asked for
/// something the thread or the engine cannot do now. A server answers these with a 4xx (or 503
/// for [`Refusal::ShuttingDown`]); every other [`RunError`] is a failure of the run or the system.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum Refusal {
    /// Another run is active on the thread and the run asked to be rejected rather than queued.
    #[error("thread `{0}` already has a run in progress")]
    ThreadBusy(ThreadId),
    /// Resume was called on a thread that is not interrupted.
    #[error("thread `{0}` is not interrupted; nothing to resume")]
    NotInterrupted(ThreadId),
    /// A resume value was rejected (unknown interrupt id, missing value).
    #[error("bad resume for thread `{thread}`: {reason}")]
    BadResume {
        /// The thread.
        thread: ThreadId,
        /// What is wrong.
        reason: String,
    },
    /// New input (or a continue) for a thread that is waiting for an answer.
    #[error("thread `{0}` is interrupted: resume it with a value")]
    Interrupted(ThreadId),
    /// New input for a thread whose run stopped between supersteps.
    #[error("thread `{0}` has an unfinished run: continue it instead of starting a new run")]
    UnfinishedRun(ThreadId),
    /// A continue for a thread with nothing pending.
    #[error("thread `{0}` has no unfinished run to continue")]
    NothingToContinue(ThreadId),
    /// The thread does not exist.
    #[error("thread `{0}` does not exist")]
    UnknownThread(ThreadId),
    /// A run option is invalid (e.g. a zero step limit).
    #[error("bad run options: {0}")]
    BadOptions(String),
    /// A node named in an API call does not exist.
    #[error("graph has no node `{0}`")]
    UnknownNode(String),
    /// The engine is shutting down and takes no new runs.
    #[error("engine is shutting down")]
    ShuttingDown,
    /// The request needs stored threads and the engine has no checkpointer.
    #[error("this engine has no checkpointer; {0} needs one")]
    NoCheckpointer(&'static str),
}

impl RunError {
    /// The refusal, when the engine refused the request rather than a run failing.
    pub fn refusal(&self) -> Option<&Refusal> {
        match self {
            Self::Refused(r) => Some(r),
            _ => None,
        }
    }
}

impl From<serde_json::Error> for RunError {
    fn from(e: serde_json::Error) -> Self {
        Self::Serde(e.to_string())
    }
}
