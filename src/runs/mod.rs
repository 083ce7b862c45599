//! Run records: what a server knows of each run it accepted — queued, running, or ended — kept in
//! the same database as the threads, so a restart (or another replica) knows what was going on.
//!
//! A checkpoint says where a *thread* is; a run record says what a *request* asked for and what
//! became of it. LangGraph's server keeps both, and so must anything that wants to be a drop-in
//! for it: `GET /threads/{id}/runs` after a restart, a queued (`enqueue`) run that survives the
//! process, a cancel that a restart honours, a rollback that knows where the run began.
//!
//! One small trait ([`RunStore`]) with three backends — [`MemoryRuns`], `SqliteRuns` (feature
//! `sqlite`), `PostgresRuns` (feature `postgres`) — held to one conformance suite
//! (`tests/support/run_store_suite.rs`). Semantics every backend keeps:
//! - a record's `seq` is assigned by the store at insert and grows with every insert: it is the
//!   submission order (queued runs start in it) and the listing order;
//! - [`RunStore::insert`] is idempotent for the same run id and thread (a retried insert whose
//!   first attempt committed returns the stored record), and refuses a run id used by another thread;
//! - [`RunStore::transition`] changes the status only from one of the given statuses, atomically —
//!   the compare-and-set that lets a cancel and a starting worker race safely;
//! - [`RunStore::unfinished`] reads only pending and running records (an index), so a starting
//!   server's work grows with the runs it must pick up, not with the threads stored;
//! - [`RunStore::sweep`] deletes only ended records;
//! - [`RunStore::claim`] never claims an ended run, and says why a claim failed ([`Claim`]).
//!
//! Times are given by the caller (milliseconds since the Unix epoch), so the stores keep no clock.

mod claim;
pub mod events;
mod memory;
#[cfg(feature = "nats")]
mod nats_events;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_events;
mod record;
mod retention;
#[cfg(feature = "sqlite")]
mod sqlite;
#[cfg(feature = "sqlite")]
mod sqlite_events;
mod url;

pub use claim::Claim;
pub use events::{MemoryRunEvents, RunEventLog, StreamEvent};
pub use memory::MemoryRuns;
#[cfg(feature = "nats")]
pub use nats_events::NatsRunEvents;
#[cfg(feature = "postgres")]
pub use postgres::PostgresRuns;
#[cfg(feature = "postgres")]
pub use postgres_events::PostgresRunEvents;
pub use record::{RunChange, RunRecord, RunRecordStatus};
pub use retention::{spawn_sweeper, sweep, SweeperHandle};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteRuns;
#[cfg(feature = "sqlite")]
pub use sqlite_events::SqliteRunEvents;
pub use url::{connect, connect_events, connect_events_in, connect_in};

use async_trait::async_trait;

/// Why a run-store call failed.
#[derive(Debug, thiserror::Error)]
pub enum RunStoreError {
    /// A connection string the store cannot use.
    #[error("bad run store URL `{url}`: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// The run id is already used by a run of another thread.
    #[error("run id `{run_id}` is already used by thread `{thread_id}`")]
    Exists {
        /// The run id.
        run_id: String,
        /// The thread that has it.
        thread_id: String,
    },
    /// An append to a run's event log was refused: another writer holds the run, or appended.
    #[error("events of run `{run_id}` were not appended: {reason}")]
    AppendRefused {
        /// The run.
        run_id: String,
        /// Why.
        reason: String,
    },
    /// A stored row does not decode (corrupt data is an error, never a default).
    #[error("stored run `{run_id}` is corrupt: {reason}")]
    Corrupt {
        /// The run id.
        run_id: String,
        /// What is wrong.
        reason: String,
    },
    /// The backend failed.
    #[error("run store backend error during {op}: {source}")]
    Backend {
        /// What was being done.
        op: &'static str,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl RunStoreError {
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn backend(
        op: &'static str,
        e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Backend {
            op,
            source: e.into(),
        }
    }
}

/// Durable run records. See the module docs for what every backend guarantees.
#[async_trait]
pub trait RunStore: Send + Sync + 'static {
    /// A short name for reports (`memory`, `sqlite`, `postgres`).
    fn backend_name(&self) -> &'static str;

    /// Stores a new record and returns it as stored, with its `seq` assigned (the `seq` given is
    /// ignored). Storing the same run id for the same thread again returns the stored record
    /// unchanged; for another thread it is [`RunStoreError::Exists`].
    async fn insert(&self, record: RunRecord) -> Result<RunRecord, RunStoreError>;

    /// One record.
    async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, RunStoreError>;

    /// A thread's records, newest first, skipping `offset`, at most `limit`.
    async fn list_thread(
        &self,
        thread_id: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<RunRecord>, RunStoreError>;

    /// Pending and running records of every thread, oldest first, at most `limit`.
    async fn unfinished(&self, limit: usize) -> Result<Vec<RunRecord>, RunStoreError>;

    /// Sets the record's status to `to` (and applies `change`) if its status is one of `from`.
    /// Returns whether it did; an unknown run is `false`.
    async fn transition(
        &self,
        run_id: &str,
        from: &[RunRecordStatus],
        to: RunRecordStatus,
        change: RunChange,
    ) -> Result<bool, RunStoreError>;

    /// Deletes a record; whether it was there.
    async fn delete(&self, run_id: &str) -> Result<bool, RunStoreError>;

    /// Deletes every record of a thread; how many.
    async fn delete_thread(&self, thread_id: &str) -> Result<u64, RunStoreError>;

    /// Among records of threads whose id starts with `prefix`: deletes ended records last
    /// updated before `ended_before` (ms), and beyond the newest `keep` ended records, oldest
    /// first, at most `batch` of them per call; how many it deleted. Pending and running records
    /// are never deleted.
    async fn sweep(
        &self,
        prefix: &str,
        ended_before: Option<u64>,
        keep: Option<usize>,
        batch: usize,
    ) -> Result<u64, RunStoreError>;

    /// Whether this store keeps **leases**, so that several processes (replicas) share its runs:
    /// each running run is held by one replica, which renews its lease while it runs; a run whose
    /// lease expired is taken over by another, with a higher fencing token. Stores that only one
    /// process uses (memory, SQLite) keep none, and the calls below grant everything.
    fn leases(&self) -> bool {
        false
    }

    /// Claims the pending or running run `run_id` for `owner` until `now_ms + ttl_ms` if nobody
    /// holds it (no lease, its own, or an expired one), atomically: [`Claim::Granted`] with the
    /// run's new fencing token — greater than every token given before — or why not: another
    /// owner's lease is live ([`Claim::Held`]), the run has ended ([`Claim::Ended`]: an ended run
    /// is never claimed), or there is no such run. Stores without leases grant every claim of a
    /// pending or running run with token 0.
    async fn claim(
        &self,
        run_id: &str,
        _owner: &str,
        _now_ms: u64,
        _ttl_ms: u64,
    ) -> Result<Claim, RunStoreError> {
        Ok(match self.get(run_id).await? {
            None => Claim::Missing,
            Some(r) if r.status.is_ended() => Claim::Ended(r.status),
            Some(r) => Claim::Granted {
                token: 0,
                status: r.status,
            },
        })
    }

    /// Extends every lease `owner` holds on a pending or running run to `now_ms + ttl_ms` — one
    /// that expired too, as long as no other owner claimed the run since (the run is still this
    /// owner's, and its fencing token still the newest) — except one it released; returns those
    /// runs as (run id, whether a cancel was asked for it on another replica). A run of this owner
    /// that is missing was taken over by another, has ended, or was released.
    async fn renew(
        &self,
        _owner: &str,
        _now_ms: u64,
        _ttl_ms: u64,
    ) -> Result<Vec<(String, bool)>, RunStoreError> {
        Ok(Vec::new())
    }

    /// The owner holding `run_id`'s lease, if any (stores without leases: none).
    async fn lease_holder(&self, _run_id: &str) -> Result<Option<String>, RunStoreError> {
        Ok(None)
    }

    /// Asks whichever replica holds the running run `run_id` to cancel it (it sees the request
    /// at its next renewal). Returns whether the run was running.
    async fn request_cancel(&self, _run_id: &str) -> Result<bool, RunStoreError> {
        Ok(false)
    }

    /// Gives up `owner`'s lease on `run_id` at once (a replica that stops hands its runs over
    /// without making the others wait for the lease to expire); [`renew`](Self::renew) does not
    /// take it back.
    async fn release(&self, _run_id: &str, _owner: &str) -> Result<(), RunStoreError> {
        Ok(())
    }

    /// Gives up every lease `owner` holds (a replica stopping after it checkpointed its runs).
    async fn release_all(&self, _owner: &str) -> Result<(), RunStoreError> {
        Ok(())
    }

    /// Pending and running records no live replica holds, oldest first, at most `limit`: their
    /// lease expired before `now_ms`, or they were never claimed and were last updated more than
    /// `grace_ms` ago (their replica went away between recording the run and claiming it).
    async fn expired(
        &self,
        _now_ms: u64,
        _grace_ms: u64,
        _limit: usize,
    ) -> Result<Vec<RunRecord>, RunStoreError> {
        Ok(Vec::new())
    }
}

/// Milliseconds since the Unix epoch, now.
pub fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}
