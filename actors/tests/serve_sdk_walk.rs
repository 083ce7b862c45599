//! Every call of both official LangGraph SDKs against a real `planwright serve` process: the
//! Python walk (`tests/sdk/walk.py`, `langgraph-sdk` 0.4.14 and `RemoteGraph` from `langgraph`
//! 1.2, in a venv) and the JavaScript walk (`tests/sdk/walk.mjs`, `@langchain/langgraph-sdk`
//! 1.15 from npm), both installed once under the target directory.
//!
//! Each walk prints one JSON line per call. Every call must pass except those listed in
//! `tests/sdk/known_gaps.txt` (one `py:…` or `js:…` name per line, then the reason); a listed
//! call that passes fails the test too, so the list only shrinks as the server catches up.

mod serve_support;

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// The API key the server is started with (`--token`); the walks send it as the SDKs do.
const KEY: &str = "walk-secret";
/// The Python SDK versions the walk is written against.
const PY_PACKAGES: [&str; 2] = ["langgraph-sdk==0.4.14", "langgraph>=1.2,<1.3"];
/// The JavaScript SDK version the walk is written against.
const JS_PACKAGE: &str = "@langchain/langgraph-sdk@~1.15.0";

fn sdk_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk")
}

/// A venv with both Python packages, made once under the target directory.
fn python() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sdk-walk-venv");
    let python = dir.join("bin/python");
    let check = "from importlib.metadata import version as v; \
                 assert v('langgraph-sdk') == '0.4.14' and v('langgraph').startswith('1.2.')";
    let ready = python.exists()
        && Command::new(&python)
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
        let ok = Command::new(dir.join("bin/pip"))
            .args(["install", "--quiet"])
            .args(PY_PACKAGES)
            .status()
            .expect("pip runs")
            .success();
        assert!(ok, "cannot install {PY_PACKAGES:?} from PyPI");
    }
    python
}

/// A directory with the JavaScript SDK in its `node_modules`, installed once by npm.
fn node_modules() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("sdk-walk-npm");
    let manifest = dir.join("node_modules/@langchain/langgraph-sdk/package.json");
    let ready = std::fs::read_to_string(&manifest)
        .ok()
        .and_then(|s| serde_json::from_str::<Value>(&s).ok())
        .is_some_and(|p| {
            p["version"]
                .as_str()
                .is_some_and(|v| v.starts_with("1.15."))
        });
    if !ready {
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .arg(JS_PACKAGE)
            .status()
            .expect("npm runs")
            .success();
        assert!(ok, "cannot install {JS_PACKAGE} from npm");
    }
    dir
}

/// One walk's lines: call name → the error (empty when the call passed).
fn results(name: &str, out: &Output) -> BTreeMap<String, String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "the {name} walk did not run:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let calls: BTreeMap<String, String> = stdout
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter_map(|v| {
            let call = v["call"].as_str()?.to_string();
            let error = if v["ok"].as_bool()? {
                String::new()
            } else {
                v["error"].as_str().unwrap_or("failed").to_string()
            };
            Some((call, error))
        })
        .collect();
    assert!(
        !calls.is_empty(),
        "the {name} walk printed no calls:\n{stdout}"
    );
    calls
}

/// The checked-in gaps: call name → reason.
fn known_gaps() -> BTreeMap<String, String> {
    let text = std::fs::read_to_string(sdk_dir().join("known_gaps.txt")).unwrap();
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .map(|l| match l.split_once(char::is_whitespace) {
            Some((name, reason)) => (name.to_string(), reason.trim().to_string()),
            None => (l.to_string(), String::new()),
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_of_both_sdks_passes_but_the_known_gaps() {
    let (python, npm) = tokio::join!(
        tokio::task::spawn_blocking(python),
        tokio::task::spawn_blocking(node_modules)
    );
    let (python, npm) = (python.unwrap(), npm.unwrap());
    let dir = serve_support::fresh_dir("sdk-walk");
    let checkpoint = format!("sqlite:{}", dir.join("serve.sqlite").display());
    // Model calls of ~150 ms, as in serve_sdk.rs: a run lasts long enough that a cancel or a
    // second run sent right after it finds it running.
    let (_server, url) = serve_support::serve_on(
        &checkpoint,
        "sim:p50=150ms,p99=200ms,seed=1",
        &["--token", KEY],
    )
    .await;
    let config = sdk_dir().join("research.json");
    let py = {
        let (url, config) = (url.clone(), config.clone());
        tokio::task::spawn_blocking(move || {
            Command::new(python)
                .arg(sdk_dir().join("walk.py"))
                .arg(&url)
                .args(["--api-key", KEY, "--assistant", "research", "--config"])
                .arg(&config)
                .output()
                .expect("python runs")
        })
    };
    let js = tokio::task::spawn_blocking(move || {
        Command::new("node")
            .arg(sdk_dir().join("walk.mjs"))
            .arg(&url)
            .args(["--api-key", KEY, "--assistant", "research", "--config"])
            .arg(&config)
            .arg("--sdk")
            .arg(&npm)
            .output()
            .expect("node runs")
    });
    let (py, js) = tokio::join!(py, js);
    let mut calls = results("python", &py.unwrap());
    calls.extend(results("javascript", &js.unwrap()));

    let gaps = known_gaps();
    let mut wrong = Vec::new();
    for (call, error) in &calls {
        match (error.is_empty(), gaps.contains_key(call)) {
            (false, false) => wrong.push(format!("FAILS  {call}: {error}")),
            (true, true) => wrong.push(format!(
                "PASSES {call}: listed in known_gaps.txt; take it off the list"
            )),
            _ => {}
        }
    }
    for gap in gaps.keys().filter(|g| !calls.contains_key(*g)) {
        wrong.push(format!(
            "STALE  {gap}: in known_gaps.txt but no walk makes this call"
        ));
    }
    let passed = calls.values().filter(|e| e.is_empty()).count();
    assert!(
        wrong.is_empty(),
        "{passed} of {} calls pass; {} differ from tests/sdk/known_gaps.txt:\n{}",
        calls.len(),
        wrong.len(),
        wrong.join("\n")
    );
}
