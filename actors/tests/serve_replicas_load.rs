//! Three `serve` replicas on one PostgreSQL database take 1,000 research conversations from
//! `load --target A --target B --target C`; one replica is SIGKILLed in the middle and another
//! later. Every conversation finishes, none is lost, no plan step is recorded twice, every
//! thread's stored chain is linear, and no model call is made again: the simulator logs every
//! answered call (process, kind, request digest — each conversation has a goal of its own, so
//! requests differ between conversations — and the call's idempotency key), each call is a
//! journaled effect of its task (`model::journaled`), and each key is answered once, whichever
//! replica asked and whichever took its run over — but for a call whose replica was killed
//! between the answer and its journal row, which the takeover asks again under the same key
//! (counted; a tool honouring `Idempotency-Key` applies it once).

#[path = "../../tests/support/backends.rs"]
mod backends;
mod serve_support;

use planwright_actors::load::{self, LoadArgs};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// The sum of the samples of metric family `name` on replica `base` (its `/metrics`).
async fn metric(base: &str, name: &str) -> u64 {
    serve_support::metrics(base)
        .await
        .lines()
        .filter(|l| l.starts_with(name) && l[name.len()..].starts_with([' ', '{']))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

/// Runs that ended on replica `base`.
async fn finished_runs(base: &str) -> u64 {
    metric(base, "planwright_runs_total").await
}

const TAKEN_OVER: &str = "planwright_replica_runs_taken_over_total";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_conversations_survive_two_killed_replicas() {
    if backends::postgres().await.is_none() {
        return;
    }
    let dir = serve_support::fresh_dir("replicas-load");
    let calls = dir.join("calls.log");
    let goals = dir.join("goals.json");
    let distinct: Vec<String> = (0..1000)
        .map(|i| format!("Should support team {i} adopt retrieval-augmented generation for customer support?"))
        .collect();
    std::fs::write(&goals, serde_json::to_string(&distinct).unwrap()).unwrap();
    let (mut a, a_url) = serve(&calls).await;
    let (mut b, b_url) = serve(&calls).await;
    let (_c, c_url) = serve(&calls).await;
    let killed = [a.pid(), b.pid()];
    let prefix = format!("rl{}", backends::unique());
    let args = LoadArgs {
        target: vec![a_url.clone(), b_url.clone(), c_url.clone()],
        graph: Some("research".into()),
        goals: Some(goals.clone()),
        conversations: Some(1000),
        concurrency: Some(24),
        thread_prefix: Some(prefix.clone()),
        quiet: true,
        ..LoadArgs::default()
    };
    let driver = tokio::spawn(async move { load::run(&args).await });
    // Kill one replica once about a third of the conversations have ended, another at about two
    // thirds (C's own count of finished runs is a third of the total while all three serve).
    let mut taken_over = 0;
    for (server, url, ended_on_c) in [(&mut a, &a_url, 110), (&mut b, &b_url, 260)] {
        let started = Instant::now();
        while finished_runs(&c_url).await < ended_on_c {
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "the load made no progress"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        taken_over += metric(url, TAKEN_OVER).await;
        server.kill();
    }
    let report = driver.await.unwrap().unwrap();
    let text = report.to_text();
    taken_over += metric(&c_url, TAKEN_OVER).await;
    assert_no_finished_step_called_twice(&calls, &killed, taken_over);
    assert_each_key_called_once(&calls, &killed, taken_over);
    assert_eq!(report.completed, 1000, "{:?}\n{text}", report.errors);
    assert_eq!(
        report.failed + report.cut_off + report.interrupted_left,
        0,
        "{text}"
    );
    assert!(
        report.failovers > 0,
        "conversations moved off the killed replicas\n{text}"
    );

    // Every thread straight from the database: one per conversation, each chain linear.
    let cp = backends::postgres().await.unwrap();
    let all = cp.list_threads(&prefix, 2000, 0).await.unwrap();
    assert_eq!(
        all.len(),
        1000,
        "one thread per conversation, none lost or doubled"
    );
    for t in &all {
        let chain = cp.list(&t.thread_id, None, 10_000).await.unwrap();
        for pair in chain.windows(2) {
            assert_eq!(
                pair[0].1,
                Some(pair[1].0),
                "{}: the stored chain is not linear",
                t.thread_id
            );
        }
        let state = reqwest::get(format!("{c_url}/threads/{}/state", t.thread_id))
            .await
            .unwrap()
            .json::<Value>()
            .await
            .unwrap();
        assert_eq!(state["next"], json!([]), "{}: {state}", t.thread_id);
        let status = state["values"]["status"].as_str().unwrap_or_default();
        assert!(
            matches!(status, "ok" | "needs_review"),
            "{}: {state}",
            t.thread_id
        );
        let mut steps: Vec<&str> = state["values"]["execution_history"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|e| e["event"] == "step_executed")
            .filter_map(|e| e["step_id"].as_str())
            .collect();
        let n = steps.len();
        steps.sort_unstable();
        steps.dedup();
        assert_eq!(
            steps.len(),
            n,
            "{}: a plan step was recorded twice",
            t.thread_id
        );
    }
}

/// From the simulator's call log: no replica answered a request twice; a request answered
/// twice was answered once in a killed replica (a step in flight when its replica died, run
/// again by the replica that took the run over); and there are at most as many of those as the
/// runs taken over could have had steps in flight (4 in parallel, the planner's default).
fn assert_no_finished_step_called_twice(log: &std::path::Path, killed: &[u32], taken_over: u64) {
    let text = std::fs::read_to_string(log).unwrap();
    let mut by_request: std::collections::HashMap<(&str, &str), Vec<u32>> = Default::default();
    for line in text.lines() {
        let mut f = line.split('\t');
        let (Some(pid), Some(kind), Some(digest), Some(_key)) =
            (f.next(), f.next(), f.next(), f.next())
        else {
            panic!("a malformed call log line: {line:?}");
        };
        by_request
            .entry((kind, digest))
            .or_default()
            .push(pid.parse().unwrap());
    }
    assert!(
        by_request.len() > 1000,
        "every conversation called the model"
    );
    let mut repeated = 0;
    for (request, pids) in &by_request {
        let mut once = pids.clone();
        once.sort_unstable();
        once.dedup();
        assert_eq!(
            once.len(),
            pids.len(),
            "{request:?} answered twice by one replica"
        );
        if pids.len() > 1 {
            repeated += 1;
            assert!(
                pids.iter().any(|p| killed.contains(p)),
                "{request:?} answered twice, by replicas that were not killed: {pids:?}"
            );
        }
    }
    assert!(
        repeated <= taken_over * 4,
        "{repeated} requests answered again, for {taken_over} runs taken over"
    );
}

/// From the simulator's call log: every call carried an idempotency key (it was journaled), and
/// a key was answered again only where the journal cannot help: its earlier answer came from a
/// replica that was killed before the answer's journal row committed (the call's own window), and
/// the replica that took the run over asked again under the same key — never one replica twice,
/// never after the answer was journaled. Such keys are counted (a tool that honours
/// `Idempotency-Key` applies them once) and bounded by the steps the runs taken over could have
/// had in flight.
fn assert_each_key_called_once(log: &std::path::Path, killed: &[u32], taken_over: u64) {
    let text = std::fs::read_to_string(log).unwrap();
    let mut by_key: std::collections::HashMap<&str, Vec<u32>> = Default::default();
    for line in text.lines() {
        let f: Vec<&str> = line.split('\t').collect();
        let [pid, _, _, key] = f[..] else {
            panic!("a malformed call log line: {line:?}");
        };
        assert_ne!(key, "-", "a model call made outside the journal: {line:?}");
        let pid: u32 = pid.parse().expect("a pid");
        by_key.entry(key).or_default().push(pid);
    }
    let again: Vec<_> = by_key.iter().filter(|(_, pids)| pids.len() > 1).collect();
    println!(
        "{} model calls, {} keys, {} keys answered again (each first in a killed replica), {taken_over} runs taken over",
        text.lines().count(),
        by_key.len(),
        again.len()
    );
    for (key, pids) in &again {
        let (last, earlier) = pids.split_last().expect("answered twice");
        assert!(
            earlier.iter().all(|p| killed.contains(p) && p != last),
            "key {key} answered again, not after a kill: {pids:?}"
        );
    }
    assert!(
        again.len() as u64 <= taken_over * 4,
        "{} keys answered again, for {taken_over} runs taken over",
        again.len()
    );
}

/// A replica on the test database (leases of 2 s, a fast simulated model logging its calls to
/// `calls`).
async fn serve(calls: &std::path::Path) -> (serve_support::Server, String) {
    serve_support::serve_on(
        &backends::pg_url(),
        &format!("sim:p50=5ms,p99=20ms,seed=9,calls={}", calls.display()),
        &["--lease-ttl", "2s"],
    )
    .await
}
