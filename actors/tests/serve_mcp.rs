//! `serve` as an MCP server (`/mcp`, Streamable HTTP with JSON responses), called by the official
//! Python `mcp` client from PyPI and the TypeScript `@modelcontextprotocol/sdk` client from npm
//! (each installed once under the target directory by `mcp_support`):
//! it lists the served graphs as tools, calls one whose run pauses, reads what is asked, and
//! resumes it on the thread the result names; an unknown tool and a resume without a thread are
//! errors that name the problem. Without the token, `/mcp` answers 401 like every route.

mod mcp_support;
mod serve_support;

use planwright_actors::serve::Server;
use serde_json::{json, Value};
use serve_support::in_process;
use std::path::Path;

const TOKEN: &str = "mcp-secret";

/// A server with the `replier` graph (draft → approve, an interrupt → send) behind a bearer
/// token, on a free port; its `/mcp` URL.
async fn serve(name: &str) -> (Server, String) {
    let mut args = in_process::sqlite(name);
    args.token = Some(TOKEN.into());
    let server = in_process::replier_server(args).await;
    let base = in_process::listen(server.router()).await;
    (server, format!("{base}/mcp"))
}

/// Runs an official client's walk (`tests/sdk/mcp_serve_client.*`) with `cmd` against a new
/// server, and checks what it saw.
async fn walk(name: &str, mut cmd: tokio::process::Command, script: &str) {
    let (_server, url) = serve(name).await;
    let script = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/sdk")
        .join(script);
    let out = cmd
        .arg(script)
        .args([&url, TOKEN, "replier"])
        .arg(json!({"request": "refund the order"}).to_string())
        .arg(json!("yes").to_string())
        .output()
        .await
        .expect("the client runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "the client failed:\n{stderr}");
    let seen: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("the client's output is not JSON ({e}):\n{stderr}"));
    check(&seen);
}

/// What a client saw: the tool and its schema, a pause that says what it asks and how to resume,
/// the resumed run's values, and the two errors naming their problem.
fn check(seen: &Value) {
    assert_eq!(seen["server"], "planwright");
    let tool = &seen["tools"]["replier"];
    let props = &tool["input_schema"]["properties"];
    assert!(props.get("request").is_some(), "the graph's input: {tool}");
    assert!(props.get("thread_id").is_some() && props.get("resume").is_some());

    let first = &seen["first"];
    assert_eq!(first["is_error"], false, "{first}");
    assert_eq!(first["structured"]["status"], "interrupted", "{first}");
    let asked = &first["structured"]["interrupts"][0]["value"];
    assert_eq!(asked["question"], "send?", "{first}");
    assert_eq!(asked["draft"], "We will refund the order.");
    let thread = first["structured"]["thread_id"].as_str().unwrap();
    let text = first["text"][0].as_str().unwrap();
    assert!(
        text.contains("send?") && text.contains(thread) && text.contains("resume"),
        "{text}"
    );

    let resumed = &seen["resumed"];
    assert_eq!(resumed["is_error"], false, "{resumed}");
    assert_eq!(resumed["structured"]["status"], "success", "{resumed}");
    let log = &resumed["structured"]["values"]["log"];
    assert_eq!(
        log,
        &json!(["approved: \"yes\"", "sent: We will refund the order."]),
        "{resumed}"
    );
    let text: Value = serde_json::from_str(resumed["text"][0].as_str().unwrap()).unwrap();
    assert_eq!(text["log"], *log, "the text content is the values as JSON");

    let unknown = seen["unknown"].to_string();
    assert!(
        unknown.contains("no-such-tool") && unknown.contains("replier"),
        "{unknown}"
    );
    let bad = &seen["resume_without_thread"];
    assert_eq!(bad["is_error"], true, "{bad}");
    assert!(
        bad["text"][0].as_str().unwrap().contains("thread_id"),
        "{bad}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_python_mcp_client_lists_calls_and_resumes_a_graph() {
    let python = tokio::task::spawn_blocking(mcp_support::python)
        .await
        .expect("the Python SDK installs");
    let cmd = tokio::process::Command::new(python);
    walk("serve-mcp-python", cmd, "mcp_serve_client.py").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_typescript_mcp_client_lists_calls_and_resumes_a_graph() {
    let sdk = tokio::task::spawn_blocking(mcp_support::npm_sdk_dir)
        .await
        .expect("the TypeScript SDK installs");
    let mut cmd = tokio::process::Command::new("node");
    cmd.env("MCP_SDK_DIR", sdk);
    walk("serve-mcp-typescript", cmd, "mcp_serve_client.mjs").await;
}

#[tokio::test]
async fn mcp_is_behind_the_auth_of_every_route() {
    let (_server, url) = serve("serve-mcp-auth").await;
    let c = reqwest::Client::new();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let r = c.post(&url).json(&list).send().await.unwrap();
    assert_eq!(r.status(), 401);
    let r = c
        .post(&url)
        .bearer_auth(TOKEN)
        .json(&list)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["result"]["tools"][0]["name"], "replier", "{body}");
    let r = c.get(&url).bearer_auth(TOKEN).send().await.unwrap();
    assert_eq!(r.status(), 405, "no server-initiated stream");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let r = c
        .post(&url)
        .bearer_auth(TOKEN)
        .json(&note)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 202, "a notification has no answer");
}

/// One JSON-RPC request to `url` with `token`; its answer.
async fn rpc(url: &str, token: &str, method: &str, params: Value) -> Value {
    let msg = json!({"jsonrpc": "2.0", "id": 7, "method": method, "params": params});
    let r = reqwest::Client::new()
        .post(url)
        .bearer_auth(token)
        .json(&msg)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    r.json().await.unwrap()
}

#[tokio::test]
async fn a_call_on_another_users_thread_or_with_a_refused_input_is_a_tool_error() {
    let dir = serve_support::fresh_dir("serve-mcp-owners");
    let file = dir.join("tokens.json");
    let users = json!({"tokens": {"ann-token": {"user": "ann"}, "bob-token": {"user": "bob"}}});
    std::fs::write(&file, users.to_string()).unwrap();
    let mut args = in_process::sqlite("serve-mcp-owners-db");
    args.auth_file = Some(file);
    let server = in_process::replier_server(args).await;
    let url = format!("{}/mcp", in_process::listen(server.router()).await);

    let call = |args: Value| json!({"name": "replier", "arguments": args});
    let paused = rpc(
        &url,
        "ann-token",
        "tools/call",
        call(json!({"thread_id": "t-ann", "request": "ship it"})),
    )
    .await;
    assert_eq!(
        paused["result"]["structuredContent"]["status"], "interrupted",
        "{paused}"
    );
    let theirs = rpc(
        &url,
        "bob-token",
        "tools/call",
        call(json!({"thread_id": "t-ann", "resume": "no"})),
    )
    .await;
    assert_eq!(theirs["result"]["isError"], true, "{theirs}");
    let why = theirs["result"]["content"][0]["text"].as_str().unwrap();
    assert!(why.contains("`t-ann` does not exist"), "{why}");
    let state = rpc(
        &url,
        "ann-token",
        "tools/call",
        call(json!({"thread_id": "t-ann", "resume": "ok"})),
    )
    .await;
    assert_eq!(
        state["result"]["structuredContent"]["values"]["log"][0], "approved: \"ok\"",
        "bob's answer did not reach ann's thread: {state}"
    );

    let refused = rpc(&url, "ann-token", "tools/call", call(json!({"request": 5}))).await;
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let why = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(
        why.starts_with("replier: ") && why.contains("expected a string"),
        "{why}"
    );
    let unknown = rpc(&url, "ann-token", "resources/list", json!({})).await;
    assert_eq!(unknown["error"]["code"], -32601, "{unknown}");
}

#[tokio::test]
async fn a_graph_without_an_interrupt_answers_its_values_in_one_call() {
    use planwright::graph::{StateGraph, END, START};
    use serve_support::in_process::{Reply, ReplyUpdate};
    let echo = StateGraph::<Reply>::new("echo")
        .add_sync_node("draft", |s: &Reply, _: &planwright::NodeContext| {
            Ok(ReplyUpdate::default().draft(format!("echo: {}", s.request)))
        })
        .add_edge(START, "draft")
        .add_edge("draft", END)
        .compile()
        .expect("the graph compiles");
    let mut args = in_process::sqlite("serve-mcp-echo");
    args.token = Some(TOKEN.into());
    let server = Server::builder(args)
        .graph("replier", in_process::replier("replier"))
        .graph("echo", echo)
        .build()
        .await
        .expect("the server builds");
    let url = format!("{}/mcp", in_process::listen(server.router()).await);
    let tools = rpc(&url, TOKEN, "tools/list", json!({})).await;
    let names: Vec<&str> = tools["result"]["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["replier", "echo"]);
    let done = rpc(
        &url,
        TOKEN,
        "tools/call",
        json!({"name": "echo", "arguments": {"request": "hi"}}),
    )
    .await;
    let result = &done["result"];
    assert_eq!(result["isError"], false, "{done}");
    assert_eq!(result["structuredContent"]["status"], "success", "{done}");
    assert_eq!(result["structuredContent"]["values"]["draft"], "echo: hi");
    let text: Value = serde_json::from_str(result["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(text["draft"], "echo: hi");
}
