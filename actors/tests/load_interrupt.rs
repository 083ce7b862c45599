//! `load` on the real binary when things go wrong late: a `--report` folder that is missing is
//! refused before the run; a report that cannot be written at the end still leaves the summary;
//! the first Ctrl-C (SIGINT) stops arrivals and writes what was measured, marked interrupted; the
//! second exits at once.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "planwright-load-interrupt-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A child killed when the test ends, whatever happened.
struct Load(Child);

impl Drop for Load {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn spawn(args: &[&str]) -> Load {
    Load(
        Command::new(env!("CARGO_BIN_EXE_planwright"))
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap(),
    )
}

fn sigint(child: &Child) {
    let status = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Waits (bounded, generously) until `path` holds a line: the run has started and sampled.
fn wait_for_sample(path: &Path, child: &mut Child) {
    let until = Instant::now() + Duration::from_secs(60);
    loop {
        if std::fs::read_to_string(path).is_ok_and(|t| t.lines().count() >= 1) {
            return;
        }
        assert!(child.try_wait().unwrap().is_none(), "load ended early");
        assert!(Instant::now() < until, "no sample within a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Waits (bounded) for the child to exit and returns its code, stdout and stderr.
fn finish(mut load: Load) -> (Option<i32>, String, String) {
    let until = Instant::now() + Duration::from_secs(60);
    while load.0.try_wait().unwrap().is_none() {
        assert!(Instant::now() < until, "load did not exit within a minute");
        std::thread::sleep(Duration::from_millis(50));
    }
    let read = |r: Option<&mut dyn std::io::Read>| {
        let mut s = String::new();
        if let Some(r) = r {
            let _ = r.read_to_string(&mut s);
        }
        s
    };
    let stdout = read(load.0.stdout.as_mut().map(|s| s as &mut dyn std::io::Read));
    let stderr = read(load.0.stderr.as_mut().map(|s| s as &mut dyn std::io::Read));
    let code = load.0.try_wait().unwrap().and_then(|s| s.code());
    (code, stdout, stderr)
}

#[test]
fn a_missing_report_folder_is_refused_before_the_run() {
    let dir = scratch("missing");
    let report = dir.join("no-such-folder").join("x.json");
    let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(["load", "--graph", "loop", "--quiet", "--rate", "5"])
        .args(["--duration", "2s", "--report", report.to_str().unwrap()])
        .output()
        .unwrap();
    // Refused as bad input (exit 2) with nothing printed on stdout: no run, no summary (a run
    // that found out at its end would exit 1 after it).
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("no-such-folder does not exist"),
        "names the folder: {stderr}"
    );
    assert!(out.stdout.is_empty(), "no run, no summary");
    // A folder given as the report: refused too.
    let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(["load", "--graph", "loop", "--quiet", "--conversations", "1"])
        .args(["--report", dir.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("is a folder"));
}

#[test]
fn a_report_that_cannot_be_written_at_the_end_still_leaves_the_summary() {
    let dir = scratch("unwritable");
    let report = dir.join("r.json");
    // The HTML page goes beside the JSON as r.html: a folder of that name makes its write fail
    // after the run, past the check of the report's folder.
    std::fs::create_dir(dir.join("r.html")).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(["load", "--graph", "loop", "--quiet", "--conversations", "5"])
        .args(["--report", report.to_str().unwrap()])
        .output()
        .unwrap();
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
    );
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stdout.contains("5 of 5 conversations started") && stdout.contains("5 completed"),
        "the summary: {stdout}"
    );
    assert!(stderr.contains("cannot write the report"), "{stderr}");
}

#[test]
fn the_first_ctrl_c_writes_what_was_measured_marked_interrupted() {
    let dir = scratch("sigint");
    let report = dir.join("r.json");
    let samples = dir.join("samples.jsonl");
    let mut load = spawn(&[
        "load",
        "--graph",
        "loop",
        "--quiet",
        "--rate",
        "20",
        "--duration",
        "10m",
        "--grace",
        "5s",
        "--report",
        report.to_str().unwrap(),
        "--out",
        samples.to_str().unwrap(),
    ]);
    wait_for_sample(&samples, &mut load.0);
    sigint(&load.0);
    let (code, stdout, stderr) = finish(load);
    assert_eq!(code, Some(130), "{stdout}\n{stderr}");
    assert!(stderr.contains("load: interrupted;"), "{stderr}");
    assert!(
        stdout.starts_with("INTERRUPTED (Ctrl-C)") && stdout.contains("stopped early: interrupted"),
        "{stdout}"
    );
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(v["interrupted"], true);
    assert!(v["started"].as_u64().unwrap() >= 1);
    assert!(v["started"].as_u64() < v["conversations"].as_u64());
    assert!(v["stopped_early"]
        .as_str()
        .unwrap()
        .starts_with("interrupted (Ctrl-C)"));
    let html = std::fs::read_to_string(dir.join("r.html")).unwrap();
    assert!(html.contains("interrupted"), "the page says so too");
}

#[test]
fn a_second_ctrl_c_exits_at_once_without_a_report() {
    let dir = scratch("sigint2");
    let report = dir.join("r.json");
    let samples = dir.join("samples.jsonl");
    // Conversations waiting minutes on their model, and a grace as long: after the first Ctrl-C
    // the run would wait for them.
    let mut load = spawn(&[
        "load",
        "--graph",
        "research",
        "--model",
        "sim:p50=5m,p99=6m",
        "--quiet",
        "--concurrency",
        "2",
        "--conversations",
        "4",
        "--grace",
        "10m",
        "--report",
        report.to_str().unwrap(),
        "--out",
        samples.to_str().unwrap(),
    ]);
    wait_for_sample(&samples, &mut load.0);
    let mut stderr = BufReader::new(load.0.stderr.take().unwrap());
    sigint(&load.0);
    let mut line = String::new();
    stderr.read_line(&mut line).unwrap();
    assert!(line.contains("load: interrupted;"), "{line}");
    sigint(&load.0);
    let (code, stdout, _) = finish(load);
    let mut rest = String::new();
    let _ = std::io::Read::read_to_string(&mut stderr, &mut rest);
    assert_eq!(code, Some(130), "{rest}");
    assert!(rest.contains("interrupted twice"), "{rest}");
    assert!(
        stdout.is_empty() && !report.exists(),
        "no summary, no report"
    );
}
