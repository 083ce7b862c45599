//! `load sweep` as a user runs it (the binary): rates stepped until one does not hold, the
//! highest that held reported, dropped arrivals counted, the page's latency-against-rate chart,
//! and the exit codes. Conversations are the research planner in process on a simulated model
//! whose every call takes 200 ms, so a conversation lasts at least two calls: with two in flight
//! at most, 20 arrivals in one second must drop most of them, whatever the machine's speed.

use serde_json::Value;
use std::path::PathBuf;
use std::process::Command;

fn scratch(name: &str) -> PathBuf {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("load-sweep-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn sweep(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(["load", "sweep", "--graph", "research"])
        .args([
            "--model",
            "sim:p50=200ms,p99=200ms,seed=1",
            "--max-in-flight",
            "2",
        ])
        .args(["--step-duration", "1s"])
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    eprintln!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    (out.status.code(), stdout)
}

#[test]
fn a_sweep_reports_the_highest_rate_that_held_and_counts_dropped_arrivals() {
    let dir = scratch("knee");
    let report = dir.join("sweep.json");
    let (code, text) = sweep(&[
        "--rates",
        "1,20,40",
        "--threshold",
        "failed<=0",
        "--report",
        report.to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "the first rate held");
    assert!(text.contains("highest rate that held: 1/s"), "{text}");
    let r: Value = serde_json::from_str(&std::fs::read_to_string(&report).unwrap()).unwrap();
    assert_eq!(r["highest_rate_held"], 1.0);
    let steps = r["steps"].as_array().unwrap();
    assert_eq!(
        steps.len(),
        2,
        "the sweep stops at the first rate that breaks"
    );
    assert_eq!(steps[0]["held"], true);
    assert_eq!(steps[0]["completed"], 1);
    let knee = &steps[1];
    assert_eq!(knee["held"], false);
    let (started, dropped) = (
        knee["started"].as_u64().unwrap(),
        knee["dropped"].as_u64().unwrap(),
    );
    assert_eq!(
        started + dropped,
        20,
        "every arrival started or was dropped"
    );
    assert!(
        dropped >= 10,
        "two at a time, each at least 400 ms: {dropped} dropped"
    );
    assert_eq!(
        knee["completed"].as_u64().unwrap(),
        started,
        "the step ended cleanly"
    );
    assert!(knee["broke"].as_str().unwrap().contains("dropped"));
    assert_eq!(r["dropped"], dropped);
    let html = std::fs::read_to_string(report.with_extension("html")).unwrap();
    assert!(html.contains("arrival rate, conversations per second") && html.contains("<svg"));
    assert!(!html.contains("<script"));
}

#[test]
fn a_sweep_whose_first_rate_breaks_exits_1_and_bad_flags_exit_2() {
    let (code, text) = sweep(&["--rates", "1,2", "--threshold", "conversation_p99<1us"]);
    assert_eq!(code, Some(1));
    assert!(text.contains("highest rate that held: none"), "{text}");
    assert_eq!(sweep(&["--rates", "2,1"]).0, Some(2), "rates must rise");
    assert_eq!(
        sweep(&["--rates", "1", "--rate", "3"]).0,
        Some(2),
        "the sweep sets the rate"
    );
}
