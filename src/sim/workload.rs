//! The simulated conversations: a small graph with every shape the runtime schedules
//! differently — a conditional edge, a parallel fan-out, an interrupt — whose answer depends on
//! its input only, so a fault-free run says what every faulty one must end with.

use crate::graph::{Route, Send, StateGraph, END, START};
use crate::{CompiledGraph, NodeContext};
use std::sync::Arc;
use std::time::Duration;

crate::state! {
    /// What a simulated conversation accumulates.
    #[derive(PartialEq)]
    pub struct Conv => ConvUpdate {
        /// The conversation's input.
        replace n: u64,
        /// What each node did, in order.
        append log: Vec<String>,
        /// How many entries `log` had when the conversation finished.
        replace total: u64,
    }
}

/// How many parallel tasks a fan-out superstep has.
const WIDTH: u64 = 3;

/// The answer a client gives conversation `n`'s question.
pub(crate) fn answer(n: u64) -> serde_json::Value {
    serde_json::json!(n * 7 + 1)
}

/// The graph: `plan` → three parallel `work` tasks (even `n`) or `solo` (odd `n`) → `ask` (an
/// interrupt the client answers) → `finish`.
pub(crate) fn graph() -> CompiledGraph<Conv> {
    StateGraph::<Conv>::new("sim")
        .add_sync_node("plan", |s: &Conv, _: &NodeContext| {
            Ok(ConvUpdate::default().log(vec![format!("plan {}", s.n)]))
        })
        .add_conditional_edges(
            "plan",
            |s: &Conv| {
                if s.n % 2 == 0 {
                    Route::Send(
                        (0..WIDTH)
                            .map(|i| Send::new("work", (s.n * 10 + i).into()))
                            .collect(),
                    )
                } else {
                    Route::to("solo")
                }
            },
            ["work", "solo"],
        )
        .add_node("work", |_s: Arc<Conv>, ctx: NodeContext| async move {
            let v = ctx.input().and_then(|v| v.as_u64()).unwrap_or(0);
            // Simulated time: the tasks finish in turn, so a crash can fall between them.
            tokio::time::sleep(Duration::from_millis(20 + 30 * (v % 10))).await;
            Ok(ConvUpdate::default().log(vec![format!("work {v}")]))
        })
        .add_node("solo", |s: Arc<Conv>, _ctx: NodeContext| async move {
            tokio::time::sleep(Duration::from_millis(40)).await;
            Ok(ConvUpdate::default().log(vec![format!("solo {}", s.n)]))
        })
        .add_sync_node("ask", |s: &Conv, ctx: &NodeContext| {
            let a = ctx.interrupt(serde_json::json!({ "question": s.n }))?;
            Ok(ConvUpdate::default().log(vec![format!("answer {a}")]))
        })
        .add_sync_node("finish", |s: &Conv, _: &NodeContext| {
            Ok(ConvUpdate::default().total(s.log.len() as u64))
        })
        .add_edge(START, "plan")
        .add_edge("work", "ask")
        .add_edge("solo", "ask")
        .add_edge("ask", "finish")
        .add_edge("finish", END)
        .compile()
        .expect("the simulation's graph compiles")
}
