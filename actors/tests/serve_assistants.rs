//! The assistants endpoints over a real socket on a SQLite file, with a graph the test registers:
//! an assistant created of the graph is read, changed (a new version each time), set back to an
//! earlier version, found by search and count with their filters, sorting and paging, and
//! deleted; the registered graph is a read-only system assistant; refusals name what is wrong;
//! created assistants outlive a restart; another user neither sees nor changes them.

use planwright::graph::{StateGraph, END, START};
use planwright::NodeContext;
use planwright_actors::serve::{ServeArgs, Server};
use serde_json::{json, Value};

planwright::state! {
    /// Words a run appends.
    pub struct Words => WordsUpdate {
        append words: Vec<String>,
    }
}

fn graph() -> planwright::CompiledGraph<Words> {
    StateGraph::<Words>::new("echo")
        .add_sync_node("say", |_: &Words, _: &NodeContext| {
            Ok(WordsUpdate::default().words(vec!["said".into()]))
        })
        .add_edge(START, "say")
        .add_edge("say", END)
        .compile()
        .expect("the graph compiles")
}

fn args(name: &str) -> ServeArgs {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("serve-assistants-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    ServeArgs {
        checkpoint: format!("sqlite:{}", dir.join("app.db").display()),
        ..ServeArgs::default()
    }
}

async fn start(args: ServeArgs) -> (Server, String) {
    let server = Server::builder(args)
        .graph("echo", graph())
        .build()
        .await
        .expect("the server builds");
    let app = server.router();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await });
    (server, format!("http://{addr}"))
}

async fn call_as(
    token: Option<&str>,
    method: &str,
    url: &str,
    body: Option<Value>,
) -> (u16, Value, Option<String>) {
    let mut req = reqwest::Client::new().request(method.parse().unwrap(), url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    if let Some(b) = body {
        req = req.json(&b);
    }
    let res = req.send().await.expect("the server answers");
    let status = res.status().as_u16();
    let next = res
        .headers()
        .get("x-pagination-next")
        .map(|v| v.to_str().unwrap().to_string());
    let text = res.text().await.unwrap();
    let v = serde_json::from_str(&text).unwrap_or(Value::String(text));
    (status, v, next)
}

async fn call(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let (s, v, _) = call_as(None, method, url, body).await;
    (s, v)
}

fn ids(v: &Value) -> Vec<&str> {
    v.as_array()
        .unwrap_or_else(|| panic!("a list: {v}"))
        .iter()
        .map(|a| a["assistant_id"].as_str().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn created_assistants_are_versioned_searched_and_kept_across_a_restart() {
    let args = args("walk");
    let (server, url) = start(args.clone()).await;

    // Create: a graph the server serves, an id of the client's or a fresh one.
    let body = json!({
        "graph_id": "echo", "assistant_id": "a1", "name": "First Echo",
        "description": "says things", "config": {"tags": ["x"]}, "context": {"lang": "fr"},
        "metadata": {"team": "blue"},
    });
    let (s, a1) = call("POST", &format!("{url}/assistants"), Some(body.clone())).await;
    assert_eq!(s, 200, "{a1}");
    assert_eq!(a1["graph_id"], "echo");
    assert_eq!(a1["version"], 1);
    assert_eq!(a1["context"], json!({"lang": "fr"}));
    assert!(a1["created_at"].as_str().unwrap().ends_with('Z'));
    let (s, v) = call("POST", &format!("{url}/assistants"), Some(body.clone())).await;
    assert_eq!(s, 409, "{v}");
    let mut again = body.clone();
    again["if_exists"] = json!("do_nothing");
    again["name"] = json!("ignored");
    let (s, same) = call("POST", &format!("{url}/assistants"), Some(again)).await;
    assert_eq!((s, &same["name"]), (200, &json!("First Echo")), "{same}");
    let (s, fresh) = call(
        "POST",
        &format!("{url}/assistants"),
        Some(json!({"graph_id": "echo", "metadata": {"team": "red"}})),
    )
    .await;
    assert_eq!(s, 200, "{fresh}");
    let fresh_id = fresh["assistant_id"].as_str().unwrap().to_string();
    assert_eq!(fresh_id.len(), 36, "a UUID: {fresh_id}");
    for (body, status, words) in [
        (json!({"graph_id": "nope"}), 404, "echo"),
        (json!({"assistant_id": "x"}), 422, "graph_id"),
        (json!({"graph_id": "echo", "config": [1]}), 422, "config"),
        (
            json!({"graph_id": "echo", "if_exists": "replace"}),
            422,
            "do_nothing",
        ),
        (
            json!({"graph_id": "echo", "assistant_id": "a b"}),
            422,
            "assistant_id",
        ),
        (
            json!({"graph_id": "echo", "assistant_id": "echo"}),
            409,
            "registered",
        ),
    ] {
        let (s, v) = call("POST", &format!("{url}/assistants"), Some(body.clone())).await;
        assert_eq!(s, status, "{body}: {v}");
        assert!(v["detail"].as_str().unwrap().contains(words), "{body}: {v}");
    }

    // A change is a new version; metadata merges; a version can be made current again.
    let (s, a2) = call(
        "PATCH",
        &format!("{url}/assistants/a1"),
        Some(json!({"name": "Second Echo", "metadata": {"tier": 2}})),
    )
    .await;
    assert_eq!(s, 200, "{a2}");
    assert_eq!(a2["version"], 2);
    assert_eq!(a2["metadata"], json!({"team": "blue", "tier": 2}));
    assert_eq!(a2["config"], json!({"tags": ["x"]}), "unnamed fields stay");
    let (s, vs) = call(
        "POST",
        &format!("{url}/assistants/a1/versions"),
        Some(json!({})),
    )
    .await;
    assert_eq!(s, 200, "{vs}");
    let nums: Vec<u64> = vs
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v["version"].as_u64().unwrap())
        .collect();
    assert_eq!(nums, [2, 1]);
    let (_, vs) = call(
        "POST",
        &format!("{url}/assistants/a1/versions"),
        Some(json!({"metadata": {"tier": 2}})),
    )
    .await;
    assert_eq!(vs.as_array().unwrap().len(), 1, "{vs}");
    let (s, back) = call(
        "POST",
        &format!("{url}/assistants/a1/latest"),
        Some(json!({"version": 1})),
    )
    .await;
    assert_eq!((s, &back["name"]), (200, &json!("First Echo")), "{back}");
    let (_, now) = call("GET", &format!("{url}/assistants/a1"), None).await;
    assert_eq!(now["version"], 1);
    let (s, _) = call(
        "POST",
        &format!("{url}/assistants/a1/latest"),
        Some(json!({"version": 9})),
    )
    .await;
    assert_eq!(s, 404);

    // The registered graph is a system assistant: readable, never changed.
    let (s, sys) = call("GET", &format!("{url}/assistants/echo"), None).await;
    assert_eq!((s, &sys["graph_id"]), (200, &json!("echo")), "{sys}");
    for (m, path) in [
        ("PATCH", "/assistants/echo"),
        ("DELETE", "/assistants/echo"),
    ] {
        let (s, v) = call(m, &format!("{url}{path}"), Some(json!({"name": "x"}))).await;
        assert_eq!(s, 409, "{m} {path}: {v}");
        assert!(
            v["detail"].as_str().unwrap().contains("registered in code"),
            "{v}"
        );
    }
    let (s, vs) = call("POST", &format!("{url}/assistants/echo/versions"), None).await;
    assert_eq!((s, vs.as_array().unwrap().len()), (200, 1), "{vs}");

    // Graph, schemas and subgraphs of a created assistant are its graph's.
    let (s, g) = call("GET", &format!("{url}/assistants/a1/graph?xray=true"), None).await;
    assert_eq!(s, 200, "{g}");
    assert!(g["nodes"].to_string().contains("say"), "{g}");
    let (s, sc) = call("GET", &format!("{url}/assistants/a1/schemas"), None).await;
    assert_eq!((s, &sc["graph_id"]), (200, &json!("echo")), "{sc}");
    let (s, sub) = call("GET", &format!("{url}/assistants/a1/subgraphs"), None).await;
    assert_eq!((s, sub), (200, json!({})));
    let (s, _) = call("GET", &format!("{url}/assistants/nope/subgraphs"), None).await;
    assert_eq!(s, 404);

    // Search: filters, sorting, paging; count.
    let search_url = format!("{url}/assistants/search");
    let search = |b: Value| call_as(None, "POST", &search_url, Some(b));
    let (s, all, _) = search(json!({})).await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(ids(&all), ["echo", "a1", fresh_id.as_str()]);
    assert_eq!(
        ids(&search(json!({"metadata": {"team": "blue"}})).await.1),
        ["a1"]
    );
    assert_eq!(ids(&search(json!({"name": "first"})).await.1), ["a1"]);
    assert_eq!(
        ids(&search(json!({"graph_id": "other"})).await.1),
        Vec::<&str>::new()
    );
    let (_, page, next) = search(json!({"limit": 2})).await;
    assert_eq!((ids(&page).len(), next.as_deref()), (2, Some("2")));
    let (_, page, next) = search(json!({"limit": 2, "offset": 2})).await;
    assert_eq!((ids(&page), next), (vec![fresh_id.as_str()], None));
    let (_, sorted, _) = search(json!({"sort_by": "assistant_id", "sort_order": "desc"})).await;
    let mut want = vec!["echo", "a1", fresh_id.as_str()];
    want.sort();
    want.reverse();
    assert_eq!(ids(&sorted), want);
    let (s, v, _) = search(json!({"sort_by": "color"})).await;
    assert_eq!(s, 422, "{v}");
    let (_, sel, _) = search(json!({"select": ["assistant_id"], "limit": 1})).await;
    assert_eq!(sel, json!([{"assistant_id": "echo"}]));
    let (s, n) = call("POST", &format!("{url}/assistants/count"), Some(json!({}))).await;
    assert_eq!((s, n), (200, json!(3)));
    let (_, n) = call(
        "POST",
        &format!("{url}/assistants/count"),
        Some(json!({"metadata": {"team": "red"}})),
    )
    .await;
    assert_eq!(n, json!(1));

    // Delete.
    let (s, _) = call("DELETE", &format!("{url}/assistants/{fresh_id}"), None).await;
    assert_eq!(s, 204);
    let (s, _) = call("GET", &format!("{url}/assistants/{fresh_id}"), None).await;
    assert_eq!(s, 404);
    let (s, v) = call(
        "DELETE",
        &format!("{url}/assistants/a1?delete_threads=true"),
        None,
    )
    .await;
    assert_eq!(s, 422, "{v}");
    server.shutdown().await;
    drop(server);

    // A restarted server on the same file has what was left.
    let (_server, url) = start(args).await;
    let (s, all) = call("POST", &format!("{url}/assistants/search"), Some(json!({}))).await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(ids(&all), ["echo", "a1"]);
    assert_eq!(all[1]["version"], 1);
    let (_, vs) = call("POST", &format!("{url}/assistants/a1/versions"), None).await;
    assert_eq!(vs.as_array().unwrap().len(), 2, "{vs}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_user_neither_sees_nor_changes_an_assistant() {
    let mut args = args("owners");
    let file = std::path::Path::new(&args.checkpoint["sqlite:".len()..])
        .parent()
        .unwrap()
        .join("tokens.json");
    std::fs::write(
        &file,
        json!({"tokens": {
            "ann-token": {"user": "ann"}, "bob-token": {"user": "bob"},
            "root-token": {"user": "root", "admin": true},
        }})
        .to_string(),
    )
    .unwrap();
    args.auth_file = Some(file);
    let (_server, url) = start(args).await;
    let (s, a, _) = call_as(
        Some("ann-token"),
        "POST",
        &format!("{url}/assistants"),
        Some(json!({"graph_id": "echo", "assistant_id": "ann-a", "config": {"tags": ["secret"]}})),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    let bob = Some("bob-token");
    for (m, path, body, want) in [
        ("GET", "/assistants/ann-a", None, 404),
        (
            "PATCH",
            "/assistants/ann-a",
            Some(json!({"name": "mine"})),
            404,
        ),
        ("DELETE", "/assistants/ann-a", None, 404),
        ("POST", "/assistants/ann-a/versions", None, 404),
        (
            "POST",
            "/assistants/ann-a/latest",
            Some(json!({"version": 1})),
            404,
        ),
        ("GET", "/assistants/ann-a/graph", None, 404),
        (
            "POST",
            "/assistants",
            Some(json!({"graph_id": "echo", "assistant_id": "ann-a", "if_exists": "do_nothing"})),
            409,
        ),
    ] {
        let (s, v, _) = call_as(bob, m, &format!("{url}{path}"), body).await;
        assert_eq!(s, want, "bob's {m} {path}: {v}");
        assert!(!v.to_string().contains("secret"), "{v}");
    }
    let (_, list, _) = call_as(
        bob,
        "POST",
        &format!("{url}/assistants/search"),
        Some(json!({})),
    )
    .await;
    assert_eq!(ids(&list), ["echo"]);
    let (_, list, _) = call_as(
        Some("root-token"),
        "POST",
        &format!("{url}/assistants/search"),
        Some(json!({})),
    )
    .await;
    assert_eq!(ids(&list), ["echo", "ann-a"]);
    let (s, _, _) = call_as(
        Some("ann-token"),
        "PATCH",
        &format!("{url}/assistants/ann-a"),
        Some(json!({"name": "still mine"})),
    )
    .await;
    assert_eq!(s, 200);
}
