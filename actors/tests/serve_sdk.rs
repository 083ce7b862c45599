//! The official LangGraph SDK (`langgraph-sdk` from PyPI) against `planwright serve`: create a
//! thread, run and wait, see an interrupt, resume, read state, stream; and an `acquire` thread
//! paused on a question, answered with a resume command; the store client (put, get, search,
//! namespaces, delete). The test makes its own venv
//! under the target directory (CI has nothing installed by hand) and installs the SDK when missing.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

fn venv() -> PathBuf {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("langgraph-sdk-venv");
    let python = dir.join("bin/python");
    let has_sdk = python.exists()
        && Command::new(&python)
            .args(["-c", "import langgraph_sdk"])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
    if !has_sdk {
        let ok = Command::new("python3")
            .args(["-m", "venv"])
            .arg(&dir)
            .status()
            .expect("python3 runs")
            .success();
        assert!(ok, "cannot create a venv at {}", dir.display());
        let ok = Command::new(dir.join("bin/pip"))
            .args(["install", "--quiet", "langgraph-sdk"])
            .status()
            .expect("pip runs")
            .success();
        assert!(ok, "cannot install langgraph-sdk from PyPI");
    }
    python
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_langgraph_sdk_works_against_the_server() {
    let python = tokio::task::spawn_blocking(venv).await.unwrap();
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("sdk-serve-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let mut server = Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{port}"),
            // Model calls of ~150 ms: a research run lasts a third of a second or more, so a
            // client that joins a background run right after creating it finds it running.
            "--model",
            "sim:p50=150ms,p99=200ms,seed=1",
            "--checkpoint",
        ])
        .arg(format!("sqlite:{}", dir.join("serve.sqlite").display()))
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("server starts");
    let url = format!("http://127.0.0.1:{port}");
    let mut up = false;
    for _ in 0..200 {
        if reqwest::get(format!("{url}/ok")).await.is_ok() {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/sdk/sdk_client.py");
    let out = if up {
        Some(
            Command::new(&python)
                .arg(&script)
                .arg(&url)
                .output()
                .expect("python runs"),
        )
    } else {
        None
    };
    let _ = server.kill();
    let _ = server.wait();
    let out = out.expect("server came up");
    assert!(
        out.status.success(),
        "SDK script failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
