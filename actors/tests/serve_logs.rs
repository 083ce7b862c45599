//! The server's log, read from the real binary's stderr with `RUST_LOG` unset: each run's start
//! and end at `info` with its thread and run ids, one JSON object per line with
//! `--log-format json`, and a 5xx caused by storage logged at `error` with the storage's cause
//! (the PostgreSQL database dropped under a running server).

#[path = "../../tests/support/backends.rs"]
mod backends;
#[path = "../../tests/support/pg_database.rs"]
mod pg_database;
mod serve_support;

use serde_json::{json, Value};
use serve_support::{call, create_thread, free_port, fresh_dir};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const GOAL: &str = "Should our support team adopt retrieval-augmented generation?";

/// A `serve` process whose stderr is collected line by line; killed when dropped.
struct Logged {
    child: Child,
    base: String,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Drop for Logged {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Logged {
    /// Starts `serve` over `checkpoint` with `extra` flags and `RUST_LOG` unset, and waits until
    /// `/ok` answers 200.
    async fn start(checkpoint: &str, extra: &[&str]) -> Self {
        let port = free_port();
        let mut child = Command::new(env!("CARGO_BIN_EXE_planwright"))
            .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
            .args(["--model", "offline", "--checkpoint", checkpoint])
            .args(extra)
            .env_remove("RUST_LOG")
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("serve starts");
        let lines: Arc<Mutex<Vec<String>>> = Arc::default();
        let (stderr, sink) = (child.stderr.take().unwrap(), lines.clone());
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                sink.lock().unwrap().push(line);
            }
        });
        let server = Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
            lines,
        };
        for _ in 0..800 {
            if let Ok(r) = reqwest::get(format!("{}/ok", server.base)).await {
                if r.status() == 200 {
                    return server;
                }
            }
            tokio::time::sleep(Duration::from_millis(25)).await;
        }
        panic!("serve never became ready; its log:\n{}", server.log());
    }

    /// Everything it wrote on stderr so far.
    fn log(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    /// The first line `matches` accepts, waiting for it up to 30 s.
    async fn line(&self, what: &str, matches: impl Fn(&str) -> bool) -> String {
        let t0 = Instant::now();
        loop {
            if let Some(l) = self.lines.lock().unwrap().iter().find(|l| matches(l)) {
                return l.clone();
            }
            assert!(
                t0.elapsed() < Duration::from_secs(30),
                "no log line {what}; the log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

/// Runs the research assistant to its end on a new thread `thread`; its run id.
async fn one_run(base: &str, thread: &str) -> String {
    create_thread(base, thread).await;
    let (s, out) = call(
        "POST",
        &format!("{base}/threads/{thread}/runs/wait"),
        Some(json!({"assistant_id": "research", "input": {"input": GOAL}})),
    )
    .await;
    assert_eq!(s, 200, "{out}");
    let (s, runs) = call("GET", &format!("{base}/threads/{thread}/runs"), None).await;
    assert_eq!(s, 200, "{runs}");
    runs[0]["run_id"].as_str().expect("a run id").to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_run_start_and_end_is_logged_at_info_with_its_ids() {
    let dir = fresh_dir("serve-logs-text");
    let db = format!("sqlite:{}", dir.join("db.sqlite").display());
    let server = Logged::start(&db, &[]).await;
    let run_id = one_run(&server.base, "logged-1").await;
    let ids = |l: &str| l.contains("thread_id=\"logged-1\"") && l.contains(&run_id);
    let start = server
        .line("`run started`", |l| l.contains("run started") && ids(l))
        .await;
    assert!(start.contains(" INFO "), "{start}");
    assert!(start.contains("assistant=\"research\""), "{start}");
    let end = server
        .line("`run ended`", |l| l.contains("run ended") && ids(l))
        .await;
    assert!(end.contains(" INFO "), "{end}");
    assert!(end.contains("status=success"), "{end}");
    assert!(end.contains("duration_ms="), "{end}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_log_format_json_every_line_is_an_object_with_its_fields() {
    let dir = fresh_dir("serve-logs-json");
    let db = format!("sqlite:{}", dir.join("db.sqlite").display());
    let server = Logged::start(&db, &["--log-format", "json"]).await;
    let run_id = one_run(&server.base, "logged-2").await;
    server
        .line("`run ended` in JSON", |l| {
            l.contains("run ended") && l.contains(&run_id)
        })
        .await;
    let lines: Vec<Value> = server
        .lines
        .lock()
        .unwrap()
        .iter()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}")))
        .collect();
    for l in &lines {
        assert!(
            l["timestamp"].is_string() && l["level"].is_string() && l["target"].is_string(),
            "{l}"
        );
        assert!(l["message"].is_string(), "{l}");
    }
    let of_run = |message: &str| {
        lines
            .iter()
            .find(|l| l["message"] == message && l["run_id"] == run_id.as_str())
            .unwrap_or_else(|| panic!("no `{message}` line of run {run_id}"))
            .clone()
    };
    let start = of_run("run started");
    assert_eq!(start["level"], "INFO");
    assert_eq!(start["thread_id"], "logged-2");
    assert_eq!(start["assistant"], "research");
    let end = of_run("run ended");
    assert_eq!(end["level"], "INFO");
    assert_eq!(end["thread_id"], "logged-2");
    assert_eq!(end["status"], "success");
    assert!(end["duration_ms"].is_u64(), "{end}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_5xx_from_storage_is_logged_as_an_error_with_its_cause() {
    // A database of its own, which the test drops under the running server.
    let Some(db) = pg_database::FreshDatabase::create("pwlogs").await else {
        return;
    };
    let (name, db_url) = (db.name.clone(), db.url());
    let admin = pg_database::admin().await;
    let server = Logged::start(&db_url, &["--log-format", "json"]).await;
    create_thread(&server.base, "doomed").await;
    admin
        .batch_execute(&format!("DROP DATABASE {name} WITH (FORCE)"))
        .await
        .unwrap();

    let (s, body) = call(
        "GET",
        &format!("{}/threads/doomed/state", server.base),
        None,
    )
    .await;
    assert!((500..600).contains(&s), "{s} {body}");
    let line = server
        .line("for the 5xx", |l| l.contains("request failed"))
        .await;
    let e: Value = serde_json::from_str(&line).unwrap();
    assert_eq!(e["level"], "ERROR", "{line}");
    assert_eq!(e["status"], s, "{line}");
    // What failed, and the database's own reason further down the chain.
    let detail = e["detail"].as_str().unwrap_or_default();
    assert!(detail.contains("postgres error 3D000"), "{line}");
    assert!(
        detail.contains(&format!("database \"{name}\" does not exist")),
        "{line}"
    );
    // The request it answered.
    assert_eq!(e["span"]["path"], "/threads/doomed/state", "{line}");
    assert_eq!(e["span"]["method"], "GET", "{line}");
    // The client reads an error id, the same as the log line's, and nothing of the cause: no
    // database name, host or SQLSTATE.
    let told = body["detail"].as_str().unwrap_or_default();
    let id = e["error_id"].as_str().unwrap_or_default();
    assert!(!id.is_empty(), "{line}");
    assert_eq!(
        told,
        format!("internal server error (error id {id}); the server's log has its cause"),
        "{body}"
    );
    for secret in [name.as_str(), "3D000", "postgres", "127.0.0.1"] {
        assert!(!told.contains(secret), "{body}");
    }
}
