//! The inspection endpoints the studio (and any client) reads, over a real socket: assistants
//! and their graphs drawn from the compiled graph, live node statistics, the state at a past
//! checkpoint, history paged with `before`, threads searched by status and id prefix, a thread
//! copied at a past checkpoint, and a run with no input continuing a thread.

use planwright_actors::serve::{router, state, ServeArgs};
use serde_json::{json, Value};

async fn start() -> String {
    let dir = std::env::temp_dir().join(format!(
        "planwright-inspect-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let args = ServeArgs {
        addr: "127.0.0.1:0".into(),
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
        token: None,
        model: "offline".into(),
        ..ServeArgs::default()
    };
    let st = state(&args).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(st)).await;
    });
    format!("http://{addr}")
}

async fn call(method: reqwest::Method, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = reqwest::Client::new().request(method, url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

async fn get(url: &str) -> (u16, Value) {
    call(reqwest::Method::GET, url, None).await
}

async fn post(url: &str, body: Value) -> (u16, Value) {
    call(reqwest::Method::POST, url, Some(body)).await
}

const GOAL: &str =
    "Should our support team adopt retrieval-augmented generation for customer support?";

/// A research thread run to its brief.
async fn briefed(url: &str, id: &str) {
    assert_eq!(
        post(&format!("{url}/threads"), json!({"thread_id": id}))
            .await
            .0,
        200
    );
    let (s, v) = post(
        &format!("{url}/threads/{id}/runs/wait"),
        json!({"assistant_id": "research", "input": {"input": GOAL}}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "ok");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn graphs_and_node_statistics_come_from_the_compiled_graphs() {
    let url = start().await;
    let (s, list) = post(&format!("{url}/assistants/search"), json!({})).await;
    assert_eq!(s, 200);
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["assistant_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["research", "acquire"]);
    assert_eq!(get(&format!("{url}/assistants/nope")).await.0, 404);

    let (s, g) = get(&format!("{url}/assistants/research/graph")).await;
    assert_eq!(s, 200);
    let nodes: Vec<&str> = g["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|n| n["id"].as_str().unwrap())
        .collect();
    assert_eq!(nodes.first(), Some(&"__start__"));
    assert_eq!(nodes.last(), Some(&"__end__"));
    for n in [
        "prepare_input",
        "create_plan",
        "review_plan",
        "execute_step",
        "synthesize_report",
    ] {
        assert!(nodes.contains(&n), "{n} in {nodes:?}");
    }
    // Every edge joins drawn nodes, and each conditional edge names its router label; the
    // Mermaid text names every node too.
    for e in g["edges"].as_array().unwrap() {
        assert!(nodes.contains(&e["source"].as_str().unwrap()), "{e}");
        assert!(nodes.contains(&e["target"].as_str().unwrap()), "{e}");
        assert_eq!(e["conditional"] == true, e["data"].is_string(), "{e}");
    }
    let mermaid = g["mermaid"].as_str().unwrap();
    for n in &nodes[1..nodes.len() - 1] {
        assert!(mermaid.contains(n), "{n} in the Mermaid text");
    }

    briefed(&url, "stats-1").await;
    let (s, stats) = get(&format!("{url}/assistants/research/nodes")).await;
    assert_eq!(s, 200);
    assert_eq!(stats["active_runs"], 0);
    let plan = stats["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "create_plan")
        .unwrap();
    assert_eq!(plan["executions"], 1);
    assert_eq!(plan["running"], 0);
    assert!(plan["work_p99_us"].as_u64().unwrap() >= plan["work_p50_us"].as_u64().unwrap());
    let steps = stats["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|n| n["node"] == "execute_step")
        .unwrap();
    assert!(steps["executions"].as_u64().unwrap() >= 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn history_pages_with_before_and_past_states_and_copies_are_reachable() {
    let url = start().await;
    briefed(&url, "hist-1").await;
    let (s, all) = post(
        &format!("{url}/threads/hist-1/history"),
        json!({"limit": 100}),
    )
    .await;
    assert_eq!(s, 200);
    let all = all.as_array().unwrap().clone();
    assert!(all.len() >= 6, "{}", all.len());
    let id = |c: &Value| {
        c["checkpoint"]["checkpoint_id"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Paging with `before` (plain id or LangGraph's config) walks the same list.
    let (_, first) = post(
        &format!("{url}/threads/hist-1/history"),
        json!({"limit": 3}),
    )
    .await;
    let (_, second) = post(
        &format!("{url}/threads/hist-1/history"),
        json!({"limit": 3, "before": {"checkpoint_id": id(&first[2])}}),
    )
    .await;
    let (_, second_plain) = post(
        &format!("{url}/threads/hist-1/history"),
        json!({"limit": 3, "before": id(&first[2])}),
    )
    .await;
    assert_eq!(second, second_plain);
    let paged: Vec<String> = first
        .as_array()
        .unwrap()
        .iter()
        .chain(second.as_array().unwrap())
        .map(id)
        .collect();
    let direct: Vec<String> = all.iter().take(6).map(id).collect();
    assert_eq!(paged, direct);
    let (s, e) = post(
        &format!("{url}/threads/hist-1/history"),
        json!({"before": {"x": 1}}),
    )
    .await;
    assert_eq!(s, 400, "{e}");

    // The state at a past checkpoint is the history's values there.
    let past = &all[all.len() - 2];
    let (s, at) = get(&format!("{url}/threads/hist-1/state/{}", id(past))).await;
    assert_eq!(s, 200);
    assert_eq!(at["values"], past["values"]);
    assert_eq!(get(&format!("{url}/threads/hist-1/state/abc")).await.0, 400);
    assert_eq!(
        get(&format!("{url}/threads/hist-1/state/999999")).await.0,
        404
    );
    assert_eq!(get(&format!("{url}/threads/none/state/1")).await.0, 404);

    // A copy at a checkpoint between supersteps continues to its own brief with no input;
    // the source is untouched.
    let mid = all
        .iter()
        .find(|c| c["metadata"]["writes"] == json!(["select_next_step"]))
        .expect("a checkpoint written by select_next_step");
    let (s, copy) = post(
        &format!("{url}/threads/hist-1/copy"),
        json!({"thread_id": "hist-1-rerun", "checkpoint_id": id(mid)}),
    )
    .await;
    assert_eq!(s, 200, "{copy}");
    assert_eq!(copy["metadata"]["copied_from"]["checkpoint_id"], id(mid));
    assert_eq!(copy["metadata"]["assistant_id"], "research");
    let (s, done) = post(
        &format!("{url}/threads/hist-1-rerun/runs/wait"),
        json!({"assistant_id": "research", "input": null}),
    )
    .await;
    assert_eq!(s, 200, "{done}");
    assert_eq!(done["status"], "ok");
    assert!(done["final_report"]
        .as_str()
        .unwrap()
        .contains("Research brief"));
    let (_, source) = post(
        &format!("{url}/threads/hist-1/history"),
        json!({"limit": 100}),
    )
    .await;
    assert_eq!(
        source.as_array().unwrap().len(),
        all.len(),
        "the source thread is untouched"
    );
    // Every run of this process is recorded, newest first.
    let (s, runs) = get(&format!("{url}/threads/hist-1-rerun/runs")).await;
    assert_eq!(s, 200);
    assert_eq!(runs.as_array().unwrap().len(), 1);
    assert_eq!(runs[0]["status"], "success");
    assert_eq!(runs[0]["multitask_strategy"], "reject");
    let (s, one) = get(&format!(
        "{url}/threads/hist-1-rerun/runs/{}",
        runs[0]["run_id"].as_str().unwrap()
    ))
    .await;
    assert_eq!((s, &one), (200, &runs[0]));
    assert_eq!(
        get(&format!("{url}/threads/hist-1-rerun/runs?limit=x"))
            .await
            .0,
        422
    );
    assert_eq!(get(&format!("{url}/threads/nobody/runs")).await.0, 404);
    // Nothing left to continue: a clear 400.
    let (s, e) = post(
        &format!("{url}/threads/hist-1/runs/wait"),
        json!({"assistant_id": "research"}),
    )
    .await;
    assert_eq!(s, 400);
    assert!(e.to_string().contains("no unfinished superstep"), "{e}");
    // Copies that cannot be made say why.
    let (s, _) = post(
        &format!("{url}/threads/hist-1/copy"),
        json!({"thread_id": "hist-1-rerun"}),
    )
    .await;
    assert_eq!(s, 409);
    let (s, _) = post(
        &format!("{url}/threads/hist-1/copy"),
        json!({"checkpoint_id": "x"}),
    )
    .await;
    assert_eq!(s, 400);
    let (s, _) = post(&format!("{url}/threads/hist-1/copy"), json!({"bogus": 1})).await;
    assert_eq!(s, 400);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn threads_are_searched_by_status_and_id_prefix() {
    let url = start().await;
    briefed(&url, "team-a-1").await;
    briefed(&url, "team-a-2").await;
    assert_eq!(
        post(&format!("{url}/threads"), json!({"thread_id": "team-b-1"}))
            .await
            .0,
        200
    );
    let (s, v) = post(
        &format!("{url}/threads/team-b-1/runs/wait"),
        json!({"assistant_id": "research", "input": {"input": GOAL, "constraints": {"require_approval": true}}}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "interrupted");
    let ids = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|t| t["thread_id"].as_str().unwrap().to_string())
            .collect()
    };
    let (_, v) = post(
        &format!("{url}/threads/search"),
        json!({"prefix": "team-a"}),
    )
    .await;
    assert_eq!(ids(&v), ["team-a-1", "team-a-2"]);
    let (_, v) = post(
        &format!("{url}/threads/search"),
        json!({"status": "interrupted"}),
    )
    .await;
    assert_eq!(ids(&v), ["team-b-1"]);
    let (_, v) = post(
        &format!("{url}/threads/search"),
        json!({"status": "idle", "limit": 1, "offset": 1}),
    )
    .await;
    assert_eq!(ids(&v), ["team-a-2"], "offset counts matching threads");
    let (s, e) = post(
        &format!("{url}/threads/search"),
        json!({"status": "sleeping"}),
    )
    .await;
    assert_eq!(s, 422);
    assert!(e.to_string().contains("sleeping"), "{e}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_from_a_past_checkpoint_branches_the_same_thread() {
    let url = start().await;
    briefed(&url, "travel-1").await;
    let history = |url: String| async move {
        let (s, all) = post(
            &format!("{url}/threads/travel-1/history"),
            json!({"limit": 1000}),
        )
        .await;
        assert_eq!(s, 200, "{all}");
        all.as_array().unwrap().clone()
    };
    let before = history(url.clone()).await;
    let oldest = before.last().unwrap();
    let input_cp = oldest["checkpoint"]["checkpoint_id"].as_str().unwrap();
    assert_eq!(oldest["metadata"]["source"], "input");
    // Replay from the input checkpoint, the way `RemoteGraph` asks (config.configurable).
    let (s, v) = post(
        &format!("{url}/threads/travel-1/runs/wait"),
        json!({"assistant_id": "research",
               "config": {"configurable": {"checkpoint_id": input_cp}}}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(v["status"], "ok");
    let after = history(url.clone()).await;
    assert_eq!(
        after.len(),
        before.len() * 2,
        "old checkpoints kept, one branch, every superstep again"
    );
    let branch = after
        .iter()
        .find(|c| c["metadata"]["source"] == "branch")
        .expect("the history shows the branch");
    assert_eq!(branch["metadata"]["branched_from"], input_cp);
    assert_eq!(
        branch["parent_checkpoint"]["checkpoint_id"], before[0]["checkpoint"]["checkpoint_id"],
        "the branch follows the old head: one linear chain"
    );
    assert_eq!(
        after[0]["values"]["final_report"], before[0]["values"]["final_report"],
        "the same brief again"
    );

    // New input from a past checkpoint replaces what was pending there (`checkpoint_id`).
    let (s, v) = post(
        &format!("{url}/threads/travel-1/runs/wait"),
        json!({"assistant_id": "research", "checkpoint_id": input_cp,
               "input": {"input": "Should we move product search to a vector database?"}}),
    )
    .await;
    assert_eq!(s, 200, "{v}");
    assert_eq!(
        v["goal"], "Should we move product search to a vector database?",
        "{v}"
    );
    // Bad checkpoints are named.
    let (s, e) = post(
        &format!("{url}/threads/travel-1/runs/wait"),
        json!({"assistant_id": "research", "checkpoint_id": "9999"}),
    )
    .await;
    assert_eq!(s, 404, "{e}");
    let (s, e) = post(
        &format!("{url}/threads/travel-1/runs/wait"),
        json!({"assistant_id": "research", "checkpoint": {"checkpoint_id": 5}}),
    )
    .await;
    assert_eq!(s, 400, "{e}");
}
