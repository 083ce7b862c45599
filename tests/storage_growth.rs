//! Storage grows linearly with a thread's steps: an append-only field is stored as deltas with
//! periodic snapshots, never a full copy per step. Measured against a full-copy baseline computed
//! in the same run (the bytes LangGraph-style savers write: the whole state every step).

mod support;

use planwright::checkpoint::{Checkpointer, MemoryCheckpointer};
use planwright::graph::{Route, StateGraph, END, START};
use planwright::{CheckpointId, Engine, NodeContext, RunOptions, ThreadId};
use std::sync::Arc;
use support::*;

const STEPS: u64 = 500;

#[tokio::test]
async fn bytes_per_step_stay_flat_over_500_steps_while_full_copies_grow() {
    let graph = StateGraph::<Walk>::new("grow")
        .add_sync_node("note", |s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().count(s.count + 1).trace(vec![format!(
                "observation {:04} {}",
                s.count + 1,
                "x".repeat(80)
            )]))
        })
        .add_edge(START, "note")
        .add_conditional_edges(
            "note",
            |s: &Walk| Route::to(if s.count >= STEPS { "end" } else { "again" }),
            [("again", "note"), ("end", END)],
        )
        .step_limit(10_000)
        .compile()
        .unwrap();
    let cp = Arc::new(MemoryCheckpointer::new());
    let engine = Engine::builder(graph)
        .checkpointer(cp.clone())
        .build()
        .await;
    let t = ThreadId::new("grow");
    engine
        .run(t.clone(), WalkUpdate::default(), RunOptions::default())
        .await
        .unwrap();

    let mut ours = Vec::new();
    let mut full_copy = Vec::new();
    for id in 1..=STEPS + 1 {
        let rec = cp.get(&t, CheckpointId(id)).await.unwrap();
        ours.push(rec.stored_bytes() as u64);
        let state = engine.state_at(&t, CheckpointId(id)).await.unwrap();
        full_copy
            .push(serde_json::to_vec(&*state).unwrap().len() as u64 + rec.next_tasks.len() as u64);
    }
    let window = |v: &[u64], from: usize| v[from..from + 100].iter().sum::<u64>();
    let (ours_first, ours_last) = (window(&ours, 1), window(&ours, 401));
    let (full_first, full_last) = (window(&full_copy, 1), window(&full_copy, 401));
    let (ours_total, full_total): (u64, u64) = (ours.iter().sum(), full_copy.iter().sum());
    println!(
        "500 steps: ours {ours_total} bytes ({:.0}/step; steps 1-100: {ours_first}, 401-500: {ours_last}); \
         full copy {full_total} bytes ({:.0}/step; 1-100: {full_first}, 401-500: {full_last})",
        ours_total as f64 / STEPS as f64,
        full_total as f64 / STEPS as f64
    );
    // Linear: the last hundred steps cost about what the first hundred did (snapshots included).
    assert!(
        ours_last < ours_first * 3,
        "ours grows per step: {ours_first} -> {ours_last}"
    );
    // Quadratic baseline: the last hundred full copies are several times the first hundred.
    assert!(
        full_last > full_first * 5,
        "baseline {full_first} -> {full_last}"
    );
    assert!(
        ours_total * 10 < full_total,
        "ours {ours_total} vs full copy {full_total}"
    );
}

#[tokio::test]
async fn large_bodies_are_stored_compressed_beside_plain_small_ones_and_read_back() {
    let graph = StateGraph::<Walk>::new("packed")
        .add_sync_node("note", |s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().count(s.count + 1).trace(vec![format!(
                "observation {:04} {}",
                s.count + 1,
                "y".repeat(300)
            )]))
        })
        .add_edge(START, "note")
        .add_conditional_edges(
            "note",
            |s: &Walk| Route::to(if s.count >= 40 { "end" } else { "again" }),
            [("again", "note"), ("end", END)],
        )
        .compile()
        .unwrap();
    let cp = Arc::new(MemoryCheckpointer::new());
    let engine = Engine::builder(graph)
        .checkpointer(cp.clone())
        .build()
        .await;
    let t = ThreadId::new("packed");
    engine
        .run(t.clone(), WalkUpdate::default(), RunOptions::default())
        .await
        .unwrap();
    const ZSTD: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
    let (mut packed, mut plain) = (0, 0);
    for id in 1..=41 {
        let rec = cp.get(&t, CheckpointId(id)).await.unwrap();
        if rec.body.starts_with(&ZSTD) {
            packed += 1;
            let json = planwright::runtime::body_codec::decode(&rec.body).unwrap();
            assert!(
                json.len() > rec.body.len() * 2,
                "checkpoint {id} compresses"
            );
        } else {
            plain += 1;
            serde_json::from_slice::<serde_json::Value>(&rec.body).unwrap();
        }
        // Every checkpoint, whatever mix of records its chain holds, reads back exactly.
        let state = engine.state_at(&t, CheckpointId(id)).await.unwrap();
        assert_eq!(state.count, id - 1);
        assert_eq!(state.trace.len() as u64, id - 1);
    }
    assert!(packed > 0 && plain > 0, "packed {packed}, plain {plain}");
}
