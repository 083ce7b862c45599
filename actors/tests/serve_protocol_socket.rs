//! The thread-centric protocol over a real WebSocket (`GET /threads/{id}/stream/events`
//! upgraded), as the SDKs' WebSocket transports speak it: the socket opens before the thread
//! exists; `subscription.subscribe` and commands go in as frames and are answered in order;
//! `run.start` and `input.respond` sent on the socket run the thread, and the socket carries the
//! same events, with the same `seq`s, as the SSE stream of the same filter; an event two
//! subscriptions match comes once; `subscription.unsubscribe`, `subscription.reconnect` and
//! frames that are not commands are answered with the protocol's codes, and the socket stays open.

mod serve_support;

use futures::{SinkExt, StreamExt};
use serde_json::{json, Value};
use serve_support::in_process::{self, replier_server};
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

type Socket =
    tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

async fn server() -> String {
    let server = replier_server(in_process::sqlite("serve-protocol-socket")).await;
    // The server's background work lives as long as the test process.
    std::mem::forget(server.start_background());
    in_process::listen(server.router()).await
}

/// The socket and the events it has carried.
struct Ws {
    socket: Socket,
    events: Vec<Value>,
}

impl Ws {
    async fn open(api: &str, thread: &str) -> Ws {
        let url = format!(
            "{}/threads/{thread}/stream/events",
            api.replacen("http", "ws", 1)
        );
        let (socket, _) = tokio_tungstenite::connect_async(url)
            .await
            .expect("the upgrade is accepted");
        Ws {
            socket,
            events: Vec::new(),
        }
    }

    async fn send_text(&mut self, text: String) {
        self.socket
            .send(Message::Text(text.into()))
            .await
            .expect("the frame is sent");
    }

    /// The next frame (a guard against one that never comes).
    async fn frame(&mut self) -> Value {
        loop {
            let msg = tokio::time::timeout(Duration::from_secs(30), self.socket.next())
                .await
                .expect("a frame within 30 s")
                .expect("the socket is open")
                .expect("a readable frame");
            if let Message::Text(t) = msg {
                return serde_json::from_str(&t).expect("JSON frames");
            }
        }
    }

    /// Sends command `id` and returns its answer, keeping the events that came before it.
    async fn command(&mut self, id: u64, method: &str, params: Value) -> Value {
        let cmd = json!({"id": id, "method": method, "params": params});
        self.send_text(cmd.to_string()).await;
        self.answer(Some(id)).await
    }

    /// The answer to command `id`, keeping the events that come before it.
    async fn answer(&mut self, id: Option<u64>) -> Value {
        loop {
            let f = self.frame().await;
            if f["type"] == "event" {
                self.events.push(f);
            } else {
                assert_eq!(f["id"], json!(id), "answers come in order: {f}");
                return f;
            }
        }
    }

    /// Reads events until one satisfies `stop`; returns every event carried so far.
    async fn until(&mut self, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
        if !self.events.iter().any(&stop) {
            loop {
                let f = self.frame().await;
                assert_eq!(f["type"], "event", "no answer is due: {f}");
                let done = stop(&f);
                self.events.push(f);
                if done {
                    break;
                }
            }
        }
        self.events.clone()
    }
}

fn lifecycle(ev: &Value, status: &str) -> bool {
    ev["method"] == "lifecycle"
        && ev["params"]["namespace"] == json!([])
        && ev["params"]["data"]["event"] == status
}

/// The events of an SSE stream of `filter`, up to the first that satisfies `stop`.
async fn sse(api: &str, thread: &str, filter: Value, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut res = reqwest::Client::new()
        .post(format!("{api}/threads/{thread}/stream/events"))
        .json(&filter)
        .send()
        .await
        .expect("the server answers");
    assert!(res.status().is_success(), "{}", res.status());
    let (mut buf, mut got) = (String::new(), Vec::new());
    loop {
        while let Some(end) = buf.find("\n\n") {
            let frame: String = buf.drain(..end + 2).collect();
            let data: String = frame
                .lines()
                .filter_map(|l| l.strip_prefix("data:"))
                .map(str::trim_start)
                .collect();
            if data.is_empty() {
                continue;
            }
            let ev: Value = serde_json::from_str(&data).expect("JSON data");
            let done = stop(&ev);
            got.push(ev);
            if done {
                return got;
            }
        }
        let chunk = tokio::time::timeout(Duration::from_secs(30), res.chunk())
            .await
            .expect("a chunk within 30 s")
            .expect("the stream reads")
            .expect("the stream is open");
        buf.push_str(&String::from_utf8_lossy(&chunk));
    }
}

fn seqs(evs: &[Value]) -> Vec<(u64, String)> {
    evs.iter()
        .map(|e| {
            (
                e["seq"].as_u64().expect("a seq"),
                e["method"].as_str().expect("a method").to_string(),
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_socket_subscribes_runs_answers_and_carries_what_the_sse_stream_carries() {
    let api = server().await;
    let channels = json!(["lifecycle", "input", "values", "updates"]);
    let mut ws = Ws::open(&api, "w1").await;

    // Subscribed before the thread exists, as the SDKs do; a second, overlapping subscription.
    let sub = ws
        .command(1, "subscription.subscribe", json!({ "channels": channels }))
        .await;
    assert_eq!(sub["type"], "success", "{sub}");
    let sub_id = sub["result"]["subscription_id"]
        .as_str()
        .expect("an id")
        .to_string();
    let overlap = ws
        .command(
            2,
            "subscription.subscribe",
            json!({"channels": ["lifecycle"]}),
        )
        .await;
    assert_eq!(overlap["type"], "success", "{overlap}");
    assert_ne!(overlap["result"]["subscription_id"], sub_id.as_str());

    // run.start on the socket creates the thread and runs it to its question.
    let started = ws
        .command(
            3,
            "run.start",
            json!({"assistant_id": "replier", "input": {"request": "refund order 42"}}),
        )
        .await;
    assert_eq!(started["type"], "success", "{started}");
    assert!(started["result"]["run_id"].is_string(), "{started}");
    assert_eq!(started["meta"]["thread_id"], "w1");
    let first = ws.until(|e| e["method"] == "input.requested").await;
    let asked = first
        .iter()
        .find(|e| e["method"] == "input.requested")
        .expect("the question");
    let interrupt_id = asked["params"]["data"]["interrupt_id"]
        .as_str()
        .expect("an interrupt id")
        .to_string();

    // Answered on the socket (the batch form, `responses`); the same subscriptions carry the
    // resumed run to its end, which says first which question it answers.
    let respond = ws
        .command(
            4,
            "input.respond",
            json!({"responses": [
                {"namespace": [], "interrupt_id": interrupt_id, "response": "yes"}
            ]}),
        )
        .await;
    assert_eq!(respond["type"], "success", "{respond}");
    let seen = ws.until(|e| e["method"] == "input.answered").await;
    let answered = seen.last().expect("input.answered");
    assert_eq!(
        answered["params"]["data"],
        json!({ "interrupt_ids": [interrupt_id] })
    );
    ws.until(|e| lifecycle(e, "completed")).await;

    // Each event once, with the seqs the SSE stream of the same filter gives (each subscription
    // keeps its own order; the two subscriptions' followers interleave).
    let over_sse = seqs(
        &sse(&api, "w1", json!({ "channels": channels }), |e| {
            lifecycle(e, "completed")
        })
        .await,
    );
    let last_seq = over_sse.last().expect("events").0;
    ws.until(|e| e["seq"].as_u64() == Some(last_seq)).await;
    while ws.events.len() < over_sse.len() {
        let f = ws.frame().await;
        assert_eq!(f["type"], "event", "no answer is due: {f}");
        ws.events.push(f);
    }
    let all = ws.events.clone();
    let mut got = seqs(&all);
    got.sort();
    assert_eq!(got, over_sse, "each event once, as over SSE");
    let last = all
        .iter()
        .filter(|e| e["method"] == "values")
        .max_by_key(|e| e["seq"].as_u64())
        .expect("values");
    assert_eq!(
        last["params"]["data"]["log"],
        json!(["approved: \"yes\"", "sent: We will refund order 42."])
    );

    // subscription.reconnect resumes after a cursor, keeping the client's id.
    let cursor = got[got.len() - 3].0;
    let mut again = Ws::open(&api, "w1").await;
    let re = again
        .command(
            1,
            "subscription.reconnect",
            json!({"channels": channels, "since": cursor, "subscription_id": "mine"}),
        )
        .await;
    assert_eq!(re["result"]["subscription_id"], "mine", "{re}");
    let resumed = again.until(|e| lifecycle(e, "completed")).await;
    assert_eq!(seqs(&resumed), got[got.len() - 2..].to_vec());

    // The socket's own commands refuse what they cannot do; the socket stays open.
    let gone = ws
        .command(
            5,
            "subscription.unsubscribe",
            json!({ "subscription_id": sub_id }),
        )
        .await;
    assert_eq!(gone["type"], "success", "{gone}");
    let twice = ws
        .command(
            6,
            "subscription.unsubscribe",
            json!({ "subscription_id": sub_id }),
        )
        .await;
    assert_eq!(twice["error"], "no_such_subscription", "{twice}");
    let no_since = ws
        .command(7, "subscription.reconnect", json!({ "channels": channels }))
        .await;
    assert_eq!(no_since["error"], "invalid_argument", "{no_since}");
    let bad_filter = ws
        .command(8, "subscription.subscribe", json!({"channels": "values"}))
        .await;
    assert_eq!(bad_filter["error"], "invalid_argument", "{bad_filter}");
    ws.send_text("not json".into()).await;
    let not_json = ws.answer(None).await;
    assert_eq!(not_json["error"], "invalid_argument", "{not_json}");
    ws.send_text(json!({"method": "state.get"}).to_string())
        .await;
    let no_id = ws.answer(None).await;
    assert_eq!(no_id["error"], "invalid_argument", "{no_id}");
    let unknown = ws.command(9, "no.such", json!({})).await;
    assert_eq!(unknown["error"], "unknown_command", "{unknown}");
    let state = ws
        .command(10, "state.get", json!({"namespace": [], "keys": ["log"]}))
        .await;
    assert_eq!(
        state["result"]["values"]["log"],
        json!(["approved: \"yes\"", "sent: We will refund order 42."]),
        "{state}"
    );
}
