//! SIGTERM: the server stops runs at a superstep boundary with every thread checkpointed, and a
//! restarted server continues them to the end. No thread is lost.

use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn spawn_server(port: u16, db: &std::path::Path) -> Child {
    Command::new(env!("CARGO_BIN_EXE_planwright"))
        .args([
            "serve",
            "--addr",
            &format!("127.0.0.1:{port}"),
            "--checkpoint",
            &format!("sqlite:{}", db.display()),
            "--model",
            "sim:p50=400ms,p99=800ms,seed=3",
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("server starts")
}

async fn wait_ready(base: &str) {
    for _ in 0..200 {
        if reqwest::get(format!("{base}/ok")).await.is_ok() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
    panic!("server did not come up");
}

const GOAL: &str = "Create a short research brief on whether our support team should adopt retrieval-augmented generation for customer support";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_checkpoints_every_thread_and_a_restart_finishes_them() {
    let dir = std::env::temp_dir().join(format!("planwright-sigterm-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let db = dir.join("serve.sqlite");
    let _ = std::fs::remove_file(&db);
    let port = free_port();
    let base = format!("http://127.0.0.1:{port}");
    let mut server = spawn_server(port, &db);
    wait_ready(&base).await;
    let client = reqwest::Client::new();
    let mut ids = Vec::new();
    let mut runs = Vec::new();
    for i in 0..4 {
        let id = format!("t{i}");
        client
            .post(format!("{base}/threads"))
            .json(&json!({"thread_id": id}))
            .send()
            .await
            .unwrap();
        let (client, base, id2) = (client.clone(), base.clone(), id.clone());
        runs.push(tokio::spawn(async move {
            client
                .post(format!("{base}/threads/{id2}/runs/wait"))
                .json(&json!({"assistant_id": "research", "input": {"input": GOAL}}))
                .send()
                .await
                .map(|r| r.status().as_u16())
        }));
        ids.push(id);
    }
    // Mid-run (the model takes ~400 ms per call), stop the server.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let pid = server.id().to_string();
    assert!(Command::new("kill")
        .args(["-TERM", &pid])
        .status()
        .unwrap()
        .success());
    let status = server.wait().unwrap();
    assert!(status.success(), "graceful stop: {status}");
    let mut stopped_mid_run = 0;
    for r in runs {
        // Each waiting request ended: 503 (checkpointed, continues on restart) or 200 (finished).
        let code = r.await.unwrap().unwrap_or(503);
        assert!(code == 503 || code == 200, "{code}");
        stopped_mid_run += usize::from(code == 503);
    }
    assert!(stopped_mid_run > 0, "the stop interrupted running threads");

    // Restart: unfinished threads continue by themselves.
    let mut server = spawn_server(port, &db);
    wait_ready(&base).await;
    for id in &ids {
        let mut last = Value::Null;
        for _ in 0..200 {
            last = client
                .get(format!("{base}/threads/{id}"))
                .send()
                .await
                .unwrap()
                .json()
                .await
                .unwrap();
            if last["status"] == "idle" && last["values"]["status"] == "ok" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        assert_eq!(
            last["values"]["status"], "ok",
            "thread {id} lost or unfinished: {last}"
        );
    }
    let _ = Command::new("kill")
        .args(["-TERM", &server.id().to_string()])
        .status();
    let _ = server.wait();
}
