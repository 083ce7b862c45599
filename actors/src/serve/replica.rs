//! Replicas: several `serve` processes on one PostgreSQL database form one service.
//!
//! Each process is a replica with a random owner id. A run it executes is held by a **lease** in
//! the run's record (`RunStore::claim`), renewed every third of `--lease-ttl` while it runs; the
//! claim gives a **fencing token** that grows with every claim, and the thread is fenced with it
//! (`Checkpointer::fence`) before the engine starts, so the database refuses the thread's
//! checkpoints and task writes from any replica holding an older token. A replica that dies (or
//! freezes) stops renewing; once its leases expire, another replica claims the runs — a higher
//! token — and continues each thread from its last checkpoint and pending writes, so finished
//! tasks of the interrupted superstep are not run again. A frozen replica that wakes up finds its
//! writes refused, and its lease another replica's at its next renewal: it stops the run locally,
//! and its clients follow the run to its end there. A lease that expired while nobody took the
//! run (a renewal that came late: a database cut, a pause) is renewed, and its run goes on — a
//! late renewal is not a lost lease. A claim never takes an ended run ([`planwright::runs::Claim`]).
//! On SIGTERM a replica checkpoints its runs and releases their leases, so the others take them
//! over at once.
//!
//! Stores without leases (SQLite, memory: one process) grant every claim: nothing here runs.

use super::lifecycle;
use super::AppState;
use planwright::runs::{now_ms, Claim, RunRecord, RunRecordStatus};
use planwright::ThreadId;
use std::sync::Arc;
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
    let ttl = r.ttl.as_millis() as u64;
    let claim = state
        .run_store
        .claim(&rec.run_id, &r.owner, now_ms(), ttl)
        .await
        .map_err(|e| planwright::ErrorChain(&e).to_string())?;
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
    let ttl = r.ttl.as_millis() as u64;
    let claim = state
        .run_store
        .claim(&rec.run_id, &r.owner, now_ms(), ttl)
        .await
        .map_err(|e| planwright::ErrorChain(&e).to_string())?;
    let Some(token) = claim.token() else {
        return Ok(false);
    };
    r.claimed.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    state
        .checkpointer
        .fence(&ThreadId::new(&rec.thread_id), token)
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

/// Renews this replica's leases and takes over runs whose replica is gone, every third of the
/// lease's life and at least every second, until the process ends.
pub fn spawn_keeper(state: Arc<AppState>) -> Option<tokio::task::JoinHandle<()>> {
    let ttl = state.replica.as_ref()?.ttl;
    let every = (ttl / 3).clamp(Duration::from_millis(50), Duration::from_secs(1));
    Some(tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            if let Err(e) = keep(&state).await {
                tracing::error!(error = %e, "leases: renewal or takeover failed; trying again");
            }
        }
    }))
}

async fn keep(state: &Arc<AppState>) -> Result<(), String> {
    let Some(r) = &state.replica else {
        return Ok(());
    };
    let ttl = r.ttl.as_millis() as u64;
    // The runs this process executes, read *before* the renewal: each of them was claimed
    // before it was listed, so a renewal that does not return it means the lease is no longer
    // this replica's. (A run registered after this read is judged at the next round.)
    let local = lifecycle::local_runs(state);
    let held = state
        .run_store
        .renew(&r.owner, now_ms(), ttl)
        .await
        .map_err(|e| planwright::ErrorChain(&e).to_string())?;
    for (thread, run_id) in local {
        if held.iter().any(|(id, cancel)| *id == run_id && *cancel) {
            // Cancelled through another replica: stop it here, as a local cancel would.
            if let Ok(Some(rec)) = state.run_store.get(&run_id).await {
                if state.live.running_on(&thread).as_deref() == Some(run_id.as_str()) {
                    tracing::info!(
                        run_id,
                        thread_id = thread,
                        "cancel asked on another replica"
                    );
                    lifecycle::cancel_local(state, &rec);
                }
            }
            continue;
        }
        if !held.iter().any(|(id, _)| *id == run_id) {
            lost(state, r, &thread, &run_id).await;
        }
    }
    if !state.recovered.load(std::sync::atomic::Ordering::Acquire)
        || r.stopping.load(std::sync::atomic::Ordering::Acquire)
    {
        return Ok(());
    }
    let expired = state
        .run_store
        .expired(now_ms(), ttl, 16)
        .await
        .map_err(|e| planwright::ErrorChain(&e).to_string())?;
    let local = lifecycle::local_runs(state);
    for rec in expired {
        // A run of this process (executing, or claimed a moment ago and about to be) is not
        // taken over by this process: its lease expired only because a renewal came late.
        if local.iter().any(|(_, id)| *id == rec.run_id) || state.live.knows(&rec.run_id) {
            continue;
        }
        if rec.status == planwright::runs::RunRecordStatus::Pending {
            // Accepted by a replica that went away before starting it: queue it here.
            if hold(state, &rec).await? {
                tracing::warn!(
                    run_id = rec.run_id,
                    thread_id = rec.thread_id,
                    replica = r.owner,
                    "taking over a queued run whose replica is gone"
                );
                r.taken_over
                    .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                lifecycle::requeue(state, rec);
            }
            continue;
        }
        if claim(state, &rec).await? {
            tracing::warn!(
                run_id = rec.run_id,
                thread_id = rec.thread_id,
                replica = r.owner,
                "taking over a run whose replica is gone"
            );
            r.taken_over
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            if let Err(e) = lifecycle::resume_running(state, &rec).await {
                tracing::error!(run_id = rec.run_id, error = %e.1, "a run taken over could not be continued");
                lifecycle::end(
                    state,
                    &rec,
                    planwright::runs::RunRecordStatus::Error,
                    Some(e.for_record()),
                )
                .await;
            }
        }
    }
    Ok(())
}

/// A run this process executes whose lease the renewal did not return. It was taken over while
/// this process could not renew (frozen, cut off) only when another replica holds its lease now:
/// then it stops here, its client following the run to its end there. Otherwise (it ended, or
/// the store cannot tell) it goes on: a guess never stops a run.
async fn lost(state: &Arc<AppState>, r: &Replica, thread: &str, run_id: &str) {
    let holder = match state.run_store.lease_holder(run_id).await {
        Ok(h) => h,
        Err(e) => {
            tracing::warn!(run_id, thread_id = thread, error = %planwright::ErrorChain(&e), "leases: a run's holder cannot be read; it goes on");
            return;
        }
    };
    if holder.is_none() || holder.as_deref() == Some(r.owner.as_str()) {
        return;
    }
    // Running there, or already ended there: either way this process's copy is nobody's.
    let Ok(Some(rec)) = state.run_store.get(run_id).await else {
        return;
    };
    if state.live.running_on(thread).as_deref() == Some(run_id) {
        tracing::warn!(
            run_id,
            thread_id = thread,
            replica = r.owner,
            holder = holder.as_deref().unwrap_or_default(),
            "lease lost to another replica; stopping here"
        );
        lifecycle::abandon(state, &rec).await;
    }
}
