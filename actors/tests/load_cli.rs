//! `load` as a user runs it: against a real `serve` process (an arrival-rate scenario with a mix,
//! the server's memory and CPU sampled, samples streamed to `--out`), the exit codes thresholds
//! give, and `load compare`.

use planwright_actors::load::{self, LoadArgs};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "planwright-load-cli-{name}-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn serve(dir: &Path, model: &str) -> (Server, String) {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let server = Server(
        Command::new(env!("CARGO_BIN_EXE_planwright"))
            .args([
                "serve",
                "--addr",
                &format!("127.0.0.1:{port}"),
                "--checkpoint",
                &format!("sqlite:{}", dir.join("serve.sqlite").display()),
                "--model",
                model,
            ])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    for _ in 0..300 {
        if reqwest::get(format!("{base}/ok")).await.is_ok() {
            return (server, base);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("serve did not come up");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_arrival_rate_against_a_serve_process() {
    let dir = scratch("serve");
    let (server, base) = serve(&dir, "sim:p50=2ms,p99=10ms").await;
    let report_path = dir.join("report.json");
    let out = dir.join("samples.jsonl");
    let args = LoadArgs {
        target: vec![base],
        server_pid: Some(server.0.id()),
        mix: Some("research=70,acquire=30".into()),
        rate: Some(5.0),
        duration: Some("4s".into()),
        think: Some("p50=50ms,p99=200ms".into()),
        thresholds: vec!["failed<0.1%".into(), "conversation_p99<30s".into()],
        report: Some(report_path.clone()),
        out: Some(out.clone()),
        quiet: true,
        ..LoadArgs::default()
    };
    let r = load::run(&args).await.unwrap();
    assert_eq!(r.started, 20);
    assert_eq!(r.completed, 20, "{:?}", r.errors);
    assert!(r.graph.contains("research @") && r.graph.contains("acquire @"));
    assert_eq!(
        r.graphs.len(),
        2,
        "outcomes and latency per entry of the mix"
    );
    assert_eq!(r.graphs.values().map(|g| g.completed).sum::<usize>(), 20);
    assert!(
        r.resumes >= 6 + 4,
        "approvals and acquire questions answered over HTTP"
    );
    assert!(r.people.answers == r.resumes);
    assert!(r.node_executions > 20 * 5, "from the server's /metrics");
    assert!(r.thresholds_passed(), "{:?}", r.thresholds);
    assert!(r.series.len() >= 4);
    assert!(
        r.series
            .iter()
            .all(|s| s.server_rss_kb.is_some_and(|k| k > 0)),
        "the server's memory sampled every second"
    );
    assert!(r.series.iter().map(|s| s.node_execs_per_sec).sum::<f64>() > 0.0);
    let lines: Vec<serde_json::Value> = std::fs::read_to_string(&out)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(lines.len(), r.series.len());
    assert!(lines.iter().all(|l| l["t_s"].is_number()));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&report_path).unwrap()).unwrap();
    assert_eq!(json["series"].as_array().unwrap().len(), r.series.len());
    assert_eq!(json["thresholds"][0]["threshold"], "failed<0.1%");
    let html = std::fs::read_to_string(report_path.with_extension("html")).unwrap();
    assert!(html.contains("server RSS") && !html.contains("<script"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn abandoned_conversations_cancel_their_runs_on_the_server() {
    let dir = scratch("abandon");
    // Every model call takes a second; every person leaves after 300 ms.
    let (_server, base) = serve(&dir, "sim:p50=1s,p99=1s").await;
    let args = LoadArgs {
        target: vec![base.clone()],
        graph: Some("research".into()),
        conversations: Some(4),
        concurrency: Some(4),
        abandon: Some(1.0),
        abandon_after: Some("p50=300ms,p99=300ms".into()),
        quiet: true,
        ..LoadArgs::default()
    };
    let r = load::run(&args).await.unwrap();
    assert_eq!(
        (r.abandoned, r.completed, r.failed),
        (4, 0, 0),
        "{:?}",
        r.errors
    );
    assert_eq!(r.people.abandoned, 4);
    let client = reqwest::Client::new();
    let threads: Vec<serde_json::Value> = client
        .post(format!("{base}/threads/search"))
        .json(&serde_json::json!({"limit": 10}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(threads.len(), 4);
    // Left alone, a run would have its plan a second after it started (and the brief soon
    // after, as it does when a client merely disconnects); cancelled, it stops where it was.
    tokio::time::sleep(Duration::from_secs(3)).await;
    for t in threads {
        let id = t["thread_id"].as_str().unwrap();
        let thread: serde_json::Value = client
            .get(format!("{base}/threads/{id}"))
            .send()
            .await
            .unwrap()
            .json()
            .await
            .unwrap();
        let events: Vec<&str> = thread["values"]["execution_history"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|e| e["event"].as_str())
            .collect();
        assert_eq!(events, vec!["input_prepared"], "thread {id} was cancelled");
    }
}

fn planwright(args: &[&str]) -> (Option<i32>, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(args)
        .output()
        .unwrap();
    (
        out.status.code(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn thresholds_give_the_exit_code_and_compare_marks_regressions() {
    let dir = scratch("exit");
    let fast = dir.join("fast.json");
    let slow = dir.join("slow.json");
    let base = [
        "load",
        "--graph",
        "loop",
        "--quiet",
        "--conversations",
        "20",
    ];
    let (code, stdout, _) = planwright(
        &[
            &base[..],
            &[
                "--threshold",
                "conversation_p99<1h",
                "--report",
                fast.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("conversation_p99<1h") && stdout.contains("passed"));
    let (code, stdout, _) = planwright(
        &[
            &base[..],
            &[
                "--concurrency",
                "1",
                "--threshold",
                "conversation_p99<1us",
                "--report",
                slow.to_str().unwrap(),
            ],
        ]
        .concat(),
    );
    assert_eq!(code, Some(1), "a crossed threshold exits 1: {stdout}");
    assert!(stdout.contains("CROSSED"));
    for bad in [
        vec!["--threshold", "speed<1"],
        vec!["--rate", "0", "--duration", "1s"],
        vec!["--kind", "ramping"],
    ] {
        let (code, _, stderr) = planwright(&[&base[..], &bad[..]].concat());
        assert_eq!(code, Some(2), "{bad:?}: {stderr}");
    }

    // Closed loop of one at a time against twenty at once: the figures differ; compare says so.
    let (code, stdout, _) = planwright(&[
        "load",
        "compare",
        fast.to_str().unwrap(),
        slow.to_str().unwrap(),
        "--html",
        dir.join("cmp.html").to_str().unwrap(),
    ]);
    assert_eq!(code, Some(0), "{stdout}");
    assert!(stdout.contains("conversation_latency_ms.p99") && stdout.contains("node tick"));
    let html = std::fs::read_to_string(dir.join("cmp.html")).unwrap();
    assert!(html.starts_with("<!doctype html>") && html.contains("<table>"));
    let (code, _, _) = planwright(&[
        "load",
        "compare",
        fast.to_str().unwrap(),
        fast.to_str().unwrap(),
        "--fail-on-regression",
    ]);
    assert_eq!(code, Some(0), "a report does not regress against itself");
    let (code, _, stderr) = planwright(&["load", "compare", "nope.json", fast.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
}
