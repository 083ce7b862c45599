//! `load --target URL --assistant NAME`: conversations against any server that speaks the
//! LangGraph Agent Server API — Planwright's `serve`, `langgraph dev`, a LangGraph Platform
//! deployment. Nothing here assumes Planwright: threads get UUIDs (LangGraph refuses other ids),
//! the input comes from a template filled per conversation ([`super::template`]), interrupts are
//! found in the thread's state (`tasks[].interrupts`, with the node that paused) and answered by
//! the answers file's rules, and a server whose `/metrics` is not Planwright's gives no
//! server-side figures rather than zeros.
//!
//! Each run either waits (`runs/wait`) or streams (`runs/stream` over server-sent events, in the
//! stream modes asked for). A streamed run is timed on the client, from its due time — the
//! conversation's due time for its first run, the moment the person's answer was ready for a
//! resume — so a slow server's queue is in the figures (no coordinated omission): time to the
//! first event, to the first token (a `messages` chunk), between tokens, between events, and to
//! the stream's end ([`super::record::RunTimes`]).

use super::record::{Ended, Outcome, RunTimes};
use super::remote::{parse_metrics, ServerMetrics};
use super::replicas::{Replicas, Reply};
use super::schedule::{sleep_until, stopped, BoxFut, Conv, Conversations, Probe, Totals};
use super::template::{Answers, Template};
use super::LoadError;
use serde_json::{json, Map, Value};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// How requests authenticate: `x-api-key` (LangGraph Platform), a bearer token, both or neither.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Auth {
    /// Sent as `x-api-key`.
    pub api_key: Option<String>,
    /// Sent as `Authorization: Bearer …`.
    pub bearer: Option<String>,
}

impl Auth {
    fn apply(&self, mut req: reqwest::RequestBuilder) -> reqwest::RequestBuilder {
        if let Some(k) = &self.api_key {
            req = req.header("x-api-key", k);
        }
        if let Some(t) = &self.bearer {
            req = req.bearer_auth(t);
        }
        req
    }
}

/// What conversations against an Agent Server API send.
#[derive(Clone, Debug)]
pub struct AgentSpec {
    /// The `assistant_id`: an assistant's id or a graph's name.
    pub assistant: String,
    /// The run input of each conversation.
    pub template: Template,
    /// How the person answers interrupts.
    pub answers: Answers,
    /// Stream modes for `runs/stream` (`values`, `messages-tuple`, `updates`, …); `None`: each run
    /// is a `runs/wait`.
    pub stream_modes: Option<Vec<String>>,
    /// Authentication.
    pub auth: Auth,
}

/// One server-sent event: its name (`message` when the server gave none) and data.
#[derive(Clone, Debug, PartialEq)]
pub struct SseEvent {
    /// `event:`.
    pub name: String,
    /// `data:` lines, joined by line breaks.
    pub data: String,
}

/// Splits a byte stream into server-sent events as the bytes arrive.
#[derive(Debug, Default)]
pub struct SseParser {
    buf: Vec<u8>,
}

impl SseParser {
    /// Adds bytes; returns the events they complete.
    pub fn push(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buf.extend(bytes.iter().filter(|b| **b != b'\r'));
        let mut out = Vec::new();
        while let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
            let block: Vec<u8> = self.buf.drain(..end + 2).collect();
            let text = String::from_utf8_lossy(&block[..end]);
            let (mut name, mut data, mut any) = (None, Vec::new(), false);
            for line in text.lines() {
                if let Some(v) = line.strip_prefix("event:") {
                    name = Some(v.trim().to_string());
                    any = true;
                } else if let Some(v) = line.strip_prefix("data:") {
                    data.push(v.strip_prefix(' ').unwrap_or(v).to_string());
                    any = true;
                }
            }
            if any {
                out.push(SseEvent {
                    name: name.unwrap_or_else(|| "message".into()),
                    data: data.join("\n"),
                });
            }
        }
        out
    }
}

/// Whether an event is a model token: a `messages` chunk (`messages-tuple` mode) or a
/// `messages/partial` (`messages` mode), from the graph or a subgraph (`messages|ns`).
pub fn is_token(name: &str) -> bool {
    matches!(
        name.split('|').next().unwrap_or(name),
        "messages" | "messages/partial"
    )
}

/// Whether an event is the protocol's, not the graph's output (not counted as an event).
fn is_protocol(name: &str) -> bool {
    matches!(name, "metadata" | "end")
}

/// The interrupts a thread's state holds: `(node, interrupt id, value)`, from `tasks[]` (which name
/// the node) or else the state's `interrupts`.
pub fn pending_interrupts(state: &Value) -> Vec<(Option<String>, Option<String>, Value)> {
    let mut out = Vec::new();
    for task in state["tasks"].as_array().into_iter().flatten() {
        for i in task["interrupts"].as_array().into_iter().flatten() {
            out.push((
                task["name"].as_str().map(String::from),
                i["id"].as_str().map(String::from),
                i["value"].clone(),
            ));
        }
    }
    if out.is_empty() {
        for i in state["interrupts"].as_array().into_iter().flatten() {
            out.push((None, i["id"].as_str().map(String::from), i["value"].clone()));
        }
    }
    out
}

/// A run's timestamps as the stream arrives.
#[derive(Default)]
struct Clock {
    first_event: Option<Instant>,
    first_token: Option<Instant>,
    last_event: Option<Instant>,
    last_token: Option<Instant>,
    times: RunTimes,
}

impl Clock {
    fn event(&mut self, name: &str, due: Instant, now: Instant) {
        if is_protocol(name) {
            return;
        }
        let t = &mut self.times;
        t.events += 1;
        if let Some(last) = self.last_event {
            t.event_gaps.push(now.saturating_duration_since(last));
        } else {
            self.first_event = Some(now);
            t.first_event = Some(now.saturating_duration_since(due));
        }
        self.last_event = Some(now);
        if is_token(name) {
            t.tokens += 1;
            if let Some(last) = self.last_token {
                t.token_gaps.push(now.saturating_duration_since(last));
            } else {
                self.first_token = Some(now);
                t.first_token = Some(now.saturating_duration_since(due));
            }
            self.last_token = Some(now);
        }
    }
}

/// Conversations against an Agent Server API's replicas.
pub struct AgentConversations {
    client: reqwest::Client,
    replicas: Replicas,
    spec: AgentSpec,
    /// Planwright's node executions before the run (`None`: not a Planwright server).
    executions0: Option<u64>,
}

/// What a thread id the conversation holds and where it lives, for cancelling it.
type ThreadAt = Mutex<Option<(String, usize)>>;

impl AgentConversations {
    /// Conversations of `spec` against the servers at `bases` (reads their `/metrics` once).
    pub async fn new(bases: &[String], spec: AgentSpec) -> Result<Arc<Self>, LoadError> {
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| LoadError::Usage(format!("--target: {e}")))?;
        let mut a = AgentConversations {
            client,
            replicas: Replicas::new(bases).map_err(LoadError::Usage)?,
            spec,
            executions0: None,
        };
        a.executions0 = a
            .metrics()
            .await
            .and_then(|(m, pw)| pw.then_some(m.node_executions));
        Ok(Arc::new(a))
    }

    /// Every replica's `/metrics`, summed, and whether any is Planwright's (`None`: no replica
    /// answered with a page).
    async fn metrics(&self) -> Option<(ServerMetrics, bool)> {
        let mut sum: Option<(ServerMetrics, bool)> = None;
        for at in 0..self.replicas.len() {
            let req = self
                .client
                .get(format!("{}/metrics", self.replicas.base(at)))
                .timeout(Duration::from_secs(2));
            let Ok(resp) = self.spec.auth.apply(req).send().await else {
                continue;
            };
            if !resp.status().is_success() {
                continue;
            }
            let Ok(text) = resp.text().await else {
                continue;
            };
            let planwright = text.contains("planwright_node_executions_total");
            let (total, pw) = sum.get_or_insert_with(Default::default);
            *pw |= planwright;
            total.add(parse_metrics(&text));
        }
        sum
    }

    fn request(&self, base: &str, get: bool, path: &str, body: &Value) -> reqwest::RequestBuilder {
        let url = format!("{base}{path}");
        let req = if get {
            self.client.get(url)
        } else {
            self.client.post(url).json(body)
        };
        self.spec.auth.apply(req)
    }

    /// A request safe to send again (a read; creating a thread of a fresh UUID with
    /// `if_exists: do_nothing`), failing over between replicas.
    async fn call(
        &self,
        at: &mut usize,
        get: bool,
        path: &str,
        body: Value,
    ) -> Result<Value, String> {
        match self
            .replicas
            .send(at, |base| self.request(base, get, path, &body))
            .await
        {
            Reply::Answered(status, v) if status < 400 => Ok(v),
            Reply::Answered(status, v) => Err(format!("{path}: HTTP {status}: {}", detail(&v))),
            Reply::Unreachable(e) | Reply::Gone(e) => Err(format!("transport: {e}")),
        }
    }

    /// One run on thread `id` at replica `at`: streamed or waited for, timed from `due`. A run is
    /// sent once: a replica that goes away fails the conversation.
    async fn run_once(
        &self,
        at: usize,
        id: &str,
        mut body: Value,
        due: Instant,
    ) -> Result<RunTimes, String> {
        let base = self.replicas.base(at);
        let streaming = self.spec.stream_modes.is_some();
        if let Some(modes) = &self.spec.stream_modes {
            body["stream_mode"] = json!(modes);
        }
        let path = format!(
            "/threads/{id}/runs/{}",
            if streaming { "stream" } else { "wait" }
        );
        let mut resp = self
            .request(base, false, &path, &body)
            .send()
            .await
            .map_err(|e| format!("transport: {base}: {e}"))?;
        let status = resp.status().as_u16();
        if status >= 400 {
            let v = resp.json::<Value>().await.unwrap_or(Value::Null);
            return Err(format!("{path}: HTTP {status}: {}", detail(&v)));
        }
        let mut clock = Clock::default();
        clock.times.streamed = streaming;
        if streaming {
            let mut sse = SseParser::default();
            loop {
                let chunk = resp
                    .chunk()
                    .await
                    .map_err(|e| format!("stream: {base}: {e}"))?;
                let Some(bytes) = chunk else { break };
                let now = Instant::now();
                for ev in sse.push(&bytes) {
                    if ev.name == "error" {
                        return Err(format!(
                            "run error: {}",
                            ev.data.chars().take(200).collect::<String>()
                        ));
                    }
                    clock.event(&ev.name, due, now);
                }
            }
        } else {
            let v = resp.json::<Value>().await.unwrap_or(Value::Null);
            if !v["__error__"].is_null() {
                return Err(format!("run error: {}", v["__error__"]));
            }
            if matches!(v["status"].as_str(), Some("failed" | "error")) {
                return Err("run failed".into());
            }
        }
        clock.times.end_to_end = due.elapsed();
        Ok(clock.times)
    }

    async fn body(
        &self,
        c: &mut Conv,
        tid: &ThreadAt,
        resumes: &mut usize,
        people: &mut Duration,
    ) -> Result<Outcome, String> {
        let mut at = self.replicas.home(c.i);
        let thread = self
            .call(
                &mut at,
                false,
                "/threads",
                json!({"thread_id": planwright::ids::random_uuid(), "if_exists": "do_nothing"}),
            )
            .await?;
        let id = thread["thread_id"]
            .as_str()
            .filter(|s| !s.is_empty())
            .ok_or("POST /threads answered no thread_id")?
            .to_string();
        *tid.lock().unwrap_or_else(|p| p.into_inner()) = Some((id.clone(), at));
        let spec = &self.spec;
        let row = spec.template.row(c.i);
        let mut body = json!({"assistant_id": spec.assistant, "input": spec.template.input(c.i)});
        let (mut due, mut first_event, mut first_token) = (c.due, false, false);
        loop {
            let times = self.run_once(at, &id, body, due).await?;
            // The conversation's firsts count from its own due time, less its person's time.
            let since = due.saturating_duration_since(c.due).saturating_sub(*people);
            let conv_event = (!first_event)
                .then_some(times.first_event.map(|d| since + d))
                .flatten();
            let conv_token = (!first_token)
                .then_some(times.first_token.map(|d| since + d))
                .flatten();
            first_event |= conv_event.is_some();
            first_token |= conv_token.is_some();
            c.recorder.run_ended(&times, conv_event, conv_token);
            let state = self
                .call(&mut at, true, &format!("/threads/{id}/state"), Value::Null)
                .await?;
            let pending = pending_interrupts(&state);
            if pending.is_empty() {
                return Ok(Outcome::Completed);
            }
            if *resumes >= spec.answers.max_resumes() {
                return Err(format!("still interrupted after {resumes} answers"));
            }
            let mut answers = Vec::with_capacity(pending.len());
            for (node, iid, value) in &pending {
                match spec.answers.answer(node.as_deref(), value, row, c.i) {
                    Some(a) => answers.push((iid.clone(), a)),
                    None => return Ok(Outcome::LeftPaused),
                }
            }
            let paused = c.person.pauses_for.is_some() && *resumes == 0;
            let wait = c.person.before_answer();
            c.recorder.answered_after(wait, paused);
            if !wait.is_zero() {
                *people += wait;
                tokio::time::sleep(wait).await;
            }
            *resumes += 1;
            // One interrupt: its value; several at once: a map of interrupt id to value.
            let resume = if answers.len() == 1 || answers.iter().any(|(i, _)| i.is_none()) {
                answers.swap_remove(0).1
            } else {
                Value::Object(
                    answers
                        .into_iter()
                        .filter_map(|(i, a)| Some((i?, a)))
                        .collect::<Map<_, _>>(),
                )
            };
            body = json!({"assistant_id": spec.assistant, "command": {"resume": resume}});
            due = Instant::now();
        }
    }

    /// Cancels the thread's pending and running runs.
    async fn cancel(&self, tid: &ThreadAt) {
        let Some((id, mut at)) = tid.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return;
        };
        let Ok(runs) = self
            .call(&mut at, true, &format!("/threads/{id}/runs"), Value::Null)
            .await
        else {
            return;
        };
        for run in runs.as_array().into_iter().flatten() {
            if matches!(run["status"].as_str(), Some("pending" | "running")) {
                if let Some(rid) = run["run_id"].as_str() {
                    let path = format!("/threads/{id}/runs/{rid}/cancel");
                    let _ = self.call(&mut at, false, &path, json!({})).await;
                }
            }
        }
    }
}

fn detail(v: &Value) -> String {
    match &v["detail"] {
        Value::Null => v.to_string().chars().take(200).collect(),
        d => d.to_string().chars().take(200).collect(),
    }
}

impl Conversations for AgentConversations {
    fn name(&self) -> String {
        let bases: Vec<&str> = (0..self.replicas.len())
            .map(|i| self.replicas.base(i))
            .collect();
        format!("{} @ {}", self.spec.assistant, bases.join(", "))
    }

    fn run(self: Arc<Self>, mut c: Conv) -> BoxFut<Ended> {
        Box::pin(async move {
            let tid = Mutex::new(None);
            let (mut resumes, mut people) = (0, Duration::ZERO);
            let leaves = c.person.leaves_after.map(|d| Instant::now() + d);
            let mut stop = c.stop.clone();
            let outcome = tokio::select! {
                o = self.body(&mut c, &tid, &mut resumes, &mut people) => o.unwrap_or_else(Outcome::Failed),
                _ = sleep_until(leaves) => Outcome::Abandoned,
                _ = stopped(&mut stop) => Outcome::CutOff,
            };
            if matches!(outcome, Outcome::Abandoned | Outcome::CutOff) {
                self.cancel(&tid).await;
            }
            Ended {
                outcome,
                resumes,
                people_time: people,
                steps: None,
                non_model_us_per_node: None,
            }
        })
    }

    fn probe(self: Arc<Self>) -> BoxFut<Probe> {
        Box::pin(async move {
            let (m, planwright) = self.metrics().await.unwrap_or_default();
            Probe {
                remote_node_executions: planwright.then_some(m.node_executions),
                mailboxes: m.mailboxes,
                server_rss_kb: m.rss_kb,
                server_cpu_us: m.cpu_us,
            }
        })
    }

    fn finish(self: Arc<Self>) -> BoxFut<Totals> {
        Box::pin(async move {
            let after = self
                .metrics()
                .await
                .and_then(|(m, pw)| pw.then_some(m.node_executions));
            Totals {
                remote_node_executions: after
                    .map(|a| a.saturating_sub(self.executions0.unwrap_or(0))),
                replicas: self.replicas.shares(),
                ..Totals::default()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_are_split_as_bytes_arrive() {
        let mut p = SseParser::default();
        assert!(p.push(b"event: metadata\r\ndata: {\"run_id\":").is_empty());
        let evs = p.push(
            b"\"r\"}\r\n\r\nevent: messages\ndata: [1,\ndata: 2]\n\n: keepalive\n\nevent: val",
        );
        assert_eq!(
            evs,
            [
                SseEvent {
                    name: "metadata".into(),
                    data: "{\"run_id\":\"r\"}".into()
                },
                SseEvent {
                    name: "messages".into(),
                    data: "[1,\n2]".into()
                },
            ]
        );
        assert_eq!(p.push(b"ues\ndata: {}\n\n")[0].name, "values");
        assert!(is_token("messages") && is_token("messages|sub:1") && is_token("messages/partial"));
        assert!(!is_token("messages/metadata") && !is_token("values"));
    }

    #[test]
    fn a_run_is_timed_from_its_due_time() {
        let due = Instant::now();
        let ms = |n| due + Duration::from_millis(n);
        let mut c = Clock::default();
        c.event("metadata", due, ms(1));
        c.event("values", due, ms(10));
        c.event("messages", due, ms(30));
        c.event("messages", due, ms(35));
        c.event("updates", due, ms(50));
        c.event("messages", due, ms(52));
        let t = c.times;
        assert_eq!(
            t.first_event,
            Some(Duration::from_millis(10)),
            "metadata is the protocol's"
        );
        assert_eq!(t.first_token, Some(Duration::from_millis(30)));
        assert_eq!(
            t.token_gaps,
            [Duration::from_millis(5), Duration::from_millis(17)]
        );
        assert_eq!(t.event_gaps.len(), 4);
        assert_eq!((t.events, t.tokens), (5, 3));
    }

    #[test]
    fn interrupts_come_from_tasks_with_their_node_or_from_the_state() {
        let st = json!({"tasks": [{"name": "answer", "interrupts": []},
            {"name": "review", "interrupts": [{"id": "i1", "value": {"type": "approval"}}]}],
            "interrupts": [{"id": "i1", "value": {"type": "approval"}}]});
        assert_eq!(
            pending_interrupts(&st),
            [(
                Some("review".into()),
                Some("i1".into()),
                json!({"type": "approval"})
            )]
        );
        let bare = json!({"interrupts": [{"value": 3}]});
        assert_eq!(pending_interrupts(&bare), [(None, None, json!(3))]);
        assert!(pending_interrupts(&json!({"tasks": [], "interrupts": []})).is_empty());
        let u = planwright::ids::random_uuid();
        assert_eq!(u.len(), 36);
        assert_eq!(&u[14..15], "4");
        assert!(matches!(&u[19..20], "8" | "9" | "a" | "b"));
    }
}
