//! Every call of both official LangGraph SDKs (`tests/sdk/walk.py` and `tests/sdk/walk.mjs`, see
//! `serve_support::sdk_walk`) against two real server processes: `planwright serve` serving the
//! research planner (gaps in `tests/sdk/known_gaps.txt`), and a process serving a graph this file
//! registers through `Server::builder(…).graph(…)`, as a user's program would (the same gaps, and
//! those of a graph that is not a planner in `tests/sdk/known_gaps_graph.txt`).
//!
//! The second process is this test binary itself, started again to run only
//! [`graph_server_process`] with the address to listen on in [`SERVE_GRAPH_AT`]: the graph is
//! test code, and the process is as separate as `planwright serve` is, with no binary target
//! of its own in the package.

mod serve_support;

use planwright::graph::{Route, StateGraph, END, START};
use planwright::NodeContext;
use planwright_actors::serve::{ServeArgs, Server};
use serde_json::json;
use serve_support::sdk_walk::{self, Target, KEY};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_of_both_sdks_passes_but_the_known_gaps() {
    sdk_walk::install().await;
    let dir = serve_support::fresh_dir("sdk-walk");
    let checkpoint = format!("sqlite:{}", dir.join("serve.sqlite").display());
    // Model calls of ~150 ms, as in serve_sdk.rs: a run lasts long enough that a cancel or a
    // second run sent right after it finds it running.
    let (_server, url) = serve_support::serve_on(
        &checkpoint,
        "sim:p50=150ms,p99=200ms,seed=1",
        &["--token", KEY],
    )
    .await;
    sdk_walk::walk_both(Target {
        url: &url,
        assistant: "research",
        config: "research.json",
        gaps: &["known_gaps.txt"],
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_of_both_sdks_passes_against_a_graph_the_test_registers_but_its_known_gaps() {
    sdk_walk::install().await;
    let dir = serve_support::fresh_dir("sdk-walk-graph");
    let port = serve_support::free_port();
    let mut process = Command::new(std::env::current_exe().expect("the test binary's path"));
    process
        .args([
            "graph_server_process",
            "--exact",
            "--ignored",
            "--nocapture",
        ])
        .env(SERVE_GRAPH_AT, format!("127.0.0.1:{port}"))
        .env(GRAPH_DB, dir.join("app.sqlite"));
    let _server = serve_support::start(process, port).await;
    sdk_walk::walk_both(Target {
        url: &format!("http://127.0.0.1:{port}"),
        assistant: "support",
        config: "graph.json",
        gaps: &["known_gaps.txt", "known_gaps_graph.txt"],
    })
    .await;
}

/// Where [`graph_server_process`] listens; without it the function returns at once.
const SERVE_GRAPH_AT: &str = "PLANWRIGHT_WALK_GRAPH_ADDR";
/// The SQLite file [`graph_server_process`] keeps its threads in.
const GRAPH_DB: &str = "PLANWRIGHT_WALK_GRAPH_DB";

/// Not a check: the server process of the walk against a registered graph. It serves [`support`]
/// as assistant `support` with the API key [`KEY`] until it is killed, when started with
/// [`SERVE_GRAPH_AT`] set; run any other way, it returns at once.
#[test]
#[ignore = "the server process of the walk against a registered graph, which starts it"]
fn graph_server_process() {
    let (Some(addr), Some(db)) = (
        std::env::var(SERVE_GRAPH_AT).ok(),
        std::env::var_os(GRAPH_DB),
    ) else {
        return;
    };
    let runtime = tokio::runtime::Runtime::new().expect("a runtime");
    runtime.block_on(async move {
        let args = ServeArgs {
            addr: addr.clone(),
            checkpoint: format!("sqlite:{}", std::path::Path::new(&db).display()),
            token: Some(KEY.into()),
            ..ServeArgs::default()
        };
        let server = Server::builder(args)
            .graph("support", support())
            .build()
            .await
            .expect("the server builds");
        let listener = tokio::net::TcpListener::bind(&addr)
            .await
            .unwrap_or_else(|e| panic!("cannot listen on {addr}: {e}"));
        server.serve(listener).await.expect("the server serves");
    });
}

planwright::state! {
    /// A support ticket's reply, approved by a person when the request asks for it.
    pub struct Ticket => TicketUpdate {
        /// What the customer asked.
        replace request: String,
        /// True when a person approves the reply before it goes out.
        replace needs_approval: bool,
        /// The drafted reply.
        replace draft: String,
        /// Where the ticket is: `drafted`, `approved`, `rejected`, `sent`, `escalated`.
        replace status: String,
        /// What happened, in order.
        append log: Vec<String>,
    }
}

/// How long [`support`]'s draft node takes per word it streams: a run lasts long enough
/// (~0.3 s) that a cancel or a second run sent right after it finds it running.
const WORD_EVERY: Duration = Duration::from_millis(40);

/// A user-style graph: `draft` streams its reply word by word (message chunks) and reports its
/// progress (custom events); a request that needs approval goes to `approve`, which asks a
/// person (an interrupt) and routes to `send`, or to `escalate` when the answer is `no`.
fn support() -> planwright::CompiledGraph<Ticket> {
    StateGraph::<Ticket>::new("support")
        .add_node("draft", |s: Arc<Ticket>, ctx: NodeContext| async move {
            let draft = format!("We will {} within two working days.", s.request);
            let words: Vec<&str> = draft.split_inclusive(' ').collect();
            let message = format!("draft-{}-{:x}", ctx.task_id(), rand::random::<u64>());
            for (i, word) in words.iter().enumerate() {
                tokio::time::sleep(WORD_EVERY).await;
                ctx.stream_chunk(&message, word);
                ctx.emit(json!({"words": i + 1, "of": words.len()}));
            }
            Ok(TicketUpdate::default()
                .draft(draft)
                .status("drafted".to_string()))
        })
        .add_sync_node("approve", |s: &Ticket, ctx: &NodeContext| {
            let answer =
                ctx.interrupt(json!({"question": "send this reply?", "draft": s.draft}))?;
            let status = if answer == "no" {
                "rejected"
            } else {
                "approved"
            };
            Ok(TicketUpdate::default()
                .status(status.to_string())
                .log(vec![format!("{status}: {answer}")]))
        })
        .add_sync_node("send", |s: &Ticket, _: &NodeContext| {
            Ok(TicketUpdate::default()
                .status("sent".to_string())
                .log(vec![format!("sent: {}", s.draft)]))
        })
        .add_sync_node("escalate", |_: &Ticket, _: &NodeContext| {
            Ok(TicketUpdate::default()
                .status("escalated".to_string())
                .log(vec!["escalated to a person".into()]))
        })
        .add_edge(START, "draft")
        .add_conditional_edges(
            "draft",
            |s: &Ticket| Route::to(if s.needs_approval { "approve" } else { "send" }),
            [("approve", "approve"), ("send", "send")],
        )
        .add_conditional_edges(
            "approve",
            |s: &Ticket| {
                Route::to(if s.status == "rejected" {
                    "escalate"
                } else {
                    "send"
                })
            },
            [("escalate", "escalate"), ("send", "send")],
        )
        .add_edge("send", END)
        .add_edge("escalate", END)
        .compile()
        .expect("the graph compiles")
}
