//! Hostile and malformed input over HTTP: every one gets a JSON 4xx that names the problem, and
//! nothing is created by a refused request.

use planwright_actors::serve::{router, state, ServeArgs};
use serde_json::{json, Value};

async fn start() -> String {
    let dir = std::env::temp_dir().join(format!(
        "planwright-input-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let args = ServeArgs {
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
        token: Some("s3cret".into()),
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

async fn send(req: reqwest::RequestBuilder) -> (u16, Value) {
    let r = req.send().await.unwrap();
    let status = r.status().as_u16();
    let ctype = r
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let text = r.text().await.unwrap();
    let v: Value = serde_json::from_str(&text)
        .unwrap_or_else(|_| panic!("a JSON body ({ctype}) for {status}: {text}"));
    (status, v)
}

fn c() -> reqwest::Client {
    reqwest::Client::new()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thread_ids_and_metadata_are_checked_before_anything_is_stored() {
    let url = start().await;
    let post = |body: Value| {
        c().post(format!("{url}/threads"))
            .bearer_auth("s3cret")
            .json(&body)
    };
    for bad in [
        json!("x".repeat(100 * 1024)),
        json!("."),
        json!(".."),
        json!("a/b"),
        json!("a b"),
        json!(""),
        json!("é"),
    ] {
        let (s, v) = send(post(json!({ "thread_id": bad }))).await;
        assert_eq!(s, 422, "{bad}: {v}");
        assert!(v["detail"].as_str().unwrap().contains("thread_id"), "{v}");
    }
    let (s, v) = send(post(json!({"thread_id": "x".repeat(128)}))).await;
    assert_eq!(s, 200, "{v}");
    for bad in [json!("text"), json!([1, 2]), json!(3)] {
        let (s, v) = send(post(json!({"thread_id": "meta-1", "metadata": bad}))).await;
        assert_eq!(s, 422, "{v}");
        assert!(v["detail"].as_str().unwrap().contains("metadata"), "{v}");
    }
    let (s, _) = send(
        c().get(format!("{url}/threads/meta-1"))
            .bearer_auth("s3cret"),
    )
    .await;
    assert_eq!(s, 404, "a refused create stores nothing");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parameters_are_validated_and_every_error_is_json() {
    let url = start().await;
    let (s, _) = send(
        c().post(format!("{url}/threads"))
            .bearer_auth("s3cret")
            .json(&json!({"thread_id": "p-1"})),
    )
    .await;
    assert_eq!(s, 200);
    let hist = |body: &str| {
        c().post(format!("{url}/threads/p-1/history"))
            .bearer_auth("s3cret")
            .header("content-type", "application/json")
            .body(body.to_string())
    };
    for (body, want) in [
        (r#"{"limit": "ten"}"#, 422),
        (r#"{"limit": -1}"#, 422),
        (r#"{"limit": 0}"#, 422),
        (r#"{"before": [1]}"#, 400),
        (r#"{"before": "abc"}"#, 400),
        (r#"[1]"#, 400),
        (r#"{"limit": "#, 400),
    ] {
        let (s, v) = send(hist(body)).await;
        assert_eq!(s, want, "{body}: {v}");
        assert!(v["detail"].is_string(), "{v}");
    }
    let (s, v) = send(hist("")).await;
    assert_eq!(s, 200, "an empty body takes the defaults: {v}");
    let (s, v) = send(
        c().post(format!("{url}/threads/search"))
            .bearer_auth("s3cret")
            .json(&json!({"status": "sleeping"})),
    )
    .await;
    assert_eq!(s, 422, "{v}");
    let (s, v) = send(
        c().post(format!("{url}/threads/search"))
            .bearer_auth("s3cret")
            .json(&json!({"limit": "many"})),
    )
    .await;
    assert!(s == 400 || s == 422, "{s} {v}");
    // No such endpoint, no such method, a malformed body, no token: JSON all the same.
    let (s, v) = send(c().get(format!("{url}/nowhere")).bearer_auth("s3cret")).await;
    assert_eq!(s, 404, "{v}");
    let (s, v) = send(
        c().delete(format!("{url}/threads/search"))
            .bearer_auth("s3cret"),
    )
    .await;
    assert_eq!(s, 405, "{v}");
    let (s, v) = send(
        c().post(format!("{url}/threads"))
            .bearer_auth("s3cret")
            .header("content-type", "application/json")
            .body("{"),
    )
    .await;
    assert_eq!(s, 400, "{v}");
    let (s, v) = send(c().get(format!("{url}/threads/p-1"))).await;
    assert_eq!(s, 401, "{v}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_bearer_scheme_is_case_insensitive() {
    let url = start().await;
    for header in [
        "Bearer s3cret",
        "bearer s3cret",
        "BEARER s3cret",
        "Bearer  s3cret ",
    ] {
        let (s, v) = send(
            c().post(format!("{url}/assistants/search"))
                .header("authorization", header)
                .json(&json!({})),
        )
        .await;
        assert_eq!(s, 200, "{header}: {v}");
    }
    for header in ["Basic s3cret", "Bearer wrong", "s3cret", "Bearer"] {
        let (s, _) = send(
            c().post(format!("{url}/assistants/search"))
                .header("authorization", header)
                .json(&json!({})),
        )
        .await;
        assert_eq!(s, 401, "{header}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ok_is_503_while_the_server_recovers_and_200_after() {
    let dir = std::env::temp_dir().join(format!("planwright-ok-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let args = ServeArgs {
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
        ..ServeArgs::default()
    };
    let st = state(&args).await.unwrap();
    st.recovered
        .store(false, std::sync::atomic::Ordering::Release);
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router(st.clone());
    tokio::spawn(async move {
        let _ = axum::serve(listener, app).await;
    });
    let (s, v) = send(c().get(format!("http://{addr}/ok"))).await;
    assert_eq!((s, v["status"].as_str()), (503, Some("recovering")), "{v}");
    st.recovered
        .store(true, std::sync::atomic::Ordering::Release);
    let (s, v) = send(c().get(format!("http://{addr}/ok"))).await;
    assert_eq!((s, &v), (200, &json!({"ok": true})));
}

#[test]
fn a_bad_retention_or_limit_flag_exits_2_naming_it() {
    for args in [
        vec!["--retention", "thread_age=forever"],
        vec!["--retention", "keep=all"],
        vec!["--header-timeout", "0s"],
        vec!["--max-connections", "0"],
    ] {
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_planwright"))
            .arg("serve")
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{args:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(args[0]), "{args:?}: {err}");
    }
}
