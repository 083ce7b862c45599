//! The one conformance suite every checkpointer backend passes (`tests/checkpoint_conformance.rs`).
//! Each check uses thread ids under a unique prefix, so backends shared between runs (PostgreSQL)
//! need no cleanup between them.

use planwright::checkpoint::{
    sweep, BatchItem, BodyKind, CheckpointError, CheckpointMetadata, CheckpointRecord,
    CheckpointSource, Checkpointer, Retention, TaskWrite, WriteKind,
};
use planwright::{CheckpointId, TaskId, ThreadId};
use std::sync::Arc;
use std::time::Duration;

/// A record of `thread` with id `id` on `parent`, body `body`.
pub fn rec(
    thread: &ThreadId,
    id: u64,
    parent: Option<u64>,
    kind: BodyKind,
    body: &str,
) -> CheckpointRecord {
    CheckpointRecord {
        thread_id: thread.clone(),
        id: CheckpointId(id),
        parent: parent.map(CheckpointId),
        graph_fingerprint: "fp".into(),
        kind,
        body: body.as_bytes().to_vec(),
        next_tasks: b"[]".to_vec(),
        metadata: CheckpointMetadata {
            step: id,
            source: CheckpointSource::Loop,
            nodes: vec![format!("n{id}")],
            created_at_ms: 1_700_000_000_000 + id,
            extra: serde_json::json!({"id": id}),
            pause: None,
        },
    }
}

fn write(step: u64, index: u32, kind: WriteKind, key: &str, payload: &str) -> TaskWrite {
    TaskWrite {
        task: TaskId { step, index },
        node: format!("node{index}"),
        kind,
        key: key.into(),
        payload: payload.as_bytes().to_vec(),
    }
}

fn ids(chain: &[CheckpointRecord]) -> Vec<u64> {
    chain.iter().map(|r| r.id.0).collect()
}

/// Runs every check against `cp`. `prefix` must be unique to this run.
pub async fn run_all(cp: Arc<dyn Checkpointer>, prefix: &str) {
    conditional_put(&*cp, prefix).await;
    chains_and_get(&*cp, prefix).await;
    writes_are_idempotent_and_ordered(&*cp, prefix).await;
    writes_in_batches(&*cp, prefix).await;
    head_with_writes(&*cp, prefix).await;
    mixed_batches(&*cp, prefix).await;
    listing(&*cp, prefix).await;
    metadata_delete_and_prune(&*cp, prefix).await;
    create_thread_once(cp.clone(), prefix).await;
    replace_thread_metadata_only_as_read(cp.clone(), prefix).await;
    big_bodies(&*cp, prefix).await;
    concurrent_writers(cp.clone(), prefix).await;
    batches(&*cp, prefix).await;
    batches_of_distinct_threads(&*cp, prefix).await;
    trim_keeps_from_a_snapshot(&*cp, prefix).await;
    rewind_restores_a_past_head(&*cp, prefix).await;
    retention_by_age_and_count(&*cp, prefix).await;
    effects_are_put_once(&*cp, prefix).await;
    effects_go_with_their_checkpoints(&*cp, prefix).await;
    effects_of_concurrent_puts_agree(cp.clone(), prefix).await;
    cp.ping()
        .await
        .expect("a healthy backend answers its probe");
}

/// `head_with_writes`: the head record and the writes saved at it (not an older checkpoint's),
/// the same as `get` and `get_writes` give; none for a thread without checkpoints.
async fn head_with_writes(cp: &dyn Checkpointer, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/head-writes"));
    assert!(cp.head_with_writes(&t).await.unwrap().is_none());
    cp.put(rec(&t, 1, None, BodyKind::Snapshot, "{}"))
        .await
        .unwrap();
    let (head, writes) = cp.head_with_writes(&t).await.unwrap().unwrap();
    assert_eq!((head.id, writes.len()), (CheckpointId(1), 0));
    cp.put_writes(
        &t,
        CheckpointId(1),
        vec![write(1, 0, WriteKind::Update, "", "at1")],
    )
    .await
    .unwrap();
    cp.put(rec(&t, 2, Some(1), BodyKind::Delta, "[2]"))
        .await
        .unwrap();
    let at2 = vec![
        write(2, 0, WriteKind::Update, "", "a"),
        write(2, 1, WriteKind::Interrupt, "", "b"),
    ];
    cp.put_writes(&t, CheckpointId(2), at2.clone())
        .await
        .unwrap();
    let (head, writes) = cp.head_with_writes(&t).await.unwrap().unwrap();
    assert_eq!(head, cp.get(&t, CheckpointId(2)).await.unwrap());
    assert_eq!(writes, cp.get_writes(&t, CheckpointId(2)).await.unwrap());
    assert_eq!(writes, at2);
}

/// A record like [`rec`] created at `created_at_ms`.
pub fn rec_at(thread: &ThreadId, id: u64, kind: BodyKind, created_at_ms: u64) -> CheckpointRecord {
    let mut r = rec(
        thread,
        id,
        (id > 1).then(|| id - 1),
        kind,
        &format!("b{id}"),
    );
    r.metadata.created_at_ms = created_at_ms;
    r
}

/// Checkpoints 1..=n of `thread`, snapshots at `snapshots` (and 1), created at `base + id`.
async fn chain_at(cp: &dyn Checkpointer, thread: &ThreadId, n: u64, snapshots: &[u64], base: u64) {
    for id in 1..=n {
        let kind = if id == 1 || snapshots.contains(&id) {
            BodyKind::Snapshot
        } else {
            BodyKind::Delta
        };
        cp.put(rec_at(thread, id, kind, base + id)).await.unwrap();
    }
}

/// A rollback's rewind: the head back at 3 with exactly the pending writes it had then; a later
/// write extends 3 again; rewinding to nothing empties the thread but keeps its record.
async fn rewind_restores_a_past_head(cp: &dyn Checkpointer, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/rewind"));
    chain_at(cp, &t, 6, &[4], 0).await;
    cp.set_thread_metadata(&t, serde_json::json!({"owner": "ann"}))
        .await
        .unwrap();
    let before = vec![write(3, 0, WriteKind::Interrupt, "", "ask")];
    cp.put_writes(&t, CheckpointId(3), before.clone())
        .await
        .unwrap();
    // What the run wrote: a resume and an update at 3, and writes at 5.
    cp.put_writes(
        &t,
        CheckpointId(3),
        vec![
            write(3, 0, WriteKind::Resume, "", "yes"),
            write(3, 1, WriteKind::Update, "", "u"),
        ],
    )
    .await
    .unwrap();
    cp.put_writes(
        &t,
        CheckpointId(5),
        vec![write(5, 0, WriteKind::Update, "", "x")],
    )
    .await
    .unwrap();
    assert_eq!(
        cp.rewind(&t, Some(CheckpointId(3)), before.clone())
            .await
            .unwrap(),
        3
    );
    assert_eq!(cp.head(&t).await.unwrap(), Some(CheckpointId(3)));
    assert_eq!(ids(&cp.load_chain(&t, None).await.unwrap()), [1, 2, 3]);
    assert_eq!(cp.get_writes(&t, CheckpointId(3)).await.unwrap(), before);
    assert!(cp.get_writes(&t, CheckpointId(5)).await.unwrap().is_empty());
    // The chain goes on from 3: a new 4 is accepted, the old 4 is gone for good.
    cp.put(rec(&t, 7, Some(3), BodyKind::Delta, "after"))
        .await
        .expect("the rewound head takes a new child");
    assert_eq!(ids(&cp.load_chain(&t, None).await.unwrap()), [1, 2, 3, 7]);
    // To nothing: no checkpoint, no write, the thread's record stays.
    assert_eq!(cp.rewind(&t, None, vec![]).await.unwrap(), 4);
    assert_eq!(cp.head(&t).await.unwrap(), None);
    assert!(cp.get_writes(&t, CheckpointId(3)).await.unwrap().is_empty());
    assert_eq!(
        cp.thread_metadata(&t).await.unwrap(),
        Some(serde_json::json!({"owner": "ann"}))
    );
    cp.put(rec(&t, 8, None, BodyKind::Snapshot, "fresh"))
        .await
        .expect("a rewound-to-nothing thread starts again");
    let other = ThreadId::new(format!("{prefix}/rewind-nobody"));
    assert_eq!(cp.rewind(&other, None, vec![]).await.unwrap(), 0);
}

async fn trim_keeps_from_a_snapshot(cp: &dyn Checkpointer, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/trim"));
    chain_at(cp, &t, 8, &[4], 0).await;
    cp.put_writes(
        &t,
        CheckpointId(2),
        vec![write(3, 0, WriteKind::Update, "", "w")],
    )
    .await
    .unwrap();
    // Keeping from 6 keeps from the snapshot before it, 4.
    assert_eq!(cp.trim(&t, CheckpointId(6)).await.unwrap(), 3);
    assert_eq!(
        ids(&cp.load_chain(&t, None).await.unwrap()),
        [4, 5, 6, 7, 8]
    );
    assert!(cp.get_writes(&t, CheckpointId(2)).await.unwrap().is_empty());
    assert_eq!(cp.trim(&t, CheckpointId(6)).await.unwrap(), 0, "idempotent");
    let nobody = ThreadId::new(format!("{prefix}/trim-nobody"));
    assert_eq!(cp.trim(&nobody, CheckpointId(3)).await.unwrap(), 0);
}

async fn retention_by_age_and_count(cp: &dyn Checkpointer, prefix: &str) {
    let p = format!("{prefix}/ret/");
    let t = |name: &str| ThreadId::new(format!("{p}{name}"));
    chain_at(cp, &t("old"), 1, &[], 1_000).await;
    chain_at(cp, &t("new1"), 1, &[], 10_000).await;
    chain_at(cp, &t("new2"), 1, &[], 20_000).await;
    chain_at(cp, &t("new3"), 1, &[], 30_000).await;
    chain_at(cp, &t("long"), 10, &[5, 9], 40_000).await;
    let now = 50_000;
    let base = Retention {
        prefix: p.clone(),
        batch: 2,
        ..Retention::default()
    };
    // By thread age: only `old` (written at 1 s, 49 s ago) goes.
    let r = sweep(
        cp,
        &Retention {
            thread_age: Some(Duration::from_secs(45)),
            ..base.clone()
        },
        now,
    )
    .await
    .unwrap();
    assert_eq!((r.threads_seen, r.threads_deleted), (5, 1));
    assert_eq!(cp.head(&t("old")).await.unwrap(), None);
    // By thread count: the least recently written beyond 3 goes.
    let r = sweep(
        cp,
        &Retention {
            max_threads: Some(3),
            ..base.clone()
        },
        now,
    )
    .await
    .unwrap();
    assert_eq!(r.threads_deleted, 1);
    assert_eq!(cp.head(&t("new1")).await.unwrap(), None);
    assert!(cp.head(&t("new2")).await.unwrap().is_some());
    // By checkpoint count: the newest 3 (8, 9, 10) are kept, from the snapshot 5 on.
    let r = sweep(
        cp,
        &Retention {
            max_checkpoints: Some(3),
            ..base.clone()
        },
        now,
    )
    .await
    .unwrap();
    assert_eq!((r.threads_deleted, r.checkpoints_deleted), (0, 4));
    let listed: Vec<u64> = cp
        .list(&t("long"), None, 100)
        .await
        .unwrap()
        .iter()
        .map(|c| c.0 .0)
        .collect();
    assert_eq!(listed, [10, 9, 8, 7, 6, 5]);
    // By checkpoint age: those written from 40 009 on are young; 5..8 go, the chain still loads.
    let age = Duration::from_millis(now - 40_009);
    let r = sweep(
        cp,
        &Retention {
            checkpoint_age: Some(age),
            ..base.clone()
        },
        now,
    )
    .await
    .unwrap();
    assert_eq!(r.checkpoints_deleted, 4);
    assert_eq!(
        ids(&cp.load_chain(&t("long"), None).await.unwrap()),
        [9, 10]
    );
    // The head is kept however old: new2 and new3 keep their only checkpoint.
    let r = sweep(
        cp,
        &Retention {
            checkpoint_age: Some(Duration::from_millis(1)),
            ..base.clone()
        },
        now,
    )
    .await
    .unwrap();
    assert_eq!(r.threads_deleted, 0);
    assert_eq!(cp.head(&t("new2")).await.unwrap(), Some(CheckpointId(1)));
    assert_eq!(
        ids(&cp.load_chain(&t("long"), None).await.unwrap()),
        [9, 10]
    );
}

async fn conditional_put(cp: &dyn Checkpointer, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/put"));
    assert_eq!(cp.head(&t).await.unwrap(), None);
    cp.put(rec(&t, 1, None, BodyKind::Snapshot, "{}"))
        .await
        .unwrap();
    // A second "first" checkpoint would fork the thread.
    let err = cp
        .put(rec(&t, 1, None, BodyKind::Snapshot, "{}"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CheckpointError::Conflict {
                found: Some(CheckpointId(1)),
                ..
            }
        ),
        "{err}"
    );
    cp.put(rec(&t, 2, Some(1), BodyKind::Delta, "[1]"))
        .await
        .unwrap();
    // Building on an old parent is a conflict naming the real head; nothing is stored.
    let err = cp
        .put(rec(&t, 3, Some(1), BodyKind::Delta, "[2]"))
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            CheckpointError::Conflict {
                expected: Some(CheckpointId(1)),
                found: Some(CheckpointId(2)),
                ..
            }
        ),
        "{err}"
    );
    assert_eq!(cp.head(&t).await.unwrap(), Some(CheckpointId(2)));
    assert!(matches!(
        cp.get(&t, CheckpointId(3)).await.unwrap_err(),
        CheckpointError::NotFound { .. }
    ));
}

async fn chains_and_get(cp: &dyn Checkpointer, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/chain"));
    let kinds = [
        BodyKind::Snapshot,
        BodyKind::Delta,
        BodyKind::Delta,
        BodyKind::Snapshot,
        BodyKind::Delta,
    ];
    for (i, k) in kinds.iter().enumerate() {
        let id = i as u64 + 1;
        cp.put(rec(
            &t,
            id,
            (id > 1).then(|| id - 1),
            *k,
            &format!("body{id}"),
        ))
        .await
        .unwrap();
    }
    assert_eq!(ids(&cp.load_chain(&t, None).await.unwrap()), [4, 5]);
    assert_eq!(
        ids(&cp.load_chain(&t, Some(CheckpointId(3))).await.unwrap()),
        [1, 2, 3]
    );
    assert_eq!(
        ids(&cp.load_chain(&t, Some(CheckpointId(4))).await.unwrap()),
        [4]
    );
    assert!(matches!(
        cp.load_chain(&t, Some(CheckpointId(9))).await.unwrap_err(),
        CheckpointError::NotFound { .. }
    ));
    let nobody = ThreadId::new(format!("{prefix}/nobody"));
    assert!(cp.load_chain(&nobody, None).await.unwrap().is_empty());
    let got = cp.get(&t, CheckpointId(2)).await.unwrap();
    assert_eq!(
        got,
        rec(&t, 2, Some(1), BodyKind::Delta, "body2"),
        "round trip"
    );
}

/// `put_writes_many`: several threads' and checkpoints' writes in one call, each stored where it
/// belongs, one result each; a write saved again in a later batch replaces the earlier one.
async fn writes_in_batches(cp: &dyn Checkpointer, prefix: &str) {
    let a = ThreadId::new(format!("{prefix}/wbatch-a"));
    let b = ThreadId::new(format!("{prefix}/wbatch-b"));
    for t in [&a, &b] {
        cp.put(rec(t, 1, None, BodyKind::Snapshot, "{}"))
            .await
            .unwrap();
        cp.put(rec(t, 2, Some(1), BodyKind::Delta, "[]"))
            .await
            .unwrap();
    }
    let results = cp
        .put_writes_many(vec![
            (
                a.clone(),
                CheckpointId(1),
                vec![write(2, 0, WriteKind::Update, "", "a1")],
            ),
            (
                b.clone(),
                CheckpointId(2),
                vec![write(3, 1, WriteKind::Update, "", "b2")],
            ),
            (
                a.clone(),
                CheckpointId(2),
                vec![
                    write(3, 0, WriteKind::Update, "", "a2"),
                    write(3, 1, WriteKind::Update, "", "a2x"),
                ],
            ),
        ])
        .await;
    assert_eq!(results.len(), 3);
    assert!(results.iter().all(Result::is_ok), "{results:?}");
    let r = cp
        .put_writes_many(vec![(
            a.clone(),
            CheckpointId(1),
            vec![write(2, 0, WriteKind::Update, "", "a1-again")],
        )])
        .await;
    assert!(r[0].is_ok());
    let payloads =
        |ws: Vec<TaskWrite>| -> Vec<Vec<u8>> { ws.into_iter().map(|w| w.payload).collect() };
    assert_eq!(
        payloads(cp.get_writes(&a, CheckpointId(1)).await.unwrap()),
        [b"a1-again".to_vec()]
    );
    assert_eq!(
        payloads(cp.get_writes(&a, CheckpointId(2)).await.unwrap()),
        [b"a2".to_vec(), b"a2x".to_vec()]
    );
    assert_eq!(
        payloads(cp.get_writes(&b, CheckpointId(2)).await.unwrap()),
        [b"b2".to_vec()]
    );
    assert!(cp.get_writes(&b, CheckpointId(1)).await.unwrap().is_empty());
    assert!(cp.put_writes_many(Vec::new()).await.is_empty());
}

/// `put_batch`: records and task writes of several threads in one call, stored in order (a
/// record may follow its parent and writes their checkpoint in the same batch), one result each;
/// a conflicting record stores nothing and the rest of the batch is still stored.
async fn mixed_batches(cp: &dyn Checkpointer, prefix: &str) {
    let a = ThreadId::new(format!("{prefix}/mixed-a"));
    let b = ThreadId::new(format!("{prefix}/mixed-b"));
    cp.put(rec(&b, 1, None, BodyKind::Snapshot, "{}"))
        .await
        .unwrap();
    let results = cp
        .put_batch(vec![
            BatchItem::Record(rec(&a, 1, None, BodyKind::Snapshot, "{}")),
            BatchItem::Writes(
                a.clone(),
                CheckpointId(1),
                vec![write(2, 0, WriteKind::Update, "", "a-task")],
            ),
            // b's head is 1, not 5: a conflict.
            BatchItem::Record(rec(&b, 6, Some(5), BodyKind::Delta, "[]")),
            BatchItem::Record(rec(&a, 2, Some(1), BodyKind::Delta, "[1]")),
            BatchItem::Record(rec(&b, 2, Some(1), BodyKind::Delta, "[2]")),
            BatchItem::Writes(
                b.clone(),
                CheckpointId(2),
                vec![write(3, 1, WriteKind::Update, "", "b-task")],
            ),
        ])
        .await;
    assert_eq!(results.len(), 6);
    for (i, r) in results.iter().enumerate() {
        if i == 2 {
            assert!(
                matches!(r, Err(CheckpointError::Conflict { .. })),
                "item {i}: {r:?}"
            );
        } else {
            assert!(r.is_ok(), "item {i}: {r:?}");
        }
    }
    assert_eq!(cp.head(&a).await.unwrap(), Some(CheckpointId(2)));
    assert_eq!(cp.head(&b).await.unwrap(), Some(CheckpointId(2)));
    assert!(
        cp.get(&b, CheckpointId(6)).await.is_err(),
        "a conflicting record is not stored"
    );
    let payloads =
        |ws: Vec<TaskWrite>| -> Vec<Vec<u8>> { ws.into_iter().map(|w| w.payload).collect() };
    assert_eq!(
        payloads(cp.get_writes(&a, CheckpointId(1)).await.unwrap()),
        [b"a-task".to_vec()]
    );
    assert_eq!(
        payloads(cp.get_writes(&b, CheckpointId(2)).await.unwrap()),
        [b"b-task".to_vec()]
    );
    assert!(cp.put_batch(Vec::new()).await.is_empty());
}

async fn writes_are_idempotent_and_ordered(cp: &dyn Checkpointer, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/writes"));
    cp.put(rec(&t, 1, None, BodyKind::Snapshot, "{}"))
        .await
        .unwrap();
    cp.put_writes(
        &t,
        CheckpointId(1),
        vec![write(2, 1, WriteKind::Update, "", "b")],
    )
    .await
    .unwrap();
    cp.put_writes(
        &t,
        CheckpointId(1),
        vec![
            write(2, 0, WriteKind::Update, "", "a"),
            write(2, 1, WriteKind::Update, "", "b2"),
            write(2, 0, WriteKind::Memo, "k", "m"),
        ],
    )
    .await
    .unwrap();
    let got = cp.get_writes(&t, CheckpointId(1)).await.unwrap();
    let summary: Vec<(u32, WriteKind, &str, &[u8])> = got
        .iter()
        .map(|w| (w.task.index, w.kind, w.key.as_str(), w.payload.as_slice()))
        .collect();
    assert_eq!(
        summary,
        [
            (0, WriteKind::Update, "", &b"a"[..]),
            (0, WriteKind::Memo, "k", &b"m"[..]),
            (1, WriteKind::Update, "", &b"b2"[..]),
        ]
    );
    assert!(cp.get_writes(&t, CheckpointId(2)).await.unwrap().is_empty());
}

async fn listing(cp: &dyn Checkpointer, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/list/a"));
    for id in 1..=5 {
        let kind = if id == 1 {
            BodyKind::Snapshot
        } else {
            BodyKind::Delta
        };
        cp.put(rec(&t, id, (id > 1).then(|| id - 1), kind, "x"))
            .await
            .unwrap();
    }
    let all = cp.list(&t, None, 100).await.unwrap();
    assert_eq!(
        all.iter().map(|(id, _, _)| id.0).collect::<Vec<_>>(),
        [5, 4, 3, 2, 1]
    );
    assert_eq!(all[0].1, Some(CheckpointId(4)));
    assert_eq!(all[0].2.nodes, ["n5"]);
    let page = cp.list(&t, Some(CheckpointId(4)), 2).await.unwrap();
    assert_eq!(
        page.iter().map(|(id, _, _)| id.0).collect::<Vec<_>>(),
        [3, 2]
    );
    for name in ["b", "c"] {
        let other = ThreadId::new(format!("{prefix}/list/{name}"));
        cp.put(rec(&other, 1, None, BodyKind::Snapshot, "x"))
            .await
            .unwrap();
    }
    // A thread with metadata but no checkpoint (created, never run) is listed, without a head.
    cp.set_thread_metadata(
        &ThreadId::new(format!("{prefix}/list/d")),
        serde_json::json!(1),
    )
    .await
    .unwrap();
    let threads = cp
        .list_threads(&format!("{prefix}/list/"), 10, 0)
        .await
        .unwrap();
    let names: Vec<&str> = threads.iter().map(|s| s.thread_id.as_str()).collect();
    assert_eq!(
        names,
        [
            format!("{prefix}/list/a"),
            format!("{prefix}/list/b"),
            format!("{prefix}/list/c"),
            format!("{prefix}/list/d")
        ]
    );
    assert_eq!(threads[0].head, Some(CheckpointId(5)));
    assert_eq!(threads[0].head_metadata.as_ref().map(|m| m.step), Some(5));
    assert_eq!(threads[3].head, None);
    assert_eq!(threads[3].head_metadata, None);
    assert_eq!(threads[3].metadata, serde_json::json!(1));
    // One with both a record and checkpoints is listed once.
    cp.set_thread_metadata(
        &ThreadId::new(format!("{prefix}/list/a")),
        serde_json::json!({"owner": "ann"}),
    )
    .await
    .unwrap();
    let again = cp
        .list_threads(&format!("{prefix}/list/"), 10, 0)
        .await
        .unwrap();
    assert_eq!(again.len(), 4);
    assert_eq!(again[0].metadata, serde_json::json!({"owner": "ann"}));
    assert_eq!(again[0].head, Some(CheckpointId(5)));
    let page = cp
        .list_threads(&format!("{prefix}/list/"), 1, 1)
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].thread_id.as_str(), format!("{prefix}/list/b"));
    // A prefix is literal, not a pattern.
    assert!(cp
        .list_threads(&format!("{prefix}/list/%"), 10, 0)
        .await
        .unwrap()
        .is_empty());
}

async fn metadata_delete_and_prune(cp: &dyn Checkpointer, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/meta"));
    assert_eq!(cp.thread_metadata(&t).await.unwrap(), None);
    cp.set_thread_metadata(&t, serde_json::json!({"owner": "ann"}))
        .await
        .unwrap();
    for id in 1..=6 {
        let kind = if id == 1 {
            BodyKind::Snapshot
        } else {
            BodyKind::Delta
        };
        cp.put(rec(
            &t,
            id,
            (id > 1).then(|| id - 1),
            kind,
            &format!("b{id}"),
        ))
        .await
        .unwrap();
        cp.put_writes(
            &t,
            CheckpointId(id),
            vec![write(id + 1, 0, WriteKind::Update, "", "w")],
        )
        .await
        .unwrap();
    }
    assert_eq!(
        cp.thread_metadata(&t).await.unwrap(),
        Some(serde_json::json!({"owner": "ann"})),
        "metadata survives checkpoints"
    );
    cp.prune(&t, CheckpointId(4), b"snap4".to_vec())
        .await
        .unwrap();
    let chain = cp.load_chain(&t, None).await.unwrap();
    assert_eq!(ids(&chain), [4, 5, 6]);
    assert_eq!(chain[0].kind, BodyKind::Snapshot);
    assert_eq!(chain[0].body, b"snap4");
    assert_eq!(cp.list(&t, None, 100).await.unwrap().len(), 3);
    assert!(cp.get_writes(&t, CheckpointId(3)).await.unwrap().is_empty());
    assert_eq!(cp.get_writes(&t, CheckpointId(4)).await.unwrap().len(), 1);
    assert!(matches!(
        cp.prune(&t, CheckpointId(2), vec![]).await.unwrap_err(),
        CheckpointError::NotFound { .. }
    ));
    cp.delete_thread(&t).await.unwrap();
    assert_eq!(cp.head(&t).await.unwrap(), None);
    assert_eq!(cp.thread_metadata(&t).await.unwrap(), None);
    assert!(cp.get_writes(&t, CheckpointId(4)).await.unwrap().is_empty());
    cp.delete_thread(&t).await.unwrap();
    // The id can start over after a delete.
    cp.put(rec(&t, 1, None, BodyKind::Snapshot, "again"))
        .await
        .unwrap();
}

/// `create_thread`: only a thread id nobody holds is created, and of concurrent creators
/// exactly one wins and its metadata stays.
async fn create_thread_once(cp: Arc<dyn Checkpointer>, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/create"));
    assert!(cp
        .create_thread(&t, serde_json::json!({"owner": "ann"}))
        .await
        .unwrap());
    assert!(!cp
        .create_thread(&t, serde_json::json!({"owner": "bob"}))
        .await
        .unwrap());
    assert_eq!(
        cp.thread_metadata(&t).await.unwrap(),
        Some(serde_json::json!({"owner": "ann"})),
        "a refused create leaves the first creator's record"
    );
    // A thread with checkpoints and no record is held too.
    let ran = ThreadId::new(format!("{prefix}/create-ran"));
    cp.put(rec(&ran, 1, None, BodyKind::Snapshot, "{}"))
        .await
        .unwrap();
    assert!(!cp
        .create_thread(&ran, serde_json::json!({"owner": "bob"}))
        .await
        .unwrap());
    // After a delete the id is free again.
    cp.delete_thread(&t).await.unwrap();
    assert!(cp
        .create_thread(&t, serde_json::json!({"owner": "bob"}))
        .await
        .unwrap());
    // Eight users race for one new id, five rounds: one wins each round, and its record stays.
    for round in 0..5 {
        let t = ThreadId::new(format!("{prefix}/create-race-{round}"));
        let tries = (0..8).map(|u| {
            let (cp, t) = (cp.clone(), t.clone());
            tokio::spawn(async move {
                let owner = format!("user{u}");
                let won = cp
                    .create_thread(&t, serde_json::json!({ "owner": owner }))
                    .await
                    .unwrap();
                (owner, won)
            })
        });
        let results: Vec<(String, bool)> = futures::future::join_all(tries)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        let winners: Vec<&String> = results.iter().filter(|r| r.1).map(|r| &r.0).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        assert_eq!(
            cp.thread_metadata(&t).await.unwrap(),
            Some(serde_json::json!({ "owner": winners[0] })),
            "round {round}"
        );
    }
}

/// `replace_thread_metadata`: a record is replaced only while it is the one read, a deleted or
/// re-created thread is not written, and of concurrent updates from one read exactly one lands.
async fn replace_thread_metadata_only_as_read(cp: Arc<dyn Checkpointer>, prefix: &str) {
    use serde_json::json;
    let t = ThreadId::new(format!("{prefix}/replace"));
    let ann = json!({"owner": "ann", "created_at": "1"});
    // Unknown: nothing is written.
    assert!(!cp
        .replace_thread_metadata(&t, &ann, json!({"owner": "ann", "x": 1}))
        .await
        .unwrap());
    assert_eq!(cp.thread_metadata(&t).await.unwrap(), None);
    assert!(cp.create_thread(&t, ann.clone()).await.unwrap());
    let marked = json!({"owner": "ann", "created_at": "1", "cancelled_run": "r1"});
    assert!(cp
        .replace_thread_metadata(&t, &ann, marked.clone())
        .await
        .unwrap());
    assert_eq!(cp.thread_metadata(&t).await.unwrap(), Some(marked.clone()));
    // A stale read is refused and changes nothing.
    assert!(!cp
        .replace_thread_metadata(
            &t,
            &ann,
            json!({"owner": "ann", "assistant_id": "research"})
        )
        .await
        .unwrap());
    assert_eq!(cp.thread_metadata(&t).await.unwrap(), Some(marked.clone()));
    // Ann's thread deleted and the id created by Bob: Ann's update of what she read does not
    // bring her record back over Bob's.
    cp.delete_thread(&t).await.unwrap();
    assert!(!cp
        .replace_thread_metadata(&t, &marked, json!({"owner": "ann"}))
        .await
        .unwrap());
    assert_eq!(
        cp.thread_metadata(&t).await.unwrap(),
        None,
        "deleted stays deleted"
    );
    let bob = json!({"owner": "bob", "created_at": "2"});
    assert!(cp.create_thread(&t, bob.clone()).await.unwrap());
    assert!(!cp
        .replace_thread_metadata(&t, &marked, json!({"owner": "ann"}))
        .await
        .unwrap());
    assert_eq!(cp.thread_metadata(&t).await.unwrap(), Some(bob.clone()));
    // A thread holding checkpoints and no record is not given one.
    let ran = ThreadId::new(format!("{prefix}/replace-ran"));
    cp.put(rec(&ran, 1, None, BodyKind::Snapshot, "{}"))
        .await
        .unwrap();
    assert!(!cp
        .replace_thread_metadata(&ran, &serde_json::Value::Null, json!({"owner": "eve"}))
        .await
        .unwrap());
    let kept = cp.thread_metadata(&ran).await.unwrap();
    assert!(
        kept.as_ref().is_none_or(|m| m.get("owner").is_none()),
        "{kept:?}"
    );
    // Eight updates from one read, five rounds: one lands, the others are refused.
    for round in 0..5 {
        let t = ThreadId::new(format!("{prefix}/replace-race-{round}"));
        let read = json!({"owner": "ann", "n": 0});
        assert!(cp.create_thread(&t, read.clone()).await.unwrap());
        let tries = (1..=8).map(|n| {
            let (cp, t, read) = (cp.clone(), t.clone(), read.clone());
            tokio::spawn(async move {
                let won = cp
                    .replace_thread_metadata(&t, &read, json!({"owner": "ann", "n": n}))
                    .await
                    .unwrap();
                (n, won)
            })
        });
        let results: Vec<(i32, bool)> = futures::future::join_all(tries)
            .await
            .into_iter()
            .map(|r| r.unwrap())
            .collect();
        let winners: Vec<i32> = results.iter().filter(|r| r.1).map(|r| r.0).collect();
        assert_eq!(winners.len(), 1, "round {round}: {results:?}");
        assert_eq!(
            cp.thread_metadata(&t).await.unwrap(),
            Some(json!({"owner": "ann", "n": winners[0]})),
            "round {round}"
        );
    }
}

async fn big_bodies(cp: &dyn Checkpointer, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/big"));
    let body: String = (0..5_000_000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect();
    cp.put(rec(&t, 1, None, BodyKind::Snapshot, &body))
        .await
        .unwrap();
    assert_eq!(
        cp.get(&t, CheckpointId(1)).await.unwrap().body.len(),
        5_000_000
    );
}

async fn concurrent_writers(cp: Arc<dyn Checkpointer>, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/race"));
    cp.put(rec(&t, 1, None, BodyKind::Snapshot, "{}"))
        .await
        .unwrap();
    let attempts = (0..16).map(|i| {
        let cp = cp.clone();
        let t = t.clone();
        tokio::spawn(async move {
            cp.put(rec(&t, 2, Some(1), BodyKind::Delta, &format!("w{i}")))
                .await
        })
    });
    let results = futures::future::join_all(attempts).await;
    let won = results.iter().filter(|r| matches!(r, Ok(Ok(())))).count();
    let conflicts = results
        .iter()
        .filter(|r| matches!(r, Ok(Err(CheckpointError::Conflict { .. }))))
        .count();
    assert_eq!(
        (won, conflicts),
        (1, 15),
        "exactly one writer extends a parent"
    );
    assert_eq!(cp.list(&t, None, 10).await.unwrap().len(), 2);
}

/// A batch of distinct threads (PostgreSQL's one-statement path): each record stands or falls
/// on its own, with the error a single write would give; a batch sent again after it committed
/// (a retry) changes nothing and reports success.
async fn batches_of_distinct_threads(cp: &dyn Checkpointer, prefix: &str) {
    let t = |n: &str| ThreadId::new(format!("{prefix}/distinct/{n}"));
    let (new, ext, stale, bad, meta) = (t("new"), t("ext"), t("stale"), t("bad"), t("meta"));
    for th in [&ext, &stale] {
        cp.put(rec(th, 1, None, BodyKind::Snapshot, "{}"))
            .await
            .unwrap();
    }
    cp.put(rec(&stale, 2, Some(1), BodyKind::Delta, "[]"))
        .await
        .unwrap();
    // A thread whose row exists without a checkpoint (metadata written first).
    cp.set_thread_metadata(&meta, serde_json::json!({"k": 1}))
        .await
        .unwrap();
    let batch = vec![
        rec(&new, 1, None, BodyKind::Snapshot, "{}"),
        rec(&ext, 2, Some(1), BodyKind::Delta, "[]"),
        rec(&stale, 3, Some(1), BodyKind::Delta, "[]"),
        rec(&bad, 5, Some(5), BodyKind::Delta, "[]"),
        rec(&meta, 1, None, BodyKind::Snapshot, "{}"),
    ];
    let results = cp.put_many(batch).await;
    assert!(results[0].is_ok(), "{results:?}");
    assert!(results[1].is_ok(), "{results:?}");
    assert!(
        matches!(
            &results[2],
            Err(CheckpointError::Conflict {
                found: Some(CheckpointId(2)),
                ..
            })
        ),
        "{results:?}"
    );
    assert!(
        matches!(&results[3], Err(CheckpointError::Conflict { .. })),
        "{results:?}"
    );
    assert!(results[4].is_ok(), "{results:?}");
    assert_eq!(cp.head(&new).await.unwrap(), Some(CheckpointId(1)));
    assert_eq!(cp.head(&ext).await.unwrap(), Some(CheckpointId(2)));
    assert_eq!(cp.head(&stale).await.unwrap(), Some(CheckpointId(2)));
    assert_eq!(cp.head(&bad).await.unwrap(), None);
    assert_eq!(cp.head(&meta).await.unwrap(), Some(CheckpointId(1)));
    assert_eq!(
        cp.thread_metadata(&meta).await.unwrap(),
        Some(serde_json::json!({"k": 1})),
        "the thread's metadata survives its first checkpoint"
    );
    let chain = cp.load_chain(&ext, None).await.unwrap();
    assert_eq!(chain.last().unwrap().id, CheckpointId(2));
}

async fn batches(cp: &dyn Checkpointer, prefix: &str) {
    let a = ThreadId::new(format!("{prefix}/batch/a"));
    let b = ThreadId::new(format!("{prefix}/batch/b"));
    cp.put(rec(&b, 1, None, BodyKind::Snapshot, "{}"))
        .await
        .unwrap();
    let results = cp
        .put_many(vec![
            rec(&a, 1, None, BodyKind::Snapshot, "{}"),
            rec(&b, 1, None, BodyKind::Snapshot, "{}"),
            rec(&a, 2, Some(1), BodyKind::Delta, "[]"),
        ])
        .await;
    assert!(results[0].is_ok());
    assert!(matches!(results[1], Err(CheckpointError::Conflict { .. })));
    assert!(
        results[2].is_ok(),
        "a batch may extend its own earlier record"
    );
    assert_eq!(cp.head(&a).await.unwrap(), Some(CheckpointId(2)));
    assert_eq!(cp.head(&b).await.unwrap(), Some(CheckpointId(1)));
}

/// The effect journal: a key's first value stays (put-if-absent), whoever puts again gets it
/// back, and keys of one thread are apart from the same keys of another.
async fn effects_are_put_once(cp: &dyn Checkpointer, prefix: &str) {
    let j = cp
        .effect_journal()
        .expect("every backend keeps an effect journal");
    let t = ThreadId::new(format!("{prefix}/effects"));
    let u = ThreadId::new(format!("{prefix}/effects-other"));
    assert_eq!(j.effect_get(&t, "k1").await.unwrap(), None);
    let first = j
        .effect_put(&t, CheckpointId(1), "k1", b"{\"sent\":1}".to_vec())
        .await
        .unwrap();
    assert_eq!(first, b"{\"sent\":1}");
    let again = j
        .effect_put(&t, CheckpointId(1), "k1", b"{\"sent\":2}".to_vec())
        .await
        .unwrap();
    assert_eq!(again, b"{\"sent\":1}", "the first value stays");
    assert_eq!(
        j.effect_get(&t, "k1").await.unwrap().as_deref(),
        Some(&b"{\"sent\":1}"[..])
    );
    assert_eq!(
        j.effect_get(&u, "k1").await.unwrap(),
        None,
        "another thread"
    );
    j.effect_put(&u, CheckpointId(1), "k1", b"7".to_vec())
        .await
        .unwrap();
    assert_eq!(
        j.effect_get(&u, "k1").await.unwrap().as_deref(),
        Some(&b"7"[..])
    );
    // Large values and empty ones round-trip.
    let big = vec![b'x'; 1 << 20];
    j.effect_put(&t, CheckpointId(2), "big", big.clone())
        .await
        .unwrap();
    assert_eq!(j.effect_get(&t, "big").await.unwrap(), Some(big));
    j.effect_put(&t, CheckpointId(2), "empty", Vec::new())
        .await
        .unwrap();
    assert_eq!(j.effect_get(&t, "empty").await.unwrap(), Some(Vec::new()));
    // A journal entry alone does not make a thread known.
    let lone = ThreadId::new(format!("{prefix}/effects-lone"));
    j.effect_put(&lone, CheckpointId(1), "k", b"1".to_vec())
        .await
        .unwrap();
    assert_eq!(cp.head(&lone).await.unwrap(), None);
    assert_eq!(cp.thread_metadata(&lone).await.unwrap(), None);
    let listed = cp
        .list_threads(&format!("{prefix}/effects-lone"), 10, 0)
        .await
        .unwrap();
    assert!(listed.is_empty(), "{listed:?}");
}

/// Journal entries go with the checkpoints their tasks started from: all of them with the
/// thread, those below the kept checkpoint with `trim` and `prune`, those above the rewound-to
/// checkpoint with `rewind` (the ones at it stay).
async fn effects_go_with_their_checkpoints(cp: &dyn Checkpointer, prefix: &str) {
    let j = cp
        .effect_journal()
        .expect("every backend keeps an effect journal");
    let keys = |t: ThreadId| async move {
        let mut found = Vec::new();
        for cp_id in 1..=8u64 {
            if j.effect_get(&t, &format!("at{cp_id}"))
                .await
                .unwrap()
                .is_some()
            {
                found.push(cp_id);
            }
        }
        found
    };
    let journal_each = |t: ThreadId| async move {
        for cp_id in 1..=8u64 {
            j.effect_put(
                &t,
                CheckpointId(cp_id),
                &format!("at{cp_id}"),
                b"1".to_vec(),
            )
            .await
            .unwrap();
        }
    };
    // trim: keeping from 6 keeps from the snapshot at 4.
    let t = ThreadId::new(format!("{prefix}/effects-trim"));
    chain_at(cp, &t, 8, &[4], 0).await;
    journal_each(t.clone()).await;
    cp.trim(&t, CheckpointId(6)).await.unwrap();
    assert_eq!(keys(t.clone()).await, [4, 5, 6, 7, 8]);
    // prune from 5.
    let t = ThreadId::new(format!("{prefix}/effects-prune"));
    chain_at(cp, &t, 8, &[], 0).await;
    journal_each(t.clone()).await;
    cp.prune(&t, CheckpointId(5), b"{}".to_vec()).await.unwrap();
    assert_eq!(keys(t.clone()).await, [5, 6, 7, 8]);
    // rewind to 3: what tasks from 3 journaled stays, what came after goes.
    let t = ThreadId::new(format!("{prefix}/effects-rewind"));
    chain_at(cp, &t, 8, &[], 0).await;
    journal_each(t.clone()).await;
    cp.rewind(&t, Some(CheckpointId(3)), vec![]).await.unwrap();
    assert_eq!(keys(t.clone()).await, [1, 2, 3]);
    cp.rewind(&t, None, vec![]).await.unwrap();
    assert!(keys(t.clone()).await.is_empty());
    // delete_thread takes every entry, and a thread started again under the id starts empty.
    let t = ThreadId::new(format!("{prefix}/effects-delete"));
    chain_at(cp, &t, 8, &[], 0).await;
    journal_each(t.clone()).await;
    let other = ThreadId::new(format!("{prefix}/effects-delete-kept"));
    journal_each(other.clone()).await;
    cp.delete_thread(&t).await.unwrap();
    assert!(keys(t.clone()).await.is_empty());
    assert_eq!(keys(other).await.len(), 8, "other threads keep theirs");
    // Retention's sweep deletes through the same calls: a thread swept goes with its journal.
    let swept = ThreadId::new(format!("{prefix}/effects-swept"));
    chain_at(cp, &swept, 2, &[], 0).await;
    journal_each(swept.clone()).await;
    let retention = Retention {
        thread_age: Some(Duration::from_secs(1)),
        prefix: swept.as_str().to_string(),
        ..Retention::default()
    };
    sweep(cp, &retention, 1_800_000_000_000).await.unwrap();
    assert_eq!(cp.head(&swept).await.unwrap(), None);
    assert!(keys(swept).await.is_empty());
}

/// Sixteen puts of one key at once with different values: exactly one value is stored, and
/// every caller gets it.
async fn effects_of_concurrent_puts_agree(cp: Arc<dyn Checkpointer>, prefix: &str) {
    let t = ThreadId::new(format!("{prefix}/effects-race"));
    let mut tasks = Vec::new();
    for i in 0..16u8 {
        let (cp, t) = (cp.clone(), t.clone());
        tasks.push(tokio::spawn(async move {
            let j = cp.effect_journal().unwrap();
            j.effect_put(&t, CheckpointId(1), "race", vec![i])
                .await
                .unwrap()
        }));
    }
    let mut got = Vec::new();
    for task in tasks {
        got.push(task.await.unwrap());
    }
    got.dedup();
    assert_eq!(
        got.len(),
        1,
        "every caller gets the one stored value: {got:?}"
    );
    let j = cp.effect_journal().unwrap();
    assert_eq!(
        j.effect_get(&t, "race").await.unwrap(),
        Some(got[0].clone())
    );
}
