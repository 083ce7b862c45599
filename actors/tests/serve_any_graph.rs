//! The server library with a graph the test registers (not one of the planners): built with
//! `Server::builder`, its router nested under `/agents` inside the test's own axum app, served
//! over a real socket on a real SQLite file. A run pauses on the graph's interrupt, the state
//! shows it, a resume finishes it; the assistant endpoints describe the graph; bad input and
//! unknown assistants are refused with errors that name the problem; a registry that cannot be
//! served is refused at build time.

mod serve_support;

use planwright_actors::serve::{ServeArgs, ServeError, Server};
use serde_json::{json, Value};
use serve_support::call;
use serve_support::in_process::{self, replier as graph, replier_server};

fn args(name: &str) -> ServeArgs {
    in_process::sqlite(&format!("serve-any-graph-{name}"))
}

/// The test's own application with the API under `/agents`, on a free port.
async fn app(server: &Server) -> String {
    let app = axum::Router::new()
        .route("/", axum::routing::get(|| async { "mine" }))
        .nest("/agents", server.router());
    in_process::listen(app).await
}

/// A webhook receiver over a real socket: its URL, and the payloads it is sent.
async fn webhook_receiver() -> (String, tokio::sync::mpsc::UnboundedReceiver<Value>) {
    let (hook_tx, hook_rx) = tokio::sync::mpsc::unbounded_channel::<Value>();
    let hook = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |axum::Json(v): axum::Json<Value>| {
            let tx = hook_tx.clone();
            async move {
                let _ = tx.send(v);
                "ok"
            }
        }),
    );
    (format!("{}/hook", in_process::listen(hook).await), hook_rx)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_registered_graph_pauses_resumes_and_describes_itself_under_a_nested_path() {
    let server = replier_server(args("walk")).await;
    let _background = server.start_background();
    let base = app(&server).await;
    let api = format!("{base}/agents");
    assert_eq!(
        reqwest::get(&base).await.unwrap().text().await.unwrap(),
        "mine",
        "the application's own route stays its own"
    );

    // The assistant describes the graph it serves.
    let (s, list) = call("POST", &format!("{api}/assistants/search"), Some(json!({}))).await;
    assert_eq!(s, 200, "{list}");
    let ids: Vec<&str> = list
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|a| a["assistant_id"].as_str())
        .collect();
    assert_eq!(ids, ["replier"]);
    let (s, g) = call("GET", &format!("{api}/assistants/replier/graph"), None).await;
    assert_eq!(s, 200, "{g}");
    let nodes: Vec<&str> = g["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["id"].as_str())
        .collect();
    assert_eq!(nodes, ["__start__", "draft", "approve", "send", "__end__"]);
    let (s, schemas) = call("GET", &format!("{api}/assistants/replier/schemas"), None).await;
    assert_eq!(s, 200, "{schemas}");
    let props = schemas["state_schema"]["properties"].as_object().unwrap();
    let fields: Vec<&str> = props.keys().map(String::as_str).collect();
    assert_eq!(fields, ["draft", "log", "request"]);

    // A run pauses on the graph's interrupt; the thread shows it; a resume finishes it.
    let (s, t) = call(
        "POST",
        &format!("{api}/threads"),
        Some(json!({"thread_id": "t1"})),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let run = json!({"assistant_id": "replier", "input": {"request": "refund order 42"}});
    let (s, out) = call("POST", &format!("{api}/threads/t1/runs/wait"), Some(run)).await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["draft"], "We will refund order 42.");
    assert_eq!(out["__interrupt__"][0]["value"]["question"], "send?");
    let (s, st) = call("GET", &format!("{api}/threads/t1/state"), None).await;
    assert_eq!(s, 200, "{st}");
    assert_eq!(st["next"], json!(["approve"]));
    assert_eq!(st["values"]["request"], "refund order 42");
    let resume = json!({"assistant_id": "replier", "command": {"resume": "yes"}});
    let (s, out) = call("POST", &format!("{api}/threads/t1/runs/wait"), Some(resume)).await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(
        out["log"],
        json!(["approved: \"yes\"", "sent: We will refund order 42."])
    );
    assert!(out.get("__interrupt__").is_none(), "{out}");
    let (s, hist) = call(
        "POST",
        &format!("{api}/threads/t1/history"),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{hist}");
    assert!(hist.as_array().unwrap().len() >= 3, "{hist}");

    // Refusals name the problem.
    let (s, t2) = call(
        "POST",
        &format!("{api}/threads"),
        Some(json!({"thread_id": "t2"})),
    )
    .await;
    assert_eq!(s, 200, "{t2}");
    let bad = json!({"assistant_id": "replier", "input": {"request": 7}});
    let (s, e) = call("POST", &format!("{api}/threads/t2/runs/wait"), Some(bad)).await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["detail"].as_str().unwrap().contains("malformed input"),
        "{e}"
    );
    let other = json!({"assistant_id": "research", "input": {"input": "x"}});
    let (s, e) = call("POST", &format!("{api}/threads/t2/runs/wait"), Some(other)).await;
    assert_eq!(s, 404, "{e}");
    assert_eq!(
        e["detail"], "unknown assistant `research`: use `replier`",
        "the refusal names the assistants there are"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_registry_that_cannot_be_served_is_refused_when_built() {
    let none = Server::builder(args("none")).build().await;
    assert!(matches!(none, Err(ServeError::Assistants(_))));
    assert_eq!(
        none.err().unwrap().to_string(),
        "a server needs at least one assistant"
    );
    let twice = Server::builder(args("twice"))
        .graph("a", graph("a"))
        .graph("a", graph("a"))
        .build()
        .await;
    assert_eq!(
        twice.err().unwrap().to_string(),
        "two assistants are registered as `a`"
    );
    let slash = Server::builder(args("slash"))
        .graph("a/b", graph("a"))
        .build()
        .await;
    assert!(slash
        .err()
        .unwrap()
        .to_string()
        .starts_with("assistant id `a/b`: use letters"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn per_run_pauses_commands_and_thread_creation_reach_the_graph() {
    let server = replier_server(args("runs")).await;
    let base = app(&server).await;
    let api = format!("{base}/agents");
    // `if_not_exists: "create"` makes the thread; `interrupt_before` pauses before `draft`.
    let run = json!({
        "assistant_id": "replier", "input": {"request": "ship it"},
        "if_not_exists": "create", "interrupt_before": ["draft"],
    });
    let (s, out) = call("POST", &format!("{api}/threads/fresh/runs/wait"), Some(run)).await;
    assert_eq!(s, 200, "{out}");
    let (_, st) = call("GET", &format!("{api}/threads/fresh/state"), None).await;
    assert_eq!(st["next"], json!(["draft"]), "{st}");
    assert_eq!(st["values"]["draft"], "", "draft has not run");
    // A command writes its update and goes straight to `send`, skipping the approval.
    let cmd = json!({
        "assistant_id": "replier",
        "command": {"update": {"draft": "Shipped."}, "goto": "send"},
    });
    let (s, out) = call("POST", &format!("{api}/threads/fresh/runs/wait"), Some(cmd)).await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["log"], json!(["sent: Shipped."]), "{out}");
    // Refusals name the problem and record nothing.
    for (body, status, words) in [
        (
            json!({"assistant_id": "replier", "input": {}, "interrupt_before": ["nope"]}),
            422,
            "the graph has no node `nope` (its nodes: draft, approve, send)",
        ),
        (
            json!({"assistant_id": "replier", "input": {}, "durability": "later"}),
            422,
            "durability `later`: use sync, async or exit",
        ),
        (
            json!({"assistant_id": "replier", "command": {"goto": 3}}),
            400,
            "command.goto: expected a node name or a list of them, not 3",
        ),
        (
            json!({"assistant_id": "replier", "command": {"update": {"draft": 1}}}),
            400,
            "malformed values",
        ),
    ] {
        let (s, e) = call(
            "POST",
            &format!("{api}/threads/fresh/runs/wait"),
            Some(body),
        )
        .await;
        assert_eq!(s, status, "{e}");
        assert!(e["detail"].as_str().unwrap().contains(words), "{e}");
    }
    let (s, e) = call(
        "POST",
        &format!("{api}/threads/absent/runs/wait"),
        Some(json!({"assistant_id": "replier", "input": {}})),
    )
    .await;
    assert_eq!(
        s, 404,
        "without if_not_exists a missing thread is not made: {e}"
    );
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stateless_runs_batches_deletes_cancels_and_webhooks() {
    let server = replier_server(args("stateless")).await;
    let base = app(&server).await;
    let api = format!("{base}/agents");
    let (hook_url, mut hook_rx) = webhook_receiver().await;

    // A stateless wait runs on a thread of its own, deleted once the run ends.
    let run = json!({"assistant_id": "replier", "input": {"request": "x"}, "webhook": hook_url});
    let res = reqwest::Client::new()
        .post(format!("{api}/runs/wait"))
        .json(&run)
        .send()
        .await
        .unwrap();
    assert_eq!(res.status(), 200);
    let at = res.headers()["content-location"]
        .to_str()
        .unwrap()
        .to_string();
    let out: Value = res.json().await.unwrap();
    assert_eq!(out["__interrupt__"][0]["value"]["question"], "send?");
    let thread = at.split('/').nth(2).unwrap().to_string();
    // The webhook gets the run's record and values.
    let got = hook_rx.recv().await.expect("the webhook is called");
    assert_eq!(got["thread_id"], thread.as_str());
    assert_eq!(got["status"], "interrupted");
    assert_eq!(got["values"]["draft"], "We will x.");
    let gone = async {
        loop {
            let (s, _) = call("GET", &format!("{api}/threads/{thread}"), None).await;
            if s == 404 {
                break;
            }
            tokio::task::yield_now().await;
        }
    };
    tokio::time::timeout(std::time::Duration::from_secs(30), gone)
        .await
        .expect("a stateless run's thread is deleted when it ends");
    // `on_completion: keep` keeps it.
    let keep =
        json!({"assistant_id": "replier", "input": {"request": "y"}, "on_completion": "keep"});
    let res = reqwest::Client::new()
        .post(format!("{api}/runs/wait"))
        .json(&keep)
        .send()
        .await
        .unwrap();
    let at = res.headers()["content-location"]
        .to_str()
        .unwrap()
        .to_string();
    let kept = at.split('/').nth(2).unwrap().to_string();
    let (s, t) = call("GET", &format!("{api}/threads/{kept}"), None).await;
    assert_eq!(s, 200, "{t}");
    assert_eq!(t["status"], "interrupted");

    // A batch: checked whole before any run starts.
    let bad = json!([
        {"assistant_id": "replier", "input": {"request": "a"}},
        {"assistant_id": "nobody", "input": {}},
    ]);
    let (s, e) = call("POST", &format!("{api}/runs/batch"), Some(bad)).await;
    assert_eq!(s, 404, "{e}");
    assert!(e["detail"]
        .as_str()
        .unwrap()
        .starts_with("run 1 of the batch: unknown assistant"));
    let batch = json!([
        {"assistant_id": "replier", "input": {"request": "a"}, "on_completion": "keep"},
        {"assistant_id": "replier", "input": {"request": "b"}, "on_completion": "keep"},
    ]);
    let (s, runs) = call("POST", &format!("{api}/runs/batch"), Some(batch)).await;
    assert_eq!(s, 200, "{runs}");
    let runs = runs.as_array().unwrap().clone();
    assert_eq!(runs.len(), 2);
    assert_ne!(runs[0]["thread_id"], runs[1]["thread_id"]);

    // Deleting a run: refused while it goes on, done once it ended.
    let (t0, r0) = (
        runs[0]["thread_id"].as_str().unwrap(),
        runs[0]["run_id"].as_str().unwrap(),
    );
    let (s, _) = call("GET", &format!("{api}/threads/{t0}/runs/{r0}/join"), None).await;
    assert_eq!(s, 200);
    let (s, _) = call("DELETE", &format!("{api}/threads/{t0}/runs/{r0}"), None).await;
    assert_eq!(s, 204);
    let (s, _) = call("GET", &format!("{api}/threads/{t0}/runs/{r0}"), None).await;
    assert_eq!(s, 404, "a deleted run is gone");

    // Cancelling many: by ids, and a malformed request named.
    let (t1, r1) = (
        runs[1]["thread_id"].as_str().unwrap(),
        runs[1]["run_id"].as_str().unwrap(),
    );
    let ids = json!({"thread_id": t1, "run_ids": [r1]});
    let (s, e) = call("POST", &format!("{api}/runs/cancel"), Some(ids)).await;
    assert_eq!(s, 204, "{e}");
    let (s, e) = call("POST", &format!("{api}/runs/cancel"), Some(json!({}))).await;
    assert_eq!(s, 422, "{e}");
    let (s, e) = call(
        "POST",
        &format!("{api}/runs/cancel"),
        Some(json!({"status": "sleeping"})),
    )
    .await;
    assert_eq!(s, 422, "{e}");
    let (s, e) = call(
        "POST",
        &format!("{api}/runs/cancel?action=rollback"),
        Some(json!({"status": "all"})),
    )
    .await;
    assert_eq!(s, 204, "{e}");

    // A delayed run waits `pending`, then runs.
    let (s, t) = call("POST", &format!("{api}/threads"), Some(json!({}))).await;
    assert_eq!(s, 200);
    let tid = t["thread_id"].as_str().unwrap();
    let later = json!({"assistant_id": "replier", "input": {"request": "z"}, "after_seconds": 0.2});
    let (s, rec) = call("POST", &format!("{api}/threads/{tid}/runs"), Some(later)).await;
    assert_eq!(s, 200, "{rec}");
    assert_eq!(rec["status"], "pending");
    let rid = rec["run_id"].as_str().unwrap();
    let (s, out) = call("GET", &format!("{api}/threads/{tid}/runs/{rid}/join"), None).await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["draft"], "We will z.");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_sent_with_the_answer_is_what_the_resumed_node_sees() {
    let server = replier_server(args("update-resume")).await;
    let api = format!("{}/agents", app(&server).await);
    let (_, t) = call("POST", &format!("{api}/threads"), Some(json!({}))).await;
    let tid = t["thread_id"].as_str().unwrap();
    // Paused before `send` (a per-run pause): the reviewer edits the draft and lets it go.
    let run = json!({"assistant_id": "replier", "input": {"request": "a"}, "interrupt_before": ["approve"]});
    let (s, _) = call("POST", &format!("{api}/threads/{tid}/runs/wait"), Some(run)).await;
    assert_eq!(s, 200);
    let go = json!({"assistant_id": "replier", "command": {"update": {"draft": "Edited."}, "resume": "ok"}});
    let (s, out) = call("POST", &format!("{api}/threads/{tid}/runs/wait"), Some(go)).await;
    assert_eq!(s, 200, "{out}");
    // `approve` runs with the edited draft and asks its own question.
    assert_eq!(
        out["__interrupt__"][0]["value"]["draft"], "Edited.",
        "{out}"
    );
    // Paused inside `approve` (a node's question): the update lands with the answer, and the
    // node, run again, sees the new draft and gets the answer.
    let both =
        json!({"assistant_id": "replier", "command": {"update": {"draft": "x"}, "resume": "yes"}});
    let (s, out) = call(
        "POST",
        &format!("{api}/threads/{tid}/runs/wait"),
        Some(both),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["log"], json!(["approved: \"yes\"", "sent: x"]), "{out}");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_assistant_created_over_the_api_runs_its_graph() {
    let server = replier_server(args("created")).await;
    let api = format!("{}/agents", app(&server).await);
    let made = json!({"graph_id": "replier", "name": "polite", "config": {"configurable": {"tone": "warm"}}});
    let (s, a) = call("POST", &format!("{api}/assistants"), Some(made)).await;
    assert_eq!(s, 200, "{a}");
    let id = a["assistant_id"].as_str().unwrap().to_string();
    assert_ne!(id, "replier");
    let (_, t) = call("POST", &format!("{api}/threads"), Some(json!({}))).await;
    let tid = t["thread_id"].as_str().unwrap();
    let run = json!({"assistant_id": id, "input": {"request": "call back"}});
    let (s, out) = call("POST", &format!("{api}/threads/{tid}/runs/wait"), Some(run)).await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["draft"], "We will call back.");
    let (_, runs) = call("GET", &format!("{api}/threads/{tid}/runs"), None).await;
    assert_eq!(runs[0]["metadata"]["assistant_id"], id.as_str(), "{runs}");
    // Its thread runs the graph: the registered graph's id resumes it too.
    let resume = json!({"assistant_id": "replier", "command": {"resume": "yes"}});
    let (s, out) = call(
        "POST",
        &format!("{api}/threads/{tid}/runs/wait"),
        Some(resume),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["log"][1], "sent: We will call back.");
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn nodes_read_the_requests_config_and_context() {
    use planwright::graph::{StateGraph, END, START};
    use planwright::NodeContext;
    use planwright_actors::serve::RunRequest;
    use serve_support::in_process::{Reply, ReplyUpdate};
    // A node that writes what its run's request gave it: the configurable, the context and
    // where it runs.
    let graph = StateGraph::<Reply>::new("echo")
        .add_sync_node("draft", |_: &Reply, ctx: &NodeContext| {
            let r = ctx.require_context::<RunRequest>()?;
            let text = |v: Option<&Value>| v.and_then(Value::as_str).unwrap_or("-").to_string();
            Ok(ReplyUpdate::default().draft(format!(
                "{} {} {} on {} by {} of {}",
                text(r.configurable("tone")),
                text(r.context_value("user")),
                text(r.context_value("lang")),
                r.thread_id,
                r.assistant_id,
                r.graph_id
            )))
        })
        .add_edge(START, "draft")
        .add_edge("draft", END)
        .compile()
        .unwrap();
    let server = Server::builder(args("request"))
        .graph("echo", graph)
        .build()
        .await
        .unwrap();
    let api = format!("{}/agents", app(&server).await);
    let made = json!({"graph_id": "echo", "config": {"configurable": {"tone": "warm"}},
                      "context": {"user": "ann"}});
    let (s, a) = call("POST", &format!("{api}/assistants"), Some(made)).await;
    assert_eq!(s, 200, "{a}");
    let id = a["assistant_id"].as_str().unwrap().to_string();
    let (_, t) = call("POST", &format!("{api}/threads"), Some(json!({}))).await;
    let tid = t["thread_id"].as_str().unwrap();
    let run = json!({"assistant_id": id, "input": {"request": "x"}, "context": {"lang": "fr"}});
    let (s, out) = call("POST", &format!("{api}/threads/{tid}/runs/wait"), Some(run)).await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(
        out["draft"],
        format!("warm ann fr on {tid} by {id} of echo")
    );
    // The graph's own id, with nothing given: the node sees nothing.
    let run = json!({"assistant_id": "echo", "input": {"request": "x"}});
    let (s, out) = call("POST", &format!("{api}/threads/{tid}/runs/wait"), Some(run)).await;
    assert_eq!(s, 200, "{out}");
    assert_eq!(out["draft"], format!("- - - on {tid} by echo of echo"));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_a_restart_finds_ended_tells_its_webhook() {
    use planwright::runs::{now_ms, RunChange, RunRecordStatus as S};
    let args = args("recovered-webhook");
    let first = replier_server(args.clone()).await;
    let api = format!("{}/agents", app(&first).await);
    let (hook_url, mut hook_rx) = webhook_receiver().await;
    let (s, t) = call("POST", &format!("{api}/threads"), Some(json!({}))).await;
    assert_eq!(s, 200, "{t}");
    let tid = t["thread_id"].as_str().unwrap();
    let ask = json!({"assistant_id": "replier", "input": {"request": "x"}});
    let (s, v) = call("POST", &format!("{api}/threads/{tid}/runs/wait"), Some(ask)).await;
    assert_eq!(s, 200, "{v}");
    let answer =
        json!({"assistant_id": "replier", "command": {"resume": "yes"}, "webhook": hook_url});
    let (s, run) = call("POST", &format!("{api}/threads/{tid}/runs"), Some(answer)).await;
    assert_eq!(s, 200, "{run}");
    let rid = run["run_id"].as_str().unwrap();
    let told = hook_rx
        .recv()
        .await
        .expect("the webhook is told of the run's end");
    assert_eq!(told["status"], "success", "{told}");
    // The server stopped after the run's last checkpoint but before its record said so: the
    // record still says `running` when the next server starts on the same file.
    let store = first.state().run_store.clone();
    let back = store
        .transition(rid, &[S::Success], S::Running, RunChange::at(now_ms()))
        .await
        .unwrap();
    assert!(back);
    let second = replier_server(args).await;
    let _background = second.start_background();
    let told = tokio::time::timeout(std::time::Duration::from_secs(30), hook_rx.recv())
        .await
        .expect("the restarted server tells the webhook of the run it found ended")
        .unwrap();
    assert_eq!(
        (told["run_id"].as_str(), told["status"].as_str()),
        (Some(rid), Some("success")),
        "{told}"
    );
    assert_eq!(told["values"]["log"][1], "sent: We will x.", "{told}");
    let rec = second.state().run_store.get(rid).await.unwrap().unwrap();
    assert_eq!(rec.status, S::Success);
}
