//! The tool servers the MCP tests call, from their registries: the official
//! `@modelcontextprotocol/server-filesystem` and `@modelcontextprotocol/server-everything` from
//! npm, and the official Python `mcp` SDK from PyPI (in a venv) running
//! `fixtures/mcp/support_kb_server.py` over Streamable HTTP; and the official clients that call
//! `serve`'s own `/mcp` (the TypeScript `@modelcontextprotocol/sdk`, the Python SDK's). Each is
//! installed once under the target directory (once per process: tests that need it at the same
//! time wait for one install). `fixtures/mcp/misbehaving_server.py` (standard library only) hangs, errors or returns
//! garbage.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use tokio::io::{AsyncBufReadExt, BufReader};

/// The npm packages' version the tests are written against.
const NPM_VERSION: &str = "2026.8.31";
const NPM_PACKAGES: [&str; 2] = [
    "@modelcontextprotocol/server-filesystem",
    "@modelcontextprotocol/server-everything",
];
/// The Python SDK's version.
const PY_PACKAGE: &str = "mcp==2.3.0";

/// `fixtures/mcp`.
pub fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fixtures/mcp")
}

/// The directory whose `node_modules/.bin` has `mcp-server-filesystem` and
/// `mcp-server-everything`.
pub fn npm_dir() -> PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY.get_or_init(install_npm).clone()
}

fn install_npm() -> PathBuf {
    npm_install("mcp-npm", &NPM_PACKAGES, NPM_VERSION)
}

/// The official TypeScript SDK's version, for the tests whose client it is.
const NPM_SDK_VERSION: &str = "1.32.2";

/// The directory whose `node_modules` has the official TypeScript SDK,
/// `@modelcontextprotocol/sdk`.
pub fn npm_sdk_dir() -> PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY
        .get_or_init(|| {
            npm_install(
                "mcp-npm-sdk",
                &["@modelcontextprotocol/sdk"],
                NPM_SDK_VERSION,
            )
        })
        .clone()
}

/// `packages` at `version` under the target directory's `name`, installed unless there.
fn npm_install(name: &str, packages: &[&str], version: &str) -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    let ready = packages.iter().all(|p| {
        std::fs::read_to_string(dir.join("node_modules").join(p).join("package.json"))
            .ok()
            .and_then(|s| serde_json::from_str::<serde_json::Value>(&s).ok())
            .is_some_and(|v| v["version"] == version)
    });
    if !ready {
        std::fs::create_dir_all(&dir).unwrap();
        let ok = Command::new("npm")
            .args(["install", "--silent", "--no-audit", "--no-fund", "--prefix"])
            .arg(&dir)
            .args(packages.iter().map(|p| format!("{p}@{version}")))
            .status()
            .expect("npm runs")
            .success();
        assert!(ok, "cannot install {packages:?} from npm");
    }
    dir
}

/// A `--tools` spec for one of the npm servers' binaries, with its arguments.
pub fn npm_server(bin: &str, args: &[&str]) -> String {
    let path = npm_dir().join("node_modules/.bin").join(bin);
    let mut spec = format!("mcp+stdio:{}", path.display());
    for a in args {
        spec.push_str(&format!(" '{a}'"));
    }
    spec
}

/// The venv's Python, with the `mcp` SDK.
pub fn python() -> PathBuf {
    static READY: OnceLock<PathBuf> = OnceLock::new();
    READY.get_or_init(install_python).clone()
}

fn install_python() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("mcp-venv");
    let python = dir.join("bin/python");
    let check = "from importlib.metadata import version as v; assert v('mcp') == '2.3.0'";
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
            .args(["install", "--quiet", PY_PACKAGE])
            .status()
            .expect("pip runs")
            .success();
        assert!(ok, "cannot install {PY_PACKAGE} from PyPI");
    }
    python
}

/// Installs the npm servers and the Python SDK (once; slow the first time).
pub async fn install() {
    let (py, npm) = tokio::join!(
        tokio::task::spawn_blocking(python),
        tokio::task::spawn_blocking(npm_dir)
    );
    py.expect("the Python SDK installs");
    npm.expect("the npm servers install");
}

/// A `--tools` spec for the misbehaving server in `mode` (`hang`, `error`, `garbage`).
pub fn misbehaving(name: &str, mode: &str) -> String {
    format!(
        "{name}=mcp+stdio:python3 '{}' {mode}",
        fixtures().join("misbehaving_server.py").display()
    )
}

/// The Python knowledge-base server over Streamable HTTP, stopped when dropped.
pub struct KbServer {
    child: tokio::process::Child,
    /// Its endpoint, `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl KbServer {
    /// Starts it on a free port and waits for the line that says where it listens.
    pub async fn start() -> Self {
        let mut child = tokio::process::Command::new(python())
            .arg(fixtures().join("support_kb_server.py"))
            .arg("0")
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .expect("the knowledge-base server starts");
        let mut lines = BufReader::new(child.stderr.take().unwrap()).lines();
        let mut seen = String::new();
        let url = loop {
            let Some(line) = lines.next_line().await.unwrap() else {
                panic!("the knowledge-base server exited before listening:\n{seen}");
            };
            seen.push_str(&line);
            seen.push('\n');
            if let Some(at) = line.find("http://127.0.0.1:") {
                let addr: String = line[at..]
                    .chars()
                    .take_while(|c| !c.is_whitespace())
                    .collect();
                break format!("{addr}/mcp");
            }
        };
        // Keep draining its log so it never blocks on a full pipe.
        tokio::spawn(async move { while let Ok(Some(_)) = lines.next_line().await {} });
        Self { child, url }
    }

    /// The `--tools` spec.
    pub fn spec(&self) -> String {
        format!("kb=mcp+{}", self.url)
    }
}

impl Drop for KbServer {
    fn drop(&mut self) {
        let _ = self.child.start_kill();
    }
}
