//! `load --assistant` against a server that is not Planwright: `langgraph dev` (from
//! `langgraph-cli[inmem]` on PyPI, in a venv made once under the target directory) serving
//! `fixtures/load/langgraph_chat` — a node that streams a reply token by token through a fake chat
//! model, then an interrupt asking for approval. `load` runs as the binary, an arrival-rate
//! scenario with a data file, answer rules and streaming: the report has the client-side figures
//! and the streaming latencies, no server-side node figures, and a threshold fails the run when it
//! should. The same scenario runs against `serve` with the research planner, and `load compare`
//! sets the two reports side by side.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Child, Command};
use std::sync::OnceLock;
use std::time::Duration;

/// A venv with `langgraph-cli[inmem]`, made once under the target directory; its `bin` folder.
fn venv() -> PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY
        .get_or_init(|| {
            let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("langgraph-dev-venv");
            let bin = dir.join("bin");
            let check = "import langgraph_api, langgraph_runtime_inmem; \
                         from langchain_core.language_models.fake_chat_models import GenericFakeChatModel";
            let ready = bin.join("langgraph").exists()
                && Command::new(bin.join("python"))
                    .args(["-c", check])
                    .status()
                    .is_ok_and(|s| s.success());
            if !ready {
                let ok = Command::new("python3")
                    .args(["-m", "venv"])
                    .arg(&dir)
                    .status()
                    .expect("python3 runs")
                    .success();
                assert!(ok, "cannot create a venv at {}", dir.display());
                let ok = Command::new(bin.join("pip"))
                    .args(["install", "--quiet", "langgraph-cli[inmem]"])
                    .status()
                    .expect("pip runs")
                    .success();
                assert!(ok, "cannot install langgraph-cli[inmem] from PyPI");
            }
            bin
        })
        .clone()
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/load")
}

fn scratch(name: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("load-langgraph-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

async fn wait_up(base: &str, server: &mut Server, log: &Path) {
    for _ in 0..1200 {
        if reqwest::get(format!("{base}/ok"))
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            return;
        }
        if let Ok(Some(status)) = server.0.try_wait() {
            panic!(
                "the server exited ({status}):\n{}",
                std::fs::read_to_string(log).unwrap_or_default()
            );
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!(
        "the server at {base} did not come up:\n{}",
        std::fs::read_to_string(log).unwrap_or_default()
    );
}

/// `langgraph dev` serving a copy of the fixture graph (it writes its state beside the graph).
async fn langgraph_dev(dir: &Path) -> (Server, String) {
    let bin = tokio::task::spawn_blocking(venv).await.unwrap();
    let graph = dir.join("graph");
    std::fs::create_dir_all(&graph).unwrap();
    for f in ["graph.py", "langgraph.json"] {
        std::fs::copy(fixtures().join("langgraph_chat").join(f), graph.join(f)).unwrap();
    }
    let port = free_port();
    let log = dir.join("langgraph.log");
    let mut server = Server(
        Command::new(bin.join("langgraph"))
            .args(["dev", "--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["--no-browser", "--no-reload"])
            .current_dir(&graph)
            .env("LANGSMITH_TRACING", "false")
            .env("LANGGRAPH_CLI_NO_ANALYTICS", "1")
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(log.with_extension("err")).unwrap())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    wait_up(&base, &mut server, &log).await;
    (server, base)
}

async fn serve(dir: &Path) -> (Server, String) {
    let port = free_port();
    let log = dir.join("serve.log");
    let mut server = Server(
        Command::new(env!("CARGO_BIN_EXE_planwright"))
            .args(["serve", "--addr", &format!("127.0.0.1:{port}")])
            .args(["--checkpoint", "memory:", "--model", "sim:p50=2ms,p99=10ms"])
            .stdout(std::fs::File::create(&log).unwrap())
            .stderr(std::fs::File::create(log.with_extension("err")).unwrap())
            .spawn()
            .unwrap(),
    );
    let base = format!("http://127.0.0.1:{port}");
    wait_up(&base, &mut server, &log).await;
    (server, base)
}

/// Runs the `load` binary; its exit code and stdout.
fn load(args: &[&str]) -> (Option<i32>, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .arg("load")
        .args(args)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    eprintln!("{stdout}{stderr}");
    (out.status.code(), stdout)
}

/// The scenario both servers get: 4 conversations a second for `duration`, streamed in three
/// modes, the data file's topics, approvals answered by rule.
fn scenario<'a>(
    target: &'a str,
    assistant: &'a str,
    input: &'a str,
    duration: &'a str,
    report: &'a str,
) -> Vec<&'a str> {
    let mut args = vec![
        "--target",
        target,
        "--assistant",
        assistant,
        "--input",
        input,
    ];
    args.extend(["--data", DATA, "--answers", ANSWERS]);
    args.extend(["--stream-mode", "values,messages-tuple,updates"]);
    args.extend(["--rate", "4", "--duration", duration]);
    args.extend(["--quiet", "--report", report]);
    args
}

const DATA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../fixtures/load/langgraph_chat/topics.csv"
);
const ANSWERS: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../fixtures/load/langgraph_chat/answers.json"
);

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn f(v: &Value, path: &str) -> f64 {
    path.split('.')
        .try_fold(v, |v, k| v.get(k))
        .and_then(Value::as_f64)
        .unwrap_or_else(|| panic!("{path} missing"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn load_streams_against_langgraph_dev_and_serve_and_compares_them() {
    let dir = scratch("both");
    let (_lg, lg_base) = langgraph_dev(&dir).await;
    let lg_report = dir.join("langgraph.json");
    let chat_input = fixtures().join("langgraph_chat/input.json");
    let (lg_input, lg_path) = (chat_input.to_str().unwrap(), lg_report.to_str().unwrap());
    let mut args = scenario(&lg_base, "chat", lg_input, "3s", lg_path);
    args.extend(["--threshold", "ttft_p99<30s", "--threshold", "failed<=0"]);
    let (code, text) = load(&args);
    assert_eq!(code, Some(0), "thresholds that hold pass");
    assert!(text.contains("time to first token") && text.contains("inter-token latency"));
    assert!(
        !text.contains("node executions/s"),
        "no server-side node figures"
    );
    let r = read(&lg_report);
    let started = f(&r, "started");
    assert!(started >= 10.0);
    assert_eq!(f(&r, "completed"), started, "{}", r["errors"]);
    assert_eq!(
        f(&r, "resumes"),
        started,
        "one approval each, answered by rule"
    );
    assert_eq!(f(&r, "node_executions"), 0.0);
    assert!(r["nodes"].as_object().unwrap().is_empty());
    // Client-side figures.
    assert!(f(&r, "conversation_latency_ms.p50") > 0.0);
    assert!(f(&r, "conversations_per_sec") > 0.0);
    assert_eq!(f(&r, "lateness.lateness_ms.count"), started);
    // Streaming: two runs per conversation (the reply, then the approval's resume), each with
    // tokens; a run's first token comes no earlier than its first event, and its end no earlier
    // than its first token.
    assert_eq!(f(&r, "stream.runs"), 2.0 * started);
    assert_eq!(f(&r, "stream.streamed_runs"), 2.0 * started);
    assert_eq!(f(&r, "stream.ttft_ms.count"), 2.0 * started);
    assert_eq!(f(&r, "stream.conversation_ttft_ms.count"), started);
    assert!(
        f(&r, "stream.tokens") >= 10.0 * started,
        "the reply streams word by word"
    );
    assert!(f(&r, "stream.itl_ms.count") > 0.0 && f(&r, "stream.itl_ms.p50") > 0.0);
    for q in ["p50", "p99", "max"] {
        let (ttfe, ttft) = (
            f(&r, &format!("stream.ttfe_ms.{q}")),
            f(&r, &format!("stream.ttft_ms.{q}")),
        );
        assert!(0.0 < ttfe && ttfe <= ttft, "{q}: ttfe {ttfe} ttft {ttft}");
        assert!(ttft <= f(&r, &format!("stream.run_ms.{q}")) * 1.001, "{q}");
    }
    assert!(
        f(&r, "stream.conversation_ttft_ms.max") <= f(&r, "conversation_latency_ms.max") * 1.001
    );
    let html = std::fs::read_to_string(lg_report.with_extension("html")).unwrap();
    assert!(html.contains("time to first token (ttft)"));

    // A threshold no server can hold fails the run.
    let failing = dir.join("failing.json");
    let mut args = scenario(&lg_base, "chat", lg_input, "1s", failing.to_str().unwrap());
    args.extend(["--threshold", "ttft_p99<1us"]);
    let (code, text) = load(&args);
    assert_eq!(code, Some(1), "a crossed threshold gives exit 1");
    assert!(text.contains("ttft_p99<1us") && text.contains("CROSSED"));
    assert_eq!(read(&failing)["thresholds"][0]["passed"], false);

    // The same scenario against serve's research planner: the approval it asks for is answered
    // by the rule for its node (the answers have no default: an interrupt no rule matches would
    // leave its conversation paused), and its /metrics gives the server-side figures.
    let (_pw, pw_base) = serve(&dir).await;
    let pw_report = dir.join("serve.json");
    let research_input = fixtures().join("research_input.json");
    let mut args = scenario(
        &pw_base,
        "research",
        research_input.to_str().unwrap(),
        "3s",
        pw_report.to_str().unwrap(),
    );
    args.extend(["--threshold", "failed<=0"]);
    let (code, _) = load(&args);
    assert_eq!(code, Some(0));
    let p = read(&pw_report);
    assert_eq!(f(&p, "completed"), f(&p, "started"), "{}", p["errors"]);
    assert!(f(&p, "resumes") >= f(&p, "started"));
    assert!(f(&p, "node_executions") > 0.0, "Planwright's /metrics");
    assert!(f(&p, "stream.ttfe_ms.count") >= 2.0 * f(&p, "started"));

    let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(["load", "compare", lg_path, pw_report.to_str().unwrap()])
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    for figure in [
        "conversation_latency_ms.p99",
        "stream.ttfe_ms.p99",
        "stream.run_ms.p50",
    ] {
        assert!(table.contains(figure), "{figure} in\n{table}");
    }
    assert!(table.contains("chat @") && table.contains("research @"));

    // A short sweep against each, then both latency-against-rate curves in one chart.
    let sweep = |base: &str, assistant: &str, input: &Path, report: &Path| {
        let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
            .args(["load", "sweep", "--rates", "2,4", "--step-duration", "1s"])
            .args(["--target", base, "--assistant", assistant])
            .args([
                "--input",
                input.to_str().unwrap(),
                "--data",
                DATA,
                "--answers",
                ANSWERS,
            ])
            .args([
                "--stream-mode",
                "values,messages-tuple",
                "--max-in-flight",
                "20",
            ])
            .args(["--quiet", "--report", report.to_str().unwrap()])
            .output()
            .unwrap();
        eprintln!("{}", String::from_utf8_lossy(&out.stdout));
        let r = read(report);
        assert!(!r["steps"].as_array().unwrap().is_empty());
        assert!(r["steps"][0]["ttft_ms"]["count"].as_u64().unwrap() > 0);
        report.to_str().unwrap().to_string()
    };
    let lg_sweep = sweep(&lg_base, "chat", &chat_input, &dir.join("lg-sweep.json"));
    let pw_sweep = sweep(
        &pw_base,
        "research",
        &research_input,
        &dir.join("pw-sweep.json"),
    );
    let page = dir.join("sweeps.html");
    let out = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(["load", "compare", &lg_sweep, &pw_sweep, "--html"])
        .arg(&page)
        .output()
        .unwrap();
    let table = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{table}");
    assert!(table.contains("highest rate that held /s"), "{table}");
    let html = std::fs::read_to_string(&page).unwrap();
    assert!(html.contains("arrival rate, conversations per second"));
    assert!(
        html.contains("chat @") && html.contains("research @"),
        "both curves"
    );
    let mixed = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args(["load", "compare", &lg_sweep, lg_path])
        .output()
        .unwrap();
    assert_eq!(
        mixed.status.code(),
        Some(2),
        "a sweep and a run do not compare"
    );
}
