//! The studio in a real browser: headless Chromium (Debian's package, installed when missing)
//! driven over WebDriver against a real `serve` process. A person's path through every view:
//! the graphs with live node statistics, a research run that waits for plan approval, approved
//! from the page while the timeline fills and the brief appears, the checkpoints with their diffs,
//! the threads list and its filter, a fork, a field-planner question answered from the page, a
//! `load` report opened and charted, and a token asked for when the server needs one.
//! Assertions read the page's content; screenshots of each view are written under
//! `target/studio-screenshots/` (and, with `UPDATE_SCREENSHOTS=1`, into `docs/studio/`).

mod studio_support;

use serde_json::json;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;
use studio_support::{ensure_browser, free_port, Browser};

struct Server {
    child: Child,
    url: String,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

async fn serve(dir: &Path, extra: &[&str]) -> Server {
    let port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--checkpoint",
        ])
        .arg(format!("sqlite:{}", dir.join("serve.sqlite").display()))
        .args(extra)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("serve starts");
    let url = format!("http://127.0.0.1:{port}");
    let server = Server { child, url };
    for _ in 0..400 {
        if reqwest::get(format!("{}/studio", server.url)).await.is_ok() {
            return server;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("serve did not open {}", server.url);
}

/// Stores `n` research threads (`t-00000`, …) in the server's SQLite file: one real run to its
/// brief, then forks of it, each a thread of its own with a snapshot checkpoint.
async fn seed_threads(dir: &Path, n: usize) {
    use planwright_actors::research::{self, policy::OfflineResearchPolicy, GraphOptions};
    let cp =
        planwright::checkpoint::connect(&format!("sqlite:{}", dir.join("serve.sqlite").display()))
            .await
            .unwrap();
    let graph = research::graph(
        std::sync::Arc::new(OfflineResearchPolicy),
        GraphOptions::default(),
    )
    .unwrap();
    let engine = planwright::Engine::builder(graph)
        .checkpointer(cp.clone())
        .build()
        .await;
    let first = planwright::ThreadId::new("t-00000");
    let input: research::ResearchInput = serde_json::from_value(
        json!({"input": "Should our support team adopt retrieval-augmented generation?"}),
    )
    .unwrap();
    let out = engine
        .run(
            first.clone(),
            research::initial_update(input).unwrap(),
            planwright::RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(out.status, planwright::RunStatus::Finished);
    let head = engine
        .get_state(&first)
        .await
        .unwrap()
        .unwrap()
        .checkpoint
        .unwrap();
    let record = json!({"metadata": {"seeded": true}, "created_at": "Tue, 24 Nov 2026 12:00:00 GMT", "assistant_id": "research"});
    cp.set_thread_metadata(&first, record.clone())
        .await
        .unwrap();
    for i in 1..n {
        let t = planwright::ThreadId::new(format!("t-{i:05}"));
        engine.fork(&first, head, &t).await.unwrap();
        cp.set_thread_metadata(&t, record.clone()).await.unwrap();
    }
    // One long thread: 500 more supersteps written on the first one.
    for i in 0..500u32 {
        engine
            .update_state(
                &first,
                research::ResearchUpdate::default().replan_count(i + 1),
                "assess_progress",
            )
            .await
            .unwrap();
    }
}

fn shots_dir() -> PathBuf {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .expect("target/tmp has a parent")
        .join("studio-screenshots")
}

/// Copies the screenshots into docs/studio/ when asked to.
fn publish_screenshots() {
    if std::env::var_os("UPDATE_SCREENSHOTS").is_none() {
        return;
    }
    let docs = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/studio");
    std::fs::create_dir_all(&docs).unwrap();
    for e in std::fs::read_dir(shots_dir()).unwrap().flatten() {
        if e.file_name() != "failure.png" {
            std::fs::copy(e.path(), docs.join(e.file_name())).unwrap();
        }
    }
}

fn browser_or_skip() -> bool {
    match ensure_browser() {
        Ok(()) => true,
        Err(e) if std::env::var_os("CI").is_some() => panic!("CI is set and {e}"),
        Err(e) => {
            eprintln!("SKIPPED: {e}");
            false
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_person_watches_and_steers_both_planners_from_the_studio() {
    if !tokio::task::spawn_blocking(browser_or_skip).await.unwrap() {
        return;
    }
    let dir = scratch("studio");
    let server = serve(&dir, &[]).await;
    let b = Browser::start(&shots_dir()).await;
    let url = &server.url;

    // Graphs: both assistants drawn from their compiled graphs, with a statistics row per node.
    b.goto(&format!("{url}/studio#/graphs")).await;
    b.wait_css("#graph-research svg g.node[data-node='create_plan']", 20)
        .await;
    b.wait_css("#graph-acquire svg g.node[data-node='decide']", 20)
        .await;
    let graph: serde_json::Value = reqwest::get(format!("{url}/assistants/research/graph"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let research_nodes = graph["nodes"].as_array().unwrap().len();
    assert_eq!(
        b.count("#graph-research svg g.node").await,
        research_nodes,
        "every node of the compiled graph is drawn, __start__ and __end__ included"
    );
    assert_eq!(
        b.count("#nodes-research tbody tr").await,
        research_nodes - 2,
        "one statistics row per node"
    );
    assert!(b.count("#graph-research svg path.edge.conditional").await > 0);

    // A research run that asks for approval, started from the form.
    b.goto(&format!("{url}/studio#/new")).await;
    b.wait_css("#start-run", 10).await;
    b.type_into("#new-thread-id", "brief-studio").await;
    b.type_into(
        "#constraints",
        r#"{"max_steps": 4, "required_sections": ["cost", "risks"], "require_approval": true}"#,
    )
    .await;
    b.click("#start-run").await;
    b.wait_css("#interrupt-panel #approve", 30).await;
    assert!(
        b.count("#review-plan tbody tr").await >= 2,
        "the plan to review is shown"
    );
    assert_eq!(
        b.text("#thread-status-badge").await.as_deref(),
        Some("interrupted")
    );
    assert!(
        b.count("#timeline svg rect.bar-work").await > 0,
        "the nodes before the pause are on the timeline"
    );
    b.screenshot("thread-approval").await;

    // Approve from the page and watch the run go on to the brief.
    b.click("#approve").await;
    b.wait_for(
        "the brief",
        60,
        "const b = document.querySelector('#brief'); return b && document.querySelector('#thread-status-badge').textContent === 'idle' ? b.textContent : null;",
        json!([]),
    )
    .await;
    let brief = b.text("#brief").await.unwrap();
    assert!(
        brief.contains("Research brief"),
        "the brief is rendered: {brief}"
    );
    assert!(
        b.count("#brief h2, #brief h3").await > 0,
        "Markdown headings rendered"
    );
    let bars = b.count("#timeline svg rect.bar-work").await;
    assert!(
        bars >= 8,
        "the timeline holds every node execution seen: {bars}"
    );
    assert!(
        b.count("#timeline svg g.task[data-node='execute_step'], #timeline svg g.task[data-node='execute_steps']").await
            + b.count("#timeline svg g.task").await
            > 0
    );
    let events = b.text("#events-log").await.unwrap();
    assert!(events.contains("run_finished"), "events log: {events}");
    assert!(
        b.count("#plan-graph svg g.node[data-status='complete']")
            .await
            >= 1
    );
    assert!(
        b.count("#evidence tbody tr").await >= 1,
        "evidence with sources"
    );
    b.screenshot("thread-brief").await;

    // Checkpoints: pick an older one and see what its superstep changed.
    let rows = b.count("#checkpoints-table tbody tr").await;
    assert!(rows >= 5, "checkpoints listed: {rows}");
    b.click("#checkpoints-table tbody tr:nth-child(3) td:nth-child(2)")
        .await;
    b.wait_for(
        "the diff of the selected checkpoint",
        10,
        "const r = document.querySelector('#checkpoints-table tbody tr:nth-child(3)'); return r.classList.contains('selected') && document.querySelector('#diff').textContent.includes('checkpoint ' + r.dataset.checkpoint);",
        json!([]),
    )
    .await;
    assert!(
        b.count("#diff .add, #diff .chg, #diff .del").await > 0,
        "the diff shows changes"
    );
    b.screenshot("checkpoint-diff").await;

    // Fork the thread: a new thread with the same values.
    b.click("#fork-thread").await;
    let forked = b
        .wait_for(
            "the forked thread",
            10,
            "const h = decodeURIComponent(location.hash); return h.startsWith('#/thread/') && !h.endsWith('brief-studio') && document.querySelector('#brief') ? h.slice(9) : null;",
            json!([]),
        )
        .await;
    let forked = forked.as_str().unwrap().to_string();
    let copy: serde_json::Value = reqwest::get(format!("{url}/threads/{forked}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(copy["metadata"]["copied_from"]["thread_id"], "brief-studio");

    // Rerun from a past checkpoint (between supersteps): a copy there goes on to its own brief.
    b.goto(&format!("{url}/studio#/thread/brief-studio")).await;
    b.wait_css("#checkpoints-table", 10).await;
    let past = b
        .eval(
            "const r = [...document.querySelectorAll('#checkpoints-table tbody tr')].find((r) => r.children[2].textContent === 'select_next_step'); return r ? r.dataset.checkpoint : null;",
            json!([]),
        )
        .await;
    let past = past
        .as_str()
        .expect("a select_next_step checkpoint")
        .to_string();
    b.click(&format!("button[data-rerun='{past}']")).await;
    let rerun = b
        .wait_for(
            "the rerun thread's brief",
            60,
            "const h = decodeURIComponent(location.hash); const b = document.querySelector('#brief'); return h.startsWith('#/thread/') && !h.endsWith('brief-studio') && b && document.querySelector('#thread-status-badge').textContent === 'idle' ? h.slice(9) : null;",
            json!([]),
        )
        .await;
    let rerun = rerun.as_str().unwrap().to_string();
    let copy: serde_json::Value = reqwest::get(format!("{url}/threads/{rerun}"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(
        copy["metadata"]["copied_from"]["checkpoint_id"],
        past.as_str()
    );
    assert!(
        b.count("#timeline svg g.task[data-node='execute_step']")
            .await
            >= 2,
        "the rerun executed the plan's steps again"
    );

    // The threads list, filtered by status.
    b.goto(&format!("{url}/studio#/threads")).await;
    b.wait_css("#threads-table a[href='#/thread/brief-studio']", 10)
        .await;
    b.eval(
        "const s = document.querySelector('#thread-status'); s.value = 'interrupted'; s.dispatchEvent(new Event('change'));",
        json!([]),
    )
    .await;
    b.click("#threads-filter button[type='submit']").await;
    b.wait_for(
        "the filtered list",
        10,
        "return location.hash.includes('status=interrupted') && !document.querySelector(\"#threads-table a[href='#/thread/brief-studio']\");",
        json!([]),
    )
    .await;
    b.goto(&format!("{url}/studio#/threads")).await;
    b.wait_css("#threads-table a[href='#/thread/brief-studio']", 10)
        .await;
    b.screenshot("threads").await;

    // The field planner: its question answered from the page, the run going on.
    b.goto(&format!("{url}/studio#/new")).await;
    b.wait_css("#start-run", 10).await;
    b.eval(
        "const s = document.querySelector('#new-assistant'); s.value = 'acquire'; s.dispatchEvent(new Event('change'));",
        json!([]),
    )
    .await;
    b.type_into("#new-thread-id", "dental-studio").await;
    b.click("#start-run").await;
    b.wait_css("#interrupt-panel #answer-input", 30).await;
    let question = b.text("#question").await.unwrap();
    assert!(
        question.starts_with("region"),
        "the first question asks for the region: {question}"
    );
    b.type_into("#answer-input", "Germany").await;
    b.click("#answer-submit").await;
    b.wait_for(
        "the next question",
        30,
        "const q = document.querySelector('#question'); return q && !q.textContent.startsWith('region') && document.querySelector(\"#fields-table tr[data-field='region']\").textContent.includes('Germany');",
        json!([]),
    )
    .await;
    assert!(
        b.count("#decisions tbody tr").await >= 1,
        "decisions with their origin"
    );
    b.screenshot("field-question").await;

    // A load report, opened from a file.
    let report = dir.join("load.json");
    let status = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args([
            "load",
            "--conversations",
            "12",
            "--concurrency",
            "4",
            "--model",
            "offline",
            "--quiet",
            "--report",
        ])
        .arg(&report)
        .stdout(Stdio::null())
        .status()
        .unwrap();
    assert!(status.success(), "load wrote its report");
    b.goto(&format!("{url}/studio#/load")).await;
    b.wait_css("#load-file", 10).await;
    b.keys("#load-file", report.to_str().unwrap()).await;
    b.wait_css("#load-summary", 10).await;
    let summary = b.text("#load-summary").await.unwrap();
    assert!(
        summary.contains("conversations") && summary.contains("12"),
        "{summary}"
    );
    assert!(
        b.count("#load-charts figure svg").await >= 1,
        "charts drawn"
    );
    b.screenshot("load-report").await;

    // The graphs again: the node statistics now count the runs.
    b.goto(&format!("{url}/studio#/graphs")).await;
    b.wait_for(
        "node statistics",
        10,
        "const r = document.querySelector(\"#nodes-research tbody tr[data-node='create_plan']\"); return r && Number(r.children[2].textContent) >= 1;",
        json!([]),
    )
    .await;
    b.screenshot("graphs").await;
    publish_screenshots();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_studio_asks_for_the_token_when_the_server_needs_one() {
    if !tokio::task::spawn_blocking(browser_or_skip).await.unwrap() {
        return;
    }
    let dir = scratch("studio-token");
    let server = serve(&dir, &["--token", "s3cret"]).await;
    let b = Browser::start(&shots_dir()).await;
    let page = reqwest::get(format!("{}/studio", server.url))
        .await
        .unwrap();
    assert_eq!(
        page.status(),
        200,
        "the page itself holds no data and loads without a token"
    );
    let api = reqwest::get(format!("{}/assistants/research/graph", server.url))
        .await
        .unwrap();
    assert_eq!(api.status(), 401, "the API still needs the token");
    b.goto(&format!("{}/studio#/graphs", server.url)).await;
    b.wait_for(
        "the token dialog",
        10,
        "return document.querySelector('#token-dialog').open;",
        json!([]),
    )
    .await;
    b.type_into("#token-input", "s3cret").await;
    b.click("#token-ok").await;
    b.wait_css("#graph-research svg g.node[data-node='create_plan']", 20)
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ten_thousand_threads_and_a_500_superstep_history_are_paged_not_loaded() {
    if !tokio::task::spawn_blocking(browser_or_skip).await.unwrap() {
        return;
    }
    let dir = scratch("studio-many");
    seed_threads(&dir, 10_000).await;
    let server = serve(&dir, &[]).await;
    let b = Browser::start(&shots_dir()).await;
    b.goto(&format!("{}/studio#/threads", server.url)).await;
    b.wait_css("#threads-table a[href='#/thread/t-00000']", 20)
        .await;
    assert_eq!(
        b.count("#threads-table tbody tr").await,
        25,
        "one page, not 10,000 rows"
    );
    b.click("#threads-next").await;
    b.wait_css("#threads-table a[href='#/thread/t-00025']", 10)
        .await;
    assert_eq!(
        b.text("#threads-info").await.as_deref(),
        Some("threads 26–50")
    );
    b.goto(&format!("{}/studio#/threads?offset=9975", server.url))
        .await;
    b.wait_css("#threads-table a[href='#/thread/t-09999']", 20)
        .await;
    assert_eq!(b.count("#threads-table tbody tr").await, 25);
    assert!(
        b.eval(
            "return document.querySelector('#threads-next').disabled",
            json!([])
        )
        .await
            == json!(true)
    );
    // The thread with 500 more supersteps: 20 checkpoints a page, older pages on demand, the diff
    // of each superstep.
    b.goto(&format!("{}/studio#/thread/t-00000", server.url))
        .await;
    b.wait_css("#checkpoints-table", 20).await;
    assert_eq!(b.count("#checkpoints-table tbody tr").await, 20);
    let newest = b
        .text("#checkpoints-table tbody tr td:nth-child(2)")
        .await
        .unwrap();
    assert!(
        newest.trim().parse::<u64>().unwrap() >= 500,
        "newest checkpoint {newest}"
    );
    // The newest checkpoint is the 500th edit (a server continues only runs it has records of;
    // these supersteps were written by an engine directly).
    b.click("#checkpoints-table tbody tr:nth-child(1) td:nth-child(2)")
        .await;
    b.wait_for(
        "the diff of the last update",
        10,
        "return document.querySelector('#diff').textContent.includes('replan_count: 499 → 500');",
        json!([]),
    )
    .await;
    for page in 1..=3u64 {
        b.click("#history-older").await;
        b.wait_for(
            "the next older page",
            10,
            "const r = document.querySelector('#checkpoints-table tbody tr td:nth-child(2)'); return r && Number(r.textContent) === Number(arguments[0]) - 20 * arguments[1];",
            json!([newest.trim(), page]),
        )
        .await;
    }
    b.wait_for(
        "the fourth page",
        10,
        "const r = document.querySelector('#checkpoints-table tbody tr td:nth-child(2)'); return r && Number(r.textContent) === Number(arguments[0]) - 60;",
        json!([newest.trim()]),
    )
    .await;
    assert_eq!(b.count("#checkpoints-table tbody tr").await, 20);
    b.goto(&format!("{}/studio#/threads", server.url)).await;
    b.wait_css("#thread-prefix", 10).await;
    b.type_into("#thread-prefix", "t-0420").await;
    b.click("#threads-filter button[type='submit']").await;
    b.wait_for(
        "the prefix filter",
        10,
        "const rows = document.querySelectorAll('#threads-table tbody tr'); return rows.length === 10 && rows[0].textContent.startsWith('t-04200');",
        json!([]),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_cancelled_from_the_page_and_then_continued() {
    if !tokio::task::spawn_blocking(browser_or_skip).await.unwrap() {
        return;
    }
    let dir = scratch("studio-cancel");
    // A slow simulated model (two calls of ~1.5 s), so the run is still going when the person
    // cancels it, even on a loaded machine.
    let server = serve(&dir, &["--model", "sim:p50=1500ms,p99=2500ms,seed=3"]).await;
    let url = &server.url;
    let b = Browser::start(&shots_dir()).await;
    b.goto(&format!("{url}/studio#/new")).await;
    b.wait_css("#start-run", 10).await;
    b.type_into("#new-thread-id", "slow-1").await;
    b.type_into("#constraints", r#"{"max_steps": 4}"#).await;
    b.click("#start-run").await;
    b.wait_for(
        "the run to be under way",
        30,
        "const c = document.querySelector('#cancel-run'); return c && !c.disabled && document.querySelectorAll('#timeline rect.bar-work').length > 0;",
        json!([]),
    )
    .await;
    b.click("#cancel-run").await;
    b.wait_for(
        "the cancelled run's end",
        30,
        "return document.querySelector('#events-log').textContent.includes('run_finished') && document.querySelector('#thread-status-badge').textContent !== 'busy';",
        json!([]),
    )
    .await;
    let log = b.text("#events-log").await.unwrap();
    assert!(log.contains("cancelled"), "the run ended cancelled: {log}");
    let runs: serde_json::Value = reqwest::get(format!("{url}/threads/slow-1/runs"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(runs[0]["status"], "interrupted", "{runs}");
    assert!(
        b.text("#brief-empty").await.is_some(),
        "no brief after the cancel"
    );
    // The thread stays usable: continue it from its newest checkpoint to the brief.
    b.wait_for(
        "Continue enabled",
        10,
        "const c = document.querySelector('#continue-run'); return c && !c.disabled;",
        json!([]),
    )
    .await;
    b.screenshot("thread-cancelled").await;
    b.click("#continue-run").await;
    b.wait_for(
        "the continued run's brief",
        90,
        "return document.querySelector('#brief') && document.querySelector('#thread-status-badge').textContent === 'idle';",
        json!([]),
    )
    .await;
    let runs: serde_json::Value = reqwest::get(format!("{url}/threads/slow-1/runs"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(runs.as_array().unwrap().len(), 2, "{runs}");
    assert_eq!(runs[0]["status"], "success", "{runs}");
}
