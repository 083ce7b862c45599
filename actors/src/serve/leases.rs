//! Leases: how a replica holds the runs it executes ([`super::replica`] says why). A run's
//! record carries its lease; a claim returns a fencing token that grows with every claim, and the
//! thread is fenced with it, so the database refuses writes from a replica holding an older one.
//! Stores without leases (SQLite, memory: one process) grant every claim: nothing here runs.

use super::AppState;
use planwright::runs::{now_ms, Claim, RunRecord, RunRecordStatus};
use planwright::ThreadId;
use std::time::Duration;

/// This process as a replica.
pub struct Replica {
    /// Its owner id in run leases.
    pub owner: String,
    /// How long a lease lasts without renewal.
    pub ttl: Duration,
    /// Runs taken over from other replicas since the start.
    pub taken_over: std::sync::atomic::AtomicU64,
    /// Leases claimed since the start (runs started, continued or taken over here).
    pub claimed: std::sync::atomic::AtomicU64,
    /// Set when the process stops: it renews what it still runs but takes nothing over.
    pub stopping: std::sync::atomic::AtomicBool,
}

impl Replica {
    /// A replica with a fresh owner id.
    pub fn new(ttl: Duration) -> Self {
        let n: u64 = rand::random();
        Self {
            owner: format!("replica-{}-{n:016x}", std::process::id()),
            ttl,
            taken_over: Default::default(),
            claimed: Default::default(),
            stopping: Default::default(),
        }
    }
}

/// Holds `rec` (a pending run this replica queues) with a lease, without fencing its thread
/// (a run before it may still be writing there). False when the run is not this replica's to
/// start: another replica holds it, it has ended, or it is gone — it was taken over while this
/// replica could not claim it (frozen between recording the run and claiming it). A run another
/// replica had already started, whose lease expired, is let go at once: the takeover of running
/// runs continues it from its checkpoint.
pub async fn hold(state: &AppState, rec: &RunRecord) -> Result<bool, String> {
    let Some(r) = &state.replica else {
        return Ok(true);
    };
    let claim = ask(state, r, rec).await?;
    match claim {
        Claim::Granted {
            status: RunRecordStatus::Pending,
            ..
        } => Ok(true),
        Claim::Granted { .. } => {
            release(state, rec).await;
            Ok(false)
        }
        Claim::Held { .. } | Claim::Ended(_) | Claim::Missing => Ok(false),
    }
}

/// Takes `rec` for this replica to run: claims its lease and fences its thread with the new
/// token. False when another replica holds it (its lease is live, or it fenced the thread with a
/// newer token) or it has ended. True at once for a store without leases.
pub async fn claim(state: &AppState, rec: &RunRecord) -> Result<bool, String> {
    let Some(r) = &state.replica else {
        return Ok(true);
    };
    let claim = ask(state, r, rec).await?;
    let Some(token) = claim.token() else {
        return Ok(false);
    };
    r.claimed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let fenced = state
        .checkpointer
        .fence(&ThreadId::new(&rec.thread_id), token)
        .await
        .map_err(|e| planwright::ErrorChain(&e).to_string());
    if !matches!(fenced, Ok(true)) {
        // The lease is this replica's but the thread is not (a newer token fenced it, or the
        // fence could not be written): let the lease go, or this replica's renewals would keep
        // a run nobody executes from ever being taken over.
        release(state, rec).await;
    }
    fenced
}

/// Asks the run store for `rec`'s lease for replica `r`, for its lease's life.
async fn ask(state: &AppState, r: &Replica, rec: &RunRecord) -> Result<Claim, String> {
    let ttl = r.ttl.as_millis() as u64;
    state
        .run_store
        .claim(&rec.run_id, &r.owner, now_ms(), ttl)
        .await
        .map_err(|e| planwright::ErrorChain(&e).to_string())
}

/// Gives up this replica's lease on `rec` (a run it stopped at a superstep boundary), so another
/// replica takes it over without waiting for the lease to expire.
pub async fn release(state: &AppState, rec: &RunRecord) {
    if let Some(r) = &state.replica {
        if let Err(e) = state.run_store.release(&rec.run_id, &r.owner).await {
            tracing::warn!(run_id = rec.run_id, error = %planwright::ErrorChain(&e), "a lease could not be released; it expires");
        }
    }
}

/// Gives up every lease of this replica: called once its runs are checkpointed on SIGTERM, so
/// the other replicas continue them at their next look instead of when the leases expire.
pub async fn release_all(state: &AppState) {
    if let Some(r) = &state.replica {
        if let Err(e) = state.run_store.release_all(&r.owner).await {
            tracing::warn!(error = %planwright::ErrorChain(&e), "leases could not be released; they expire");
        }
    }
}
