//! What replicas rely on in PostgreSQL: run leases (claim, renew, expiry, release, tokens that
//! only grow) and fencing (a thread taken over refuses the old owner's checkpoints and task
//! writes). Times are passed in, so no test sleeps; two checkpointer instances on one database
//! stand for two processes.

#[path = "support/backends.rs"]
mod backends;

use planwright::checkpoint::{
    BodyKind, CheckpointError, CheckpointMetadata, CheckpointRecord, CheckpointSource, TaskWrite,
    WriteKind,
};
use planwright::runs::{Claim, PostgresRuns, RunChange, RunRecord, RunRecordStatus, RunStore};
use planwright::{CheckpointId, TaskId, ThreadId};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn leases_are_claimed_renewed_expired_and_released() {
    if backends::postgres().await.is_none() {
        return;
    }
    let s = PostgresRuns::connect(&backends::pg_url()).await.unwrap();
    assert!(s.leases());
    let p = format!("lease{}", backends::unique());
    let (run, thread) = (format!("{p}-r"), format!("{p}-t"));
    // Owners of this test alone: a renewal covers every run of its owner in the database.
    let (oa, ob, oc) = (format!("{p}-A"), format!("{p}-B"), format!("{p}-C"));
    s.insert(RunRecord::pending(&run, &thread, "research", 1))
        .await
        .unwrap();
    assert!(s
        .transition(
            &run,
            &[RunRecordStatus::Pending],
            RunRecordStatus::Running,
            RunChange::at(2)
        )
        .await
        .unwrap());
    let now = 1_000_000;
    let a = s
        .claim(&run, &oa, now, 1_000)
        .await
        .unwrap()
        .token()
        .expect("free: A claims it");
    assert_eq!(
        s.claim(&run, &ob, now + 500, 1_000).await.unwrap(),
        Claim::Held { owner: oa.clone() },
        "A's lease is live"
    );
    assert_eq!(
        s.renew(&oa, now + 900, 1_000).await.unwrap(),
        vec![(run.clone(), false)]
    );
    // A cancel asked on another replica reaches the holder at its next renewal.
    assert!(s.request_cancel(&run).await.unwrap());
    assert_eq!(
        s.renew(&oa, now + 900, 1_000).await.unwrap(),
        vec![(run.clone(), true)]
    );
    assert_eq!(
        s.claim(&run, &ob, now + 1_500, 1_000).await.unwrap(),
        Claim::Held { owner: oa.clone() },
        "renewed to now + 1900"
    );
    assert!(s
        .expired(now + 1_500, 1_000, 10)
        .await
        .unwrap()
        .iter()
        .all(|r| r.run_id != run));
    // A stops renewing: at now + 2000 the lease has expired and B takes over, with a newer token.
    let expired = s.expired(now + 2_000, 1_000, 1000).await.unwrap();
    assert!(expired.iter().any(|r| r.run_id == run), "listed as expired");
    let b = s
        .claim(&run, &ob, now + 2_000, 1_000)
        .await
        .unwrap()
        .token()
        .expect("expired: B claims it");
    assert!(b > a, "tokens only grow: {a} then {b}");
    assert!(
        s.renew(&oa, now + 2_100, 1_000).await.unwrap().is_empty(),
        "A's renewal tells it the run is gone"
    );
    // B stops and hands over at once.
    s.release(&run, &ob).await.unwrap();
    let c = s
        .claim(&run, &oc, now + 2_200, 1_000)
        .await
        .unwrap()
        .token()
        .expect("released");
    assert!(c > b);
    // An ended run is neither renewed nor listed.
    assert!(s
        .transition(
            &run,
            &[RunRecordStatus::Running],
            RunRecordStatus::Success,
            RunChange::at(3)
        )
        .await
        .unwrap());
    assert!(s.renew(&oc, now + 2_300, 1_000).await.unwrap().is_empty());
    assert!(s
        .expired(u64::MAX / 2, 1_000, 100_000)
        .await
        .unwrap()
        .iter()
        .all(|r| r.run_id != run));
}

/// A renewal that comes late (the replica was frozen, or the database cut off for longer than a
/// lease) keeps the leases nobody took in between: they are still the replica's, with the newest
/// token, and its runs go on. One another replica claimed is not renewed, nor one released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_late_renewal_keeps_the_leases_nobody_took() {
    if backends::postgres().await.is_none() {
        return;
    }
    let s = PostgresRuns::connect(&backends::pg_url()).await.unwrap();
    let p = format!("late{}", backends::unique());
    let thread = format!("{p}-t");
    let (oa, ob) = (format!("{p}-A"), format!("{p}-B"));
    let runs: Vec<String> = (0..3).map(|i| format!("{p}-r{i}")).collect();
    let now = 1_000_000;
    for run in &runs {
        s.insert(RunRecord::pending(run, &thread, "research", 1))
            .await
            .unwrap();
        assert!(s
            .transition(
                run,
                &[RunRecordStatus::Pending],
                RunRecordStatus::Running,
                RunChange::at(2)
            )
            .await
            .unwrap());
        s.claim(run, &oa, now, 1_000)
            .await
            .unwrap()
            .token()
            .unwrap();
    }
    // A misses its renewals for 5 s: every lease expired. B takes one run over; A releases one.
    s.claim(&runs[1], &ob, now + 5_000, 1_000)
        .await
        .unwrap()
        .token()
        .expect("expired: B claims it");
    s.release(&runs[2], &oa).await.unwrap();
    assert_eq!(
        s.renew(&oa, now + 5_100, 1_000).await.unwrap(),
        vec![(runs[0].clone(), false)],
        "the lease nobody took is A's again; the taken and the released ones are not"
    );
    assert_eq!(
        s.claim(&runs[0], &ob, now + 5_200, 1_000).await.unwrap(),
        Claim::Held { owner: oa.clone() },
        "renewed to now + 6100"
    );
    assert_eq!(
        s.lease_holder(&runs[1]).await.unwrap().as_deref(),
        Some(ob.as_str())
    );
}

fn record(thread: &ThreadId, id: u64) -> CheckpointRecord {
    CheckpointRecord {
        thread_id: thread.clone(),
        id: CheckpointId(id),
        parent: (id > 1).then(|| CheckpointId(id - 1)),
        graph_fingerprint: "fp".into(),
        kind: BodyKind::Snapshot,
        body: b"{}".to_vec(),
        next_tasks: b"[]".to_vec(),
        metadata: CheckpointMetadata {
            step: id,
            source: CheckpointSource::Loop,
            nodes: vec![],
            created_at_ms: 0,
            extra: serde_json::Value::Null,
            pause: None,
        },
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_taken_over_refuses_the_old_owners_writes() {
    if backends::postgres().await.is_none() {
        return;
    }
    let url = backends::pg_url();
    let a = planwright::checkpoint::connect(&url).await.unwrap();
    let b = planwright::checkpoint::connect(&url).await.unwrap();
    let t = ThreadId::new(format!("fence{}", backends::unique()));
    assert!(a.fence(&t, 10).await.unwrap(), "A takes the thread");
    a.put(record(&t, 1)).await.unwrap();
    a.put(record(&t, 2)).await.unwrap();
    assert!(
        !b.fence(&t, 9).await.unwrap(),
        "an older token does not take it"
    );
    assert!(b.fence(&t, 11).await.unwrap(), "B takes it over");
    let err = a.put(record(&t, 3)).await.unwrap_err();
    assert!(
        matches!(err, CheckpointError::Fenced { token: 10, .. }),
        "{err}"
    );
    let write = TaskWrite {
        task: TaskId { step: 2, index: 0 },
        node: "n".into(),
        kind: WriteKind::Update,
        key: String::new(),
        payload: b"{}".to_vec(),
    };
    let err = a
        .put_writes(&t, CheckpointId(2), vec![write.clone()])
        .await
        .unwrap_err();
    assert!(matches!(err, CheckpointError::Fenced { .. }), "{err}");
    assert!(
        a.get_writes(&t, CheckpointId(2)).await.unwrap().is_empty(),
        "nothing written"
    );
    // The new owner writes on; the chain stays linear.
    b.put_writes(&t, CheckpointId(2), vec![write])
        .await
        .unwrap();
    b.put(record(&t, 3)).await.unwrap();
    assert_eq!(b.head(&t).await.unwrap(), Some(CheckpointId(3)));
    let batch = a.put_many(vec![record(&t, 4)]).await;
    assert!(
        matches!(batch[0], Err(CheckpointError::Fenced { .. })),
        "{batch:?}"
    );
    // A process that never fenced the thread (one process, no replicas) still writes it as before.
    let c = planwright::checkpoint::connect(&url).await.unwrap();
    c.put(record(&t, 4)).await.unwrap();
    b.delete_thread(&t).await.unwrap();
}
