//! The `fanout` benchmark shape: plan-execute-replan with trivial node bodies.
//!
//! `prepare_input → create_plan → validate_plan → review_plan → select_next_step`, which fans out
//! every ready step of a six-step diamond plan (s1; s2, s3, s4 after s1; s5 after s2 and s3; s6
//! after s4 and s5) to `execute_step`, joined by `assess_progress`. Step s3 fails its first attempt,
//! causing one `replan → validate_plan → review_plan`. Under superstep scheduling that is 25 node
//! executions, ending in `synthesize_report` — the same trace as LangGraph's reference benchmark.

use planwright::graph::{Route, Send, StateGraph, END, START};
use planwright::{CompiledGraph, GraphError, NodeContext, NodeError};
use serde_json::json;
use std::collections::BTreeMap;

/// Node executions per conversation.
pub const NODES_PER_CONVERSATION: u64 = 25;

const PLAN: [(&str, &[&str]); 6] = [
    ("s1", &[]),
    ("s2", &["s1"]),
    ("s3", &["s1"]),
    ("s4", &["s1"]),
    ("s5", &["s2", "s3"]),
    ("s6", &["s4", "s5"]),
];

planwright::state! {
    /// State of the fanout shape.
    pub struct FanoutState => FanoutUpdate {
        /// Step ids of the plan, in order.
        replace plan: Vec<String>,
        /// Outcome by step id: true = complete, false = failed.
        merge results: BTreeMap<String, bool>,
        /// Replans so far.
        replace replans: u32,
        /// Set by `synthesize_report`.
        replace report: String,
        /// Visited nodes (for verification).
        append trace: Vec<String>,
    }
}

fn deps(step: &str) -> &'static [&'static str] {
    PLAN.iter()
        .find(|(id, _)| *id == step)
        .map(|(_, d)| *d)
        .unwrap_or(&[])
}

fn ready(s: &FanoutState) -> Vec<String> {
    s.plan
        .iter()
        .filter(|id| s.results.get(*id) != Some(&true))
        .filter(|id| !(s.results.get(*id) == Some(&false) && s.replans == 0))
        .filter(|id| deps(id).iter().all(|d| s.results.get(*d) == Some(&true)))
        .cloned()
        .collect()
}

fn visit(name: &str) -> FanoutUpdate {
    FanoutUpdate::default().trace(vec![name.to_string()])
}

fn ok(u: FanoutUpdate) -> Result<FanoutUpdate, NodeError> {
    Ok(u)
}

/// Builds the fanout graph.
pub fn graph() -> Result<CompiledGraph<FanoutState>, GraphError> {
    StateGraph::<FanoutState>::new("bench-fanout")
        .add_sync_node("prepare_input", |_: &FanoutState, _: &NodeContext| {
            ok(visit("prepare_input"))
        })
        .add_sync_node("create_plan", |_: &FanoutState, _: &NodeContext| {
            ok(visit("create_plan").plan(PLAN.iter().map(|(id, _)| id.to_string()).collect()))
        })
        .add_sync_node("validate_plan", |_: &FanoutState, _: &NodeContext| {
            ok(visit("validate_plan"))
        })
        .add_sync_node("review_plan", |_: &FanoutState, _: &NodeContext| {
            ok(visit("review_plan"))
        })
        .add_sync_node("select_next_step", |_: &FanoutState, _: &NodeContext| {
            ok(visit("select_next_step"))
        })
        .add_sync_node("execute_step", |s: &FanoutState, ctx: &NodeContext| {
            let step = ctx
                .input()
                .and_then(|v| v["step"].as_str())
                .unwrap_or("?")
                .to_string();
            let met = !(step == "s3" && s.replans == 0);
            ok(visit("execute_step").results(BTreeMap::from([(step, met)])))
        })
        .add_sync_node("assess_progress", |_: &FanoutState, _: &NodeContext| {
            ok(visit("assess_progress"))
        })
        .add_sync_node("replan", |s: &FanoutState, _: &NodeContext| {
            ok(visit("replan").replans(s.replans + 1))
        })
        .add_sync_node("synthesize_report", |s: &FanoutState, _: &NodeContext| {
            ok(visit("synthesize_report").report(format!("{} steps complete", s.results.len())))
        })
        .add_edge(START, "prepare_input")
        .add_edge("prepare_input", "create_plan")
        .add_edge("create_plan", "validate_plan")
        .add_edge("validate_plan", "review_plan")
        .add_edge("review_plan", "select_next_step")
        .add_conditional_edges(
            "select_next_step",
            |s: &FanoutState| {
                let r = ready(s);
                if r.is_empty() {
                    Route::to("synthesize_report")
                } else {
                    Route::Send(
                        r.into_iter()
                            .map(|id| Send::new("execute_step", json!({ "step": id })))
                            .collect(),
                    )
                }
            },
            ["execute_step", "synthesize_report"],
        )
        .add_edge("execute_step", "assess_progress")
        .add_conditional_edges(
            "assess_progress",
            |s: &FanoutState| {
                if s.results.values().any(|m| !m) && s.replans == 0 {
                    Route::to("replan")
                } else if s.results.len() == s.plan.len() && s.results.values().all(|m| *m) {
                    Route::to("synthesize_report")
                } else {
                    Route::to("select_next_step")
                }
            },
            ["replan", "select_next_step", "synthesize_report"],
        )
        .add_edge("replan", "validate_plan")
        .add_edge("synthesize_report", END)
        .compile()
}

/// Checks a finished conversation reached the expected end state.
pub fn verify(s: &FanoutState) -> Result<(), String> {
    let all_met = s.results.len() == 6 && s.results.values().all(|m| *m);
    if !all_met
        || s.replans != 1
        || s.trace.len() != NODES_PER_CONVERSATION as usize
        || s.report.is_empty()
    {
        return Err(format!(
            "unexpected end state: results={:?} replans={} nodes={}",
            s.results,
            s.replans,
            s.trace.len()
        ));
    }
    Ok(())
}
