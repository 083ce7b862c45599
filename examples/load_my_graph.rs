//! Load-testing your own graph with the library entry points `planwright_actors::load::run_workload`
//! (a closed loop) and `run_scenario` (arrival rates, ramps, soaks, mixes, thresholds).
//!
//! Run: `cargo run --release -p planwright-actors --example load_my_graph`

use planwright::graph::{Route, StateGraph, END, START};
use planwright::{Engine, NodeContext};
use planwright_actors::load::{
    run_scenario, run_workload, EngineConversations, Entry, Scenario, ScenarioOptions, Workload,
};
use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

planwright::state! {
    /// A tiny agent: a "model" call, then a few tool steps.
    pub struct Agent => AgentUpdate {
        replace steps: u32,
        append log: Vec<String>,
    }
}

#[tokio::main]
async fn main() {
    let graph = StateGraph::<Agent>::new("my-agent")
        .add_node("think", |_s: Arc<Agent>, _ctx: NodeContext| async {
            tokio::time::sleep(Duration::from_millis(20)).await; // stands in for a model call
            Ok(AgentUpdate::default().log(vec!["thought".into()]))
        })
        .add_sync_node("act", |s: &Agent, _: &NodeContext| {
            Ok(AgentUpdate::default().steps(s.steps + 1))
        })
        .add_edge(START, "think")
        .add_edge("think", "act")
        .add_conditional_edges(
            "act",
            |s: &Agent| Route::to(if s.steps >= 3 { "done" } else { "again" }),
            [("again", "think"), ("done", END)],
        )
        .compile()
        .expect("the graph compiles");
    let engine = Engine::new(graph).await;
    let workload = || Workload {
        graph: "my-agent".into(),
        conversations: 2_000,
        concurrency: 200,
        thread_prefix: "example".into(),
        input: Arc::new(|_| AgentUpdate::default()),
        answer: Arc::new(|_, _| None),
        model_nodes: HashSet::from(["think".to_string()]),
        on_done: Arc::new(|| {}),
        steps: None,
    };
    // A closed loop: 2,000 conversations, at most 200 at once.
    let report = run_workload(&engine, workload())
        .await
        .expect("a valid workload");
    println!("{}", report.to_text());

    // An arrival rate: 100 conversations started per second for 10 s, however fast they finish,
    // gated on thresholds the way a CI job would.
    let mut options = ScenarioOptions::new(Scenario::Constant {
        rate: 100.0,
        duration: Duration::from_secs(10),
    });
    options.thresholds = ["conversation_p99<1s", "failed<0.1%"]
        .iter()
        .map(|t| t.parse().expect("a valid threshold"))
        .collect();
    let entry = Entry {
        weight: 1,
        conversations: EngineConversations::new(engine.clone(), workload()),
    };
    let report = run_scenario(options, vec![entry])
        .await
        .expect("a valid scenario");
    println!("{}", report.to_text());
    std::process::exit(if report.thresholds_passed() { 0 } else { 1 });
}
