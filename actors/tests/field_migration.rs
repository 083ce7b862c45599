//! Threads across topology versions: a conversation whose planner thread was written by the old
//! single-`plan`-node graph (`{id}:planner`) continues under `{id}:planner:v2` by re-bootstrapping
//! from the prior schema and decompositions, keeping every collected value; a v2 thread written by
//! another graph fingerprint goes through the engine's migration hook the same way.

mod field_support;

use field_support::*;
use planwright::{RunOptions, RunStatus, ThreadId};
use planwright_actors::field::runner::{self, NoAnswers, Start};
use planwright_actors::field::{input, GraphOptions, Topology};
use std::sync::Arc;

async fn sqlite(name: &str) -> Arc<dyn planwright::checkpoint::Checkpointer> {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("field-migration-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    planwright::checkpoint::connect(&format!("sqlite:{}", dir.join("t.db").display()))
        .await
        .unwrap()
}

fn plan_options() -> GraphOptions {
    GraphOptions {
        topology: Topology::Plan,
        ..GraphOptions::default()
    }
}

#[tokio::test]
async fn an_old_planner_thread_rebootstraps_under_v2_keeping_collected_values() {
    let cp = sqlite("ns").await;
    let sc = scenario("coffee");
    // The old graph collects what it can and pauses on a question nobody answers.
    let old = engine(offline(), &plan_options(), Some(cp.clone())).await;
    let update = input::initial_update("conv", "coffee", sc.schema.clone(), sc.corpus.clone());
    let mut answers = sc.answers.clone();
    answers.remove("currency");
    let first = runner::run(
        &old,
        Topology::Plan,
        "conv",
        Start::Input(Box::new(update.clone())),
        &mut answers,
    )
    .await
    .unwrap();
    old.shutdown().await;
    assert_eq!(first.thread.to_string(), "conv:planner");
    assert_eq!(first.status(), "interrupted");
    assert!(first.state.values.contains_key("region"));
    // The new graph finds no v2 thread, re-bootstraps from the old one and finishes.
    let new = engine(offline(), &GraphOptions::default(), Some(cp.clone())).await;
    let mut answers = sc.answers.clone();
    let run = runner::run(
        &new,
        Topology::Staged,
        "conv",
        Start::Input(Box::new(update)),
        &mut answers,
    )
    .await
    .unwrap();
    assert_eq!(run.action, "rebootstrapped");
    assert_eq!(run.thread.to_string(), "conv:planner:v2");
    assert_eq!(run.status(), "ok");
    for (field, value) in &first.state.values {
        assert_eq!(&run.state.values[field], value, "{field} kept");
    }
    assert_eq!(
        run.state.attempts.get("region").map(|a| a.asks),
        None,
        "region was not asked again"
    );
    assert!(run.state.reflections[0].contains("re-bootstrapped"));
    new.shutdown().await;
}

#[tokio::test]
async fn a_v2_thread_of_another_fingerprint_goes_through_the_migration_hook() {
    let cp = sqlite("fp").await;
    let sc = scenario("dental");
    let thread = ThreadId::new("conv2:planner:v2");
    let old = engine(offline(), &plan_options(), Some(cp.clone())).await;
    let update = input::initial_update("conv2", "", sc.schema.clone(), sc.corpus.clone());
    let out = old
        .run(thread.clone(), update.clone(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(
        out.status,
        RunStatus::Interrupted,
        "paused on the region question"
    );
    let resumed = old
        .resume(
            thread.clone(),
            planwright::Resume::Value("Nordland".into()),
            RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(resumed.status, RunStatus::Interrupted, "now on currency");
    old.shutdown().await;
    let new = engine(offline(), &GraphOptions::default(), Some(cp)).await;
    let ts = new.get_state(&thread).await.unwrap().unwrap();
    assert!(
        ts.interrupts.is_empty() && ts.next.is_empty(),
        "migrated: nothing pending"
    );
    assert_eq!(ts.values.iterations, 0);
    assert!(ts.values.values.contains_key("region"));
    let mut answers = sc.answers.clone();
    let run = runner::run(
        &new,
        Topology::Staged,
        "conv2",
        Start::Input(Box::new(update)),
        &mut answers,
    )
    .await
    .unwrap();
    assert_eq!(run.action, "rebootstrapped");
    assert_eq!(run.status(), "ok");
    assert_eq!(
        run.state.decisions[0].target.as_deref(),
        Some("currency"),
        "region kept, not asked again"
    );
    let none = runner::run(
        &new,
        Topology::Staged,
        "conv2",
        Start::Resume("x".into()),
        &mut NoAnswers,
    )
    .await;
    assert!(none.is_err());
    new.shutdown().await;
}
