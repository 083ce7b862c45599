//! `load` end to end, in-process: every conversation accounted for, interrupts answered under
//! load, the report's JSON keys and its HTML page; bad arguments are clear errors.

use planwright_actors::load::{self, LoadArgs, LoadError};
use std::path::PathBuf;

fn args(graph: &str, n: usize) -> LoadArgs {
    LoadArgs {
        graph: Some(graph.into()),
        conversations: Some(n),
        concurrency: Some(16),
        model: Some("sim:p50=1ms,p99=5ms,seed=2".into()),
        quiet: true,
        ..LoadArgs::default()
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn research_conversations_all_finish_with_interrupts_answered() {
    let dir = std::env::temp_dir().join(format!("planwright-load-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let report_path: PathBuf = dir.join("report.json");
    let mut a = args("research", 60);
    a.checkpoint = Some(format!("sqlite:{}", dir.join("load.sqlite").display()));
    a.report = Some(report_path.clone());
    let report = load::run(&a).await.unwrap();
    assert_eq!(
        report.completed + report.failed + report.interrupted_left,
        60,
        "none lost"
    );
    assert_eq!(report.failed, 0, "{:?}", report.errors);
    // Every fifth conversation asks for approval (a replanned plan is reviewed again).
    assert!(
        report.resumes >= 10,
        "{} interrupts answered",
        report.resumes
    );
    assert_eq!(report.interrupted_left, 0);
    assert!(report.checkpoint_records > 0);
    // Each resume found its paused state kept in the engine (a load run's threads are new, so
    // their starts look nothing up).
    let loads = report
        .thread_loads
        .expect("an in-process run counts its loads");
    assert_eq!(loads.from_memory, report.resumes as u64, "{loads:?}");
    assert_eq!(loads.from_storage, 0, "{loads:?}");
    assert!(report.to_text().contains("thread loads: "));
    assert!(report.nodes.contains_key("create_plan"));
    let calls: u64 = report.model.iter().map(|m| m.calls).sum();
    assert!(calls >= 60, "{calls} model calls");

    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    for key in [
        "conversations",
        "completed",
        "failed",
        "node_execs_per_sec",
        "overhead_us_per_node",
        "peak_rss_kb",
        "thread_loads",
        "nodes",
    ] {
        assert!(json.get(key).is_some(), "report lacks `{key}`");
    }
    for key in ["p50_ms", "p99_ms", "queue_p99_ms"] {
        assert!(
            json["nodes"]["create_plan"].get(key).is_some(),
            "node figures lack `{key}`"
        );
    }
    let html = std::fs::read_to_string(report_path.with_extension("html")).unwrap();
    assert!(
        html.starts_with("<!doctype html>") && html.contains("<svg") && !html.contains("<script")
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_loop_graph_runs_without_a_model() {
    let report = load::run(&args("loop", 40)).await.unwrap();
    assert_eq!(report.completed, 40);
    assert_eq!(report.node_executions, 40 * 110);
}

#[tokio::test]
async fn bad_arguments_are_named() {
    for (a, needle) in [
        (args("chess", 1), "unknown graph `chess`"),
        (
            LoadArgs {
                model: Some("gpt".into()),
                ..args("research", 1)
            },
            "unknown model `gpt`",
        ),
        (
            LoadArgs {
                conversations: Some(0),
                ..args("research", 1)
            },
            "at least 1",
        ),
        (
            LoadArgs {
                target: vec!["http://x".into()],
                ..args("loop", 1)
            },
            "--target",
        ),
    ] {
        let err: LoadError = load::run(&a).await.unwrap_err();
        assert!(err.to_string().contains(needle), "{err}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_drives_a_serve_instance_over_http() {
    use planwright_actors::serve::{router, state, ServeArgs};
    let dir = std::env::temp_dir().join(format!("planwright-load-target-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let st = state(&ServeArgs {
        addr: "127.0.0.1:0".into(),
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
        token: Some("t0k".into()),
        model: "sim:p50=1ms,p99=3ms".into(),
        ..ServeArgs::default()
    })
    .await
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(st)).await;
    });
    let mut a = args("research", 30);
    a.target = vec![format!("http://{addr}")];
    a.token = Some("t0k".into());
    let report = load::run(&a).await.unwrap();
    assert_eq!(report.completed, 30, "{:?}", report.errors);
    assert!(
        report.resumes >= 6,
        "every fifth conversation was approved over HTTP"
    );
    assert!(
        report.node_executions > 30 * 5,
        "read from the server's /metrics"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn acquire_conversations_all_finish_with_every_question_answered_under_load() {
    use planwright::{Engine, ThreadId};
    use planwright_actors::field::{self, FieldState};
    let dir = std::env::temp_dir().join(format!(
        "planwright-load-acquire-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let url = format!("sqlite:{}", dir.join("load.sqlite").display());
    let mut a = args("acquire", 30);
    a.checkpoint = Some(url.clone());
    let report = load::run(&a).await.unwrap();
    assert_eq!(report.graph, "acquire");
    assert_eq!(report.completed, 30, "{:?}", report.errors);
    assert_eq!(report.failed, 0, "{:?}", report.errors);
    assert_eq!(report.interrupted_left, 0);
    // Ten conversations per scenario: dental asks region, currency and obtainable_share; coffee
    // region and currency; bikes region, currency and lease_price (not in its corpus).
    assert_eq!(report.resumes, 10 * (3 + 2 + 3), "{}", report.to_text());
    let node = |n: &str| report.nodes.get(n).map_or(0, |f| f.executions);
    assert_eq!(
        node("ask_user") as usize,
        report.resumes * 2,
        "paused, then re-run on resume"
    );
    assert_eq!(node("observe_user") as usize, report.resumes);
    assert_eq!(node("finish"), 30);
    assert!(report.checkpoint_records > 0);
    let calls: u64 = report.model.iter().map(|m| m.calls).sum();
    assert!(calls >= 30, "{calls} model calls");

    // Every stored conversation ended `ok` with its targets calculated; dental conversations
    // answered the obtainable share from the fixture (5%) or, every other round, plausibly (0.1).
    let cp = planwright::checkpoint::connect(&url).await.unwrap();
    let graph = field::graph(
        std::sync::Arc::new(field::OfflineFieldPolicy),
        &field::GraphOptions::default(),
    )
    .unwrap();
    let engine: Engine<FieldState> = Engine::builder(graph)
        .checkpointer(cp.clone())
        .build()
        .await;
    let threads = cp.list_threads("load-acquire-", 100, 0).await.unwrap();
    assert_eq!(threads.len(), 30);
    let mut shares = std::collections::BTreeMap::<String, usize>::new();
    for t in threads {
        let st = engine
            .get_state(&ThreadId::new(t.thread_id.as_str()))
            .await
            .unwrap()
            .unwrap();
        let out = field::output::output_json(&st.values, None);
        assert_eq!(out["status"], "ok", "{}: {out}", t.thread_id);
        let targets = out["targets"].as_object().unwrap();
        assert!(
            !targets.is_empty() && targets.values().all(|v| v.as_f64().is_some()),
            "{out}"
        );
        if let Some(share) = out["fields"].get("obtainable_share") {
            *shares.entry(share["value"].to_string()).or_default() += 1;
        }
    }
    assert_eq!(
        shares,
        [("0.05".to_string(), 5), ("0.1".to_string(), 5)].into(),
        "dental conversations at i % 6 == 0 and 3"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_drives_acquire_conversations_on_a_serve_instance() {
    use planwright_actors::serve::{router, state, ServeArgs};
    let dir = std::env::temp_dir().join(format!(
        "planwright-load-acquire-target-{}",
        std::process::id()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let st = state(&ServeArgs {
        addr: "127.0.0.1:0".into(),
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
        token: None,
        model: "sim:p50=1ms,p99=3ms".into(),
        ..ServeArgs::default()
    })
    .await
    .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move {
        let _ = axum::serve(listener, router(st)).await;
    });
    let mut a = args("acquire", 12);
    a.target = vec![format!("http://{addr}")];
    let report = load::run(&a).await.unwrap();
    assert_eq!(report.completed, 12, "{:?}", report.errors);
    assert_eq!(
        report.resumes,
        4 * (3 + 2 + 3),
        "every question answered over HTTP"
    );
    assert!(
        report.node_executions > 12 * 20,
        "read from the server's /metrics"
    );
}

#[test]
fn a_malformed_checkpoint_url_is_bad_input_exit_2() {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args([
            "load",
            "--graph",
            "loop",
            "--conversations",
            "1",
            "--quiet",
            "--checkpoint",
            "mysql://x",
        ])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
