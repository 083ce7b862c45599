//! Your own graph behind the LangGraph Agent Server API, mounted inside your own axum app.
//!
//! The graph drafts a reply, asks a person to approve it (an interrupt), and sends it. The
//! server library opens the storage, registers the graph as assistant `replier` and gives a
//! `Router` that is nested under `/agents`, beside the application's own routes. Any LangGraph
//! SDK then talks to `http://127.0.0.1:8123/agents` (see docs/server.md, "Serving your graph").
//!
//! Run: `cargo run -p planwright-actors --example serve_my_graph` and, in another shell:
//! `curl -s -X POST localhost:8123/agents/threads -H 'content-type: application/json' -d '{"thread_id": "t1"}'`
//! `curl -s -X POST localhost:8123/agents/threads/t1/runs/wait -H 'content-type: application/json' -d '{"assistant_id": "replier", "input": {"request": "refund order 42"}}'`
//! `curl -s -X POST localhost:8123/agents/threads/t1/runs/wait -H 'content-type: application/json' -d '{"assistant_id": "replier", "command": {"resume": "yes"}}'`

use axum::routing::get;
use planwright::graph::{StateGraph, END, START};
use planwright::NodeContext;
use planwright_actors::serve::{ServeArgs, Server};
use serde_json::json;

planwright::state! {
    /// A reply a person approves before it goes out.
    pub struct Reply => ReplyUpdate {
        /// What the customer asked.
        replace request: String,
        /// The drafted reply.
        replace draft: String,
        /// What happened, in order.
        append log: Vec<String>,
    }
}

/// The graph: draft → approve (asks a person) → send.
fn graph() -> planwright::CompiledGraph<Reply> {
    StateGraph::<Reply>::new("replier")
        .add_sync_node("draft", |s: &Reply, _: &NodeContext| {
            Ok(ReplyUpdate::default().draft(format!("We will {}.", s.request)))
        })
        .add_sync_node("approve", |s: &Reply, ctx: &NodeContext| {
            let answer =
                ctx.interrupt(json!({"question": "send this reply?", "draft": s.draft}))?;
            Ok(ReplyUpdate::default().log(vec![format!("approved: {answer}")]))
        })
        .add_sync_node("send", |s: &Reply, _: &NodeContext| {
            Ok(ReplyUpdate::default().log(vec![format!("sent: {}", s.draft)]))
        })
        .add_edge(START, "draft")
        .add_edge("draft", "approve")
        .add_edge("approve", "send")
        .add_edge("send", END)
        .compile()
        .expect("the graph compiles")
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args = ServeArgs {
        // A SQLite file beside the app; `postgres://…` for replicas.
        checkpoint: "sqlite:target/serve_my_graph.db".into(),
        ..ServeArgs::default()
    };
    let server = Server::builder(args)
        .graph("replier", graph())
        .build()
        .await?;
    // Recovery of runs a stopped app left, and the sweepers; stopped when dropped.
    let _background = server.start_background();
    let app = axum::Router::new()
        .route("/", get(|| async { "my application" }))
        .nest("/agents", server.router());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:8123").await?;
    println!("the Agent Server API is at http://127.0.0.1:8123/agents");
    axum::serve(listener, app)
        .with_graceful_shutdown(async {
            let _ = tokio::signal::ctrl_c().await;
        })
        .await?;
    // Running nodes finish and every thread is checkpointed before the process ends.
    server.shutdown().await;
    Ok(())
}
