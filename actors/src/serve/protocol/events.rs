//! `POST /threads/{thread_id}/stream/events`: the thread's runs as protocol events, over
//! server-sent events, filtered by the body `{"channels", "namespaces"?, "depth"?, "since"?}`.
//!
//! The events are made from the run event log ([`planwright::runs::RunEventLog`]), never
//! straight from a run: the stream follows the thread's runs in submission order, reading each
//! run's stored stream (`metadata`, `values`, `updates`, `custom`, `tasks`, `checkpoints`, the
//! end marker) and turning each stored event into the protocol's:
//!
//! - the run's first event: `lifecycle` `{event: "running", graph_name}`, then, for a run that
//!   resumes interrupts by id (`command.resume` a map of interrupt ids, as `input.respond`
//!   sends it), `input.answered` `{interrupt_ids}` (channel `input`): every client following
//!   the thread can stop offering those questions; its end: `lifecycle` `completed`,
//!   `interrupted` (it paused for an answer) or `failed` (`error` says why);
//! - `values` → `values` (the state, without `__interrupt__`);
//! - `updates` → `updates` `{node, values}`, one per node; `{"__interrupt__": […]}` →
//!   `input.requested` `{interrupt_id, payload}` per question (`value` too, as the Python SDK
//!   reads it);
//! - `custom` → `custom` `{payload}`; `tasks` → `tasks`; `checkpoints` → `checkpoints` `{id,
//!   parent_id, step, source}`;
//! - `messages` (`[chunk, metadata]`, the `messages-tuple` mode) → the protocol's message
//!   lifecycle on `messages`, `params.node` the node that streamed it: a model's chunks open a
//!   message (`message-start` `{role: "ai", id}`, `content-block-start` of an empty text block)
//!   and each adds a `content-block-delta` (`text-delta`); the task's result (`tasks`) or the
//!   run's end closes it (`content-block-finish` with the whole text, `message-finish`). A
//!   message a node returns whole comes as all five at once, with its role (`ai`, `human`,
//!   `system`, `tool`). The `tools` channel carries `tool-started`/`tool-finished` events of
//!   LangGraph's tool node; no graph this server runs has one, so it carries nothing, as
//!   LangGraph's does for a graph without tool calls;
//! - a subgraph's event (`mode|namespace…`) the same, under its `namespace`.
//!
//! Every event's `seq` is fixed by where it comes from: the run's submission number
//! ([`RunRecord::seq`]) above [`SHIFT`] bits, the stored event's seq times [`SLOTS`] plus its
//! place among the protocol events made from it below. So a stream read again, on any replica,
//! gives every event the same `seq` (and `event_id`, its decimal text, also the SSE `id`), and a
//! client that sends the last `seq` it saw as `since` resumes exactly after it. A run with more
//! than 2^22 stored events, or a server past 2^27 runs, would leave JavaScript's exact integers;
//! neither is near.
//!
//! The stream stays open after the runs end, waiting for the thread's next run (woken at once
//! for runs started here, within a second for runs started elsewhere), until the client hangs
//! up. A run whose stream was not stored (started by `POST …/runs` without `stream_resumable`,
//! and never followed) shows only its end, from its record.

use super::super::auth;
use super::super::errors::ApiError;
use super::super::publish::END;
use super::super::thread_records::existing;
use super::super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::response::sse::{Event, KeepAlive, Sse};
use axum::Json;
use futures::Stream;
use planwright::ids::InterruptId;
use planwright::runs::{RunRecord, RunRecordStatus, StreamEvent};
use serde::Deserialize;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashSet};
use std::convert::Infallible;
use std::sync::{Arc, LazyLock};
use std::time::Duration;
use tokio::sync::{mpsc, watch};

/// Bits of an event's `seq` below its run's submission number.
pub const SHIFT: u32 = 26;

/// Protocol events one stored event may make (more are left out, with a warning).
pub const SLOTS: u64 = 16;

/// How many stored events one read takes.
const READ_BATCH: usize = 256;

/// The lowest `seq` a run's events may have: everything before it belongs to older runs.
pub fn run_base(rec: &RunRecord) -> u64 {
    (rec.seq + 1) << SHIFT
}

/// Bumped when this process starts a protocol run: streams waiting for a thread's next run look.
static RUNS: LazyLock<watch::Sender<u64>> = LazyLock::new(|| watch::channel(0).0);

/// Wakes the streams waiting for a thread's next run (they look whether it is theirs).
pub fn runs_changed() {
    RUNS.send_modify(|n| *n = n.wrapping_add(1));
}

/// The protocol's lifecycle status for a run's record (`None` while it has not ended).
pub fn lifecycle_of(rec: &RunRecord) -> Option<&'static str> {
    match rec.status {
        RunRecordStatus::Pending | RunRecordStatus::Running => None,
        RunRecordStatus::Success => Some("completed"),
        RunRecordStatus::Interrupted => Some("interrupted"),
        RunRecordStatus::Error | RunRecordStatus::Timeout => Some("failed"),
    }
}

/// The body (or a WebSocket `subscription.subscribe`'s params): which events the client wants.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Filter {
    /// `values`, `updates`, `messages`, `tools`, `lifecycle`, `input`, `checkpoints`, `tasks`,
    /// `custom` or `custom:NAME`.
    channels: Vec<String>,
    /// Namespace prefixes (any namespace when absent).
    #[serde(default)]
    namespaces: Option<Vec<Vec<String>>>,
    /// How far below a prefix (unbounded when absent).
    #[serde(default)]
    depth: Option<usize>,
    /// Only events with a greater `seq`.
    #[serde(default)]
    since: Option<u64>,
}

impl Filter {
    /// The `since` cursor, if any.
    pub fn since(&self) -> Option<u64> {
        self.since
    }
}

/// One protocol event.
#[derive(Debug, Clone, PartialEq)]
pub struct ProtocolEvent {
    /// Its place in the thread's stream.
    pub seq: u64,
    /// `lifecycle`, `values`, `updates`, `input.requested`, `input.answered`, `messages`,
    /// `custom`, `tasks`, `checkpoints`.
    pub method: &'static str,
    /// The subgraph it comes from (`[]`: the root graph).
    pub namespace: Vec<String>,
    /// The node that made it (`params.node`), for `updates` and `messages`.
    pub node: Option<String>,
    /// Its `params.data`.
    pub data: Value,
}

impl ProtocolEvent {
    /// The event as it goes on the wire.
    pub fn to_json(&self) -> Value {
        let ms = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        let mut params = json!({"namespace": self.namespace, "timestamp": ms, "data": self.data});
        if let Some(node) = &self.node {
            params["node"] = json!(node);
        }
        json!({
            "type": "event",
            "event_id": self.seq.to_string(),
            "seq": self.seq,
            "method": self.method,
            "params": params,
        })
    }

    /// The channel a subscription names it by.
    fn channel(&self) -> String {
        match self.method {
            "input.requested" | "input.answered" => "input".into(),
            "custom" => match self.data["name"].as_str() {
                Some(n) if !n.is_empty() => format!("custom:{n}"),
                _ => "custom".into(),
            },
            m => m.into(),
        }
    }
}

/// A namespace segment without its `:task` suffix.
fn bare(segment: &str) -> &str {
    segment.split(':').next().unwrap_or(segment)
}

impl Filter {
    /// Whether the client wants `ev`.
    pub fn wants(&self, ev: &ProtocolEvent) -> bool {
        if self.since.is_some_and(|s| ev.seq <= s) {
            return false;
        }
        let channel = ev.channel();
        let named = self
            .channels
            .iter()
            .any(|c| *c == channel || (c == "custom" && channel.starts_with("custom:")));
        if !named {
            return false;
        }
        let Some(prefixes) = self.namespaces.as_ref().filter(|p| !p.is_empty()) else {
            return true;
        };
        prefixes.iter().any(|prefix| {
            prefix.len() <= ev.namespace.len()
                && prefix
                    .iter()
                    .zip(&ev.namespace)
                    .all(|(p, n)| p == n || (!p.contains(':') && bare(n) == p))
                && self
                    .depth
                    .is_none_or(|d| ev.namespace.len() - prefix.len() <= d)
        })
    }

    /// Whether every event of a run starting at `base` is at or before `since`.
    fn passed(&self, base: u64) -> bool {
        self.since.is_some_and(|s| s >= base + (1 << SHIFT) - 1)
    }
}

/// A message whose chunks have come but not its end.
struct OpenMessage {
    /// The node that streams it.
    node: Option<String>,
    /// The text so far.
    text: String,
}

/// One protocol event before its `seq`: method, namespace, node, data.
type Made = (&'static str, Vec<String>, Option<String>, Value);

/// One run's stored events turned into protocol events.
pub struct Translation {
    graph: String,
    /// The interrupts the run answers by id (`input.answered` at its start).
    answers: Vec<String>,
    /// Interrupts already announced.
    asked: HashSet<String>,
    /// Messages streamed as chunks and not finished, by namespace, task and message id.
    open: BTreeMap<(Vec<String>, String, String), OpenMessage>,
    /// Ids of the messages started, so a message is not sent twice.
    started: HashSet<String>,
    interrupted: bool,
    error: Option<String>,
    /// The end marker was read.
    pub ended: bool,
}

impl Translation {
    /// For a run of `graph`.
    pub fn new(graph: &str) -> Self {
        Self {
            graph: graph.to_string(),
            answers: Vec::new(),
            asked: HashSet::new(),
            open: BTreeMap::new(),
            started: HashSet::new(),
            interrupted: false,
            error: None,
            ended: false,
        }
    }

    /// For the run `rec`: its graph, and the interrupts it answers by id (the keys of its
    /// `command.resume` when they are all interrupt ids, as LangGraph reads a resume map).
    pub fn for_run(rec: &RunRecord) -> Self {
        let mut tr = Self::new(&rec.assistant_id);
        if let Some(map) = rec
            .kwargs
            .pointer("/command/resume")
            .and_then(Value::as_object)
        {
            if !map.is_empty() && map.keys().all(|k| InterruptId::is_digest(k)) {
                tr.answers = map.keys().cloned().collect();
            }
        }
        tr
    }

    /// The protocol events of stored event `e` of the run starting at `base`.
    pub fn on_stored(&mut self, base: u64, e: &StreamEvent) -> Vec<ProtocolEvent> {
        let mut out: Vec<Made> = Vec::new();
        let mut parts = e.event.split('|');
        let mode = parts.next().unwrap_or_default();
        let ns: Vec<String> = parts.map(String::from).collect();
        let data: Value = serde_json::from_str(&e.data).unwrap_or(Value::Null);
        match mode {
            "metadata" => {
                out.push((
                    "lifecycle",
                    vec![],
                    None,
                    json!({"event": "running", "graph_name": self.graph}),
                ));
                if !self.answers.is_empty() {
                    let ids = json!({ "interrupt_ids": self.answers });
                    out.push(("input.answered", vec![], None, ids));
                }
            }
            END => {
                self.ended = true;
                self.finish_messages(|_| true, &mut out);
                out.push(("lifecycle", vec![], None, self.terminal(None)));
            }
            "error" => {
                let why = data["message"]
                    .as_str()
                    .map(String::from)
                    .unwrap_or_else(|| data.to_string());
                self.error = Some(why);
            }
            "values" => {
                let mut values = data;
                if let Some(asked) = values
                    .as_object_mut()
                    .and_then(|o| o.remove("__interrupt__"))
                {
                    self.ask(&ns, &asked, &mut out);
                }
                if !values.as_object().is_some_and(|o| o.is_empty()) {
                    out.push(("values", ns, None, values));
                }
            }
            "updates" => {
                if let Some(obj) = data.as_object() {
                    for (node, values) in obj {
                        if node == "__interrupt__" {
                            self.ask(&ns, values, &mut out);
                        } else {
                            out.push((
                                "updates",
                                ns.clone(),
                                Some(node.clone()),
                                json!({"node": node, "values": values}),
                            ));
                        }
                    }
                }
            }
            "custom" => out.push(("custom", ns, None, json!({ "payload": data }))),
            "messages" => self.message(ns, &data, &mut out),
            "tasks" => {
                // A task's result ends the messages it streamed.
                if data.get("result").is_some() || data.get("error").is_some() {
                    if let Some(task) = data["id"].as_str() {
                        self.finish_messages(|(n, t, _)| *n == ns && t == task, &mut out);
                    }
                }
                out.push(("tasks", ns, None, data));
            }
            "checkpoints" => {
                let id = |c: &Value| c.pointer("/configurable/checkpoint_id").cloned();
                let mut cp = json!({
                    "id": id(&data["config"]).unwrap_or(Value::Null),
                    "step": data["metadata"]["step"],
                    "source": data["metadata"]["source"],
                });
                if let Some(parent) = id(&data["parent_config"]) {
                    cp["parent_id"] = parent;
                }
                out.push(("checkpoints", ns, None, cp));
            }
            _ => {}
        }
        if out.len() as u64 > SLOTS {
            tracing::warn!(
                event = e.event,
                made = out.len(),
                "a stored event made more protocol events than it has ids for; the rest are left out"
            );
            out.truncate(SLOTS as usize);
        }
        out.into_iter()
            .enumerate()
            .map(|(k, (method, namespace, node, data))| ProtocolEvent {
                seq: base + e.seq * SLOTS + k as u64,
                method,
                namespace,
                node,
                data,
            })
            .collect()
    }

    /// The protocol's message events for one `[message or chunk, metadata]` of the run.
    fn message(&mut self, ns: Vec<String>, data: &Value, out: &mut Vec<Made>) {
        let (m, meta) = (&data[0], &data[1]);
        let Some(id) = m["id"].as_str() else { return };
        let node = meta["langgraph_node"].as_str().map(String::from);
        let text = text_of(&m["content"]);
        let kind = m["type"].as_str().unwrap_or("ai");
        if kind.ends_with("Chunk") {
            let task = meta["langgraph_task"]
                .as_str()
                .unwrap_or_default()
                .to_string();
            let key = (ns.clone(), task, id.to_string());
            if !self.open.contains_key(&key) {
                self.started.insert(id.to_string());
                out.push(("messages", ns.clone(), node.clone(), start(role(kind), m)));
                out.push((
                    "messages",
                    ns.clone(),
                    node.clone(),
                    block("content-block-start", ""),
                ));
                let message = OpenMessage {
                    node: node.clone(),
                    text: String::new(),
                };
                self.open.insert(key.clone(), message);
            }
            if let Some(open) = self.open.get_mut(&key) {
                open.text.push_str(&text);
            }
            let delta = json!({"event": "content-block-delta", "index": 0,
                "delta": {"type": "text-delta", "text": text}});
            out.push(("messages", ns, node, delta));
        } else if self.started.insert(id.to_string()) {
            out.push(("messages", ns.clone(), node.clone(), start(role(kind), m)));
            out.push((
                "messages",
                ns.clone(),
                node.clone(),
                block("content-block-start", ""),
            ));
            let delta = json!({"event": "content-block-delta", "index": 0,
                "delta": {"type": "text-delta", "text": text}});
            out.push(("messages", ns.clone(), node.clone(), delta));
            out.push((
                "messages",
                ns.clone(),
                node.clone(),
                block("content-block-finish", &text),
            ));
            out.push(("messages", ns, node, json!({"event": "message-finish"})));
        }
    }

    /// Ends the open messages `which` picks: their whole text, then `message-finish`.
    fn finish_messages(
        &mut self,
        which: impl Fn(&(Vec<String>, String, String)) -> bool,
        out: &mut Vec<Made>,
    ) {
        let done: Vec<_> = self.open.keys().filter(|k| which(k)).cloned().collect();
        for key in done {
            if let Some(m) = self.open.remove(&key) {
                let ns = key.0;
                out.push((
                    "messages",
                    ns.clone(),
                    m.node.clone(),
                    block("content-block-finish", &m.text),
                ));
                out.push(("messages", ns, m.node, json!({"event": "message-finish"})));
            }
        }
    }

    /// `input.requested` for each question of an `__interrupt__` list not announced yet.
    fn ask(&mut self, ns: &[String], list: &Value, out: &mut Vec<Made>) {
        if ns.is_empty() {
            self.interrupted = true;
        }
        for i in list.as_array().into_iter().flatten() {
            let Some(id) = i["id"].as_str() else { continue };
            if self.asked.insert(id.to_string()) {
                out.push((
                    "input.requested",
                    ns.to_vec(),
                    None,
                    json!({"interrupt_id": id, "payload": i["value"], "value": i["value"]}),
                ));
            }
        }
    }

    /// The root's last lifecycle event: from what the stream said, or the record's `status`.
    fn terminal(&self, status: Option<&str>) -> Value {
        let status = status.unwrap_or(if self.error.is_some() {
            "failed"
        } else if self.interrupted {
            "interrupted"
        } else {
            "completed"
        });
        let mut data = json!({"event": status, "graph_name": self.graph});
        if status == "failed" {
            data["error"] = json!(self.error.as_deref().unwrap_or("the run failed"));
        }
        data
    }

    /// The end of a run whose stream has no end marker, from its record.
    fn ended_by_record(&mut self, seq: u64, rec: Option<&RunRecord>) -> ProtocolEvent {
        self.ended = true;
        if let Some(e) = rec.and_then(|r| r.error.clone()) {
            self.error.get_or_insert(e);
        }
        let status = rec.and_then(lifecycle_of);
        ProtocolEvent {
            seq,
            method: "lifecycle",
            namespace: vec![],
            node: None,
            data: self.terminal(status),
        }
    }
}

/// A message's `message-start`: its role and id (and the call a tool message answers).
fn start(role: &str, m: &Value) -> Value {
    let mut s = json!({"event": "message-start", "role": role, "id": m["id"]});
    if let Some(call) = m.get("tool_call_id").filter(|c| c.is_string()) {
        s["tool_call_id"] = call.clone();
    }
    s
}

/// A text block's `content-block-start` or `content-block-finish` (index 0: our messages carry
/// one text block).
fn block(event: &str, text: &str) -> Value {
    json!({"event": event, "index": 0, "content": {"type": "text", "text": text}})
}

/// The protocol's role for a LangChain message `type`.
fn role(kind: &str) -> &'static str {
    match kind.trim_end_matches("MessageChunk") {
        "human" | "Human" => "human",
        "system" | "System" | "developer" => "system",
        "tool" | "Tool" => "tool",
        _ => "ai",
    }
}

/// A message's text: its content when a string, else the text of its text blocks.
fn text_of(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b.as_str().or_else(|| b["text"].as_str()))
            .collect(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

/// The endpoint: 404 for a thread that does not exist (yet), else the stream.
pub async fn stream_events(
    State(state): State<Arc<AppState>>,
    Path(thread_id): Path<String>,
    body: Result<Json<Filter>, JsonRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Json(filter) = body?;
    existing(&state, &thread_id).await?;
    let (tx, rx) = mpsc::channel::<Event>(READ_BATCH);
    let stream = async move {
        if let Err(frame) = follow(&state, &thread_id, &filter, &tx, &sse_frame).await {
            let _ = tx
                .send(Event::default().event("error").data(frame.to_string()))
                .await;
        }
    };
    // The follower outlives the request: it goes on as its caller.
    match auth::caller() {
        Some(me) => tokio::spawn(auth::as_caller(me, stream)),
        None => tokio::spawn(stream),
    };
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::default()))
}

/// An event as a server-sent event (its `seq` is the SSE `id`).
fn sse_frame(ev: &ProtocolEvent) -> Event {
    Event::default()
        .id(ev.seq.to_string())
        .event(ev.method)
        .data(ev.to_json().to_string())
}

/// How a transport carries an event to its client (an SSE event, a WebSocket frame).
pub type Frame<T> = dyn Fn(&ProtocolEvent) -> T + Sync;

/// Follows the thread's runs for one subscription (an SSE stream, or a WebSocket
/// `subscription.subscribe`), sending each event `filter` wants to `tx` as `frame` makes it, until
/// the receiver is dropped. `Err` is the protocol's error frame (`id` null) to end the stream
/// with, once the runs' events cannot be read (logged here).
pub async fn follow<T: Send>(
    state: &AppState,
    thread_id: &str,
    filter: &Filter,
    tx: &mpsc::Sender<T>,
    frame: &Frame<T>,
) -> Result<(), Value> {
    follow_thread(state, thread_id, filter, tx, frame)
        .await
        .map_err(|e| {
            tracing::warn!(thread_id, error = %e, "thread event stream dropped: its runs' events cannot be read");
            json!({"type": "error", "id": null, "error": "unknown_error", "message": e})
        })
}

/// Sends `ev` if the client wants it; false once the client is gone.
async fn send<T>(
    filter: &Filter,
    ev: &ProtocolEvent,
    tx: &mpsc::Sender<T>,
    frame: &Frame<T>,
) -> bool {
    if !filter.wants(ev) {
        return true;
    }
    tx.send(frame(ev)).await.is_ok()
}

/// Follows the thread's runs, oldest first, then waits for the next, until the client hangs up.
async fn follow_thread<T>(
    state: &AppState,
    thread_id: &str,
    filter: &Filter,
    tx: &mpsc::Sender<T>,
    frame: &Frame<T>,
) -> Result<(), String> {
    let mut news = RUNS.subscribe();
    let mut done: HashSet<String> = HashSet::new();
    loop {
        news.borrow_and_update();
        let mut runs = state
            .run_store
            .list_thread(thread_id, usize::MAX, 0)
            .await
            .map_err(|e| planwright::ErrorChain(&e).to_string())?;
        runs.sort_by_key(|r| r.seq);
        match runs.into_iter().find(|r| !done.contains(&r.run_id)) {
            Some(run) => {
                done.insert(run.run_id.clone());
                // A thread this caller could not see when it subscribed (it did not exist yet)
                // may be created by another user: that user's runs are absent to this caller.
                if filter.passed(run_base(&run))
                    || !auth::caller_may_see(&json!({"owner": run.owner}))
                {
                    continue;
                }
                if !follow_run(state, &run, filter, tx, frame).await? {
                    return Ok(());
                }
            }
            None => {
                tokio::select! {
                    _ = news.changed() => {}
                    _ = tokio::time::sleep(Duration::from_secs(1)) => {}
                    _ = tx.closed() => return Ok(()),
                }
            }
        }
    }
}

/// Sends one run's protocol events until its end; false once the client is gone.
async fn follow_run<T>(
    state: &AppState,
    run: &RunRecord,
    filter: &Filter,
    tx: &mpsc::Sender<T>,
    frame: &Frame<T>,
) -> Result<bool, String> {
    let base = run_base(run);
    let mut tr = Translation::for_run(run);
    let mut woken = state.events.watch(&run.run_id);
    let mut after = 0u64;
    // Set (with the record as it ended) once the record says the run ended.
    let mut ended: Option<Option<RunRecord>> = None;
    loop {
        woken.borrow_and_update();
        let batch = state
            .events
            .read(&run.run_id, after, READ_BATCH)
            .await
            .map_err(|e| planwright::ErrorChain(&e).to_string())?;
        for e in &batch {
            after = e.seq;
            for ev in tr.on_stored(base, e) {
                if !send(filter, &ev, tx, frame).await {
                    return Ok(false);
                }
            }
            if tr.ended {
                return Ok(true);
            }
        }
        if !batch.is_empty() {
            continue;
        }
        if let Some(rec) = &ended {
            // The record says it ended and its stream holds no end marker: it never will.
            let ev = tr.ended_by_record(base + (after + 1) * SLOTS, rec.as_ref());
            return Ok(send(filter, &ev, tx, frame).await);
        }
        let idle = tokio::select! {
            _ = woken.changed() => false,
            _ = tokio::time::sleep(Duration::from_secs(1)) => true,
            _ = tx.closed() => return Ok(false),
        };
        if idle {
            match state.run_store.get(&run.run_id).await {
                Ok(Some(r)) if r.status.is_ended() => ended = Some(Some(r)),
                Ok(Some(_)) => {}
                Ok(None) => ended = Some(None),
                Err(e) => return Err(planwright::ErrorChain(&e).to_string()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stored(seq: u64, event: &str, data: Value) -> StreamEvent {
        StreamEvent {
            seq,
            event: event.into(),
            data: data.to_string(),
        }
    }

    #[test]
    fn a_pause_becomes_a_question_and_an_interrupted_end() {
        let mut tr = Translation::new("g");
        let base = 1 << SHIFT;
        let start = tr.on_stored(base, &stored(1, "metadata", json!({"run_id": "r"})));
        assert_eq!(start[0].data["event"], "running");
        assert_eq!(start[0].seq, base + SLOTS);
        let asked = json!({"__interrupt__": [{"id": "i1", "value": {"q": 1}}]});
        let evs = tr.on_stored(base, &stored(2, "updates", asked.clone()));
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].method, "input.requested");
        assert_eq!(evs[0].data["interrupt_id"], "i1");
        assert_eq!(evs[0].data["payload"], json!({"q": 1}));
        // The final values repeat the question: it is not asked twice.
        let mut values = json!({"a": 1});
        values["__interrupt__"] = asked["__interrupt__"].clone();
        let evs = tr.on_stored(base, &stored(3, "values", values));
        assert_eq!(evs.len(), 1);
        assert_eq!(evs[0].data, json!({"a": 1}));
        let end = tr.on_stored(base, &stored(4, END, Value::Null));
        assert_eq!(end[0].data["event"], "interrupted");
        assert!(tr.ended);
    }

    #[test]
    fn a_resume_by_id_is_announced_and_chunks_make_one_message() {
        let mut rec = RunRecord::pending("r", "t", "g", 0);
        let id = "0123456789abcdef0123456789abcdef";
        rec.kwargs = json!({"command": {"resume": {id: "yes"}}});
        let mut tr = Translation::for_run(&rec);
        let start = tr.on_stored(0, &stored(1, "metadata", json!({})));
        assert_eq!(start[1].method, "input.answered");
        assert_eq!(start[1].data, json!({ "interrupt_ids": [id] }));
        let meta = json!({"langgraph_node": "n", "langgraph_task": "1.0"});
        let chunk =
            |text: &str| json!([{"type": "AIMessageChunk", "id": "m", "content": text}, meta]);
        let a = tr.on_stored(0, &stored(2, "messages", chunk("he")));
        let b = tr.on_stored(0, &stored(3, "messages", chunk("llo")));
        let kinds = |evs: &[ProtocolEvent]| -> Vec<String> {
            evs.iter()
                .map(|e| e.data["event"].as_str().unwrap().to_string())
                .collect()
        };
        assert_eq!(
            kinds(&a),
            [
                "message-start",
                "content-block-start",
                "content-block-delta"
            ]
        );
        assert_eq!(kinds(&b), ["content-block-delta"]);
        assert_eq!(a[0].node.as_deref(), Some("n"));
        let done = json!({"id": "1.0", "name": "n", "result": [], "error": null});
        let end = tr.on_stored(0, &stored(4, "tasks", done));
        assert_eq!(kinds(&end[..2]), ["content-block-finish", "message-finish"]);
        assert_eq!(end[0].data["content"]["text"], "hello");
        assert_eq!(end[2].method, "tasks");
        // A plain resume value names no interrupt: nothing to announce.
        rec.kwargs = json!({"command": {"resume": "yes"}});
        let start = Translation::for_run(&rec).on_stored(0, &stored(1, "metadata", json!({})));
        assert_eq!(start.len(), 1);
    }

    #[test]
    fn filters_match_channels_namespaces_depth_and_since() {
        let ev = |method, ns: &[&str], seq| ProtocolEvent {
            seq,
            method,
            namespace: ns.iter().map(|s| s.to_string()).collect(),
            node: None,
            data: json!({}),
        };
        let f: Filter = serde_json::from_value(json!({"channels": ["values", "input"]})).unwrap();
        assert!(f.wants(&ev("values", &["sub:1"], 5)));
        assert!(f.wants(&ev("input.requested", &[], 5)));
        assert!(!f.wants(&ev("updates", &[], 5)));
        let f: Filter = serde_json::from_value(
            json!({"channels": ["values"], "namespaces": [["sub"]], "depth": 0, "since": 5}),
        )
        .unwrap();
        assert!(f.wants(&ev("values", &["sub:1"], 6)));
        assert!(!f.wants(&ev("values", &["sub:1"], 5)), "at the cursor");
        assert!(
            !f.wants(&ev("values", &["sub:1", "inner:2"], 6)),
            "too deep"
        );
        assert!(!f.wants(&ev("values", &[], 6)), "outside the prefix");
    }

    #[tokio::test]
    async fn another_users_runs_on_a_thread_of_the_same_id_are_absent() {
        use planwright::runs::{now_ms, RunChange, RunRecordStatus as S};
        let args = super::super::super::ServeArgs {
            checkpoint: "memory:".into(),
            model: "offline".into(),
            ..super::super::super::ServeArgs::default()
        };
        let st = super::super::super::state(&args).await.unwrap();
        // Bob's run on `t`, then Ann's (the thread was deleted and made again under the id).
        let mut seqs = Vec::new();
        for (id, owner) in [("bob-run", "bob"), ("ann-run", "ann")] {
            let mut r = RunRecord::pending(id, "t", "g", now_ms());
            r.owner = Some(owner.into());
            let r = st.run_store.insert(r).await.unwrap();
            let ended = RunChange::at(now_ms());
            assert!(st
                .run_store
                .transition(id, &[S::Pending], S::Success, ended)
                .await
                .unwrap());
            seqs.push(run_base(&r) >> SHIFT);
        }
        let filter: Filter = serde_json::from_value(json!({"channels": ["lifecycle"]})).unwrap();
        let ann = auth::Principal {
            user: "ann".into(),
            admin: false,
        };
        let (tx, mut rx) = mpsc::channel::<ProtocolEvent>(16);
        let frame = |ev: &ProtocolEvent| ev.clone();
        let st2 = st.clone();
        let follower = tokio::spawn(auth::as_caller(ann, async move {
            let _ = follow(&st2, "t", &filter, &tx, &frame).await;
        }));
        // Ann's first event is her own run's end: Bob's run is skipped, not shown.
        let first = rx.recv().await.expect("ann's run is followed");
        assert_eq!(first.seq >> SHIFT, seqs[1], "{first:?}");
        assert_eq!(first.data["event"], "completed", "{first:?}");
        follower.abort();
    }
}
