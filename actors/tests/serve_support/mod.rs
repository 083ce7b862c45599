//! The real `planwright serve` binary for HTTP tests: started on a free port and a SQLite file
//! (or any checkpoint URL), ready once `/ok` answers 200, killed (SIGKILL) when dropped. Any
//! other process that serves the API starts the same way ([`start`]). Beside it: the server
//! library inside the test process ([`in_process`]) and the official SDKs' walks ([`sdk_walk`]).

#![allow(dead_code)]

pub mod in_process;
pub mod sdk_walk;

use serde_json::{json, Value};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

/// A running server; dropping it kills the process (no graceful stop).
pub struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Server {
    /// Sends the process a signal by name (`STOP`, `CONT`, `TERM`).
    pub fn signal(&self, sig: &str) {
        let ok = Command::new("kill")
            .args([&format!("-{sig}"), &self.0.id().to_string()])
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "kill -{sig} failed");
    }

    /// The process id.
    pub fn pid(&self) -> u32 {
        self.0.id()
    }

    /// Kills the process now (SIGKILL) and waits for it.
    pub fn kill(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A fresh directory under the test target dir.
pub fn fresh_dir(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

/// Starts `serve` on `port` over the SQLite file `db` with `model`, and waits until it is ready.
pub async fn serve(db: &Path, port: u16, model: &str) -> Server {
    serve_with(port, &format!("sqlite:{}", db.display()), model, &[]).await
}

/// Starts `serve` on a free port over `checkpoint` with `model` and `extra` flags, waits until it
/// is ready, and returns it with its base URL.
pub async fn serve_on(checkpoint: &str, model: &str, extra: &[&str]) -> (Server, String) {
    let port = free_port();
    let server = serve_with(port, checkpoint, model, extra).await;
    (server, format!("http://127.0.0.1:{port}"))
}

/// Starts `serve` on `port` over `checkpoint` with `model` and `extra` flags, and waits until it
/// is ready.
pub async fn serve_with(port: u16, checkpoint: &str, model: &str, extra: &[&str]) -> Server {
    let mut serve = Command::new(env!("CARGO_BIN_EXE_planwright"));
    serve
        .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
        .args(["--model", model, "--checkpoint", checkpoint])
        .args(extra);
    start(serve, port).await
}

/// Starts `server`, a process that serves the API on `port`, and waits until it is ready.
pub async fn start(mut server: Command, port: u16) -> Server {
    let child = server
        .stdout(Stdio::null())
        // `PLANWRIGHT_TEST_SERVER_LOG=1` shows the server's log, for debugging a test.
        .stderr(
            if std::env::var_os("PLANWRIGHT_TEST_SERVER_LOG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            },
        )
        .spawn()
        .expect("the server process starts");
    let server = Server(child);
    // Ready: recovered and storage answering.
    for _ in 0..800 {
        if let Ok(r) = reqwest::get(format!("http://127.0.0.1:{port}/ok")).await {
            if r.status() == 200 {
                return server;
            }
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("the server on {port} never became ready");
}

/// One request; the status and the JSON body (`null` when there is none, a string when the body
/// is not JSON).
pub async fn call(method: &str, url: &str, body: Option<Value>) -> (u16, Value) {
    let mut req = reqwest::Client::new().request(method.parse().unwrap(), url);
    if let Some(b) = body {
        req = req.json(&b);
    }
    let r = req.send().await.expect("the server answers");
    let s = r.status().as_u16();
    let text = r.text().await.unwrap_or_default();
    let body = match serde_json::from_str(&text) {
        Ok(v) => v,
        Err(_) if text.is_empty() => Value::Null,
        Err(_) => Value::String(text),
    };
    (s, body)
}

/// Server `base`'s `/metrics` page.
pub async fn metrics(base: &str) -> String {
    reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// Creates thread `id`.
pub async fn create_thread(url: &str, id: &str) {
    let (s, t) = call(
        "POST",
        &format!("{url}/threads"),
        Some(json!({"thread_id": id})),
    )
    .await;
    assert_eq!(s, 200, "{t}");
}

/// The thread's checkpoints, newest first (at most 1000).
pub async fn history(url: &str, thread: &str) -> Vec<Value> {
    let (s, h) = call(
        "POST",
        &format!("{url}/threads/{thread}/history"),
        Some(json!({"limit": 1000})),
    )
    .await;
    assert_eq!(s, 200, "{h}");
    h.as_array().cloned().unwrap_or_default()
}

/// Polls until the thread has at least `n` checkpoints.
pub async fn wait_for_checkpoints(url: &str, thread: &str, n: usize) {
    for _ in 0..800 {
        if history(url, thread).await.len() >= n {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("thread `{thread}` never reached {n} checkpoints");
}

/// Polls until no run of the thread is pending or running; the statuses, newest first.
pub async fn wait_runs_ended(url: &str, thread: &str) -> Vec<String> {
    let mut statuses = Vec::new();
    for _ in 0..1600 {
        let (_, runs) = call(
            "GET",
            &format!("{url}/threads/{thread}/runs?limit=100"),
            None,
        )
        .await;
        statuses = runs
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["status"].as_str().unwrap().to_string())
            .collect();
        if !statuses.iter().any(|s| s == "pending" || s == "running") {
            return statuses;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("runs of `{thread}` never ended: {statuses:?}");
}

/// One server-sent event: its id (when it has one), name and JSON data.
#[derive(Clone, Debug, PartialEq)]
pub struct SseEvent {
    /// The `id:` field, when it is a number (a run stream's ids).
    pub id: Option<u64>,
    /// The `id:` field as sent (a thread stream's ids are `{run}-{event}`).
    pub raw_id: Option<String>,
    /// The `event:` field.
    pub event: String,
    /// The `data:` field, parsed.
    pub data: Value,
}

/// Reads a `text/event-stream` response one event at a time.
pub struct SseReader {
    resp: reqwest::Response,
    buf: String,
}

impl SseReader {
    /// Opens `req` (a `runs/stream` or join-stream request); panics unless it answers 200.
    pub async fn open(req: reqwest::RequestBuilder) -> Self {
        let resp = req.send().await.expect("the stream request is sent");
        assert_eq!(resp.status(), 200, "the stream was refused");
        Self {
            resp,
            buf: String::new(),
        }
    }

    /// The next event (keep-alive comments skipped); `None` when the stream ended or broke.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..end + 2).collect();
                let field = |name: &str| {
                    block
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim_start().to_string())
                };
                let Some(event) = field("event:") else {
                    continue;
                };
                return Some(SseEvent {
                    id: field("id:").and_then(|i| i.parse().ok()),
                    raw_id: field("id:"),
                    event,
                    data: serde_json::from_str(&field("data:").unwrap_or_default())
                        .unwrap_or(Value::Null),
                });
            }
            match self.resp.chunk().await {
                Ok(Some(bytes)) => self.buf.push_str(&String::from_utf8_lossy(&bytes)),
                _ => return None,
            }
        }
    }

    /// Every event left, until the stream ends.
    pub async fn rest(&mut self) -> Vec<SseEvent> {
        let mut all = Vec::new();
        while let Some(e) = self.next().await {
            all.push(e);
        }
        all
    }
}
