//! A chat UI on `useStream` (`@langchain/langgraph-sdk/react` 1.15) in a real browser against a
//! real `planwright serve` process with the simulated model: the page in `tests/chat_ui/` is
//! built with Vite (npm packages installed once under the target directory), served by this test
//! with the server's API proxied under `/api` (one origin, as a deployment would put it), and
//! driven in headless Chromium over WebDriver (`studio_support`, which installs Debian's
//! `chromium` and `chromium-driver` when missing). A person's path: a research goal sent from the
//! page, the planner's tokens streaming in, the plan-approval interrupt shown, the page reloaded
//! with the interrupt still there, approved from the page, the brief's tokens streaming and the
//! brief shown, and the thread in the thread list.

mod studio_support;

use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::Response;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use studio_support::{ensure_browser, free_port, Browser};

/// A `planwright serve` process, killed when dropped.
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn source() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/chat_ui")
}

/// Builds the page: npm packages installed once under the target directory (again when
/// `package.json` changes), the sources copied beside them, and Vite's output in `dist/`.
fn build_page() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("chat-ui-npm");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    let manifest = std::fs::read_to_string(source().join("package.json")).unwrap();
    let installed = std::fs::read_to_string(dir.join("package.json")).ok();
    if installed.as_deref() != Some(manifest.as_str()) || !dir.join("node_modules/vite").exists() {
        std::fs::write(dir.join("package.json"), &manifest).unwrap();
        let ok = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund"])
            .current_dir(&dir)
            .status()
            .expect("npm runs")
            .success();
        assert!(ok, "npm install failed in {}", dir.display());
    }
    for file in [
        "index.html",
        "vite.config.js",
        "src/main.jsx",
        "src/App.jsx",
    ] {
        std::fs::copy(source().join(file), dir.join(file)).unwrap();
    }
    let out = Command::new("node")
        .args(["node_modules/vite/bin/vite.js", "build", "--emptyOutDir"])
        .current_dir(&dir)
        .output()
        .expect("node runs");
    assert!(
        out.status.success(),
        "vite build failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    dir.join("dist")
}

async fn serve(db: &Path) -> (Server, String) {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
        // Model calls of about a second: a plan's or a brief's tokens arrive over many frames.
        .args(["--model", "sim:p50=1s,p99=1200ms,seed=7", "--checkpoint"])
        .arg(format!("sqlite:{}", db.display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let server = Server(child);
    let url = format!("http://127.0.0.1:{port}");
    for _ in 0..800 {
        if reqwest::get(format!("{url}/ok"))
            .await
            .is_ok_and(|r| r.status() == 200)
        {
            return (server, url);
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("serve did not open {url}");
}

#[derive(Clone)]
struct Site {
    dist: PathBuf,
    api: String,
    http: reqwest::Client,
}

/// `/api/…` forwarded to the server (the response streamed back as it comes, so server-sent
/// events pass), anything else a file of the built page (`index.html` when there is none).
async fn site(State(site): State<Site>, req: Request) -> Response {
    let path = req.uri().path().to_string();
    if let Some(rest) = path.strip_prefix("/api") {
        return proxy(&site, rest, req).await;
    }
    let file = site.dist.join(path.trim_start_matches('/'));
    let file = if file.is_file() {
        file
    } else {
        site.dist.join("index.html")
    };
    let kind = match file.extension().and_then(|e| e.to_str()) {
        Some("js") => "text/javascript",
        Some("css") => "text/css",
        _ => "text/html; charset=utf-8",
    };
    Response::builder()
        .header(header::CONTENT_TYPE, kind)
        .body(Body::from(std::fs::read(file).unwrap()))
        .unwrap()
}

async fn proxy(site: &Site, rest: &str, req: Request) -> Response {
    let query = req
        .uri()
        .query()
        .map(|q| format!("?{q}"))
        .unwrap_or_default();
    let mut out = site
        .http
        .request(req.method().clone(), format!("{}{rest}{query}", site.api));
    let last_event_id = header::HeaderName::from_static("last-event-id");
    for name in [header::CONTENT_TYPE, header::ACCEPT, last_event_id] {
        if let Some(v) = req.headers().get(&name) {
            out = out.header(name, v.clone());
        }
    }
    let body = axum::body::to_bytes(req.into_body(), usize::MAX)
        .await
        .unwrap();
    let Ok(res) = out.body(body).send().await else {
        return Response::builder()
            .status(StatusCode::BAD_GATEWAY)
            .body(Body::empty())
            .unwrap();
    };
    let mut builder = Response::builder().status(res.status().as_u16());
    for name in [
        header::CONTENT_TYPE,
        header::CONTENT_LOCATION,
        header::LOCATION,
    ] {
        if let Some(v) = res.headers().get(&name) {
            builder = builder.header(name, HeaderValue::from_bytes(v.as_bytes()).unwrap());
        }
    }
    let chunks = futures::stream::unfold(res, |mut res| async move {
        match res.chunk().await {
            Ok(Some(bytes)) => Some((Ok::<_, reqwest::Error>(bytes), res)),
            Ok(None) => None,
            Err(e) => Some((Err(e), res)),
        }
    });
    builder.body(Body::from_stream(chunks)).unwrap()
}

/// Serves the page and the proxy on a free port; returns its URL.
async fn host(dist: PathBuf, api: String) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let app = axum::Router::new().fallback(site).with_state(Site {
        dist,
        api,
        http: reqwest::Client::new(),
    });
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    url
}

/// The lengths at which the page saw each streamed message (`window.__seen`, id → lengths).
async fn seen(b: &Browser) -> serde_json::Map<String, Value> {
    b.eval("return window.__seen;", json!([]))
        .await
        .as_object()
        .cloned()
        .unwrap_or_default()
}

/// Whether a message whose id starts with `prefix` was seen growing over at least `n` lengths.
async fn streamed(b: &Browser, prefix: &str, n: usize) -> bool {
    seen(b).await.iter().any(|(id, lengths)| {
        id.starts_with(prefix) && lengths.as_array().is_some_and(|l| l.len() >= n)
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_research_chat_streams_tokens_pauses_for_approval_and_survives_a_reload() {
    ensure_browser().unwrap_or_else(|e| panic!("no browser: {e}"));
    let dist = tokio::task::spawn_blocking(build_page).await.unwrap();
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("chat-ui-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let (_server, api) = serve(&dir.join("serve.sqlite")).await;
    let page = host(dist, api).await;
    let b =
        Browser::start(&Path::new(env!("CARGO_TARGET_TMPDIR")).join("chat-ui-screenshots")).await;

    // A goal sent as a message: the plan streams in as tokens, then the approval interrupt.
    b.goto(&page).await;
    b.wait_css("#goal-input", 30).await;
    b.type_into("#goal-input", "Should our support team adopt RAG?")
        .await;
    b.click("#send").await;
    b.wait_css("#interrupt #resume-approve", 60).await;
    assert!(
        streamed(&b, "create_plan-", 3).await,
        "the plan's tokens did not stream: {:?}",
        seen(&b).await
    );
    let question = b.text("#interrupt .question").await.unwrap();
    assert!(!question.is_empty());
    assert!(b.count("#interrupt li").await >= 2, "the plan is listed");
    let thread = b
        .eval(
            "return new URL(location.href).searchParams.get('thread');",
            json!([]),
        )
        .await
        .as_str()
        .expect("the thread is in the URL")
        .to_string();
    b.screenshot("interrupt").await;

    // A reload restores the thread and its pending interrupt.
    b.goto(&format!("{page}/?thread={thread}")).await;
    b.wait_css("#interrupt #resume-approve", 30).await;
    assert_eq!(b.text("#interrupt .question").await.unwrap(), question);

    // Approved from the page: the brief streams in and is shown.
    b.click("#resume-approve").await;
    b.wait_css("#report", 120).await;
    assert!(
        streamed(&b, "synthesize_report-", 3).await,
        "the brief's tokens did not stream: {:?}",
        seen(&b).await
    );
    assert!(b.text("#report").await.unwrap().contains("# "));
    b.wait_for(
        "the thread listed as idle",
        30,
        "return document.querySelector(`#threads [data-thread='${arguments[0]}'][data-status='idle']`) !== null;",
        json!([thread]),
    )
    .await;
    b.screenshot("report").await;

    // A new thread: the past one stays in the list, and opens again.
    b.click("#new-thread").await;
    b.wait_for(
        "an empty chat",
        10,
        "return document.querySelector('#report') === null;",
        json!([]),
    )
    .await;
    b.click(&format!("#threads [data-thread='{thread}'] button"))
        .await;
    b.wait_css("#report", 30).await;
}
