//! The threads endpoints as the official SDKs call them, over a real socket, on SQLite and on
//! PostgreSQL: search and count with every filter (threads never run included), `PATCH` of a
//! thread's metadata, `update_state` (the node that wrote last by default, `as_node`, from a past
//! checkpoint), `patchState` of a checkpoint's metadata, the state at a checkpoint by body, and
//! prune.

#[path = "../../tests/support/backends.rs"]
mod backends;
#[path = "../../tests/support/pg_database.rs"]
mod pg_database;
mod serve_support;

use planwright::graph::{StateGraph, END, START};
use planwright::NodeContext;
use planwright_actors::serve::{ServeArgs, Server};
use serde_json::{json, Value};
use serve_support::call;
use serve_support::in_process::{self, replier_server};
use std::sync::Arc;

/// Settings over a fresh SQLite file of the test `name`.
fn sqlite(name: &str) -> ServeArgs {
    in_process::sqlite(&format!("serve-threads-api-{name}"))
}

planwright::state! {
    /// A note written by a node that holds until the test lets it go.
    pub struct Gate => GateUpdate {
        replace note: String,
    }
}

/// One node that says when it starts (`entered`) and ends when `release` is notified.
fn gate(
    entered: Arc<tokio::sync::Notify>,
    release: Arc<tokio::sync::Notify>,
) -> planwright::CompiledGraph<Gate> {
    StateGraph::<Gate>::new("gate")
        .add_node("hold", move |_s: Arc<Gate>, _ctx: NodeContext| {
            let (entered, release) = (entered.clone(), release.clone());
            async move {
                entered.notify_one();
                release.notified().await;
                Ok(GateUpdate::default().note("held".to_string()))
            }
        })
        .add_edge(START, "hold")
        .add_edge("hold", END)
        .compile()
        .expect("the graph compiles")
}

fn ids(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("a list: {v}"))
        .iter()
        .map(|t| t["thread_id"].as_str().unwrap())
        .collect()
}

/// The whole walk on the storage of `args`.
async fn walk(args: ServeArgs) {
    let server = replier_server(args).await;
    let _background = server.start_background();
    let api = in_process::listen(server.router()).await;
    let post = |path: &str, body: Value| {
        let url = format!("{api}{path}");
        async move { call("POST", &url, Some(body)).await }
    };

    for (id, metadata) in [
        ("a1", json!({"team": "a", "n": 1})),
        ("a2", json!({"team": "a", "n": 2})),
        ("b1", json!({"team": "b"})),
    ] {
        let (s, t) = post("/threads", json!({"thread_id": id, "metadata": metadata})).await;
        assert_eq!(s, 200, "{t}");
    }

    // Threads never run are listed, by id unless sorted otherwise.
    let (s, all) = post("/threads/search", json!({})).await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(ids(&all), ["a1", "a2", "b1"]);
    assert_eq!(all[0]["status"], "idle");
    assert_eq!(all[0]["values"], Value::Null);
    let (s, team) = post("/threads/search", json!({"metadata": {"team": "a"}})).await;
    assert_eq!(s, 200, "{team}");
    assert_eq!(ids(&team), ["a1", "a2"]);
    let (s, n) = post("/threads/count", json!({"metadata": {"team": "a"}})).await;
    assert_eq!((s, n), (200, json!(2)));

    // A run pauses a1 on the graph's interrupt.
    let run = json!({"assistant_id": "replier", "input": {"request": "refund order 42"}});
    let (s, out) = post("/threads/a1/runs/wait", run).await;
    assert_eq!(s, 200, "{out}");

    let (_, v) = post(
        "/threads/search",
        json!({"values": {"request": "refund order 42"}}),
    )
    .await;
    assert_eq!(ids(&v), ["a1"]);
    let (_, v) = post("/threads/search", json!({"status": "interrupted"})).await;
    assert_eq!(ids(&v), ["a1"]);
    let (_, v) = post("/threads/count", json!({"status": "idle"})).await;
    assert_eq!(v, json!(2));
    let (_, v) = post(
        "/threads/search",
        json!({"metadata": {"graph_id": "replier"}}),
    )
    .await;
    assert_eq!(
        ids(&v),
        ["a1"],
        "a thread's metadata names its graph once bound"
    );
    let (_, v) = post("/threads/search", json!({"ids": ["b1", "a1", "zz"]})).await;
    assert_eq!(ids(&v), ["a1", "b1"]);
    let (_, v) = post(
        "/threads/search",
        json!({"sort_by": "thread_id", "sort_order": "desc"}),
    )
    .await;
    assert_eq!(ids(&v), ["b1", "a2", "a1"]);
    let (_, v) = post("/threads/search", json!({"sort_by": "status"})).await;
    assert_eq!(ids(&v), ["a2", "b1", "a1"], "idle before interrupted");
    let (_, v) = post("/threads/search", json!({"limit": 1, "offset": 1})).await;
    assert_eq!(ids(&v), ["a2"]);
    let (_, v) = post(
        "/threads/search",
        json!({"select": ["thread_id", "status"], "limit": 1}),
    )
    .await;
    assert_eq!(v, json!([{"thread_id": "a1", "status": "interrupted"}]));
    let (s, e) = post("/threads/search", json!({"sort_by": "colour"})).await;
    assert_eq!(s, 422, "{e}");
    assert!(e["detail"].as_str().unwrap().contains("thread_id"), "{e}");

    // PATCH merges metadata.
    let (s, t) = call(
        "PATCH",
        &format!("{api}/threads/a2"),
        Some(json!({"metadata": {"n": 3, "x": true}})),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    assert_eq!(t["metadata"], json!({"team": "a", "n": 3, "x": true}));
    let (_, v) = post("/threads/search", json!({"metadata": {"x": true}})).await;
    assert_eq!(ids(&v), ["a2"]);
    let (s, _) = call(
        "PATCH",
        &format!("{api}/threads/zz"),
        Some(json!({"metadata": {}})),
    )
    .await;
    assert_eq!(s, 404);

    // update_state: as the node that wrote last when none is named.
    let (_, before) = call("GET", &format!("{api}/threads/a1/state"), None).await;
    let first_cp = before["checkpoint"]["checkpoint_id"].clone();
    let (s, up) = post(
        "/threads/a1/state",
        json!({"values": {"draft": "We will refund twice."}}),
    )
    .await;
    assert_eq!(s, 200, "{up}");
    assert_eq!(up["checkpoint"]["thread_id"], "a1");
    let (_, st) = call("GET", &format!("{api}/threads/a1/state"), None).await;
    assert_eq!(st["values"]["draft"], "We will refund twice.");
    assert_eq!(
        st["checkpoint"]["checkpoint_id"],
        up["checkpoint"]["checkpoint_id"]
    );
    assert_eq!(
        st["next"],
        json!(["approve"]),
        "written as `draft`: `approve` runs next"
    );
    // As a named node: its edges decide what runs next.
    let (s, up2) = post(
        "/threads/a1/state",
        json!({"values": {"log": ["skipped"]}, "as_node": "approve"}),
    )
    .await;
    assert_eq!(s, 200, "{up2}");
    let (_, st) = call("GET", &format!("{api}/threads/a1/state"), None).await;
    assert_eq!(st["next"], json!(["send"]), "{st}");
    // Refusals name the problem.
    let (s, e) = post(
        "/threads/a1/state",
        json!({"values": {}, "as_node": "nope"}),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(
        e["detail"]
            .as_str()
            .unwrap()
            .contains("draft, approve, send"),
        "{e}"
    );
    let (s, e) = post(
        "/threads/a1/state",
        json!({"values": {"request": 7}, "as_node": "draft"}),
    )
    .await;
    assert_eq!(s, 400, "{e}");
    assert!(e["detail"].as_str().unwrap().starts_with("values:"), "{e}");
    let (s, _) = post("/threads/zz/state", json!({"values": {}})).await;
    assert_eq!(s, 404);
    let (s, e) = post(
        "/threads/b1/state",
        json!({"values": {}, "as_node": "draft"}),
    )
    .await;
    assert_eq!(s, 409, "a thread never run has no state to update yet: {e}");
    // From a past checkpoint: the thread goes back there first.
    let (s, up3) = post(
        "/threads/a1/state",
        json!({"values": {"request": "refund order 43"}, "as_node": "draft", "checkpoint_id": first_cp}),
    )
    .await;
    assert_eq!(s, 200, "{up3}");
    let (_, st) = call("GET", &format!("{api}/threads/a1/state"), None).await;
    assert_eq!(st["values"]["request"], "refund order 43");
    assert_eq!(
        st["values"]["log"],
        json!([]),
        "the branch drops the later update"
    );
    let (s, e) = post(
        "/threads/a1/state",
        json!({"values": {}, "as_node": "draft", "checkpoint": {"checkpoint_id": "999999"}}),
    )
    .await;
    assert_eq!(s, 404, "{e}");

    // patchState: the current checkpoint's metadata, shown with its state.
    let (s, _) = call(
        "PATCH",
        &format!("{api}/threads/a1/state"),
        Some(json!({"metadata": {"reviewed": true}})),
    )
    .await;
    assert_eq!(s, 204);
    let (_, st) = call("GET", &format!("{api}/threads/a1/state"), None).await;
    assert_eq!(st["metadata"]["reviewed"], true, "{st}");
    let head = st["checkpoint"]["checkpoint_id"].clone();
    let (s, at) = post(
        "/threads/a1/state/checkpoint",
        json!({"checkpoint": {"checkpoint_id": head}}),
    )
    .await;
    assert_eq!(s, 200, "{at}");
    assert_eq!(at["metadata"]["reviewed"], true);
    assert_eq!(at["values"]["request"], "refund order 43");
    let (s, at) = post(
        "/threads/a1/state/checkpoint",
        json!({"checkpoint": {"checkpoint_id": first_cp}}),
    )
    .await;
    assert_eq!(s, 200, "{at}");
    assert_eq!(at["values"]["request"], "refund order 42");
    assert!(at["metadata"].get("reviewed").is_none(), "{at}");
    let (s, e) = call(
        "PATCH",
        &format!("{api}/threads/b1/state"),
        Some(json!({"metadata": {}})),
    )
    .await;
    assert_eq!(s, 400, "{e}");

    // At the thread's first checkpoint no node wrote anything: the update is written as
    // `__start__`, the graph's input, and the nodes START leads to run next.
    let (s, hist) = post("/threads/a1/history", json!({"limit": 100})).await;
    assert_eq!(s, 200, "{hist}");
    let oldest = hist.as_array().unwrap().last().unwrap()["checkpoint"].clone();
    let (s, up4) = post(
        "/threads/a1/state",
        json!({"values": {"request": "refund order 44"}, "checkpoint": oldest}),
    )
    .await;
    assert_eq!(s, 200, "{up4}");
    let (_, st) = call("GET", &format!("{api}/threads/a1/state"), None).await;
    assert_eq!(st["values"]["request"], "refund order 44");
    assert_eq!(st["next"], json!(["draft"]), "{st}");
    let (s, up5) = post(
        "/threads/a1/state",
        json!({"values": {"request": "refund order 45"}, "as_node": "__start__"}),
    )
    .await;
    assert_eq!(s, 200, "{up5}");

    // Prune deletes what the caller may see and counts it.
    let (s, p) = post("/threads/prune", json!({"thread_ids": ["a2", "zz"]})).await;
    assert_eq!((s, &p), (200, &json!({"pruned_count": 1})));
    let (s, _) = call("GET", &format!("{api}/threads/a2"), None).await;
    assert_eq!(s, 404);
    // keep_latest keeps the thread, its state and only its newest checkpoint.
    let a1_state = format!("{api}/threads/a1/state");
    let (_, before) = call("GET", &a1_state, None).await;
    let (_, hist) = post("/threads/a1/history", json!({"limit": 100})).await;
    assert!(hist.as_array().unwrap().len() > 1, "{hist}");
    let (s, p) = post(
        "/threads/prune",
        json!({"thread_ids": ["a1", "zz"], "strategy": "keep_latest"}),
    )
    .await;
    assert_eq!((s, &p), (200, &json!({"pruned_count": 1})));
    let (_, after) = call("GET", &a1_state, None).await;
    assert_eq!(after["values"], before["values"]);
    assert_eq!(after["checkpoint"], before["checkpoint"]);
    assert_eq!(after["next"], before["next"]);
    let (_, hist) = post("/threads/a1/history", json!({"limit": 100})).await;
    assert_eq!(hist.as_array().unwrap().len(), 1, "{hist}");
    let (s, e) = post(
        "/threads/prune",
        json!({"thread_ids": ["b1"], "strategy": "keep_some"}),
    )
    .await;
    assert_eq!(s, 422, "{e}");
    let (_, n) = post("/threads/count", json!({})).await;
    assert_eq!(n, json!(2));
    server.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_threads_api_on_sqlite() {
    walk(sqlite("walk")).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_threads_api_on_postgres() {
    let Some(db) = pg_database::FreshDatabase::create("pwthreads").await else {
        return;
    };
    walk(ServeArgs {
        checkpoint: db.url(),
        ..ServeArgs::default()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_busy_thread_refuses_a_state_update_until_its_run_ends() {
    let (entered, release) = (Arc::default(), Arc::<tokio::sync::Notify>::default());
    let server = Server::builder(sqlite("busy"))
        .graph("gate", gate(Arc::clone(&entered), Arc::clone(&release)))
        .build()
        .await
        .expect("the server builds");
    let _background = server.start_background();
    let api = in_process::listen(server.router()).await;

    let (s, t) = call(
        "POST",
        &format!("{api}/threads"),
        Some(json!({"thread_id": "g1"})),
    )
    .await;
    assert_eq!(s, 200, "{t}");
    let run = json!({"assistant_id": "gate", "input": {"note": "x"}});
    let (s, r) = call("POST", &format!("{api}/threads/g1/runs"), Some(run)).await;
    assert_eq!(s, 200, "{r}");
    entered.notified().await;
    let update = json!({"values": {"note": "y"}});
    let (s, e) = call(
        "POST",
        &format!("{api}/threads/g1/state"),
        Some(update.clone()),
    )
    .await;
    assert_eq!(s, 409, "{e}");
    let (_, v) = call(
        "POST",
        &format!("{api}/threads/search"),
        Some(json!({"status": "busy"})),
    )
    .await;
    assert_eq!(ids(&v), ["g1"]);
    release.notify_one();
    let run_id = r["run_id"].as_str().unwrap();
    let (s, out) = call("GET", &format!("{api}/threads/g1/runs/{run_id}/join"), None).await;
    assert_eq!(s, 200, "{out}");
    // Idle again: written as the graph's only node.
    let (s, up) = call("POST", &format!("{api}/threads/g1/state"), Some(update)).await;
    assert_eq!(s, 200, "{up}");
    let (_, st) = call("GET", &format!("{api}/threads/g1/state"), None).await;
    assert_eq!(st["values"]["note"], "y");
    server.shutdown().await;
}
