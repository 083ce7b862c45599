//! The research planner over chat models: the simulator (offline answers with latency and faults)
//! reaches the offline result; a scripted chat model drives a run through `ask`; a provider that
//! keeps failing ends the run `failed`, never a panic.

mod research_support;

use planwright_actors::model::{ModelError, ScriptedModel, SimulatedModel};
use planwright_actors::research::output_json;
use planwright_actors::research::policy::{responders, ChatResearchPolicy, OfflineResearchPolicy};
use research_support::*;
use serde_json::json;
use std::sync::Arc;

#[tokio::test(start_paused = true)]
async fn the_simulator_reaches_the_offline_result() {
    let req = || input(BATTERY_GOAL, json!({}), Some(battery_notes()));
    let offline = run(Arc::new(OfflineResearchPolicy), req()).await;
    let sim = SimulatedModel::new(
        "sim:p50=200ms,p99=900ms,seed=4".parse().unwrap(),
        responders(),
    );
    let chat = run(Arc::new(ChatResearchPolicy::new(Arc::new(sim))), req()).await;
    assert_eq!(chat.status, offline.status);
    assert_eq!(chat.state.status, "ok");
    let (a, b) = (
        output_json(&offline.state, &offline.state.status),
        output_json(&chat.state, &chat.state.status),
    );
    assert_eq!(a["final_report"], b["final_report"]);
    assert_eq!(a["plan"], b["plan"]);
}

#[tokio::test(start_paused = true)]
async fn simulated_faults_are_retried_and_the_run_still_finishes() {
    let req = input(BATTERY_GOAL, json!({}), Some(battery_notes()));
    // 20 % errors and 10 % malformed answers: transient errors are retried by the node, malformed
    // ones fed back once by `ask`.
    let sim = SimulatedModel::new(
        "sim:p50=50ms,p99=200ms,errors=0.2,malformed=0.1,seed=8"
            .parse()
            .unwrap(),
        responders(),
    );
    let out = run(Arc::new(ChatResearchPolicy::new(Arc::new(sim))), req).await;
    let j = output_json(&out.state, &out.state.status);
    assert_eq!(j["status"], "ok", "{j}");
}

#[tokio::test]
async fn a_scripted_chat_model_drives_the_plan() {
    let model = Arc::new(ScriptedModel::new());
    model.push_json(
        "create_plan",
        json!({"steps": [
            {"id": "find", "description": "find battery costs", "depends_on": [], "tool": "search",
             "params": {"query": "solar battery cost"}, "acceptance_criteria": [{"min_sources": 1}]},
        ]}),
    );
    model.push_json(
        "synthesize_report",
        json!({"text": "# Brief\n\nCosts fell. [b1]"}),
    );
    let out = run(
        Arc::new(ChatResearchPolicy::new(model.clone())),
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let j = output_json(&out.state, &out.state.status);
    assert_eq!(j["plan"][0]["id"], "find", "{j}");
    let calls: Vec<String> = model.requests().iter().map(|r| r.call.clone()).collect();
    assert_eq!(calls.first().map(String::as_str), Some("create_plan"));
    assert!(
        calls.contains(&"synthesize_report".to_string()),
        "{calls:?}"
    );
}

#[tokio::test(start_paused = true)]
async fn a_provider_that_keeps_failing_ends_the_run_failed() {
    let model = Arc::new(ScriptedModel::new());
    for _ in 0..10 {
        model.push(
            "create_plan",
            Err(ModelError::Server {
                status: 503,
                body: "down".into(),
            }),
        );
    }
    let out = run(
        Arc::new(ChatResearchPolicy::new(model)),
        input(BATTERY_GOAL, json!({}), Some(battery_notes())),
    )
    .await;
    let j = output_json(&out.state, &out.state.status);
    assert_eq!(j["status"], "failed", "{j}");
    assert!(
        j["blocked_reason"].as_str().unwrap_or("").contains("503"),
        "{j}"
    );
}
