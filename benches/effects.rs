//! Criterion benchmarks of once-only effects (`NodeContext::effect`): what a journaled call
//! costs on each backend.
//!
//! One run of a one-node graph whose node makes [`CALLS`] effect calls (a call that answers at
//! once, so the figure is the journal's), on a current-thread runtime: `effects/{backend}` with
//! the journal, `effects/{backend}_repeat` with the node opted out (`repeat_effects`: the same
//! calls and the same run, no journal). The cost of one journaled call is the difference over
//! [`CALLS`]. PostgreSQL is measured when `PLANWRIGHT_TEST_POSTGRES` (or the default test server)
//! answers.
//!
//! Run: `cargo bench -p planwright --bench effects`. Results: `docs/PERFORMANCE.md`.

use criterion::{criterion_group, criterion_main, Criterion};
use planwright::graph::{StateGraph, END, START};
use planwright::{
    CompiledGraph, Engine, NodeContext, NodeError, NodeOptions, RunOptions, ThreadId,
};
use std::hint::black_box;
use std::sync::Arc;

planwright::state! {
    /// What the calls add up to.
    pub struct Sum => SumUpdate {
        replace total: u64,
    }
}

/// Effect calls per run.
const CALLS: u64 = 20;

fn graph(repeat: bool) -> CompiledGraph<Sum> {
    let options = if repeat {
        NodeOptions::default().repeat_effects()
    } else {
        NodeOptions::default()
    };
    StateGraph::new("bench-effects")
        .add_node("call", |_s: Arc<Sum>, ctx: NodeContext| async move {
            let mut total = 0;
            for i in 0..CALLS {
                total += ctx
                    .effect("tool", |_key| async move { Ok::<_, NodeError>(i) })
                    .await?;
            }
            Ok(SumUpdate::default().total(total))
        })
        .node_options("call", options)
        .add_edge(START, "call")
        .add_edge("call", END)
        .compile()
        .expect("effects graph compiles")
}

fn bench(c: &mut Criterion) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = std::env::temp_dir().join(format!("planwright-bench-effects-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let pg = std::env::var("PLANWRIGHT_TEST_POSTGRES")
        .unwrap_or_else(|_| "postgres://postgres@127.0.0.1:5432/test".to_string());
    let backends = [
        ("memory", "memory:".to_string()),
        (
            "sqlite",
            format!("sqlite:{}", dir.join("effects.sqlite").display()),
        ),
        ("postgres", pg),
    ];
    let mut n = 0u64;
    for (name, url) in backends {
        let Ok(cp) = rt.block_on(planwright::checkpoint::connect(&url)) else {
            eprintln!("effects/{name}: {url} unreachable, not measured");
            continue;
        };
        for repeat in [false, true] {
            let engine = rt.block_on(
                Engine::builder(graph(repeat))
                    .checkpointer(cp.clone())
                    .build(),
            );
            let id = if repeat {
                format!("effects/{name}_repeat")
            } else {
                format!("effects/{name}")
            };
            let prefix = format!("bench-effects-{}-{}", std::process::id(), id);
            c.bench_function(&id, |b| {
                b.iter(|| {
                    n += 1;
                    let out = rt
                        .block_on(engine.run(
                            ThreadId::new(format!("{prefix}-{n}")),
                            SumUpdate::default(),
                            RunOptions::default(),
                        ))
                        .expect("run");
                    black_box(out.state.total)
                })
            });
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench);
criterion_main!(benches);
