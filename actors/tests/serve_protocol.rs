//! The thread-centric protocol (`POST /threads/{id}/commands`, `POST /threads/{id}/stream/events`)
//! over a real socket, with a graph the test registers: `run.start` creates the thread the client
//! named and runs it; the event stream carries ids (`seq`, `event_id` and the SSE `id` agree and
//! grow); a stream opened with `since` resumes exactly after that event; the question the graph
//! asks comes as `input.requested`, `input.respond` answers it and the same stream carries the
//! resumed run to its end, opening with `input.answered`; `state.get` reads the result; malformed
//! and unknown commands are refused with the protocol's error codes. A chat graph's model chunks
//! come on `messages` as the protocol's message lifecycle, and `input.inject` gives it a message
//! in a run of its own.

mod serve_support;

use serde_json::{json, Value};
use serve_support::in_process::{self, replier_server};
use std::time::Duration;

/// The API on a free port, serving the `replier` graph over a SQLite file of its own.
async fn server() -> String {
    let server = replier_server(in_process::sqlite("serve-protocol")).await;
    // The server's background work lives as long as the test process.
    std::mem::forget(server.start_background());
    in_process::listen(server.router()).await
}

async fn command(api: &str, thread: &str, cmd: Value) -> (u16, Value) {
    let res = reqwest::Client::new()
        .post(format!("{api}/threads/{thread}/commands"))
        .json(&cmd)
        .send()
        .await
        .expect("the server answers");
    let status = res.status().as_u16();
    (status, res.json().await.expect("a JSON answer"))
}

/// An open event stream and what it has sent but not yet been read.
struct Events {
    res: reqwest::Response,
    buf: String,
}

impl Events {
    async fn open(api: &str, thread: &str, filter: Value) -> Result<Events, u16> {
        let res = reqwest::Client::new()
            .post(format!("{api}/threads/{thread}/stream/events"))
            .header("accept", "text/event-stream")
            .json(&filter)
            .send()
            .await
            .expect("the server answers");
        if !res.status().is_success() {
            return Err(res.status().as_u16());
        }
        Ok(Events {
            res,
            buf: String::new(),
        })
    }

    /// The next event: its SSE `id`, `event` and JSON data.
    async fn next(&mut self) -> (String, String, Value) {
        loop {
            if let Some(end) = self.buf.find("\n\n") {
                let frame: String = self.buf.drain(..end + 2).collect();
                let (mut id, mut event, mut data) = (String::new(), String::new(), String::new());
                for line in frame.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        id = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("event:") {
                        event = v.trim().to_string();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue; // a keep-alive comment
                }
                return (id, event, serde_json::from_str(&data).expect("JSON data"));
            }
            // A guard against a stream that never sends what the test waits for.
            let chunk = tokio::time::timeout(Duration::from_secs(30), self.res.chunk())
                .await
                .expect("the stream sends within 30 s")
                .expect("the stream reads")
                .expect("the stream stays open");
            self.buf.push_str(&String::from_utf8_lossy(&chunk));
        }
    }

    /// Events up to and including the first `stop` accepts; each one's ids checked.
    async fn until(&mut self, stop: impl Fn(&Value) -> bool) -> Vec<Value> {
        let mut got: Vec<Value> = Vec::new();
        loop {
            let (id, event, data) = self.next().await;
            assert_eq!(data["type"], "event", "{data}");
            assert_eq!(event, data["method"].as_str().unwrap(), "{data}");
            let seq = data["seq"].as_u64().expect("a seq");
            assert_eq!(id, seq.to_string(), "the SSE id is the seq");
            assert_eq!(data["event_id"], json!(id), "the event_id is the seq");
            if let Some(last) = got.last() {
                assert!(seq > last["seq"].as_u64().unwrap(), "seqs grow: {data}");
            }
            let done = stop(&data);
            got.push(data);
            if done {
                return got;
            }
        }
    }
}

fn lifecycle(ev: &Value, status: &str) -> bool {
    ev["method"] == "lifecycle"
        && ev["params"]["namespace"] == json!([])
        && ev["params"]["data"]["event"] == status
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_started_followed_resumed_from_a_cursor_and_answered() {
    let api = server().await;
    let channels = json!(["lifecycle", "input", "values", "updates"]);

    // No thread yet: no stream either (the SDKs open theirs after run.start).
    assert_eq!(
        Events::open(&api, "p1", json!({ "channels": channels }))
            .await
            .err(),
        Some(404)
    );

    // run.start creates the thread the client named and starts the run.
    let start = json!({"id": 1, "method": "run.start", "params": {
        "assistant_id": "replier", "input": {"request": "refund order 42"}}});
    let (s, ok) = command(&api, "p1", start).await;
    assert_eq!(s, 200, "{ok}");
    assert_eq!(ok["type"], "success", "{ok}");
    assert_eq!(ok["id"], 1);
    let run_id = ok["result"]["run_id"]
        .as_str()
        .expect("a run id")
        .to_string();
    let before = ok["meta"]["applied_through_seq"]
        .as_u64()
        .expect("a cursor");

    // The whole run, from its start to its question.
    let mut stream = Events::open(&api, "p1", json!({ "channels": channels }))
        .await
        .expect("a stream");
    let first = stream.until(|e| lifecycle(e, "interrupted")).await;
    assert!(lifecycle(&first[0], "running"), "{}", first[0]);
    assert!(first[0]["seq"].as_u64().unwrap() > before);
    let asked: Vec<&Value> = first
        .iter()
        .filter(|e| e["method"] == "input.requested")
        .collect();
    assert_eq!(asked.len(), 1, "one question: {first:?}");
    let question = &asked[0]["params"]["data"];
    assert_eq!(question["payload"]["question"], "send?", "{question}");
    let interrupt_id = question["interrupt_id"].as_str().unwrap().to_string();
    let drafted = first
        .iter()
        .find(|e| e["method"] == "updates" && e["params"]["data"]["node"] == "draft")
        .expect("the draft node's update");
    assert_eq!(
        drafted["params"]["data"]["values"]["draft"],
        "We will refund order 42."
    );
    assert!(first.iter().any(|e| e["method"] == "values"));

    // A stream opened with `since` resumes right after that event, with the same ids.
    let cursor = first[1]["seq"].as_u64().unwrap();
    let mut again = Events::open(&api, "p1", json!({ "channels": channels, "since": cursor }))
        .await
        .expect("a stream");
    let rest = again.until(|e| lifecycle(e, "interrupted")).await;
    let seqs = |evs: &[Value]| -> Vec<(u64, String)> {
        evs.iter()
            .map(|e| {
                (
                    e["seq"].as_u64().unwrap(),
                    e["method"].as_str().unwrap().into(),
                )
            })
            .collect()
    };
    assert_eq!(seqs(&rest), seqs(&first[2..]));
    // Filtered by channel: only the questions.
    let mut questions = Events::open(&api, "p1", json!({"channels": ["input"]}))
        .await
        .expect("a stream");
    let only = questions.until(|e| e["method"] == "input.requested").await;
    assert_eq!(only.len(), 1);
    assert_eq!(only[0]["seq"], asked[0]["seq"]);

    // A wrong interrupt id is refused; the right one resumes the thread.
    let wrong = json!({"id": 2, "method": "input.respond", "params": {
        "namespace": [], "interrupt_id": "nope", "response": "yes"}});
    let (_, refused) = command(&api, "p1", wrong).await;
    assert_eq!(refused["type"], "error", "{refused}");
    assert_eq!(refused["error"], "no_such_interrupt", "{refused}");
    let respond = json!({"id": 3, "method": "input.respond", "params": {
        "namespace": [], "interrupt_id": interrupt_id, "response": "yes"}});
    let (s, ok) = command(&api, "p1", respond).await;
    assert_eq!((s, &ok["type"]), (200, &json!("success")), "{ok}");
    assert_eq!(ok["result"], json!({}));

    // The first stream goes on with the resumed run, to its end; the run says first which
    // question it answers.
    let second = stream.until(|e| lifecycle(e, "completed")).await;
    assert!(lifecycle(&second[0], "running"), "{}", second[0]);
    assert_eq!(second[1]["method"], "input.answered", "{}", second[1]);
    assert_eq!(second[1]["params"]["namespace"], json!([]));
    assert_eq!(
        second[1]["params"]["data"],
        json!({ "interrupt_ids": [interrupt_id] })
    );
    let last_values = second
        .iter()
        .rev()
        .find(|e| e["method"] == "values")
        .expect("values");
    assert_eq!(
        last_values["params"]["data"]["log"],
        json!(["approved: \"yes\"", "sent: We will refund order 42."])
    );
    assert!(second.iter().all(|e| e["method"] != "input.requested"));

    // Two runs on the thread; state.get reads where they left it.
    let (s, state) = command(
        &api,
        "p1",
        json!({"id": 4, "method": "state.get", "params": {"namespace": [], "keys": ["log"]}}),
    )
    .await;
    assert_eq!(s, 200);
    assert_eq!(state["type"], "success", "{state}");
    assert_eq!(
        state["result"]["values"],
        json!({"log": ["approved: \"yes\"", "sent: We will refund order 42."]})
    );
    assert!(state["result"]["checkpoint"]["id"].is_string(), "{state}");
    let runs: Value = reqwest::get(format!("{api}/threads/p1/runs"))
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let ids: Vec<&str> = runs
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|r| r["run_id"].as_str())
        .collect();
    assert_eq!(ids.len(), 2, "{runs}");
    assert!(ids.contains(&run_id.as_str()));

    // Unknown and malformed commands.
    let (s, e) = command(&api, "p1", json!({"id": 5, "method": "no.such"})).await;
    assert_eq!((s, &e["error"]), (200, &json!("unknown_command")), "{e}");
    let (s, e) = command(&api, "p1", json!({"method": "run.start"})).await;
    assert_eq!((s, &e["error"]), (400, &json!("invalid_argument")), "{e}");
    let (_, e) = command(
        &api,
        "p1",
        json!({"id": 6, "method": "run.start", "params": {"input": {}}}),
    )
    .await;
    assert_eq!(e["error"], "invalid_argument", "{e}");
}

planwright::state! {
    /// A conversation.
    pub struct Chat => ChatUpdate {
        append messages: Vec<Value>,
    }
}

/// A chat graph: `answer` streams its reply as model chunks, then returns it whole.
fn chat() -> planwright::CompiledGraph<Chat> {
    use planwright::graph::{StateGraph, END, START};
    StateGraph::<Chat>::new("chat")
        .add_sync_node("answer", |s: &Chat, ctx: &planwright::NodeContext| {
            let id = format!("reply-{}", s.messages.len());
            let said = s
                .messages
                .last()
                .map_or("", |m| m["content"].as_str().unwrap_or(""));
            let reply = format!("you said {said}");
            for word in reply.split_inclusive(' ') {
                ctx.stream_chunk(&id, word);
            }
            Ok(ChatUpdate::default()
                .messages(vec![json!({"type": "ai", "id": id, "content": reply})]))
        })
        .add_edge(START, "answer")
        .add_edge("answer", END)
        .compile()
        .expect("the graph compiles")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn model_chunks_come_as_messages_and_an_injected_message_runs() {
    let server =
        planwright_actors::serve::Server::builder(in_process::sqlite("serve-protocol-chat"))
            .graph("chat", chat())
            .build()
            .await
            .expect("the server builds");
    std::mem::forget(server.start_background());
    let api = in_process::listen(server.router()).await;
    let start = json!({"id": 1, "method": "run.start", "params": {"assistant_id": "chat",
        "input": {"messages": [{"role": "user", "content": "hello"}]}}});
    let (_, ok) = command(&api, "c1", start).await;
    assert_eq!(ok["type"], "success", "{ok}");
    let channels = json!(["lifecycle", "messages", "tools"]);
    let mut stream = Events::open(&api, "c1", json!({ "channels": channels }))
        .await
        .expect("a stream");
    let first = stream.until(|e| lifecycle(e, "completed")).await;
    let said: Vec<&Value> = first
        .iter()
        .filter(|e| e["method"] == "messages")
        .map(|e| &e["params"]["data"])
        .collect();
    let kinds: Vec<&str> = said.iter().map(|d| d["event"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "message-start",
            "content-block-start",
            "content-block-delta",
            "content-block-delta",
            "content-block-delta",
            "content-block-finish",
            "message-finish"
        ],
        "{said:?}"
    );
    assert_eq!(said[0]["role"], "ai");
    assert_eq!(said[0]["id"], "reply-1");
    let text: String = said
        .iter()
        .filter_map(|d| d["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "you said hello");
    assert_eq!(
        said[5]["content"],
        json!({"type": "text", "text": "you said hello"})
    );
    assert!(first
        .iter()
        .filter(|e| e["method"] == "messages")
        .all(|e| e["params"]["node"] == "answer" && e["params"]["namespace"] == json!([])));
    // The graph calls no tools: the tools channel carries nothing.
    assert!(first.iter().all(|e| e["method"] != "tools"), "{first:?}");

    // input.inject: the message runs in a run of its own, on the same stream.
    let inject =
        |id: u64, params: Value| json!({"id": id, "method": "input.inject", "params": params});
    let (_, e) = command(
        &api,
        "c1",
        inject(
            2,
            json!({"namespace": [], "message": {"role": "robot", "content": "x"}}),
        ),
    )
    .await;
    assert_eq!(e["error"], "invalid_argument", "{e}");
    let (_, e) = command(
        &api,
        "c1",
        inject(
            3,
            json!({"namespace": ["sub"], "message": {"role": "user", "content": "x"}}),
        ),
    )
    .await;
    assert_eq!(e["error"], "no_such_namespace", "{e}");
    let (_, e) = command(
        &api,
        "nobody",
        inject(
            4,
            json!({"namespace": [], "message": {"role": "user", "content": "x"}}),
        ),
    )
    .await;
    assert_eq!(e["error"], "no_such_run", "{e}");
    let (_, ok) = command(
        &api,
        "c1",
        inject(
            5,
            json!({"namespace": [], "message": {"role": "user", "content": "again"}}),
        ),
    )
    .await;
    assert_eq!(
        (&ok["type"], &ok["result"]),
        (&json!("success"), &json!({})),
        "{ok}"
    );
    let cursor = ok["meta"]["applied_through_seq"]
        .as_u64()
        .expect("a cursor");
    let second = stream.until(|e| lifecycle(e, "completed")).await;
    assert!(second[0]["seq"].as_u64().unwrap() > cursor);
    let text: String = second
        .iter()
        .filter_map(|e| e["params"]["data"]["delta"]["text"].as_str())
        .collect();
    assert_eq!(text, "you said again");
    let (_, state) = command(
        &api,
        "c1",
        json!({"id": 6, "method": "state.get", "params": {"namespace": []}}),
    )
    .await;
    let contents: Vec<&str> = state["result"]["values"]["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .map(|m| m["content"].as_str().unwrap())
        .collect();
    assert_eq!(
        contents,
        ["hello", "you said hello", "again", "you said again"]
    );
}
