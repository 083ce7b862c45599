//! Every stream mode of the Agent Server API, on the real server (`planwright serve`, SQLite,
//! the offline model): one research run that pauses for approval, streamed with every mode at
//! once, sends each mode's events in LangGraph's shapes — `updates` ending with the
//! `__interrupt__`, `tasks` starts and results, `checkpoints` whose ids, parents, steps and `next`
//! are the ones the thread's history and state show, `debug` wrapping the same, `custom`,
//! `events` — and a join filtered to one mode gets only that mode. An unknown mode is a 422 that
//! names the modes, and nothing is recorded; a run's responses name it in `Content-Location`.
//! (The research planner streams no model tokens and returns no messages: the shapes of
//! `messages` and `messages-tuple` are asserted by the unit tests of `serve/messages.rs`, and
//! subgraph namespaces by those of `serve/stream/modes.rs`.)

mod serve_support;

use serde_json::{json, Value};
use serve_support::{call, serve_on, SseEvent, SseReader};
use std::collections::HashMap;

const GOAL: &str =
    "Should our support team adopt retrieval-augmented generation for customer support?";

const ALL_BUT_MESSAGES: [&str; 7] = [
    "values",
    "updates",
    "custom",
    "events",
    "debug",
    "tasks",
    "checkpoints",
];

async fn server(name: &str) -> (serve_support::Server, String) {
    let file = serve_support::fresh_dir(name).join("s.sqlite");
    serve_on(&format!("sqlite:{}", file.display()), "offline", &[]).await
}

async fn thread(base: &str) -> String {
    let (s, t) = call("POST", &format!("{base}/threads"), Some(json!({}))).await;
    assert_eq!(s, 200, "{t}");
    t["thread_id"].as_str().unwrap().to_string()
}

/// A research run that pauses for approval of its plan.
fn paused_run(modes: &[&str]) -> Value {
    json!({"assistant_id": "research", "stream_mode": modes,
           "input": {"input": GOAL, "constraints": {"max_steps": 4, "require_approval": true}}})
}

/// An object's keys, sorted.
fn keys(v: &Value) -> Vec<&str> {
    let mut k: Vec<&str> = v.as_object().unwrap().keys().map(String::as_str).collect();
    k.sort_unstable();
    k
}

fn of<'a>(events: &'a [SseEvent], name: &str) -> Vec<&'a Value> {
    events
        .iter()
        .filter(|e| e.event == name)
        .map(|e| &e.data)
        .collect()
}

/// `updates`: `{node: update}` per task, the last one the pause as LangGraph sends it.
fn assert_updates(events: &[SseEvent]) {
    let updates = of(events, "updates");
    assert!(updates.len() >= 2, "{events:?}");
    let (pause, steps) = updates.split_last().unwrap();
    for u in steps {
        let u = u.as_object().unwrap();
        assert_eq!(u.len(), 1, "one node per event: {u:?}");
        assert!(!u.contains_key("__interrupt__"));
    }
    let interrupts = pause["__interrupt__"].as_array().expect("the pause");
    assert_eq!(interrupts.len(), 1, "{pause}");
    let i = &interrupts[0];
    assert_eq!(keys(i), ["id", "value"], "LangGraph's interrupt: {pause}");
    assert!(i["value"]["plan"].is_array(), "{pause}");
    assert!(i["id"].is_string(), "{pause}");
}

/// `tasks`: each task's start, then its result; the paused task's result has its interrupt.
/// The ids of the tasks that started, by name, in order.
fn assert_tasks(events: &[SseEvent], interrupt_id: &Value) -> Vec<(String, String)> {
    let mut open: HashMap<String, String> = HashMap::new();
    let mut started = Vec::new();
    let mut paused = 0;
    for t in of(events, "tasks") {
        let keys = keys(t);
        let (id, name) = (
            t["id"].as_str().unwrap().to_string(),
            t["name"].as_str().unwrap().to_string(),
        );
        if t.get("triggers").is_some() {
            assert_eq!(keys, ["id", "input", "name", "triggers"], "a start: {t}");
            assert_eq!(t["triggers"], json!([format!("branch:to:{name}")]), "{t}");
            assert!(open.insert(id.clone(), name.clone()).is_none(), "{t}");
            started.push((name, id));
        } else {
            assert_eq!(
                keys,
                ["error", "id", "interrupts", "name", "result"],
                "a result: {t}"
            );
            assert_eq!(open.remove(&id).as_deref(), Some(name.as_str()), "{t}");
            assert!(t["error"].is_null(), "{t}");
            if t["interrupts"].as_array().unwrap().is_empty() {
                // LangGraph's writes: [[key, value], …]
                for w in t["result"].as_array().unwrap() {
                    assert!(w[0].is_string() && w.as_array().unwrap().len() == 2, "{t}");
                }
            } else {
                paused += 1;
                assert_eq!(&t["interrupts"][0]["id"], interrupt_id, "{t}");
            }
        }
    }
    assert!(open.is_empty(), "every task has its result: {open:?}");
    assert_eq!(paused, 1, "the approval task paused");
    assert!(started.len() >= 3, "{started:?}");
    started
}

/// `checkpoints`: one per superstep, each the child of the one before, its `next` the tasks
/// that ran from it — the ids, steps and nexts the thread's history and state show.
async fn assert_checkpoints(base: &str, t: &str, events: &[SseEvent]) -> Vec<Value> {
    let checkpoints: Vec<Value> = of(events, "checkpoints").into_iter().cloned().collect();
    assert!(checkpoints.len() >= 2, "{events:?}");
    let history = serve_support::history(base, t).await;
    let by_id: HashMap<&str, &Value> = history
        .iter()
        .map(|h| (h["checkpoint"]["checkpoint_id"].as_str().unwrap(), h))
        .collect();
    let mut parent: Option<String> = None;
    for c in &checkpoints {
        assert_eq!(
            keys(c),
            [
                "config",
                "metadata",
                "next",
                "parent_config",
                "tasks",
                "values"
            ],
            "{c}"
        );
        let conf = &c["config"]["configurable"];
        assert_eq!(conf["thread_id"], t);
        assert_eq!(conf["checkpoint_ns"], "");
        let id = conf["checkpoint_id"].as_str().unwrap();
        let stored = by_id
            .get(id)
            .unwrap_or_else(|| panic!("{id} is stored: {c}"));
        assert_eq!(c["metadata"]["step"], stored["metadata"]["step"], "{c}");
        assert_eq!(c["metadata"]["source"], "loop");
        assert_eq!(
            c["parent_config"]["configurable"]["checkpoint_id"],
            stored["parent_checkpoint"]["checkpoint_id"],
            "{c}"
        );
        if let Some(p) = &parent {
            assert_eq!(
                c["parent_config"]["configurable"]["checkpoint_id"], *p,
                "{c}"
            );
        }
        parent = Some(id.to_string());
        assert!(c["values"].is_object(), "{c}");
        let next: Vec<&str> = c["next"]
            .as_array()
            .unwrap()
            .iter()
            .map(|n| n.as_str().unwrap())
            .collect();
        let tasks: Vec<&str> = c["tasks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t["name"].as_str().unwrap())
            .collect();
        assert_eq!(next, tasks, "{c}");
        assert!(!next.is_empty(), "the run went on from each: {c}");
    }
    // The last is where the thread paused.
    let (_, state) = call("GET", &format!("{base}/threads/{t}/state"), None).await;
    let last = checkpoints.last().unwrap();
    assert_eq!(
        last["config"]["configurable"]["checkpoint_id"], state["checkpoint"]["checkpoint_id"],
        "{state}"
    );
    assert_eq!(last["next"], state["next"], "{state}");
    checkpoints
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_mode_streams_langgraph_shapes() {
    let (_s, base) = server("serve-stream-modes-all").await;
    let t = thread(&base).await;
    let resp = reqwest::Client::new()
        .post(format!("{base}/threads/{t}/runs/stream"))
        .json(&paused_run(&ALL_BUT_MESSAGES));
    let events = SseReader::open(resp).await.rest().await;
    assert_eq!(events[0].event, "metadata", "{events:?}");
    let run = events[0].data["run_id"].as_str().unwrap().to_string();
    let names: std::collections::BTreeSet<&str> = events.iter().map(|e| e.event.as_str()).collect();
    assert_eq!(
        names.into_iter().collect::<Vec<_>>(),
        [
            "checkpoints",
            "debug",
            "events",
            "metadata",
            "tasks",
            "updates",
            "values"
        ],
        "no other event (the plan's review comes before any node emits)"
    );

    assert_updates(&events);
    let interrupt_id = of(&events, "updates").last().unwrap()["__interrupt__"][0]["id"].clone();
    let started = assert_tasks(&events, &interrupt_id);
    let checkpoints = assert_checkpoints(&base, &t, &events).await;
    // Each checkpoint's `next` are the tasks that start after it, before the next checkpoint.
    let mut windows: Vec<(Vec<String>, Vec<String>)> = Vec::new();
    for e in &events {
        match e.event.as_str() {
            "checkpoints" => {
                let next = e.data["next"].as_array().unwrap();
                let next = next.iter().map(|n| n.as_str().unwrap().to_string());
                windows.push((next.collect(), Vec::new()));
            }
            "tasks" if e.data.get("triggers").is_some() => {
                if let Some((_, starts)) = windows.last_mut() {
                    starts.push(e.data["name"].as_str().unwrap().to_string());
                }
            }
            _ => {}
        }
    }
    for (mut next, mut starts) in windows {
        next.sort();
        starts.sort();
        assert_eq!(
            next, starts,
            "a checkpoint's next are the tasks started from it"
        );
    }
    assert!(
        started.iter().any(|(n, _)| n == "review_plan"),
        "{started:?}"
    );

    // `debug` is the same tasks, results and checkpoints, wrapped.
    let debug = of(&events, "debug");
    let payloads = |kind: &str| -> Vec<Value> {
        debug
            .iter()
            .filter(|d| d["type"] == kind)
            .map(|d| d["payload"].clone())
            .collect()
    };
    for d in &debug {
        assert_eq!(keys(d), ["payload", "step", "timestamp", "type"], "{d}");
        let ts = d["timestamp"].as_str().unwrap();
        assert!(
            ts.len() == 24 && ts.ends_with('Z') && &ts[10..11] == "T",
            "{d}"
        );
        assert!(d["step"].is_u64(), "{d}");
    }
    assert_eq!(payloads("checkpoint"), checkpoints);
    let tasks: Vec<Value> = of(&events, "tasks").into_iter().cloned().collect();
    let mut wrapped = payloads("task");
    wrapped.extend(payloads("task_result"));
    assert_eq!(wrapped.len(), tasks.len());
    for t in &tasks {
        assert!(wrapped.contains(t), "{t} is in debug");
    }

    // `events`: the run's events whole.
    let kinds: Vec<&str> = of(&events, "events")
        .iter()
        .map(|e| e["event"].as_str().unwrap())
        .collect();
    for k in [
        "node_started",
        "node_finished",
        "state_updated",
        "interrupted",
    ] {
        assert!(kinds.contains(&k), "{k} in {kinds:?}");
    }
    // The run ends paused: its last `values` carry the interrupt.
    let last = *of(&events, "values").last().unwrap();
    assert_eq!(last["__interrupt__"][0]["id"], interrupt_id, "{last}");

    // Joined again with one mode, the stored stream gives that mode only.
    let joined = SseReader::open(reqwest::Client::new().get(format!(
        "{base}/threads/{t}/runs/{run}/stream?stream_mode=checkpoints"
    )))
    .await
    .rest()
    .await;
    let again: Vec<Value> = joined.iter().map(|e| e.data.clone()).collect();
    assert!(joined.iter().all(|e| e.event == "checkpoints"));
    assert_eq!(again, checkpoints);

    // Approved, the run goes on from the paused task: `custom` is what its steps emit, and its
    // checkpoints go on from the one it paused at.
    let resume = json!({"assistant_id": "research", "command": {"resume": {"action": "approve"}},
                        "stream_mode": ["custom", "checkpoints", "tasks"]});
    let events = SseReader::open(
        reqwest::Client::new()
            .post(format!("{base}/threads/{t}/runs/stream"))
            .json(&resume),
    )
    .await
    .rest()
    .await;
    let custom = of(&events, "custom");
    assert!(
        custom.iter().any(|c| c.get("step_started").is_some()),
        "{events:?}"
    );
    assert!(custom.iter().all(|c| c.is_object()), "{custom:?}");
    let more = of(&events, "checkpoints");
    let paused_at = &checkpoints.last().unwrap()["config"]["configurable"]["checkpoint_id"];
    assert!(more.len() >= 2, "{events:?}");
    assert_eq!(
        &more[0]["parent_config"]["configurable"]["checkpoint_id"], paused_at,
        "{more:?}"
    );
    for pair in more.windows(2) {
        assert_eq!(
            pair[1]["parent_config"]["configurable"]["checkpoint_id"],
            pair[0]["config"]["configurable"]["checkpoint_id"]
        );
    }
    // The run finished: the last checkpoint has nothing next, and is the thread's head.
    let last = more.last().unwrap();
    assert_eq!(last["next"], json!([]), "{last}");
    let (_, state) = call("GET", &format!("{base}/threads/{t}/state"), None).await;
    assert_eq!(
        last["config"]["configurable"]["checkpoint_id"],
        state["checkpoint"]["checkpoint_id"]
    );
    assert_eq!(last["values"]["status"], "ok", "{last}");
    let results = of(&events, "tasks");
    assert!(results
        .iter()
        .any(|t| t["name"] == "review_plan" && t.get("result").is_some()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn messages_modes_and_subgraphs_are_accepted() {
    let (_s, base) = server("serve-stream-modes-messages").await;
    for modes in [["messages-tuple", "updates"], ["messages", "updates"]] {
        let t = thread(&base).await;
        let mut body = paused_run(&modes);
        body["stream_subgraphs"] = json!(true);
        let events = SseReader::open(
            reqwest::Client::new()
                .post(format!("{base}/threads/{t}/runs/stream"))
                .json(&body),
        )
        .await
        .rest()
        .await;
        // The research planner streams no tokens and returns no messages: nothing under
        // `messages`, and its graph has no subgraph, so no namespace either.
        assert!(
            events
                .iter()
                .all(|e| e.event == "metadata" || e.event == "updates"),
            "{events:?}"
        );
        assert!(of(&events, "updates").last().unwrap()["__interrupt__"].is_array());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_mode_is_a_422_naming_the_modes_and_records_nothing() {
    let (_s, base) = server("serve-stream-modes-422").await;
    let t = thread(&base).await;
    for (path, mode) in [
        ("runs/stream", json!(["values", "tokens"])),
        ("runs/wait", json!("tokens")),
        ("runs", json!(["tokens"])),
        ("runs/stream", json!(7)),
    ] {
        let mut body = paused_run(&[]);
        body["stream_mode"] = mode.clone();
        let (s, e) = call("POST", &format!("{base}/threads/{t}/{path}"), Some(body)).await;
        assert_eq!(s, 422, "{path} {mode}: {e}");
        let detail = e["detail"].as_str().unwrap();
        for m in [
            "values",
            "updates",
            "messages",
            "messages-tuple",
            "custom",
            "events",
            "debug",
            "tasks",
            "checkpoints",
        ] {
            assert!(detail.contains(m), "{detail} names {m}");
        }
    }
    let (_, runs) = call("GET", &format!("{base}/threads/{t}/runs"), None).await;
    assert_eq!(runs, json!([]), "no run was recorded");
    let (_, th) = call("GET", &format!("{base}/threads/{t}"), None).await;
    assert_eq!(th["status"], "idle", "{th}");
    assert!(
        th["metadata"].get("assistant_id").is_none(),
        "not bound: {th}"
    );

    // Joining a stream with an unknown mode is refused the same way.
    let (s, run) = call(
        "POST",
        &format!("{base}/threads/{t}/runs"),
        Some(paused_run(&["values"])),
    )
    .await;
    assert_eq!(s, 200, "{run}");
    let run = run["run_id"].as_str().unwrap();
    let (s, e) = call(
        "GET",
        &format!("{base}/threads/{t}/runs/{run}/stream?stream_mode=values,tokens"),
        None,
    )
    .await;
    assert_eq!(s, 422, "{e}");
    assert!(e["detail"].as_str().unwrap().contains("`tokens`"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_responses_name_the_run_in_content_location() {
    let (_s, base) = server("serve-stream-modes-location").await;
    let http = reqwest::Client::new();
    let location = |r: &reqwest::Response| {
        r.headers()
            .get("content-location")
            .map(|v| v.to_str().unwrap().to_string())
    };

    let t = thread(&base).await;
    let r = http
        .post(format!("{base}/threads/{t}/runs/stream"))
        .json(&paused_run(&["updates"]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let at = location(&r).expect("runs/stream names its run");
    let body = r.text().await.unwrap();
    let run = body
        .split("\"run_id\":\"")
        .nth(1)
        .and_then(|s| s.split('"').next())
        .unwrap();
    assert_eq!(at, format!("/threads/{t}/runs/{run}"));

    let t = thread(&base).await;
    let r = http
        .post(format!("{base}/threads/{t}/runs"))
        .json(&paused_run(&["values"]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let at = location(&r).expect("runs names its run");
    let rec: Value = r.json().await.unwrap();
    assert_eq!(
        at,
        format!("/threads/{t}/runs/{}", rec["run_id"].as_str().unwrap())
    );
    // The place it names is the run.
    let (s, got) = call("GET", &format!("{base}{at}"), None).await;
    assert_eq!((s, &got["run_id"]), (200, &rec["run_id"]));

    let t = thread(&base).await;
    let r = http
        .post(format!("{base}/threads/{t}/runs/wait"))
        .json(&paused_run(&["values"]))
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let at = location(&r).expect("runs/wait names its run");
    let (s, runs) = call("GET", &format!("{base}/threads/{t}/runs"), None).await;
    assert_eq!(s, 200);
    assert_eq!(
        at,
        format!("/threads/{t}/runs/{}", runs[0]["run_id"].as_str().unwrap())
    );
}
