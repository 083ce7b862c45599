//! A streamed run's `values` are the state each superstep left, on the real server with the
//! offline model (a run that finishes in a few milliseconds, faster than a reader of the thread's
//! latest state), on a fresh thread, on SQLite and on `memory:`.

mod serve_support;

use serde_json::{json, Value};
use serve_support::{call, serve_on, SseEvent, SseReader};

const GOAL: &str =
    "Should our support team adopt retrieval-augmented generation for customer support?";

/// Streams a research run with `["updates", "values"]` on a fresh thread of a server over
/// `checkpoint`; every event, and the thread's final values.
async fn stream_a_run(checkpoint: &str) -> (Vec<SseEvent>, Value) {
    let (_server, base) = serve_on(checkpoint, "offline", &[]).await;
    let (_, t) = call("POST", &format!("{base}/threads"), Some(json!({}))).await;
    let t = t["thread_id"].as_str().unwrap().to_string();
    let mut stream = SseReader::open(
        reqwest::Client::new()
            .post(format!("{base}/threads/{t}/runs/stream"))
            .json(
                &json!({"assistant_id": "research", "input": {"input": GOAL},
                          "stream_mode": ["updates", "values"]}),
            ),
    )
    .await;
    let events = stream.rest().await;
    let (status, state) = call("GET", &format!("{base}/threads/{t}/state"), None).await;
    assert_eq!(status, 200, "{state}");
    (events, state["values"].clone())
}

fn len(v: &Value) -> usize {
    v.as_array().map_or(0, Vec::len)
}

fn complete_steps(values: &Value) -> usize {
    values["plan"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|s| s["status"] == "complete")
        .count()
}

/// Checks that each `values` event holds the state after the superstep whose `updates` came
/// just before it: the execution history holds exactly the entries the updates so far appended,
/// nothing is complete before `assess_progress` says so, the brief and `ok` appear only with
/// `synthesize_report`, and the last `values` is the thread's final state.
fn assert_each_values_is_its_superstep(events: &[SseEvent], final_values: &Value) {
    let mut history = 0; // entries appended by the updates seen so far
    let mut nodes: Vec<String> = Vec::new(); // every node seen so far
    let mut step_nodes: Vec<String> = Vec::new(); // the nodes of the current superstep
    let mut done = 0;
    let mut supersteps = 0;
    let mut last = Value::Null;
    for e in events {
        match e.event.as_str() {
            "updates" => {
                for (node, update) in e.data.as_object().unwrap() {
                    history += len(&update["execution_history"]);
                    nodes.push(node.clone());
                    step_nodes.push(node.clone());
                }
            }
            "values" if !step_nodes.is_empty() => {
                let v = &e.data;
                let at = format!("values {:?} after {step_nodes:?}: {v}", e.id);
                supersteps += 1;
                assert_eq!(len(&v["execution_history"]), history, "{at}");
                if supersteps == 1 {
                    assert_eq!(step_nodes, ["prepare_input"], "{at}");
                    assert_eq!(len(&v["plan"]), 0, "no plan yet: {at}");
                }
                let assessed = nodes.iter().any(|n| n == "assess_progress");
                let synthesized = nodes.iter().any(|n| n == "synthesize_report");
                if !assessed {
                    assert_eq!(complete_steps(v), 0, "nothing assessed yet: {at}");
                }
                if !synthesized {
                    assert_ne!(v["status"], "ok", "{at}");
                    assert!(
                        v["final_report"].as_str().unwrap_or("").is_empty(),
                        "no brief yet: {at}"
                    );
                }
                assert!(complete_steps(v) >= done, "steps never go back: {at}");
                done = complete_steps(v);
                step_nodes.clear();
                last = v.clone();
            }
            // The run's end repeats the last superstep's values.
            "values" => last = e.data.clone(),
            _ => {}
        }
    }
    assert!(supersteps >= 6, "a values event per superstep: {events:?}");
    assert!(done > 0, "the plan's steps complete: {last}");
    assert_eq!(last["status"], "ok");
    assert_eq!(&last, final_values, "the last values are the final state");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_values_event_is_the_state_after_its_superstep_on_sqlite() {
    let file = serve_support::fresh_dir("serve-stream-values").join("s.sqlite");
    let (events, final_values) = stream_a_run(&format!("sqlite:{}", file.display())).await;
    assert_each_values_is_its_superstep(&events, &final_values);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_values_event_is_the_state_after_its_superstep_in_memory() {
    let (events, final_values) = stream_a_run("memory:").await;
    assert_each_values_is_its_superstep(&events, &final_values);
}
