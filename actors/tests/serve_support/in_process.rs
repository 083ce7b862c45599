//! The server library inside the test process, for tests of a graph they register
//! (`Server::builder(…).graph(…)`): the `replier` graph several of them serve, a SQLite file of
//! a test's own, and a router served over a real socket on a free port. One copy, so that the
//! tests differ only in what they check.

use planwright::graph::{StateGraph, END, START};
use planwright::NodeContext;
use planwright_actors::serve::{ServeArgs, Server};
use serde_json::json;

planwright::state! {
    /// A reply a person approves before it goes out.
    pub struct Reply => ReplyUpdate {
        replace request: String,
        replace draft: String,
        append log: Vec<String>,
    }
}

/// The graph named `name`: draft → approve (asks a person, an interrupt) → send.
pub fn replier(name: &str) -> planwright::CompiledGraph<Reply> {
    StateGraph::<Reply>::new(name)
        .add_sync_node("draft", |s: &Reply, _: &NodeContext| {
            Ok(ReplyUpdate::default().draft(format!("We will {}.", s.request)))
        })
        .add_sync_node("approve", |s: &Reply, ctx: &NodeContext| {
            let answer = ctx.interrupt(json!({"question": "send?", "draft": s.draft}))?;
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

/// Settings over a fresh SQLite file (`app.db` in a directory named after `name`).
pub fn sqlite(name: &str) -> ServeArgs {
    let dir = super::fresh_dir(name);
    ServeArgs {
        checkpoint: format!("sqlite:{}", dir.join("app.db").display()),
        ..ServeArgs::default()
    }
}

/// A server with `args` that serves [`replier`] as assistant `replier`.
pub async fn replier_server(args: ServeArgs) -> Server {
    Server::builder(args)
        .graph("replier", replier("replier"))
        .build()
        .await
        .expect("the server builds")
}

/// Serves `app` on a free port of 127.0.0.1 for as long as the test's runtime lives; its base
/// URL.
pub async fn listen(app: axum::Router) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    format!("http://{addr}")
}
