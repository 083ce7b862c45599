//! The event stream of a run (typed, JSON lines) and interrupts on an in-memory engine.

mod support;

use planwright::graph::{Route, Send, StateGraph, END, START};
use planwright::runtime::Resume;
use planwright::{Engine, NodeContext, RunError, RunEvent, RunOptions, RunStatus, ThreadId};
use serde_json::json;
use std::collections::BTreeMap;
use std::sync::Arc;
use support::*;

/// `a` emits a custom event and appends to the trace, then `b` calls `in_b` and sets the count.
fn two_step_graph(
    in_b: impl Fn(&NodeContext) + std::marker::Send + Sync + 'static,
) -> planwright::CompiledGraph<Walk> {
    StateGraph::<Walk>::new("events")
        .add_sync_node("a", |_: &Walk, ctx: &NodeContext| {
            ctx.emit(json!({"progress": 0.5}));
            Ok(WalkUpdate::default().trace(vec!["a".into()]))
        })
        .add_sync_node("b", move |_: &Walk, ctx: &NodeContext| {
            in_b(ctx);
            Ok(WalkUpdate::default().count(7))
        })
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_edge("b", END)
        .compile()
        .unwrap()
}

/// The run of [`two_step_graph`] (with nothing in `b`) and its events.
async fn two_step_events(opts: RunOptions) -> (Vec<RunEvent>, Vec<String>, Arc<Walk>) {
    let engine = Engine::new(two_step_graph(|_| {})).await;
    let mut h = engine
        .start(ThreadId::new("t"), WalkUpdate::default(), opts)
        .await
        .unwrap();
    let mut rx = h.events.take().unwrap();
    let out = h.wait().await.unwrap();
    let mut events = Vec::new();
    while let Some(e) = rx.recv().await {
        events.push(e);
    }
    let kinds: Vec<String> = events
        .iter()
        .map(|e| {
            let v: serde_json::Value = serde_json::from_str(&e.to_json_line()).unwrap();
            v["event"].as_str().unwrap().to_string()
        })
        .collect();
    (events, kinds, out.state)
}

/// The events of [`two_step_events`]' run, in order, for a listener that wants them all.
const TWO_STEP_KINDS: [&str; 9] = [
    "run_started",
    "node_started",
    "custom",
    "node_finished",
    "state_updated",
    "node_started",
    "node_finished",
    "state_updated",
    "run_finished",
];

#[tokio::test]
async fn a_listener_that_does_not_want_state_updates_gets_every_other_event() {
    let (events, kinds, state) =
        two_step_events(RunOptions::streaming().without_state_updates()).await;
    let expected: Vec<&str> = TWO_STEP_KINDS
        .into_iter()
        .filter(|k| *k != "state_updated")
        .collect();
    assert_eq!(kinds, expected);
    assert!(!events
        .iter()
        .any(|e| matches!(e, RunEvent::StateUpdated { .. })));
    assert_eq!(state.count, 7, "the run itself is the same");
}

#[tokio::test]
async fn with_values_each_state_update_carries_the_state_its_superstep_left() {
    let (events, _, state) = two_step_events(RunOptions::streaming().with_values()).await;
    let values: Vec<&serde_json::Value> = events
        .iter()
        .filter_map(|e| match e {
            RunEvent::StateUpdated { values, .. } => values.as_ref(),
            _ => None,
        })
        .collect();
    // After `a`: its trace, the count not yet set; after `b`: the run's end.
    assert_eq!(values.len(), 2, "{events:?}");
    assert_eq!(values[0]["trace"], json!(["a"]));
    assert_eq!(values[0]["count"], 0);
    assert_eq!(*values[1], serde_json::to_value(&*state).unwrap());
    // Without it, the events carry none.
    let (plain, _, _) = two_step_events(RunOptions::streaming()).await;
    assert!(plain.iter().all(|e| !matches!(
        e,
        RunEvent::StateUpdated {
            values: Some(_),
            ..
        }
    )));
}

#[tokio::test]
async fn a_run_streams_typed_events_that_serialise_as_json_lines() {
    let (events, kinds, state) = two_step_events(RunOptions::streaming()).await;
    assert_eq!(kinds, TWO_STEP_KINDS);
    assert!(
        matches!(&events[2], RunEvent::Custom { node, payload, .. } if node == "a" && payload["progress"] == 0.5)
    );
    assert!(
        matches!(&events[7], RunEvent::StateUpdated { nodes, updates, .. } if nodes == &["b"] && updates[0]["count"] == 7)
    );
    assert!(matches!(
        events.last(),
        Some(RunEvent::RunFinished {
            status: RunStatus::Finished,
            steps: 2,
            node_executions: 2
        })
    ));
    assert_eq!(state.count, 7);
    // Every line round-trips.
    for e in &events {
        let back: RunEvent = serde_json::from_str(&e.to_json_line()).unwrap();
        assert_eq!(&back, e);
    }
}

/// `split` sends two `ask` tasks; each asks a question; `join` records the answers.
fn asking_graph() -> StateGraph<Walk> {
    StateGraph::new("asking")
        .add_sync_node("split", |_: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default())
        })
        .add_conditional_edges(
            "split",
            |_: &Walk| {
                Route::Send(vec![
                    Send::new("ask", json!("x")),
                    Send::new("ask", json!("y")),
                ])
            },
            ["ask"],
        )
        .add_node("ask", |_s: Arc<Walk>, ctx: NodeContext| async move {
            let q = ctx.input().cloned().unwrap_or_default();
            let answer = ctx.interrupt(json!({ "question": q }))?;
            Ok(WalkUpdate::default().trace(vec![format!(
                "{}={}",
                q.as_str().unwrap_or("?"),
                answer
            )]))
        })
        .add_sync_node("join", |s: &Walk, _: &NodeContext| {
            Ok(WalkUpdate::default().count(s.trace.len() as u64))
        })
        .add_edge(START, "split")
        .add_edge("ask", "join")
        .add_edge("join", END)
}

#[tokio::test]
async fn parallel_interrupts_get_distinct_ids_and_resume_by_id() {
    let engine = Engine::new(asking_graph().compile().unwrap()).await;
    let thread = ThreadId::new("t");
    let out = engine
        .run(thread.clone(), WalkUpdate::default(), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(out.status, RunStatus::Interrupted);
    assert_eq!(out.interrupts.len(), 2);
    assert_ne!(out.interrupts[0].id, out.interrupts[1].id);
    assert_eq!(out.interrupts[0].value, json!({"question": "x"}));

    // One value for two pending interrupts is ambiguous: an error, and nothing changes.
    let err = engine
        .resume(
            thread.clone(),
            Resume::Value(json!(1)),
            RunOptions::default(),
        )
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Refused(planwright::Refusal::BadResume { .. })
        ),
        "{err}"
    );
    // An unknown id is an error naming it.
    let mut bad = BTreeMap::new();
    bad.insert("nope".to_string(), json!(1));
    bad.insert(out.interrupts[0].id.0.clone(), json!(1));
    let err = engine
        .resume(thread.clone(), Resume::ById(bad), RunOptions::default())
        .await
        .unwrap_err();
    assert!(err.to_string().contains("nope"), "{err}");

    let mut answers = BTreeMap::new();
    answers.insert(out.interrupts[0].id.0.clone(), json!("X"));
    answers.insert(out.interrupts[1].id.0.clone(), json!("Y"));
    let done = engine
        .resume(thread.clone(), Resume::ById(answers), RunOptions::default())
        .await
        .unwrap();
    assert_eq!(done.status, RunStatus::Finished);
    assert_eq!(done.state.trace, ["x=\"X\"", "y=\"Y\""]);
    assert_eq!(done.state.count, 2);

    // The thread is no longer interrupted.
    let err = engine
        .resume(thread, Resume::Value(json!(1)), RunOptions::default())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            RunError::Refused(planwright::Refusal::NotInterrupted(_))
        ),
        "{err}"
    );
}

/// A run whose events are switched: nothing while the switch is off, everything from the moment
/// it is turned on (here by node `b` itself, so the moment is exact), and a receiver that closes
/// when the run ends either way.
#[tokio::test]
async fn a_switched_event_stream_builds_events_only_while_it_is_on() {
    let switch = planwright::EventSwitch::new(false);
    let turn_on = switch.clone();
    let engine = Engine::new(two_step_graph(move |ctx| {
        turn_on.turn_on();
        ctx.emit(json!({"from": "b"}));
    }))
    .await;
    let mut h = engine
        .start(
            ThreadId::new("t"),
            WalkUpdate::default(),
            RunOptions::default().events_while(switch.clone()),
        )
        .await
        .unwrap();
    let mut rx = h.events.take().unwrap();
    assert_eq!(h.wait().await.unwrap().state.count, 7);
    let mut kinds = Vec::new();
    while let Some(e) = rx.recv().await {
        if let RunEvent::Custom { payload, .. } = &e {
            assert_eq!(
                payload["from"], "b",
                "nothing from before the switch: {e:?}"
            );
        }
        let v: serde_json::Value = serde_json::from_str(&e.to_json_line()).unwrap();
        kinds.push(v["event"].as_str().unwrap().to_string());
    }
    assert_eq!(
        kinds,
        ["custom", "node_finished", "state_updated", "run_finished"]
    );

    // Never switched on: the receiver gets nothing and closes with the run.
    let off = planwright::EventSwitch::new(false);
    let mut h = engine
        .start(
            ThreadId::new("t2"),
            WalkUpdate::default(),
            RunOptions::default().events_while(off),
        )
        .await
        .unwrap();
    let mut rx = h.events.take().unwrap();
    h.wait().await.unwrap();
    assert!(rx.recv().await.is_none());
}
