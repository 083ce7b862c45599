//! Criterion benchmark of the field-acquisition planner: one whole `dental` conversation (bootstrap
//! questions answered from the fixture, 10 iterations), staged topology against the single `plan`
//! node, with no checkpointer and on a SQLite file (`sync` durability). The two topologies make the
//! same decisions; the difference is the cost of the extra node boundaries, which are what make
//! each model call resumable on its own.
//!
//! Run: `cargo bench -p planwright-actors --bench field_planner`. Results: `docs/PERFORMANCE.md`.

use criterion::{criterion_group, criterion_main, Criterion};
use planwright::{Engine, ThreadId};
use planwright_actors::field::runner::{self, Start};
use planwright_actors::field::schema::Schema;
use planwright_actors::field::{
    graph, input, FieldState, GraphOptions, OfflineFieldPolicy, Topology,
};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

fn fixture(part: &str) -> String {
    std::fs::read_to_string(format!(
        "{}/../fixtures/field/dental.{part}.json",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

async fn engine(topology: Topology, sqlite: Option<&str>) -> Engine<FieldState> {
    let options = GraphOptions {
        topology,
        ..GraphOptions::default()
    };
    let g = graph(Arc::new(OfflineFieldPolicy), &options).unwrap();
    let mut b = Engine::builder(g);
    if let Some(url) = sqlite {
        b = b.checkpointer(planwright::checkpoint::connect(url).await.unwrap());
    }
    b.build().await
}

fn bench(c: &mut Criterion) {
    let schema = Schema::from_json(&fixture("schema")).unwrap();
    let corpus = input::parse_corpus(&fixture("corpus")).unwrap();
    let answers: BTreeMap<String, String> =
        input::parse_answers(&fixture("answers"), Some(&schema)).unwrap();
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("field-bench-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("bench.db").display());
    let n = AtomicU64::new(0);
    let mut group = c.benchmark_group("field_conversation");
    for (name, topology, store) in [
        ("staged/memory", Topology::Staged, None),
        ("plan_node/memory", Topology::Plan, None),
        ("staged/sqlite", Topology::Staged, Some(url.as_str())),
        ("plan_node/sqlite", Topology::Plan, Some(url.as_str())),
    ] {
        let e = rt.block_on(engine(topology, store));
        // One conversation first, to report its node executions.
        rt.block_on(async {
            let update = input::initial_update("probe", "", schema.clone(), corpus.clone());
            let mut a = answers.clone();
            runner::run(
                &e,
                topology,
                "probe",
                Start::Input(Box::new(update)),
                &mut a,
            )
            .await
            .unwrap();
        });
        let execs: u64 = e.node_stats().iter().map(|s| s.executions).sum();
        eprintln!("{name}: {execs} node executions per conversation");
        group.bench_function(name, |b| {
            b.to_async(&rt).iter(|| async {
                let id = format!("c{}", n.fetch_add(1, Ordering::Relaxed));
                let update = input::initial_update(&id, "", schema.clone(), corpus.clone());
                let mut a = answers.clone();
                let run = runner::run(&e, topology, &id, Start::Input(Box::new(update)), &mut a)
                    .await
                    .unwrap();
                assert_eq!(run.status(), "ok");
                if store.is_none() {
                    // Ephemeral threads would pile up; drop the finished one.
                    let _ = e
                        .delete_thread(&ThreadId::new(run.thread.to_string()))
                        .await;
                }
            })
        });
        rt.block_on(e.shutdown());
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
