//! The official LangGraph SDK (`langgraph-sdk` from PyPI) against `planwright serve`: create a
//! thread, run and wait, see an interrupt, resume, read state, stream; and an `acquire` thread
//! paused on a question, answered with a resume command; the store client (put, get, search,
//! namespaces, delete). The SDK comes from the walks' venv under the target directory
//! ([`serve_support::sdk_walk::python`]: CI has nothing installed by hand), installed when missing.

mod serve_support;

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_official_langgraph_sdk_works_against_the_server() {
    let python = tokio::task::spawn_blocking(serve_support::sdk_walk::python)
        .await
        .unwrap();
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
