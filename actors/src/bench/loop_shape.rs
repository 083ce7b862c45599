//! The `loop` benchmark shape: the field-acquisition loop with trivial node bodies.
//!
//! Twelve raw fields. Each iteration is `tick → prepare → calc_gate → acquire → decide →
//! enforce_policy → search → observe → tick`; `observe` fills one field. Once all are filled, one
//! iteration ends in `calculate` (three derived fields) and one in `finish`: 12 × 8 + 7 + 7 = 110
//! node executions per conversation, the same trace as LangGraph's reference benchmark.

use planwright::graph::{Route, StateGraph, END, START};
use planwright::{CompiledGraph, NodeContext, NodeError};
use std::collections::BTreeMap;

/// Raw fields per conversation.
pub const RAW_FIELDS: usize = 12;
/// Node executions per conversation.
pub const NODES_PER_CONVERSATION: u64 = 110;

planwright::state! {
    /// State of the loop shape.
    pub struct LoopState => LoopUpdate {
        /// Loop iterations so far.
        replace iterations: u32,
        /// The action `enforce_policy` chose: `search`, `calculate` or `finish`.
        replace action: String,
        /// The field being acquired.
        replace target: Option<usize>,
        /// Acquired raw values by field name.
        merge fields: BTreeMap<String, f64>,
        /// The three derived values, once calculated.
        replace derived: Vec<f64>,
        /// Set by `finish`.
        replace done: bool,
    }
}

fn field_name(i: usize) -> String {
    format!("f{i:02}")
}

fn ok(u: LoopUpdate) -> Result<LoopUpdate, NodeError> {
    Ok(u)
}

/// Builds the loop graph.
pub fn graph() -> Result<CompiledGraph<LoopState>, planwright::GraphError> {
    let g = StateGraph::<LoopState>::new("bench-loop")
        .add_sync_node("tick", |s: &LoopState, _: &NodeContext| {
            ok(LoopUpdate::default().iterations(s.iterations + 1))
        })
        .add_sync_node("prepare", |_: &LoopState, _: &NodeContext| {
            ok(LoopUpdate::default())
        })
        .add_sync_node("calc_gate", |_: &LoopState, _: &NodeContext| {
            ok(LoopUpdate::default())
        })
        .add_sync_node("acquire", |s: &LoopState, _: &NodeContext| {
            let next = (0..RAW_FIELDS).find(|i| !s.fields.contains_key(&field_name(*i)));
            ok(LoopUpdate::default().target(next))
        })
        .add_sync_node("decide", |s: &LoopState, _: &NodeContext| {
            let action = match (s.target, s.derived.is_empty()) {
                (Some(_), _) => "search",
                (None, true) => "calculate",
                (None, false) => "finish",
            };
            ok(LoopUpdate::default().action(action.to_string()))
        })
        .add_sync_node("enforce_policy", |_: &LoopState, _: &NodeContext| {
            ok(LoopUpdate::default())
        })
        .add_sync_node("search", |_: &LoopState, _: &NodeContext| {
            ok(LoopUpdate::default())
        })
        .add_sync_node("observe", |s: &LoopState, _: &NodeContext| {
            let i = s.target.unwrap_or(0);
            ok(LoopUpdate::default()
                .fields(BTreeMap::from([(field_name(i), (i + 1) as f64 * 10.0)])))
        })
        .add_sync_node("calculate", |s: &LoopState, _: &NodeContext| {
            let total: f64 = s.fields.values().sum();
            ok(LoopUpdate::default().derived(vec![total, total * 0.3, total * 0.03]))
        })
        .add_sync_node("finish", |_: &LoopState, _: &NodeContext| {
            ok(LoopUpdate::default().done(true))
        })
        .add_edge(START, "tick")
        .add_edge("tick", "prepare")
        .add_edge("prepare", "calc_gate")
        .add_edge("calc_gate", "acquire")
        .add_edge("acquire", "decide")
        .add_edge("decide", "enforce_policy")
        .add_conditional_edges(
            "enforce_policy",
            |s: &LoopState| Route::To(s.action.clone().into()),
            ["search", "calculate", "finish"],
        )
        .add_edge("search", "observe")
        .add_edge("observe", "tick")
        .add_edge("calculate", "tick")
        .add_edge("finish", END);
    g.compile()
}

/// Checks a finished conversation reached the expected end state.
pub fn verify(s: &LoopState) -> Result<(), String> {
    let expected: f64 = (1..=RAW_FIELDS).map(|i| i as f64 * 10.0).sum();
    if !s.done
        || s.fields.len() != RAW_FIELDS
        || s.derived.first() != Some(&expected)
        || s.iterations != 14
    {
        return Err(format!(
            "unexpected end state: done={} fields={} derived={:?} iterations={}",
            s.done,
            s.fields.len(),
            s.derived,
            s.iterations
        ));
    }
    Ok(())
}
