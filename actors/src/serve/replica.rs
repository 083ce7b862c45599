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

//!
//! This module is the keeper: it renews the leases and takes runs over, handing them to
//! `recovery`; the leases themselves are `leases`.

use super::leases::{claim, hold, Replica};
use super::{live_runs, recovery, AppState};
use planwright::runs::now_ms;
use std::sync::Arc;
use std::time::Duration;

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
    let local = live_runs::local_runs(state);
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
                    live_runs::cancel_local(state, &rec);
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
    let local = live_runs::local_runs(state);
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
                recovery::requeue(state, rec);
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
            if let Err(e) = recovery::resume_running(state, &rec).await {
                tracing::error!(run_id = rec.run_id, error = %e.1, "a run taken over could not be continued");
                let error = planwright::runs::RunRecordStatus::Error;
                let why = Some(e.for_record());
                live_runs::conclude(state, &rec, error, serde_json::Value::Null, why).await;
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
        live_runs::abandon(state, &rec).await;
    }
}
