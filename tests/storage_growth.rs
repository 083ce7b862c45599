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
            let json = planwright::checkpoint::body_codec::decode(&rec.body).unwrap();
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

/// A dictionary trained on records shaped like the `dict` graph's deltas.
fn trained(word: &str) -> &'static [u8] {
    let samples: Vec<Vec<u8>> = (0..300)
        .map(|i| {
            format!(r#"[{{"count":{i},"trace":["{word} step {i}: looked at the notes and kept what they said"]}}]"#)
                .into_bytes()
        })
        .collect();
    Box::leak(
        zstd::dict::from_samples(&samples, 2048)
            .unwrap()
            .into_boxed_slice(),
    )
}

fn dict_graph(dictionary: &'static [u8], retired: Option<&'static [u8]>) -> StateGraph<Walk> {
    let g = StateGraph::<Walk>::new("dict")
        .add_sync_node("note", |s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().count(s.count + 1).trace(vec![format!(
                "walker step {}: looked at the notes and kept what they said",
                s.count + 1
            )]))
        })
        .add_edge(START, "note")
        .add_conditional_edges(
            "note",
            |s: &Walk| Route::to(if s.count >= 20 { "end" } else { "again" }),
            [("again", "note"), ("end", END)],
        )
        .compression_dictionary(dictionary);
    match retired {
        Some(r) => g.retired_dictionary(r),
        None => g,
    }
}

#[tokio::test]
async fn a_graph_with_a_dictionary_stores_small_records_against_it_and_reads_them_back() {
    let dict = trained("walker");
    let graph = dict_graph(dict, None).compile().unwrap();
    let id = graph.body_dictionary().unwrap().id();
    let cp = Arc::new(MemoryCheckpointer::new());
    let engine = Engine::builder(graph)
        .checkpointer(cp.clone())
        .build()
        .await;
    let t = ThreadId::new("dict");
    engine
        .run(t.clone(), WalkUpdate::default(), RunOptions::default())
        .await
        .unwrap();
    let mut named = 0;
    for n in 1..=21 {
        let rec = cp.get(&t, CheckpointId(n)).await.unwrap();
        if let Some(frame_dict) = zstd::zstd_safe::get_dict_id_from_frame(&rec.body) {
            assert_eq!(frame_dict.get(), id);
            named += 1;
        }
        let state = engine.state_at(&t, CheckpointId(n)).await.unwrap();
        assert_eq!(state.count, n - 1);
    }
    // Each delta is ~80 bytes of JSON: plain zstd leaves it alone, the dictionary does not.
    assert!(
        named >= 19,
        "{named} of 21 records compressed against the dictionary"
    );
}

#[test]
fn a_retired_dictionary_is_registered_when_the_graph_compiles() {
    let old = trained("retired");
    let frame = zstd::bulk::Compressor::with_dictionary(3, old)
        .unwrap()
        .compress(br#"[{"count":3,"trace":["retired step 3: looked at the notes"]}]"#)
        .unwrap();
    assert!(
        planwright::checkpoint::body_codec::decode(&frame).is_err(),
        "not registered before"
    );
    dict_graph(trained("current"), Some(old)).compile().unwrap();
    let json = planwright::checkpoint::body_codec::decode(&frame).unwrap();
    assert!(json.starts_with(br#"[{"count":3"#));
    assert!(matches!(
        dict_graph(trained("current"), Some(b"not a dictionary")).compile(),
        Err(planwright::GraphError::Dictionary(_))
    ));
}
