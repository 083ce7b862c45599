//! Criterion benchmarks of the runtime's per-step cost.
//!
//! Three levels, measured in the same run so their ratios mean something on a noisy machine:
//! - `baseline/direct_110`: the same 110 node bodies called directly in a loop, with the same
//!   reducers, no actors and no scheduling: the floor any runtime is measured against;
//! - `superstep/merge_route`: one superstep of the pure machine (merge an update, evaluate the
//!   router, build the next task);
//! - `engine/loop_110` and `engine/fanout_8`: whole runs through the supervisor and node actors on a
//!   current-thread tokio runtime;
//! - `resume/memory` and `resume/sqlite`: resuming an interrupted thread until the run ends (load,
//!   validate the value, run the node that receives it, store the result), and `resume_to_node/*`:
//!   only the part until the node that receives the value runs.
//!
//! Run: `cargo bench -p planwright --bench superstep`. Results: `docs/PERFORMANCE.md`.

use criterion::{criterion_group, criterion_main, Criterion};
use planwright::graph::{Route, Send, StateGraph, END, START};
use planwright::reducer::MergeCtx;
use planwright::runtime::machine::superstep;
use planwright::state::State;
use planwright::{CompiledGraph, Engine, NodeContext, NodeError, RunOptions, ThreadId};
use std::hint::black_box;

planwright::state! {
    /// A small loop state.
    pub struct Loop => LoopUpdate {
        replace count: u64,
        replace target: u64,
        append items: Vec<u64>,
    }
}

fn inc(s: &Loop, _: &NodeContext) -> Result<LoopUpdate, NodeError> {
    Ok(LoopUpdate::default().count(s.count + 1))
}

fn route(s: &Loop) -> Route {
    Route::to(if s.count >= s.target { "end" } else { "again" })
}

fn loop_graph() -> CompiledGraph<Loop> {
    StateGraph::new("bench-loop")
        .add_sync_node("inc", inc)
        .add_edge(START, "inc")
        .add_conditional_edges("inc", route, [("again", "inc"), ("end", END)])
        .step_limit(10_000)
        .compile()
        .expect("loop graph compiles")
}

fn fanout_graph() -> CompiledGraph<Loop> {
    StateGraph::new("bench-fanout")
        .add_sync_node("split", |_: &Loop, _: &NodeContext| {
            Ok(LoopUpdate::default())
        })
        .add_conditional_edges(
            "split",
            |_: &Loop| Route::Send((0..8).map(|i| Send::new("work", i.into())).collect()),
            ["work"],
        )
        .add_sync_node("work", |_: &Loop, ctx: &NodeContext| {
            let i = ctx.input().and_then(|v| v.as_u64()).unwrap_or(0);
            Ok(LoopUpdate::default().items(vec![i]))
        })
        .add_sync_node("join", |s: &Loop, _: &NodeContext| {
            Ok(LoopUpdate::default().count(s.items.len() as u64))
        })
        .add_edge(START, "split")
        .add_edge("work", "join")
        .add_edge("join", END)
        .compile()
        .expect("fanout graph compiles")
}

fn bench(c: &mut Criterion) {
    let ctx = NodeContext::detached("inc");
    c.bench_function("baseline/direct_110", |b| {
        b.iter(|| {
            let mut s = Loop {
                target: 110,
                ..Loop::default()
            };
            let mut m = MergeCtx::new();
            while s.count < s.target {
                let u = inc(&s, &ctx).expect("inc never fails");
                m = MergeCtx::new();
                m.set_writer("inc");
                s.apply(u, &mut m).expect("one writer");
                black_box(route(&s));
            }
            black_box((s, m))
        })
    });

    let graph = loop_graph();
    let first = superstep::start_tasks(&graph, &Loop::default(), 1).expect("start");
    c.bench_function("superstep/merge_route", |b| {
        b.iter(|| {
            let mut s = Loop {
                target: 110,
                ..Loop::default()
            };
            superstep::merge(&mut s, &first, vec![LoopUpdate::default().count(1)]).expect("merge");
            black_box(superstep::next_tasks(&graph, &s, &first, 2).expect("next"))
        })
    });

    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let engine = rt.block_on(Engine::new(loop_graph()));
    let mut n = 0u64;
    c.bench_function("engine/loop_110", |b| {
        b.iter(|| {
            n += 1;
            let out = rt
                .block_on(engine.run(
                    ThreadId::new(format!("l{n}")),
                    LoopUpdate::default().target(110),
                    RunOptions::default(),
                ))
                .expect("run");
            black_box(out.node_executions)
        })
    });
    let engine = rt.block_on(Engine::new(fanout_graph()));
    c.bench_function("engine/fanout_8", |b| {
        b.iter(|| {
            n += 1;
            let out = rt
                .block_on(engine.run(
                    ThreadId::new(format!("f{n}")),
                    LoopUpdate::default(),
                    RunOptions::default(),
                ))
                .expect("run");
            black_box(out.node_executions)
        })
    });
}

/// `ask` pauses for a value; `after` records it. Resuming runs `ask` (which receives the value)
/// and `after`.
/// When the current resume started, and how long it took to reach the node that receives the value.
static RESUMED_AT: std::sync::Mutex<Option<std::time::Instant>> = std::sync::Mutex::new(None);
static TO_NODE_NS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn asking_graph() -> CompiledGraph<Loop> {
    StateGraph::new("bench-ask")
        .add_sync_node("ask", |_: &Loop, ctx: &NodeContext| {
            let v = ctx.interrupt(serde_json::json!({"question": "n?"}))?;
            if let Some(t0) = *RESUMED_AT.lock().unwrap_or_else(|p| p.into_inner()) {
                TO_NODE_NS.fetch_add(
                    t0.elapsed().as_nanos() as u64,
                    std::sync::atomic::Ordering::Relaxed,
                );
            }
            Ok(LoopUpdate::default().count(v.as_u64().unwrap_or(0)))
        })
        .add_edge(START, "ask")
        .add_edge("ask", END)
        .compile()
        .expect("ask graph compiles")
}

/// A current-thread runtime, a scratch directory, and the asking graph's engine on memory and on
/// a SQLite file in that directory.
fn asking_engines(
    tag: &str,
) -> (
    tokio::runtime::Runtime,
    std::path::PathBuf,
    Vec<(&'static str, Engine<Loop>)>,
) {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = std::env::temp_dir().join(format!("planwright-bench-{tag}-{}", std::process::id()));
    let _ = std::fs::create_dir_all(&dir);
    let sqlite = format!("sqlite:{}", dir.join("resume.sqlite").display());
    let engines = [("memory", "memory:".to_string()), ("sqlite", sqlite)]
        .into_iter()
        .map(|(name, url)| {
            let engine = rt.block_on(async {
                let cp = planwright::checkpoint::connect(&url)
                    .await
                    .expect("checkpointer");
                Engine::builder(asking_graph())
                    .checkpointer(cp)
                    .build()
                    .await
            });
            (name, engine)
        })
        .collect();
    (rt, dir, engines)
}

fn bench_resume(c: &mut Criterion) {
    let (rt, dir, engines) = asking_engines("resume");
    for (name, engine) in engines {
        let mut n = 0u64;
        c.bench_function(&format!("resume/{name}"), |b| {
            b.iter_batched(
                || {
                    n += 1;
                    let t = ThreadId::new(format!("r{n}"));
                    rt.block_on(engine.run(
                        t.clone(),
                        LoopUpdate::default(),
                        RunOptions::default(),
                    ))
                    .expect("runs to the interrupt");
                    t
                },
                |t| {
                    let out = rt
                        .block_on(engine.resume(
                            t,
                            planwright::runtime::Resume::Value(7.into()),
                            RunOptions::default(),
                        ))
                        .expect("resumes");
                    black_box(out.state.count)
                },
                criterion::BatchSize::SmallInput,
            )
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// From `Engine::resume` to the moment the node that receives the value runs (LangGraph's
/// "resume -> ask_user receives value").
fn bench_resume_to_node(c: &mut Criterion) {
    let (rt, dir, engines) = asking_engines("resume-to-node");
    for (name, engine) in engines {
        let mut n = 0u64;
        c.bench_function(&format!("resume_to_node/{name}"), |b| {
            b.iter_custom(|iters| {
                TO_NODE_NS.store(0, std::sync::atomic::Ordering::Relaxed);
                for _ in 0..iters {
                    n += 1;
                    let t = ThreadId::new(format!("n{n}"));
                    *RESUMED_AT.lock().unwrap_or_else(|p| p.into_inner()) = None;
                    rt.block_on(engine.run(
                        t.clone(),
                        LoopUpdate::default(),
                        RunOptions::default(),
                    ))
                    .expect("runs to the interrupt");
                    *RESUMED_AT.lock().unwrap_or_else(|p| p.into_inner()) =
                        Some(std::time::Instant::now());
                    rt.block_on(engine.resume(
                        t,
                        planwright::runtime::Resume::Value(7.into()),
                        RunOptions::default(),
                    ))
                    .expect("resumes");
                }
                std::time::Duration::from_nanos(
                    TO_NODE_NS.load(std::sync::atomic::Ordering::Relaxed),
                )
            })
        });
    }
    let _ = std::fs::remove_dir_all(&dir);
}

criterion_group!(benches, bench, bench_resume, bench_resume_to_node);
criterion_main!(benches);
