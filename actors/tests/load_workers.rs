//! `load --coordinator` over worker processes of the real binary, against a minimal Agent Server
//! API written here that answers every run at once (`runs/wait`, no interrupt). The merged report
//! holds exactly every worker's conversations, and its percentiles come from the merged histogram
//! (they lie within the workers' own and its maximum is theirs); a worker killed mid-run is named
//! in the report and the summary, and the arrivals it had yet to start run on the others, so the
//! run still starts every arrival of the scenario.

use axum::extract::Path;
use axum::routing::{get, post};
use axum::{Json, Router};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};

static THREADS: AtomicU64 = AtomicU64::new(1);

async fn create() -> Json<Value> {
    let n = THREADS.fetch_add(1, Ordering::Relaxed);
    Json(json!({"thread_id": format!("00000000-0000-4000-8000-{n:012x}")}))
}

async fn wait(Path(_id): Path<String>, Json(_body): Json<Value>) -> Json<Value> {
    Json(json!({}))
}

async fn state(Path(_id): Path<String>) -> Json<Value> {
    Json(json!({"values": {}, "tasks": []}))
}

/// Serves the API on a thread of its own (the test's body blocks on processes).
fn start_server() -> String {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let app = Router::new()
                .route("/threads", post(create))
                .route("/threads/{id}/runs/wait", post(wait))
                .route("/threads/{id}/state", get(state));
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            tx.send(format!("http://{}", listener.local_addr().unwrap()))
                .unwrap();
            let _ = axum::serve(listener, app).await;
        });
    });
    rx.recv().unwrap()
}

fn dir(name: &str) -> std::path::PathBuf {
    let d = std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("load-workers-{name}-{}", std::process::id()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A worker process and the lines of its stdout after the address.
struct Worker {
    child: Child,
    url: String,
    lines: std::io::Lines<BufReader<std::process::ChildStdout>>,
}

fn worker() -> Worker {
    let mut child = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(["load", "--worker", "127.0.0.1:0"])
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    let first = lines.next().unwrap().unwrap();
    let url = first
        .strip_prefix("load worker listening on ")
        .unwrap_or_else(|| panic!("{first}"))
        .to_string();
    Worker { child, url, lines }
}

fn coordinator(
    server: &str,
    workers: &str,
    rate: &str,
    duration: &str,
    report: &std::path::Path,
) -> Child {
    coordinator_with(server, workers, rate, duration, "3", report)
}

fn coordinator_with(
    server: &str,
    workers: &str,
    rate: &str,
    duration: &str,
    timeout: &str,
    report: &std::path::Path,
) -> Child {
    Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args([
            "load",
            "--coordinator",
            "--workers",
            workers,
            "--target",
            server,
            "--assistant",
            "chat",
            "--stream-mode",
            "wait",
            "--rate",
            rate,
            "--duration",
            duration,
            "--quiet",
            "--worker-timeout",
            timeout,
            "--threshold",
            "conversation_p99<60s",
            "--report",
        ])
        .arg(report)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap()
}

fn read(report: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(report).unwrap()).unwrap()
}

fn f(v: &Value) -> f64 {
    v.as_f64().unwrap()
}

#[test]
fn three_local_workers_merge_into_one_report_with_exact_counts() {
    let server = start_server();
    let report = dir("merge").join("r.json");
    let out = coordinator(&server, "3", "30", "4s", &report)
        .wait_with_output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let r = read(&report);
    assert_eq!(r["started"], 120, "{r:#}");
    assert_eq!(r["completed"], 120);
    let workers = r["workers"].as_array().unwrap();
    assert_eq!(workers.len(), 3);
    let merged = &r["conversation_latency_ms"];
    let mut count = 0;
    let (mut lo50, mut hi50, mut lo99, mut hi99, mut max) =
        (f64::MAX, 0.0f64, f64::MAX, 0.0f64, 0.0f64);
    for w in workers {
        assert_eq!(w["share"], 40, "{w}");
        assert_eq!(w["started"], 40, "{w}");
        assert!(w["died"].is_null(), "{w}");
        assert!(f(&w["cpu_ms"]) > 0.0, "{w}");
        let l = &w["latency_ms"];
        count += l["count"].as_u64().unwrap();
        (lo50, hi50) = (lo50.min(f(&l["p50"])), hi50.max(f(&l["p50"])));
        (lo99, hi99) = (lo99.min(f(&l["p99"])), hi99.max(f(&l["p99"])));
        max = max.max(f(&l["max"]));
    }
    // The merged histogram holds every worker's samples, and its percentiles are read from it.
    assert_eq!(merged["count"].as_u64().unwrap(), count);
    assert_eq!(count, 120);
    assert_eq!(f(&merged["max"]), max);
    assert!(
        (lo50..=hi50).contains(&f(&merged["p50"])),
        "{merged} {lo50}..{hi50}"
    );
    assert!(
        (lo99..=hi99).contains(&f(&merged["p99"])),
        "{merged} {lo99}..{hi99}"
    );
    assert_eq!(r["thresholds"][0]["passed"], true, "{:#}", r["thresholds"]);
    assert_eq!(
        stdout.matches("  worker http://127.0.0.1:").count(),
        3,
        "{stdout}"
    );
}

#[test]
fn a_killed_worker_is_reported_and_its_arrivals_run_on_the_others() {
    let server = start_server();
    let report = dir("kill").join("r.json");
    let mut ws: Vec<Worker> = (0..3).map(|_| worker()).collect();
    let urls: Vec<String> = ws.iter().map(|w| w.url.clone()).collect();
    let coord = coordinator(&server, &urls.join(","), "30", "6s", &report);
    // Once the second worker has sent two samples, kill it.
    let victim = &mut ws[1];
    loop {
        let line = victim.lines.next().unwrap().unwrap();
        if line == "load worker: sample 2" {
            break;
        }
    }
    victim.child.kill().unwrap();
    victim.child.wait().unwrap();
    let out = coord.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    for w in ws.iter_mut() {
        let _ = w.child.kill();
        let _ = w.child.wait();
    }
    let r = read(&report);
    let workers = r["workers"].as_array().unwrap();
    let dead = &workers[1];
    let why = dead["died"].as_str().unwrap_or_else(|| panic!("{r:#}"));
    assert!(why.contains("connection"), "{why}");
    assert!(
        stdout.contains(&format!("worker {}:", urls[1])) && stdout.contains("DIED"),
        "{stdout}"
    );
    let dead_started = dead["started"].as_u64().unwrap();
    assert!(dead_started > 0 && dead_started < 60, "{dead}");
    let respread: u64 = workers
        .iter()
        .map(|w| w["respread_to_it"].as_u64().unwrap())
        .sum();
    assert_eq!(respread, 60 - dead_started, "{r:#}");
    assert_eq!(dead["respread_to_it"], 0);
    for k in [0, 2] {
        let w = &workers[k];
        assert!(w["died"].is_null(), "{w}");
        let expected = 60 + w["respread_to_it"].as_u64().unwrap();
        assert_eq!(w["started"].as_u64().unwrap(), expected, "{w}");
        assert_eq!(w["completed"].as_u64().unwrap(), expected, "{w}");
    }
    // Every arrival of the scenario started: the dead worker's before it died, the rest on the
    // others.
    assert_eq!(r["started"], 180, "{r:#}");
}

#[test]
fn a_silent_worker_counts_as_dead_after_the_timeout() {
    let server = start_server();
    let report = dir("silent").join("r.json");
    let mut ws: Vec<Worker> = (0..2).map(|_| worker()).collect();
    let urls: Vec<String> = ws.iter().map(|w| w.url.clone()).collect();
    let coord = coordinator_with(&server, &urls.join(","), "20", "5s", "2", &report);
    // After its first sample, freeze the second worker (SIGSTOP): its connection stays open, but
    // no sample comes.
    loop {
        let line = ws[1].lines.next().unwrap().unwrap();
        if line == "load worker: sample 1" {
            break;
        }
    }
    let pid = ws[1].child.id().to_string();
    assert!(Command::new("kill")
        .args(["-STOP", &pid])
        .status()
        .unwrap()
        .success());
    let out = coord.wait_with_output().unwrap();
    let _ = Command::new("kill").args(["-CONT", &pid]).status();
    for w in ws.iter_mut() {
        let _ = w.child.kill();
        let _ = w.child.wait();
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    let r = read(&report);
    let workers = r["workers"].as_array().unwrap();
    let why = workers[1]["died"]
        .as_str()
        .unwrap_or_else(|| panic!("{r:#}"));
    assert_eq!(why, "no sample for 2 s");
    assert!(stdout.contains("DIED: no sample for 2 s"), "{stdout}");
    let frozen = workers[1]["started"].as_u64().unwrap();
    assert_eq!(
        workers[0]["respread_to_it"].as_u64().unwrap(),
        50 - frozen,
        "{r:#}"
    );
    assert_eq!(
        workers[0]["started"].as_u64().unwrap(),
        100 - frozen,
        "{r:#}"
    );
    assert_eq!(r["started"], 100, "{r:#}");
}

/// The load tester's own cost (docs/PERFORMANCE.md): one local worker against this server that
/// answers at once, the rate doubled until an arrival is dropped or more than 1 % start late
/// (> 10 ms); prints each step's CPU per conversation. Run by hand:
/// `cargo test --release -p planwright-actors --test load_workers one_worker_cost -- --ignored --nocapture`.
#[test]
#[ignore = "a measurement, not a check"]
fn one_worker_cost() {
    let server = start_server();
    let report = dir("cost").join("r.json");
    let mut rate = 100u64;
    let mut held = None;
    while rate <= 12_800 {
        let out = coordinator_with(&server, "1", &rate.to_string(), "5s", "5", &report)
            .wait_with_output()
            .unwrap();
        let r = read(&report);
        let w = &r["workers"][0];
        let (conversations, started) = (
            r["conversations"].as_u64().unwrap(),
            r["started"].as_u64().unwrap(),
        );
        let late = r["lateness"]["late"].as_u64().unwrap();
        let ok = out.status.success() && started == conversations && late * 100 <= started;
        println!(
            "rate {rate}/s: {started} of {conversations} started, {late} late, p99 {:.1} ms, worker CPU {:.0} ms = {:.0} µs per conversation{}",
            f(&r["conversation_latency_ms"]["p99"]),
            f(&w["cpu_ms"]),
            f(&w["cpu_us_per_conversation"]),
            if ok { "" } else { "  <- did not hold" }
        );
        if !ok {
            break;
        }
        held = Some(rate);
        rate *= 2;
    }
    println!("highest rate held: {held:?}");
}

#[test]
fn a_threshold_crossed_on_the_merged_figures_stops_every_worker() {
    let report = dir("abort").join("r.json");
    let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args([
            "load",
            "--coordinator",
            "--workers",
            "2",
            "--graph",
            "loop",
            "--rate",
            "20",
            "--duration",
            "30s",
            "--threshold",
            "conversation_p50<0.01ms",
            "--abort-on-fail",
            "--quiet",
            "--report",
        ])
        .arg(&report)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{out:?}");
    let r = read(&report);
    let why = r["stopped_early"]
        .as_str()
        .unwrap_or_else(|| panic!("{r:#}"));
    assert!(why.contains("crossed on the merged figures"), "{why}");
    let t = &r["thresholds"][0];
    assert_eq!(t["passed"], false);
    assert_eq!(t["value"], r["conversation_latency_ms"]["p50"]);
    // Stopped long before the 600 arrivals of 30 s.
    assert!(r["started"].as_u64().unwrap() < 300, "{r:#}");
    for w in r["workers"].as_array().unwrap() {
        assert!(w["died"].is_null(), "{w}");
    }
}
