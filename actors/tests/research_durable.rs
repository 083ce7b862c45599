//! A thread whose process stopped mid-run is continued from its last checkpoint and ends with the
//! same result an unbroken run gives; completed steps are not run again.

mod research_support;

use planwright::checkpoint::{Checkpointer, MemoryCheckpointer};
use planwright::{Engine, RunOptions, RunStatus, ThreadId};
use planwright_actors::research::runner::{self, Start};
use planwright_actors::research::{
    graph, initial_update, GraphOptions, OfflineResearchPolicy, ResearchState, TokioClock,
};
use research_support::*;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

const GOAL: &str = "Should our customer support adopt retrieval-augmented generation and how would it change staffing";

async fn durable_engine(cp: Arc<dyn Checkpointer>) -> Engine<ResearchState> {
    let options = GraphOptions {
        clock: Arc::new(TokioClock::new()),
        step_latency: Duration::from_millis(100),
        ..GraphOptions::default()
    };
    let g = graph(Arc::new(OfflineResearchPolicy), options).unwrap();
    Engine::builder(g).checkpointer(cp).build().await
}

fn update() -> Box<planwright_actors::research::ResearchUpdate> {
    let req = input(
        GOAL,
        json!({"required_sections": ["cost", "staffing"]}),
        None,
    );
    Box::new(initial_update(req).unwrap())
}

#[tokio::test(start_paused = true)]
async fn an_interrupted_process_is_continued_to_the_same_result() {
    // The unbroken run.
    let reference = {
        let e = durable_engine(Arc::new(MemoryCheckpointer::new())).await;
        let r = runner::run(
            &e,
            ThreadId::new("ref"),
            Start::Input(Some(update())),
            |_| {},
        )
        .await
        .unwrap();
        e.shutdown().await;
        r.state
    };
    assert_eq!(reference.status, "ok");
    assert_eq!(reference.replan_count, 1);

    // The same run, stopped while its first steps execute (an engine shutdown stands in for the
    // process dying: the superstep in flight is checkpointed, nothing after it runs).
    let cp: Arc<dyn Checkpointer> = Arc::new(MemoryCheckpointer::new());
    let t = ThreadId::new("crash");
    let first = durable_engine(cp.clone()).await;
    let handle = first
        .start(t.clone(), *update(), RunOptions::default())
        .await
        .unwrap();
    tokio::time::sleep(Duration::from_millis(50)).await;
    first.shutdown().await;
    let stopped = handle.wait().await.unwrap();
    assert_eq!(stopped.status, RunStatus::Suspended);
    assert!(stopped.state.status.is_empty(), "not finished");
    assert!(!stopped.state.plan.is_empty(), "stopped after planning");
    let ran_before = stopped.state.step_results.len();

    // A new process with the same storage: the same command continues the thread.
    let second = durable_engine(cp).await;
    let r = runner::run(&second, t, Start::Input(Some(update())), |_| {})
        .await
        .unwrap();
    assert_eq!(r.action, "continued");
    let s = r.state;
    assert_eq!(s.status, reference.status);
    assert_eq!(s.final_report, reference.final_report);
    assert_eq!(s.plan, reference.plan);
    assert_eq!(s.knowledge_gaps, reference.knowledge_gaps);
    let runs = |st: &ResearchState| {
        st.execution_history
            .iter()
            .filter(|h| h.event == "step_executed")
            .count()
    };
    assert_eq!(
        runs(&s),
        runs(&reference),
        "no step ran twice ({ran_before} had results at the stop)"
    );
}
