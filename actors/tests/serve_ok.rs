//! `GET /ok` with auth on, over a real socket: a health probe has no token, so `/ok` answers it
//! (with the status and nothing else) while every other endpoint still asks for the token;
//! `--ok-requires-auth` closes `/ok` like the rest.

#[path = "../../tests/support/backends.rs"]
mod backends;
#[path = "../../tests/support/pg_database.rs"]
mod pg_database;
#[path = "../../tests/support/tcp_proxy.rs"]
mod tcp_proxy;

use pg_database::{server, FreshDatabase};
use planwright_actors::serve::{router, state, ServeArgs};
use serde_json::{json, Value};
use tcp_proxy::{Mode, TcpProxy};

/// A server with `--token secret` (and `--ok-requires-auth` when `closed`), storing its threads
/// in a SQLite file of its own.
async fn start(name: &str, closed: bool) -> String {
    let dir = std::env::temp_dir().join(format!("planwright-ok-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    start_on(
        &format!("sqlite:{}", dir.join("serve.sqlite").display()),
        closed,
    )
    .await
}

/// A server with `--token secret` on the checkpoint URL `checkpoint`.
async fn start_on(checkpoint: &str, closed: bool) -> String {
    let args = ServeArgs {
        checkpoint: checkpoint.into(),
        token: Some("secret".into()),
        ok_requires_auth: closed,
        ..ServeArgs::default()
    };
    serve_with(args).await
}

/// A server with `args`, on a socket of its own.
async fn serve_with(args: ServeArgs) -> String {
    let st = state(&args).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(st)).await;
    });
    format!("http://{addr}")
}

async fn get(url: &str, token: Option<&str>) -> (u16, Value) {
    let mut req = reqwest::Client::new().get(url);
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let resp = req.send().await.unwrap();
    let status = resp.status().as_u16();
    let text = resp.text().await.unwrap();
    (
        status,
        serde_json::from_str(&text).unwrap_or(Value::String(text)),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_answers_a_probe_without_a_token_and_nothing_else_does() {
    let base = start("open", false).await;
    let (s, v) = get(&format!("{base}/ok"), None).await;
    assert_eq!(
        (s, &v),
        (200, &json!({"ok": true})),
        "a probe without a token"
    );
    let (s, v) = get(&format!("{base}/ok"), Some("wrong")).await;
    assert_eq!(
        (s, &v),
        (200, &json!({"ok": true})),
        "a probe with a stale token"
    );
    let (s, _) = get(&format!("{base}/ok"), Some("secret")).await;
    assert_eq!(s, 200);
    // Everything else still asks for the token, the neighbours of `/ok` included.
    for path in [
        "/ok/",
        "/okay",
        "/metrics",
        "/assistants/research",
        "/threads/t1",
    ] {
        let (s, v) = get(&format!("{base}{path}"), None).await;
        assert_eq!(s, 401, "{path}: {v}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_requires_auth_closes_ok_too() {
    let base = start("closed", true).await;
    let (s, v) = get(&format!("{base}/ok"), None).await;
    assert_eq!(s, 401, "{v}");
    assert!(v["detail"].as_str().unwrap_or("").contains("Bearer"), "{v}");
    let (s, v) = get(&format!("{base}/ok"), Some("secret")).await;
    assert_eq!((s, &v), (200, &json!({"ok": true})));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_storage_is_unreachable_is_told_only_to_a_caller_with_the_token() {
    let Some(db) = FreshDatabase::create("pwok").await else {
        return;
    };
    let (addr, _) = server();
    let proxy = TcpProxy::start(addr).await;
    let url = db.url_at(
        proxy.addr(),
        "retry_for=0&op_timeout=1s&connect_timeout=1s&pool_size=4",
    );
    let base = start_on(&url, false).await;
    let (s, v) = get(&format!("{base}/ok"), None).await;
    assert_eq!((s, &v), (200, &json!({"ok": true})));
    // The database stops answering: the probe gives up after its 2 s.
    proxy.set_mode(Mode::Stall);
    let (s, v) = get(&format!("{base}/ok"), None).await;
    assert_eq!(
        (s, &v),
        (503, &json!({"ok": false, "status": "storage unreachable"})),
        "a caller without a token hears the status alone"
    );
    let (s, v) = get(&format!("{base}/ok"), Some("secret")).await;
    assert_eq!(s, 503, "{v}");
    assert_eq!(v["status"], "storage unreachable", "{v}");
    assert!(
        v["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "the token's holder hears why: {v}"
    );
    proxy.set_mode(Mode::Pass);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn why_storage_is_unreachable_is_told_to_an_admin_not_to_a_user() {
    let Some(db) = FreshDatabase::create("pwokusers").await else {
        return;
    };
    let (addr, _) = server();
    let proxy = TcpProxy::start(addr).await;
    let url = db.url_at(
        proxy.addr(),
        "retry_for=0&op_timeout=1s&connect_timeout=1s&pool_size=4",
    );
    let fixtures = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/auth");
    let base = serve_with(ServeArgs {
        checkpoint: url,
        auth_file: Some(fixtures.join("tokens.json")),
        ..ServeArgs::default()
    })
    .await;
    proxy.set_mode(Mode::Stall);
    // The error's causes name the database's host and port: a user hears the status alone.
    let (s, v) = get(&format!("{base}/ok"), Some("ann-token")).await;
    assert_eq!(
        (s, &v),
        (503, &json!({"ok": false, "status": "storage unreachable"})),
        "a user who is not an admin hears the status alone"
    );
    let (s, v) = get(&format!("{base}/ok"), Some("ops-token")).await;
    assert_eq!(s, 503, "{v}");
    assert!(
        v["detail"].as_str().is_some_and(|d| !d.is_empty()),
        "an admin hears why: {v}"
    );
    proxy.set_mode(Mode::Pass);
}
