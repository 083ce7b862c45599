//! A fixed workload for counting instructions per node execution: the graphs of
//! `engine/loop_110` (111 node executions) and `engine/fanout_8` (10) of `benches/superstep.rs`,
//! REPS times and 4 × REPS times, on a current-thread runtime, no checkpointer (REPS from the
//! first argument). Criterion's iteration counts follow the clock, so a count of instructions
//! needs a fixed amount of work: run it under `valgrind --tool=cachegrind` at two REPS and divide
//! the difference by the node executions between them (`docs/PERFORMANCE.md`, issue 44).
//!
//! Build: `cargo bench -p planwright --bench per_node_fixed --no-run`.
use planwright::graph::{Route, Send, StateGraph, END, START};
use planwright::{CompiledGraph, Engine, NodeContext, NodeError, RunOptions, ThreadId};
use std::hint::black_box;

planwright::state! {
    /// The loop's state.
    pub struct Loop => LoopUpdate {
        replace count: u64,
        replace target: u64,
        append items: Vec<u64>,
    }
}

fn inc(s: &Loop, _: &NodeContext) -> Result<LoopUpdate, NodeError> {
    Ok(LoopUpdate::default().count(s.count + 1))
}

fn loop_graph() -> CompiledGraph<Loop> {
    StateGraph::new("bench-loop")
        .add_sync_node("inc", inc)
        .add_sync_node(
            "done",
            |_: &Loop, _: &NodeContext| Ok(LoopUpdate::default()),
        )
        .add_edge(START, "inc")
        .add_conditional_edges(
            "inc",
            |s: &Loop| {
                if s.count >= s.target {
                    Route::to("done")
                } else {
                    Route::to("inc")
                }
            },
            ["inc", "done"],
        )
        .add_edge("done", END)
        .compile()
        .unwrap()
}

fn fanout_graph() -> CompiledGraph<Loop> {
    StateGraph::new("bench-fanout")
        .add_sync_node("split", |_: &Loop, _: &NodeContext| {
            Ok(LoopUpdate::default())
        })
        .add_conditional_edges(
            "split",
            |_: &Loop| Route::Send((0..8u64).map(|i| Send::new("work", i.into())).collect()),
            ["work"],
        )
        .add_node(
            "work",
            |_s: std::sync::Arc<Loop>, ctx: NodeContext| async move {
                Ok(LoopUpdate::default()
                    .items(vec![ctx.input().and_then(|v| v.as_u64()).unwrap_or(0)]))
            },
        )
        .add_sync_node(
            "join",
            |_: &Loop, _: &NodeContext| Ok(LoopUpdate::default()),
        )
        .add_edge(START, "split")
        .add_edge("work", "join")
        .add_edge("join", END)
        .compile()
        .unwrap()
}

fn main() {
    let reps: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(100);
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let lp = rt.block_on(Engine::new(loop_graph()));
    let fan = rt.block_on(Engine::new(fanout_graph()));
    let mut nodes = 0;
    for n in 0..reps {
        let out = rt
            .block_on(lp.run(
                ThreadId::new(format!("l{n}")),
                LoopUpdate::default().target(110),
                RunOptions::default(),
            ))
            .unwrap();
        nodes += out.node_executions;
        for k in 0..4 {
            let out = rt
                .block_on(fan.run(
                    ThreadId::new(format!("f{n}.{k}")),
                    LoopUpdate::default(),
                    RunOptions::default(),
                ))
                .unwrap();
            nodes += out.node_executions;
        }
    }
    black_box(nodes);
    println!("{nodes} node executions");
}
