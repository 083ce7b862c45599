//! The simulated conversations: a small graph with every shape the runtime schedules
//! differently — a conditional edge, a parallel fan-out, an interrupt — whose answer depends on
//! its input only, so a fault-free run says what every faulty one must end with.

use super::tool::ToolPort;
use crate::graph::{Route, Send, StateGraph, END, START};
use crate::{CompiledGraph, NodeContext, NodeError, NodeOptions, RetryPolicy};
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

/// The work item `solo` of conversation `n` calls the tool for (`work` items are `n * 10 + i`).
fn solo_item(n: u64) -> u64 {
    1_000 + n
}

/// Calls the tool for `item` through the effect journal, and tells the tool's books the
/// result reached the node.
async fn call_tool(ctx: &NodeContext, port: &ToolPort, item: u64) -> Result<u64, NodeError> {
    // Each task makes one call: its key has index 0.
    let key = ctx.effect_key("tool", 0);
    let stopped = port.guard(key.clone());
    let receipt = ctx
        .effect("tool", |key| async move { port.call(&key, item).await })
        .await?;
    port.returned(&key);
    drop(stopped);
    Ok(receipt)
}

/// The graph: `plan` → three parallel `work` tasks (even `n`) or `solo` (odd `n`) → `ask` (an
/// interrupt the client answers) → `finish`. `work` and `solo` each make one external call
/// through `NodeContext::effect` to the tool behind `port` (retried on a lost reply), `work`
/// before its simulated work, so a crash can fall between the journaled call and the task's
/// commit.
pub(crate) fn graph(port: ToolPort) -> CompiledGraph<Conv> {
    let retry = NodeOptions::default()
        .retry(RetryPolicy::exponential(4, Duration::from_millis(50)).without_jitter());
    let solo_port = port.clone();
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
        .add_node("work", move |_s: Arc<Conv>, ctx: NodeContext| {
            let port = port.clone();
            async move {
                let v = ctx.input().and_then(|v| v.as_u64()).unwrap_or(0);
                let r = call_tool(&ctx, &port, v).await?;
                // Simulated time: the tasks finish in turn, so a crash can fall between them.
                tokio::time::sleep(Duration::from_millis(20 + 30 * (v % 10))).await;
                Ok(ConvUpdate::default().log(vec![format!("work {v} receipt {r}")]))
            }
        })
        .add_node("solo", move |s: Arc<Conv>, ctx: NodeContext| {
            let port = solo_port.clone();
            async move {
                tokio::time::sleep(Duration::from_millis(40)).await;
                let r = call_tool(&ctx, &port, solo_item(s.n)).await?;
                Ok(ConvUpdate::default().log(vec![format!("solo {} receipt {r}", s.n)]))
            }
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
        .node_options("work", retry.clone())
        .node_options("solo", retry)
        .compile()
        .expect("the simulation's graph compiles")
}
