//! One writer per thread across processes: two processes race to extend the same thread on a
//! shared database. The conditional write in the database lets exactly one extend each parent, so
//! the chain never forks. Run for PostgreSQL and for a shared SQLite file.
//!
//! The racing processes are this test binary, re-executed with `--exact child_writer_entry`. Each
//! first appends freely, then runs rounds in lockstep: both read the head, wait until the other has
//! read it too, then both write on it, so every lockstep round is a real race whatever the machine's
//! scheduling, and exactly one of the two writes must lose.

#[path = "support/backends.rs"]
mod backends;
#[path = "support/checkpoint_suite.rs"]
#[allow(dead_code)]
mod checkpoint_suite;

use planwright::checkpoint::{connect, BodyKind, CheckpointError};
use planwright::ThreadId;
use std::process::{Command, Stdio};

const APPENDS: u64 = 200;
/// Rounds in which both processes are made to write on the same head.
const LOCKSTEP: u64 = 30;

/// Waits until `path` exists (the other process's step of the lockstep barrier).
fn wait_for(path: &std::path::Path) {
    while !path.exists() {
        std::thread::sleep(std::time::Duration::from_millis(1));
    }
}

/// The racing process's body; a no-op unless the race test started this process. It tries to
/// append `APPENDS` checkpoints (reading the head, writing head + 1 on it) and prints
/// `won <n> lost <m>`.
#[test]
fn child_writer_entry() {
    let (Ok(url), Ok(thread)) = (
        std::env::var("PW_RACE_URL"),
        std::env::var("PW_RACE_THREAD"),
    ) else {
        return;
    };
    // Start together: wait for the parent's go file.
    if let Ok(go) = std::env::var("PW_RACE_GO") {
        while !std::path::Path::new(&go).exists() {
            std::thread::sleep(std::time::Duration::from_millis(1));
        }
    }
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    let (won, lost) = rt.block_on(async {
        let cp = connect(&url).await.expect("checkpointer");
        let t = ThreadId::new(thread);
        let (mut won, mut lost) = (0u64, 0u64);
        for _ in 0..APPENDS {
            let head = cp.head(&t).await.expect("head").map(|h| h.0);
            let id = head.map_or(1, |h| h + 1);
            let kind = if head.is_none() {
                BodyKind::Snapshot
            } else {
                BodyKind::Delta
            };
            let body = format!("{{\"pid\":{}}}", std::process::id());
            match cp
                .put(checkpoint_suite::rec(&t, id, head, kind, &body))
                .await
            {
                Ok(()) => won += 1,
                Err(CheckpointError::Conflict { .. }) => lost += 1,
                Err(e) => panic!("unexpected error: {e}"),
            }
        }
        if let (Ok(dir), Ok(me)) = (
            std::env::var("PW_RACE_BARRIER"),
            std::env::var("PW_RACE_INDEX"),
        ) {
            let other = if me == "0" { "1" } else { "0" };
            let dir = std::path::Path::new(&dir);
            for round in 0..LOCKSTEP {
                let head = cp.head(&t).await.expect("head").map(|h| h.0);
                std::fs::write(dir.join(format!("{me}-{round}")), b"").expect("barrier");
                wait_for(&dir.join(format!("{other}-{round}")));
                let id = head.map_or(1, |h| h + 1);
                let body = format!("{{\"pid\":{}}}", std::process::id());
                match cp
                    .put(checkpoint_suite::rec(&t, id, head, BodyKind::Delta, &body))
                    .await
                {
                    Ok(()) => won += 1,
                    Err(CheckpointError::Conflict { .. }) => lost += 1,
                    Err(e) => panic!("unexpected error: {e}"),
                }
                // Both must have written before either reads the next round's head.
                std::fs::write(dir.join(format!("{me}-{round}-w")), b"").expect("barrier");
                wait_for(&dir.join(format!("{other}-{round}-w")));
            }
        }
        (won, lost)
    });
    println!("\nrace-result won {won} lost {lost}");
}

async fn race(url: &str) {
    let thread = format!("race-{}", backends::unique());
    let me = std::env::current_exe().expect("test binary");
    // Open once first so both children find the schema migrated.
    let cp = connect(url).await.expect("checkpointer");
    let go = backends::sqlite_path("race-go").with_extension("go");
    let barrier = backends::sqlite_path("race-barrier").with_extension("d");
    std::fs::create_dir_all(&barrier).expect("barrier dir");
    let children: Vec<_> = (0..2)
        .map(|index| {
            Command::new(&me)
                .args([
                    "--exact",
                    "child_writer_entry",
                    "--nocapture",
                    "--test-threads=1",
                ])
                .env("PW_RACE_URL", url)
                .env("PW_RACE_THREAD", &thread)
                .env("PW_RACE_GO", &go)
                .env("PW_RACE_BARRIER", &barrier)
                .env("PW_RACE_INDEX", index.to_string())
                .stdout(Stdio::piped())
                .stderr(Stdio::null())
                .spawn()
                .expect("child starts")
        })
        .collect();
    std::fs::write(&go, b"go").expect("go file");
    let mut won_total = 0;
    let mut lost_total = 0;
    for child in children {
        let out = child.wait_with_output().expect("child ends");
        assert!(out.status.success(), "child failed: {}", out.status);
        let text = String::from_utf8_lossy(&out.stdout);
        let line = text
            .lines()
            .find(|l| l.starts_with("race-result "))
            .unwrap_or_else(|| panic!("child did not report: {text}"));
        let nums: Vec<u64> = line.split(' ').filter_map(|w| w.parse().ok()).collect();
        won_total += nums[0];
        lost_total += nums[1];
    }
    let t = ThreadId::new(thread);
    let chain = cp.list(&t, None, 10_000).await.expect("list");
    assert_eq!(
        chain.len() as u64,
        won_total,
        "every win stored, no loss stored"
    );
    for (id, parent, _) in &chain {
        assert_eq!(
            parent.map(|p| p.0),
            id.0.checked_sub(1).filter(|p| *p > 0),
            "linear chain"
        );
    }
    assert_eq!(won_total + lost_total, 2 * (APPENDS + LOCKSTEP));
    assert!(
        lost_total >= LOCKSTEP,
        "every lockstep round is a race one write loses ({lost_total} lost)"
    );
    println!("{url}: {won_total} checkpoints written, {lost_total} conflicting writes refused");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_never_fork_a_postgres_thread() {
    if backends::postgres().await.is_none() {
        return;
    }
    race(&backends::pg_url()).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_processes_never_fork_a_sqlite_thread() {
    let path = backends::sqlite_path("race");
    race(&format!("sqlite:{}", path.display())).await;
}
