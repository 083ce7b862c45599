//! The official SDKs' walks (`tests/sdk/walk.py` with `langgraph-sdk` 0.4.14 and `RemoteGraph`
//! from `langgraph` 1.2 in a venv; `tests/sdk/walk.mjs` with `@langchain/langgraph-sdk` 1.15
//! from npm, both installed once under the target directory) against a running server, judged
//! against a list of known gaps. One copy for every server the walks meet: the research planner
//! and a graph a test registers.
//!
//! Each walk prints one JSON line per call. Every call must pass except those the gap files list
//! (one `py:…` or `js:…` name per line, then the reason); a listed call that passes fails too, so
//! a list only shrinks as the server catches up.

use serde_json::Value;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;

/// The API key the servers are started with; the walks send it as the SDKs do.
pub const KEY: &str = "walk-secret";
/// The Python SDK versions the walk is written against.
const PY_PACKAGES: [&str; 2] = ["langgraph-sdk==0.4.14", "langgraph>=1.2,<1.3"];
/// The JavaScript SDK version the walk is written against.
const JS_PACKAGE: &str = "@langchain/langgraph-sdk@~1.15.0";

/// One pair of walks at a time: a walk cancels and interrupts runs while they run, which wants
/// the machine's cores for its own server, not shared with another walk's.
static ONE_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// `tests/sdk`: the walks, their configs and their gap lists.
pub fn sdk_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk")
}

/// A venv with both Python packages, made once under the target directory (once per process:
/// tests that walk at the same time wait for one install); the interpreter's path.
pub fn python() -> PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY.get_or_init(install_python).clone()
}

fn install_python() -> PathBuf {
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

/// A directory with the JavaScript SDK in its `node_modules`, installed once by npm (once per
/// process, as [`python`]).
fn node_modules() -> PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY.get_or_init(install_node_modules).clone()
}

fn install_node_modules() -> PathBuf {
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

/// Installs both SDKs (once; slow the first time). A test calls it before it starts its server,
/// so that the server does not wait idle through an install.
pub async fn install() {
    let (python, npm) = tokio::join!(
        tokio::task::spawn_blocking(python),
        tokio::task::spawn_blocking(node_modules)
    );
    python.expect("the Python SDK installs");
    npm.expect("the JavaScript SDK installs");
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

/// The checked-in gaps of the files `tests/sdk/<file>`: call name → the file that lists it.
fn known_gaps<'a>(files: &[&'a str]) -> BTreeMap<String, &'a str> {
    let mut gaps = BTreeMap::new();
    for &file in files {
        let path = sdk_dir().join(file);
        let text = std::fs::read_to_string(&path)
            .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
        let names = text
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| {
                l.split_once(char::is_whitespace)
                    .map_or(l, |(name, _)| name)
            });
        for name in names {
            gaps.insert(name.to_string(), file);
        }
    }
    gaps
}

/// What the walks meet: a server and the graph it serves.
pub struct Target<'a> {
    /// The server's base URL; it takes [`KEY`].
    pub url: &'a str,
    /// The assistant the walks run.
    pub assistant: &'a str,
    /// The JSON file in `tests/sdk` that describes the graph's inputs (see walk.py).
    pub config: &'a str,
    /// The files in `tests/sdk` that list the calls known to fail against it, with why.
    pub gaps: &'a [&'a str],
}

/// Runs both walks against `target` (one pair at a time in the process) and fails unless
/// exactly the calls its gap files list fail.
pub async fn walk_both(target: Target<'_>) {
    install().await;
    let _alone = ONE_AT_A_TIME.lock().await;
    let config = sdk_dir().join(target.config);
    let common = |script: &str, exe: PathBuf| {
        let mut cmd = Command::new(exe);
        cmd.arg(sdk_dir().join(script))
            .arg(target.url)
            .args([
                "--api-key",
                KEY,
                "--assistant",
                target.assistant,
                "--config",
            ])
            .arg(&config);
        cmd
    };
    let mut py = common("walk.py", python());
    let mut js = common("walk.mjs", "node".into());
    js.arg("--sdk").arg(node_modules());
    // Node 20's WebSocket (the SDK's WebSocket transport) is behind a flag.
    js.env("NODE_OPTIONS", "--experimental-websocket");
    let py = tokio::task::spawn_blocking(move || py.output().expect("python runs"));
    let js = tokio::task::spawn_blocking(move || js.output().expect("node runs"));
    let (py, js) = tokio::join!(py, js);
    let mut calls = results("python", &py.unwrap());
    calls.extend(results("javascript", &js.unwrap()));

    let gaps = known_gaps(target.gaps);
    let mut wrong = Vec::new();
    for (call, error) in &calls {
        match (error.is_empty(), gaps.get(call)) {
            (false, None) => wrong.push(format!("FAILS  {call}: {error}")),
            (true, Some(list)) => wrong.push(format!(
                "PASSES {call}: listed in {list}; take it off the list"
            )),
            _ => {}
        }
    }
    for (gap, list) in gaps.iter().filter(|(g, _)| !calls.contains_key(*g)) {
        wrong.push(format!(
            "STALE  {gap}: in {list} but no walk makes this call"
        ));
    }
    let passed = calls.values().filter(|e| e.is_empty()).count();
    assert!(
        wrong.is_empty(),
        "{passed} of {} calls pass against `{}`; {} differ from the known gaps ({}):\n{}",
        calls.len(),
        target.assistant,
        wrong.len(),
        target.gaps.join(", "),
        wrong.join("\n")
    );
}
