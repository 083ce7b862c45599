//! Hostile clients over real sockets: clients that send half a header and wait, clients that
//! send a header and never the body, and one client with too many requests at once. The server
//! keeps answering real requests and closes the stalled connections after its timeouts; with the
//! default limits, a real request takes the place of the oldest half-open connection at once.

use planwright_actors::serve::listen::{serve, Limits};
use planwright_actors::serve::{router_with_limits, state, ServeArgs};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

async fn start(limits: Limits, model: &str) -> std::net::SocketAddr {
    let dir = std::env::temp_dir().join(format!(
        "planwright-limits-{}-{}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0)
    ));
    std::fs::create_dir_all(&dir).unwrap();
    let args = ServeArgs {
        checkpoint: format!("sqlite:{}", dir.join("serve.sqlite").display()),
        model: model.into(),
        ..ServeArgs::default()
    };
    let st = state(&args).await.unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = router_with_limits(st, &limits);
    tokio::spawn(async move {
        let _ = serve(
            listener,
            app,
            &limits,
            std::future::pending(),
            Duration::from_secs(1),
        )
        .await;
    });
    addr
}

/// `n` clients that each send half a header to `addr` and then nothing.
async fn stall(addr: std::net::SocketAddr, n: usize) -> Vec<TcpStream> {
    let mut stalled = Vec::new();
    for _ in 0..n {
        let mut s = TcpStream::connect(addr).await.unwrap();
        s.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\nX-Half: ")
            .await
            .unwrap();
        stalled.push(s);
    }
    stalled
}

/// Reads until the server closes the connection (or `bound` passes); what it sent.
async fn until_closed(mut s: TcpStream, bound: Duration) -> Option<String> {
    let mut buf = Vec::new();
    match tokio::time::timeout(bound, s.read_to_end(&mut buf)).await {
        Ok(_) => Some(String::from_utf8_lossy(&buf).into_owned()),
        Err(_) => None,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn half_open_clients_do_not_stop_real_requests() {
    let limits = Limits {
        header_timeout: Duration::from_millis(400),
        max_connections: 64,
        ..Limits::default()
    };
    let addr = start(limits, "offline").await;
    // 1,100 clients each send half a header and then nothing.
    let mut stalled = stall(addr, 1100).await;
    // A real client is still answered: the stalled ones are closed by the header timeout and
    // the rest wait their turn in the backlog.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    for _ in 0..3 {
        let r = client
            .get(format!("http://{addr}/ok"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
    }
    // Every stalled connection is eventually closed by the server, none answered with data it
    // did not ask for but a timeout.
    let mut closed = 0;
    for s in stalled.drain(..).take(50) {
        if until_closed(s, Duration::from_secs(60)).await.is_some() {
            closed += 1;
        }
    }
    assert_eq!(
        closed, 50,
        "the server closes connections that never finish a header"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn with_default_limits_half_open_clients_give_their_place_to_real_requests() {
    let limits = Limits::default();
    let addr = start(limits.clone(), "offline").await;
    // More clients than connection slots, from the same address as the real client, each
    // sending half a header and then nothing.
    let mut stalled = stall(addr, 1100).await;
    // A real request takes the place of the oldest half-open connection: it does not wait for
    // the stalled ones' header timeout.
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(60))
        .build()
        .unwrap();
    let mut waits = Vec::new();
    for _ in 0..5 {
        let asked = std::time::Instant::now();
        let r = client
            .get(format!("http://{addr}/ok"))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200);
        waits.push(asked.elapsed());
    }
    println!("real requests behind 1,100 half-open connections waited {waits:?}");
    assert!(
        waits.iter().all(|w| *w < limits.header_timeout),
        "answered before any stalled client's header timeout freed a slot: {waits:?}"
    );
    // The oldest stalled connections were closed to make room.
    let oldest = stalled.remove(0);
    let sent = until_closed(oldest, Duration::from_secs(5))
        .await
        .expect("the oldest half-open connection is closed");
    assert!(sent.is_empty(), "closed without a reply: {sent:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_body_that_never_arrives_times_out_and_an_idle_connection_is_closed() {
    let limits = Limits {
        header_timeout: Duration::from_millis(300),
        body_timeout: Duration::from_millis(300),
        ..Limits::default()
    };
    let addr = start(limits, "offline").await;
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"POST /threads HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{\"thread_id\":")
        .await
        .unwrap();
    let answer = until_closed(s, Duration::from_secs(30))
        .await
        .expect("the server gives up on the body");
    assert!(
        answer.is_empty() || answer.starts_with("HTTP/1.1 4"),
        "a 4xx or a closed connection, not a created thread: {answer}"
    );
    // A keep-alive connection that goes quiet after one request is closed too.
    let mut s = TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /ok HTTP/1.1\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let answer = until_closed(s, Duration::from_secs(30))
        .await
        .expect("the idle connection is closed");
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_client_with_too_many_requests_in_progress_gets_429() {
    let limits = Limits {
        max_requests_per_client: 2,
        ..Limits::default()
    };
    // A slow simulated model: each run takes seconds, so the 12 requests overlap.
    let addr = start(limits, "sim:p50=300ms,p99=600ms,seed=1").await;
    let client = reqwest::Client::new();
    // `runs/wait` holds its request until the run ends: 12 at the same moment from one address
    // leave at most 2 in progress; the others are refused with 429 and lose nothing.
    let goal = "Should our support team adopt retrieval-augmented generation?";
    for i in 0..12 {
        let r = client
            .post(format!("http://{addr}/threads"))
            .json(&serde_json::json!({"thread_id": format!("busy-{i}")}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 200, "one request at a time is always served");
    }
    let mut calls = Vec::new();
    for i in 0..12 {
        let client = client.clone();
        calls.push(tokio::spawn(async move {
            let id = format!("busy-{i}");
            client
                .post(format!("http://{addr}/threads/{id}/runs/wait"))
                .json(&serde_json::json!({"assistant_id": "research", "input": {"input": goal}}))
                .send()
                .await
                .unwrap()
        }));
    }
    let mut statuses = Vec::new();
    for c in calls {
        let r = c.await.unwrap();
        let status = r.status().as_u16();
        if status == 429 {
            let body: serde_json::Value = r.json().await.unwrap();
            assert!(body["detail"]
                .as_str()
                .unwrap()
                .contains("more than 2 requests"));
        }
        statuses.push(status);
    }
    assert!(
        statuses.iter().all(|s| *s == 200 || *s == 429),
        "{statuses:?}"
    );
    assert!(statuses.contains(&200), "{statuses:?}");
    assert!(statuses.contains(&429), "{statuses:?}");
}
