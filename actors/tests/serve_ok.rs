//! `GET /ok` with auth on, over a real socket: a health probe has no token, so `/ok` answers it
//! (with the status and nothing else) while every other endpoint still asks for the token;
//! `--ok-requires-auth` closes `/ok` like the rest.

use planwright_actors::serve::{router, state, ServeArgs};
use serde_json::{json, Value};

/// A server with `--token secret` (and `--ok-requires-auth` when `closed`), storing its threads
/// in a SQLite file of its own.
async fn start(name: &str, closed: bool) -> String {
    let dir = std::env::temp_dir().join(format!("planwright-ok-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let args = ServeArgs {
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
        token: Some("secret".into()),
        ok_requires_auth: closed,
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
