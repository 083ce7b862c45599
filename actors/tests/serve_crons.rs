//! Crons (`/runs/crons`): a thread's cron fires once per scheduled minute even with two schedulers
//! (two replicas) racing for each firing; a stateless cron makes a thread per firing, runs a
//! created assistant's graph, and keeps or deletes the thread as `on_run_completed` says — all
//! in paused time. Over a real socket on a SQLite file: the endpoints create, search, count,
//! change and delete crons, refuse what they cannot do with errors naming it, and crons outlive
//! a restart.

mod serve_support;

use planwright::graph::{StateGraph, END, START};
use planwright::NodeContext;
use planwright_actors::serve::{crons, ServeArgs, Server};
use serde_json::{json, Value};
// Requests over a socket; `call` below goes through the router without one.
use serve_support::call as http;
use serve_support::in_process;
use std::collections::BTreeSet;
use std::time::Duration;
use tower::ServiceExt;

planwright::state! {
    /// Ticks a cron's runs leave.
    pub struct Tally => TallyUpdate {
        append log: Vec<String>,
    }
}

fn graph() -> planwright::CompiledGraph<Tally> {
    StateGraph::<Tally>::new("counter")
        .add_sync_node("count", |_: &Tally, _: &NodeContext| {
            Ok(TallyUpdate::default().log(vec!["counted".into()]))
        })
        .add_edge(START, "count")
        .add_edge("count", END)
        .compile()
        .expect("the graph compiles")
}

async fn server(args: ServeArgs) -> Server {
    Server::builder(args)
        .graph("counter", graph())
        .build()
        .await
        .expect("the server builds")
}

fn memory() -> ServeArgs {
    ServeArgs {
        checkpoint: "memory:".into(),
        ..ServeArgs::default()
    }
}

/// One request through the router, without a socket (paused time).
async fn call(app: &axum::Router, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
    let req = axum::http::Request::builder()
        .method(method)
        .uri(path)
        .header("content-type", "application/json")
        .body(axum::body::Body::from(
            body.map(|b| b.to_string()).unwrap_or_default(),
        ))
        .unwrap();
    let res = app.clone().oneshot(req).await.unwrap();
    let status = res.status().as_u16();
    let bytes = axum::body::to_bytes(res.into_body(), 1 << 20)
        .await
        .unwrap();
    let v = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into()));
    (status, v)
}

#[tokio::test(start_paused = true)]
async fn a_thread_cron_fires_once_per_scheduled_minute_with_two_schedulers_racing() {
    let server = server(memory()).await;
    let app = server.router();
    let state = server.state().clone();
    let (s, t) = call(&app, "POST", "/threads", Some(json!({"thread_id": "t"}))).await;
    assert_eq!(s, 200, "{t}");
    let cron = json!({
        "assistant_id": "counter", "schedule": "* * * * *", "input": {"log": ["tick"]},
        "metadata": {"team": "ops"}, "multitask_strategy": "enqueue",
    });
    let (s, c) = call(&app, "POST", "/threads/t/runs/crons", Some(cron)).await;
    assert_eq!(s, 200, "{c}");
    assert_eq!(c["thread_id"], "t");
    assert!(
        c["next_run_date"].as_str().unwrap().ends_with(":00.000Z"),
        "{c}"
    );
    // Two replicas' schedulers over one store.
    let a = crons::spawn_scheduler(state.clone(), planwright::store::system_clock());
    let b = crons::spawn_scheduler(state.clone(), planwright::store::system_clock());
    tokio::time::sleep(Duration::from_secs(185)).await;
    a.abort();
    b.abort();
    // Every run ends.
    let runs = loop {
        let runs = state.run_store.list_thread("t", 100, 0).await.unwrap();
        if runs.iter().all(|r| r.status.is_ended()) {
            break runs;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    let minutes: Vec<String> = runs
        .iter()
        .map(|r| {
            assert_eq!(r.metadata["cron_id"], c["cron_id"]);
            assert_eq!(r.metadata["team"], "ops");
            assert_eq!(r.status.to_string(), "success", "{r:?}");
            r.metadata["scheduled_at"].as_str().unwrap().to_string()
        })
        .collect();
    let distinct: BTreeSet<&String> = minutes.iter().collect();
    assert_eq!(
        distinct.len(),
        minutes.len(),
        "a minute fired twice: {minutes:?}"
    );
    assert!((3..=4).contains(&minutes.len()), "{minutes:?}");
    for m in &minutes {
        assert!(m.ends_with(":00.000Z"), "{m}");
    }
    // The thread holds one tick and one count per firing.
    let (s, st) = call(&app, "GET", "/threads/t/state", None).await;
    assert_eq!(s, 200, "{st}");
    assert_eq!(
        st["values"]["log"].as_array().unwrap().len(),
        2 * minutes.len()
    );

    // Disabled, it fires no more.
    let path = format!("/runs/crons/{}", c["cron_id"].as_str().unwrap());
    let (s, off) = call(&app, "PATCH", &path, Some(json!({"enabled": false}))).await;
    assert_eq!(s, 200, "{off}");
    assert_eq!(off["next_run_date"], Value::Null);
    let a = crons::spawn_scheduler(state.clone(), planwright::store::system_clock());
    tokio::time::sleep(Duration::from_secs(125)).await;
    a.abort();
    let after = state.run_store.list_thread("t", 100, 0).await.unwrap();
    assert_eq!(after.len(), minutes.len(), "a disabled cron fired");
}

#[tokio::test(start_paused = true)]
async fn a_stateless_cron_runs_a_created_assistant_on_a_new_thread_each_time() {
    let server = server(memory()).await;
    let app = server.router();
    let state = server.state().clone();
    let (s, a) = call(
        &app,
        "POST",
        "/assistants",
        Some(json!({"graph_id": "counter", "assistant_id": "nightly", "config": {"tags": ["n"]}})),
    )
    .await;
    assert_eq!(s, 200, "{a}");
    let mk = |keep: &str| {
        json!({"assistant_id": "nightly", "schedule": "* * * * *",
               "input": {"log": [keep]}, "on_run_completed": keep})
    };
    let (s, kept) = call(&app, "POST", "/runs/crons", Some(mk("keep"))).await;
    assert_eq!(s, 200, "{kept}");
    assert_eq!(kept["thread_id"], Value::Null);
    assert_eq!(kept["on_run_completed"], "keep");
    let (s, dropped) = call(&app, "POST", "/runs/crons", Some(mk("delete"))).await;
    assert_eq!(s, 200, "{dropped}");
    let sched = crons::spawn_scheduler(state.clone(), planwright::store::system_clock());
    tokio::time::sleep(Duration::from_secs(61)).await;
    sched.abort();
    // Let the runs end and the deleting cron's thread go.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let (s, threads) = call(&app, "POST", "/threads/search", Some(json!({"limit": 100}))).await;
    assert_eq!(s, 200, "{threads}");
    let of = |cron: &Value| -> Vec<Value> {
        threads
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["metadata"]["cron_id"] == cron["cron_id"])
            .cloned()
            .collect()
    };
    let kept_threads = of(&kept);
    assert_eq!(kept_threads.len(), 1, "{threads}");
    assert!(
        of(&dropped).is_empty(),
        "a deleting cron's thread stayed: {threads}"
    );
    let t = kept_threads[0]["thread_id"].as_str().unwrap();
    let runs = state.run_store.list_thread(t, 10, 0).await.unwrap();
    assert_eq!(runs.len(), 1);
    // The graph of the created assistant ran, the run naming the assistant.
    assert_eq!(runs[0].assistant_id, "counter");
    assert_eq!(runs[0].metadata["assistant_id"], "nightly");
    assert_eq!(
        kept_threads[0]["values"]["log"],
        json!(["keep", "counted"]),
        "{threads}"
    );
}

fn id_of(cron: &Value) -> String {
    cron["cron_id"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_cron_endpoints_over_a_socket_and_across_a_restart() {
    let args = in_process::sqlite("serve-crons-endpoints");
    let first = server(args.clone()).await;
    let url = in_process::listen(first.router()).await;
    let (s, _) = http(
        "POST",
        &format!("{url}/threads"),
        Some(json!({"thread_id": "t1"})),
    )
    .await;
    assert_eq!(s, 200);
    let (s, c1) = http(
        "POST",
        &format!("{url}/threads/t1/runs/crons"),
        Some(json!({"assistant_id": "counter", "schedule": "0 9 * * 1-5",
                    "input": {"log": ["a"]}, "metadata": {"k": 1},
                    "end_time": "2099-01-01T00:00:00Z"})),
    )
    .await;
    assert_eq!(s, 200, "{c1}");
    for field in [
        "cron_id",
        "assistant_id",
        "thread_id",
        "schedule",
        "end_time",
        "enabled",
        "payload",
        "metadata",
        "user_id",
        "created_at",
        "updated_at",
        "next_run_date",
    ] {
        assert!(c1.get(field).is_some(), "{field} missing: {c1}");
    }
    assert_eq!(c1["end_time"], "2099-01-01T00:00:00.000Z");
    assert!(
        c1["next_run_date"]
            .as_str()
            .unwrap()
            .contains("T09:00:00.000Z"),
        "{c1}"
    );
    assert_eq!(c1["payload"]["input"], json!({"log": ["a"]}));
    let (s, c2) = http(
        "POST",
        &format!("{url}/runs/crons"),
        Some(json!({"assistant_id": "counter", "schedule": "@hourly"})),
    )
    .await;
    assert_eq!(s, 200, "{c2}");
    assert_eq!(c2["on_run_completed"], "delete");

    // Refusals name what is wrong.
    for (path, body, status, words) in [
        (
            "/runs/crons",
            json!({"assistant_id": "counter", "schedule": "61 * * * *"}),
            422,
            "minute",
        ),
        (
            "/runs/crons",
            json!({"assistant_id": "counter", "schedule": "* * *"}),
            422,
            "five fields",
        ),
        (
            "/runs/crons",
            json!({"assistant_id": "nope", "schedule": "* * * * *"}),
            404,
            "counter",
        ),
        (
            "/runs/crons",
            json!({"assistant_id": "counter"}),
            422,
            "schedule",
        ),
        (
            "/runs/crons",
            json!({"assistant_id": "counter", "schedule": "* * * * *", "timezone": "Europe/Paris"}),
            422,
            "UTC",
        ),
        (
            "/runs/crons",
            json!({"assistant_id": "counter", "schedule": "* * * * *", "webhook": "http://x"}),
            422,
            "webhook",
        ),
        (
            "/runs/crons",
            json!({"assistant_id": "counter", "schedule": "* * * * *", "end_time": "soon"}),
            422,
            "end_time",
        ),
        (
            "/threads/nope/runs/crons",
            json!({"assistant_id": "counter", "schedule": "* * * * *"}),
            404,
            "nope",
        ),
    ] {
        let (s, v) = http("POST", &format!("{url}{path}"), Some(body.clone())).await;
        assert_eq!(s, status, "{path} {body}: {v}");
        assert!(
            v["detail"].as_str().unwrap().contains(words),
            "{path} {body}: {v}"
        );
    }

    // The store's namespace of crons is not writable through /store: no forged crons.
    let forged = json!({"namespace": ["__planwright__", "crons"], "key": "x", "value": {"a": 1}});
    let (s, v) = http("PUT", &format!("{url}/store/items"), Some(forged)).await;
    assert_eq!(s, 403, "{v}");
    let gone = json!({"namespace": ["__planwright__", "crons"], "key": id_of(&c1)});
    let (s, v) = http("DELETE", &format!("{url}/store/items"), Some(gone)).await;
    assert_eq!(s, 403, "{v}");

    // Search and count.
    let search_url = format!("{url}/runs/crons/search");
    let search = |body: Value| http("POST", &search_url, Some(body));
    let ids = |v: &Value| -> Vec<String> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|c| c["cron_id"].as_str().unwrap().to_string())
            .collect()
    };
    let id1 = c1["cron_id"].as_str().unwrap().to_string();
    let id2 = c2["cron_id"].as_str().unwrap().to_string();
    let (s, all) = search(json!({})).await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(ids(&all), [id1.as_str(), id2.as_str()]);
    assert_eq!(
        ids(&search(json!({"thread_id": "t1"})).await.1),
        [id1.as_str()]
    );
    assert_eq!(
        ids(&search(json!({"metadata": {"k": 1}})).await.1),
        [id1.as_str()]
    );
    assert_eq!(
        ids(
            &search(json!({"sort_by": "created_at", "sort_order": "desc"}))
                .await
                .1
        ),
        [id2.as_str(), id1.as_str()]
    );
    assert_eq!(
        ids(&search(json!({"limit": 1, "offset": 1})).await.1),
        [id2.as_str()]
    );
    let (_, sel) = search(json!({"select": ["cron_id", "schedule"], "limit": 1})).await;
    assert_eq!(sel[0].as_object().unwrap().len(), 2, "{sel}");
    let (s, n) = http("POST", &format!("{url}/runs/crons/count"), Some(json!({}))).await;
    assert_eq!((s, n), (200, json!(2)));
    let (_, n) = http(
        "POST",
        &format!("{url}/runs/crons/count"),
        Some(json!({"assistant_id": "counter", "thread_id": "t1"})),
    )
    .await;
    assert_eq!(n, json!(1));

    // Changes.
    let (s, p) = http(
        "PATCH",
        &format!("{url}/runs/crons/{id1}"),
        Some(json!({"schedule": "30 6 * * *", "end_time": null, "input": {"log": ["b"]}})),
    )
    .await;
    assert_eq!(s, 200, "{p}");
    assert_eq!(p["schedule"], "30 6 * * *");
    assert_eq!(p["end_time"], Value::Null);
    assert_eq!(p["payload"]["input"], json!({"log": ["b"]}));
    assert!(
        p["next_run_date"]
            .as_str()
            .unwrap()
            .contains("T06:30:00.000Z"),
        "{p}"
    );
    let (s, v) = http(
        "PATCH",
        &format!("{url}/runs/crons/{id1}"),
        Some(json!({"schedule": "soon"})),
    )
    .await;
    assert_eq!(s, 422, "{v}");
    let (s, _) = http("DELETE", &format!("{url}/runs/crons/{id2}"), None).await;
    assert_eq!(s, 204);
    let (s, _) = http("DELETE", &format!("{url}/runs/crons/{id2}"), None).await;
    assert_eq!(s, 404);
    let (s, _) = http("PATCH", &format!("{url}/runs/crons/{id2}"), Some(json!({}))).await;
    assert_eq!(s, 404);
    first.shutdown().await;
    drop(first);

    // A restarted server on the same file has the cron as it was left.
    let second = server(args).await;
    let url = in_process::listen(second.router()).await;
    let (s, all) = http("POST", &format!("{url}/runs/crons/search"), Some(json!({}))).await;
    assert_eq!(s, 200, "{all}");
    assert_eq!(ids(&all), [id1]);
    assert_eq!(all[0]["schedule"], "30 6 * * *");
}
