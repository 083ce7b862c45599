//! Three `serve` replicas on one PostgreSQL database take 1,000 research conversations from
//! `load --target A --target B --target C`; one replica is SIGKILLed in the middle and another
//! later. Every conversation finishes, none is lost, no plan step is recorded twice, and every
//! thread's stored chain is linear.

#[path = "../../tests/support/backends.rs"]
mod backends;
mod serve_support;

use planwright_actors::load::{self, LoadArgs};
use serde_json::{json, Value};
use std::time::{Duration, Instant};

/// Runs that ended on replica `base` (its `/metrics`).
async fn finished_runs(base: &str) -> u64 {
    let page = reqwest::get(format!("{base}/metrics"))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    page.lines()
        .filter(|l| l.starts_with("planwright_runs_total{"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thousand_conversations_survive_two_killed_replicas() {
    if backends::postgres().await.is_none() {
        return;
    }
    let (mut a, a_url) = serve().await;
    let (mut b, b_url) = serve().await;
    let (_c, c_url) = serve().await;
    let prefix = format!("rl{}", backends::unique());
    let args = LoadArgs {
        target: vec![a_url.clone(), b_url.clone(), c_url.clone()],
        graph: Some("research".into()),
        conversations: Some(1000),
        concurrency: Some(24),
        thread_prefix: Some(prefix.clone()),
        quiet: true,
        ..LoadArgs::default()
    };
    let driver = tokio::spawn(async move { load::run(&args).await });
    // Kill one replica once about a third of the conversations have ended, another at about two
    // thirds (C's own count of finished runs is a third of the total while all three serve).
    for (server, ended_on_c) in [(&mut a, 110), (&mut b, 260)] {
        let started = Instant::now();
        while finished_runs(&c_url).await < ended_on_c {
            assert!(
                started.elapsed() < Duration::from_secs(600),
                "the load made no progress"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        server.kill();
    }
    let report = driver.await.unwrap().unwrap();
    let text = report.to_text();
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

/// A replica on the test database (leases of 2 s, a fast simulated model).
async fn serve() -> (serve_support::Server, String) {
    serve_support::serve_on(
        &backends::pg_url(),
        "sim:p50=5ms,p99=20ms,seed=9",
        &["--lease-ttl", "2s"],
    )
    .await
}
