//! The run record and its status, as every backend stores them.

use crate::ids::CheckpointId;
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// Where a run is, in LangGraph's words.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunRecordStatus {
    /// Accepted, waiting for its thread (an enqueued run) or about to start.
    Pending,
    /// Executing.
    Running,
    /// Ended normally (including a planner that reports its own failure in its values).
    Success,
    /// Ended with an error, or could not start.
    Error,
    /// Exceeded its time limit.
    Timeout,
    /// Paused at an interrupt, or cancelled.
    Interrupted,
}

impl RunRecordStatus {
    /// Every status, for parsing and tests.
    pub const ALL: [RunRecordStatus; 6] = [
        Self::Pending,
        Self::Running,
        Self::Success,
        Self::Error,
        Self::Timeout,
        Self::Interrupted,
    ];

    /// The status as stored and served (`pending`, `running`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Pending => "pending",
            Self::Running => "running",
            Self::Success => "success",
            Self::Error => "error",
            Self::Timeout => "timeout",
            Self::Interrupted => "interrupted",
        }
    }

    /// Parses [`as_str`](Self::as_str)'s form.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|st| st.as_str() == s)
    }

    /// True once the run has ended (neither pending nor running).
    pub fn is_ended(self) -> bool {
        !matches!(self, Self::Pending | Self::Running)
    }
}

impl std::fmt::Display for RunRecordStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One run as the server accepted it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunRecord {
    /// Its id (unique across threads and restarts: the server uses UUIDs).
    pub run_id: String,
    /// The thread it runs on.
    pub thread_id: String,
    /// The assistant (graph) it runs.
    pub assistant_id: String,
    /// Where it is.
    pub status: RunRecordStatus,
    /// What it does when its thread is busy (`reject`, `enqueue`, `interrupt`, `rollback`).
    pub multitask_strategy: String,
    /// When it was accepted (ms since the Unix epoch).
    pub created_at: u64,
    /// When its status last changed.
    pub updated_at: u64,
    /// Free-form metadata from the request (a JSON object).
    pub metadata: Value,
    /// The request itself (input, command, stream modes…), so a queued run can start after a
    /// restart exactly as it was asked for.
    pub kwargs: Value,
    /// The user who created it (`None` without authentication).
    pub owner: Option<String>,
    /// Why it failed, when it did.
    pub error: Option<String>,
    /// The thread's head when the run started (`None`: the thread had no checkpoint, or the run
    /// has not started): a rollback rewinds the thread to it.
    pub start_checkpoint: Option<CheckpointId>,
    /// The task writes pending at `start_checkpoint` when the run started (a JSON array; `null`
    /// before it starts), restored by a rollback so a paused thread is paused again.
    pub start_writes: Value,
    /// Submission order, assigned by the store.
    pub seq: u64,
}

impl RunRecord {
    /// A new pending record created at `now`.
    pub fn pending(
        run_id: impl Into<String>,
        thread_id: impl Into<String>,
        assistant_id: impl Into<String>,
        now: u64,
    ) -> Self {
        Self {
            run_id: run_id.into(),
            thread_id: thread_id.into(),
            assistant_id: assistant_id.into(),
            status: RunRecordStatus::Pending,
            multitask_strategy: "reject".into(),
            created_at: now,
            updated_at: now,
            metadata: Value::Object(Default::default()),
            kwargs: Value::Object(Default::default()),
            owner: None,
            error: None,
            start_checkpoint: None,
            start_writes: Value::Null,
            seq: 0,
        }
    }
}

/// What a [`transition`](super::RunStore::transition) changes besides the status.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct RunChange {
    /// The time of the change (ms since the Unix epoch); becomes `updated_at`.
    pub at: u64,
    /// Sets the error (`None` leaves it as it is).
    pub error: Option<String>,
    /// Sets the start checkpoint (`None` leaves it as it is).
    pub start_checkpoint: Option<CheckpointId>,
    /// Sets the start writes (`None` leaves them as they are).
    pub start_writes: Option<Value>,
}

impl RunChange {
    /// A change at `at` with nothing else.
    pub fn at(at: u64) -> Self {
        Self {
            at,
            ..Self::default()
        }
    }

    /// With an error.
    pub fn error(mut self, e: impl Into<String>) -> Self {
        self.error = Some(e.into());
        self
    }

    /// With the start checkpoint and the writes pending there.
    pub fn started_from(mut self, cp: Option<CheckpointId>, writes: Value) -> Self {
        self.start_checkpoint = cp;
        self.start_writes = Some(writes);
        self
    }
}
