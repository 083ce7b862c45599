//! The one conformance suite every run-store backend passes (`tests/run_store_conformance.rs`).
//! Every check works under a unique thread prefix and filters global listings by it, so a shared
//! PostgreSQL database needs no cleanup between runs.

use planwright::runs::{Claim, RunChange, RunRecord, RunRecordStatus, RunStore, RunStoreError};
use planwright::CheckpointId;
use serde_json::json;
use std::sync::Arc;

use RunRecordStatus::{Error, Interrupted, Pending, Running, Success};

/// A pending record of `thread` created at `at`.
pub fn rec(run: &str, thread: &str, at: u64) -> RunRecord {
    let mut r = RunRecord::pending(run, thread, "research", at);
    r.kwargs = json!({"input": {"goal": run}, "multitask_strategy": "enqueue"});
    r.metadata = json!({"by": "suite"});
    r.owner = Some("ann".into());
    r
}

/// Runs every check against `s`. `prefix` must be unique to this run.
pub async fn run_all(s: Arc<dyn RunStore>, prefix: &str) {
    insert_get_and_order(&*s, prefix).await;
    transitions_compare_and_set(&*s, prefix).await;
    unfinished_lists_pending_and_running_oldest_first(&*s, prefix).await;
    deletes(&*s, prefix).await;
    sweep_by_age_and_count(&*s, prefix).await;
    concurrent_transitions_have_one_winner(s.clone(), prefix).await;
    claims_say_why_and_never_take_an_ended_run(&*s, prefix).await;
}

async fn insert_get_and_order(s: &dyn RunStore, p: &str) {
    let t = format!("{p}/order");
    let a = s.insert(rec(&format!("{p}-a"), &t, 10)).await.unwrap();
    let b = s.insert(rec(&format!("{p}-b"), &t, 11)).await.unwrap();
    assert!(b.seq > a.seq, "seq grows with every insert");
    let got = s.get(&a.run_id).await.unwrap().expect("stored");
    assert_eq!(got, a, "every field round-trips");
    assert_eq!(got.kwargs["input"]["goal"], json!(format!("{p}-a")));
    assert_eq!(got.owner.as_deref(), Some("ann"));
    // The same insert again (a retry) returns what is stored; another thread is refused.
    let again = s.insert(rec(&format!("{p}-a"), &t, 99)).await.unwrap();
    assert_eq!(again, a);
    let err = s
        .insert(rec(&format!("{p}-a"), &format!("{p}/other"), 12))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, RunStoreError::Exists { thread_id, .. } if *thread_id == t),
        "{err}"
    );
    let listed = s.list_thread(&t, 10, 0).await.unwrap();
    assert_eq!(
        listed.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>(),
        [format!("{p}-b"), format!("{p}-a")],
        "newest first"
    );
    assert_eq!(s.list_thread(&t, 1, 1).await.unwrap()[0].run_id, a.run_id);
    assert!(s
        .list_thread(&format!("{p}/none"), 10, 0)
        .await
        .unwrap()
        .is_empty());
    assert!(s.get(&format!("{p}-missing")).await.unwrap().is_none());
}

async fn transitions_compare_and_set(s: &dyn RunStore, p: &str) {
    let t = format!("{p}/cas");
    let id = format!("{p}-cas");
    s.insert(rec(&id, &t, 1)).await.unwrap();
    // Only from the listed statuses.
    assert!(!s
        .transition(&id, &[Running], Success, RunChange::at(2))
        .await
        .unwrap());
    assert!(s
        .transition(
            &id,
            &[Pending],
            Running,
            RunChange::at(3).started_from(Some(CheckpointId(42)), json!([{"kind": "interrupt"}]))
        )
        .await
        .unwrap());
    let r = s.get(&id).await.unwrap().unwrap();
    assert_eq!((r.status, r.updated_at, r.created_at), (Running, 3, 1));
    assert_eq!(r.start_checkpoint, Some(CheckpointId(42)));
    assert_eq!(r.start_writes, json!([{"kind": "interrupt"}]));
    // A change without a checkpoint keeps the one set; an error is recorded.
    assert!(s
        .transition(
            &id,
            &[Pending, Running],
            Error,
            RunChange::at(4).error("boom")
        )
        .await
        .unwrap());
    let r = s.get(&id).await.unwrap().unwrap();
    assert_eq!(r.status, Error);
    assert_eq!(r.error.as_deref(), Some("boom"));
    assert_eq!(r.start_checkpoint, Some(CheckpointId(42)));
    assert!(!s
        .transition(
            &format!("{p}-nobody"),
            &[Pending],
            Running,
            RunChange::at(5)
        )
        .await
        .unwrap());
}

async fn unfinished_lists_pending_and_running_oldest_first(s: &dyn RunStore, p: &str) {
    let t = format!("{p}/unf");
    let ids: Vec<String> = (0..4).map(|i| format!("{p}-u{i}")).collect();
    for id in &ids {
        s.insert(rec(id, &t, 1)).await.unwrap();
    }
    s.transition(&ids[1], &[Pending], Running, RunChange::at(2))
        .await
        .unwrap();
    s.transition(&ids[2], &[Pending], Interrupted, RunChange::at(2))
        .await
        .unwrap();
    let mine: Vec<String> = s
        .unfinished(usize::MAX)
        .await
        .unwrap()
        .into_iter()
        .filter(|r| r.thread_id == t)
        .map(|r| r.run_id)
        .collect();
    assert_eq!(mine, [ids[0].clone(), ids[1].clone(), ids[3].clone()]);
    for id in &ids {
        s.transition(id, &[Pending, Running], Success, RunChange::at(3))
            .await
            .unwrap();
    }
}

async fn deletes(s: &dyn RunStore, p: &str) {
    let t = format!("{p}/del");
    for i in 0..3 {
        s.insert(rec(&format!("{p}-d{i}"), &t, 1)).await.unwrap();
    }
    assert!(s.delete(&format!("{p}-d0")).await.unwrap());
    assert!(!s.delete(&format!("{p}-d0")).await.unwrap(), "already gone");
    assert_eq!(s.delete_thread(&t).await.unwrap(), 2);
    assert!(s.list_thread(&t, 10, 0).await.unwrap().is_empty());
    // The id is free again.
    s.insert(rec(&format!("{p}-d0"), &format!("{p}/del2"), 1))
        .await
        .unwrap();
}

async fn sweep_by_age_and_count(s: &dyn RunStore, p: &str) {
    let sp = format!("{p}/sweep");
    let t = format!("{sp}/t");
    // Six ended (updated at 100..105), one running, one pending.
    for i in 0..6u64 {
        let id = format!("{p}-s{i}");
        s.insert(rec(&id, &t, 1)).await.unwrap();
        s.transition(&id, &[Pending], Success, RunChange::at(100 + i))
            .await
            .unwrap();
    }
    let running = format!("{p}-srun");
    s.insert(rec(&running, &t, 1)).await.unwrap();
    s.transition(&running, &[Pending], Running, RunChange::at(1))
        .await
        .unwrap();
    s.insert(rec(&format!("{p}-spend"), &t, 1)).await.unwrap();
    // Another prefix is untouched.
    assert_eq!(
        s.sweep(&format!("{p}/elsewhere"), Some(u64::MAX), None, 100)
            .await
            .unwrap(),
        0
    );
    // By age: ended before 102 (s0, s1), in batches of one.
    assert_eq!(s.sweep(&sp, Some(102), None, 1).await.unwrap(), 1);
    assert_eq!(s.sweep(&sp, Some(102), None, 1).await.unwrap(), 1);
    assert_eq!(s.sweep(&sp, Some(102), None, 1).await.unwrap(), 0);
    // By count: keep the newest two ended (s4, s5); never the running or pending.
    assert_eq!(s.sweep(&sp, None, Some(2), 100).await.unwrap(), 2);
    assert_eq!(
        left(s, &t).await,
        [
            format!("{p}-s4"),
            format!("{p}-s5"),
            format!("{p}-spend"),
            format!("{p}-srun")
        ]
    );
    assert_eq!(s.sweep(&sp, Some(u64::MAX), Some(0), 100).await.unwrap(), 2);
    assert_eq!(
        left(s, &t).await,
        [format!("{p}-spend"), format!("{p}-srun")]
    );
}

/// A cancel and a starting worker race on one pending run: exactly one wins.
async fn concurrent_transitions_have_one_winner(s: Arc<dyn RunStore>, p: &str) {
    let t = format!("{p}/race");
    for round in 0..20 {
        let id = format!("{p}-race{round}");
        s.insert(rec(&id, &t, 1)).await.unwrap();
        let (a, b) = tokio::join!(
            {
                let (s, id) = (s.clone(), id.clone());
                tokio::spawn(async move {
                    s.transition(&id, &[Pending], Running, RunChange::at(2))
                        .await
                        .unwrap()
                })
            },
            {
                let (s, id) = (s.clone(), id.clone());
                tokio::spawn(async move {
                    s.transition(&id, &[Pending], Interrupted, RunChange::at(2))
                        .await
                        .unwrap()
                })
            }
        );
        let (a, b) = (a.unwrap(), b.unwrap());
        assert!(
            a ^ b,
            "round {round}: exactly one transition wins ({a}, {b})"
        );
        let status = s.get(&id).await.unwrap().unwrap().status;
        assert_eq!(status, if a { Running } else { Interrupted });
    }
}

/// The run ids of `thread`, sorted.
async fn left(s: &dyn RunStore, thread: &str) -> Vec<String> {
    let mut v: Vec<String> = s
        .list_thread(thread, 100, 0)
        .await
        .unwrap()
        .into_iter()
        .map(|r| r.run_id)
        .collect();
    v.sort();
    v
}

/// A claim is granted only on a pending or running run, and a refused one says why: another
/// owner's live lease (stores with leases), an ended run, or no run at all. An ended run's lease
/// is never taken (a replica that froze before claiming its run must not start it again).
async fn claims_say_why_and_never_take_an_ended_run(s: &dyn RunStore, p: &str) {
    let t = format!("{p}/claim");
    let id = format!("{p}-claim");
    s.insert(rec(&id, &t, 1)).await.unwrap();
    let now = 1_000_000;
    let first = s.claim(&id, "A", now, 1_000).await.unwrap();
    assert!(
        matches!(
            first,
            Claim::Granted {
                status: Pending,
                ..
            }
        ),
        "{first:?}"
    );
    if s.leases() {
        assert_eq!(
            s.claim(&id, "B", now + 10, 1_000).await.unwrap(),
            Claim::Held { owner: "A".into() }
        );
    }
    assert!(s
        .transition(&id, &[Pending], Running, RunChange::at(2))
        .await
        .unwrap());
    let running = s.claim(&id, "A", now + 20, 1_000).await.unwrap();
    assert!(
        matches!(
            running,
            Claim::Granted {
                status: Running,
                ..
            }
        ),
        "{running:?}"
    );
    assert!(s
        .transition(&id, &[Running], Success, RunChange::at(3))
        .await
        .unwrap());
    // Ended: neither its holder nor anyone else (its lease long expired) claims it.
    assert_eq!(
        s.claim(&id, "A", now + 30, 1_000).await.unwrap(),
        Claim::Ended(Success)
    );
    assert_eq!(
        s.claim(&id, "B", now + 1_000_000, 1_000).await.unwrap(),
        Claim::Ended(Success)
    );
    if s.leases() {
        assert_eq!(
            s.lease_holder(&id).await.unwrap().as_deref(),
            Some("A"),
            "the refused claim changed nothing"
        );
    }
    assert_eq!(
        s.claim(&format!("{p}-no-such-run"), "A", now, 1_000)
            .await
            .unwrap(),
        Claim::Missing
    );
}
