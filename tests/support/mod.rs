//! Small graphs shared by the runtime's integration tests.
#![allow(dead_code)]

use planwright::graph::{Route, StateGraph, END, START};
use planwright::{NodeContext, NodeError};
use std::sync::Arc;

planwright::state! {
    /// A state for routing tests.
    #[derive(PartialEq)]
    pub struct Walk => WalkUpdate {
        replace count: u64,
        append trace: Vec<String>,
        replace target: u64,
        append items: Vec<u64>,
    }
}

/// `inc` loops until `count == target`, then `done` runs.
pub fn counter_graph() -> StateGraph<Walk> {
    StateGraph::new("counter")
        .add_sync_node("inc", |s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default()
                .count(s.count + 1)
                .trace(vec![format!("inc{}", s.count + 1)]))
        })
        .add_sync_node("done", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().trace(vec!["done".into()]))
        })
        .add_edge(START, "inc")
        .add_conditional_edges(
            "inc",
            |s: &Walk| {
                if s.count >= s.target {
                    Route::to("finish")
                } else {
                    Route::to("again")
                }
            },
            [("again", "inc"), ("finish", "done")],
        )
        .add_edge("done", END)
}

/// An async node that sleeps `ms` (tokio time) then appends its name.
pub fn sleeper(
    name: &'static str,
    ms: u64,
) -> impl Fn(
    Arc<Walk>,
    NodeContext,
) -> futures::future::BoxFuture<'static, Result<WalkUpdate, NodeError>>
       + Send
       + Sync
       + 'static {
    move |_s, _ctx| {
        Box::pin(async move {
            tokio::time::sleep(std::time::Duration::from_millis(ms)).await;
            Ok(WalkUpdate::default().trace(vec![name.to_string()]))
        })
    }
}
