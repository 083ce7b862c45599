//! The stream modes of the Agent Server API, and a run's events ([`RunEvent`]) turned into the
//! server-sent events of the modes a request asks for, as LangGraph sends them:
//!
//! - `values`: the state after each superstep (`{key: value}`);
//! - `updates`: `{node: update}` per task of each superstep, and `{"__interrupt__": [{"value",
//!   "id"}]}` when the run pauses;
//! - `messages-tuple` (the SDKs' name; the event is `messages`) and `messages`: model tokens and
//!   the messages nodes return ([`super::messages`]);
//! - `custom`: what nodes emit (`NodeContext::emit`);
//! - `tasks`: a task's start `{"id", "name", "input", "triggers"}` and its result `{"id", "name",
//!   "error", "result", "interrupts"}` (`result` as LangGraph's `[[key, value], …]` writes);
//! - `checkpoints`: each checkpoint a superstep leaves, `{"config", "parent_config", "values",
//!   "metadata", "next", "tasks"}` as `get_state` shows it;
//! - `debug`: the three of them wrapped as `{"type": "checkpoint" | "task" | "task_result",
//!   "timestamp", "step", "payload"}`;
//! - `events`: every run event as Planwright's [`RunEvent`] JSON (`{"event": "node_started", …}`;
//!   LangGraph sends LangChain callback events there, which a Planwright graph does not have).
//!
//! With `stream_subgraphs: true` a subgraph's events come under `mode|namespace` (nested
//! namespaces joined by `|`); without it they are left out, as LangGraph leaves them out.
//!
//! A superstep's checkpoint is sent when the next superstep's first task starts (or the run
//! pauses or ends): it is stored by then, and its record ([`Lookup`]: its id, parent, step,
//! source and next tasks, metadata and the tasks' list, not the state) is read back, once per
//! superstep and only for these two modes; its `values` are the ones the run's event carried.
//! So it comes before the tasks that run from it, as in LangGraph.

use super::errors::ApiError;
use super::messages::Messages;
use axum::http::StatusCode;
use planwright::checkpoint::Checkpointer;
use planwright::{Interrupt, RunEvent, TaskId, ThreadId};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;

/// The stream modes this server sends, in the order the 422 names them.
pub const MODES: [&str; 9] = [
    "values",
    "updates",
    "messages",
    "messages-tuple",
    "custom",
    "events",
    "debug",
    "tasks",
    "checkpoints",
];

/// The stream modes of a request's `stream_mode` (`values` when it names none).
pub fn parse(v: &Value) -> Vec<String> {
    match v {
        Value::String(s) => vec![s.clone()],
        Value::Array(a) => a
            .iter()
            .filter_map(|m| m.as_str().map(String::from))
            .collect(),
        _ => vec!["values".into()],
    }
}

fn unknown(what: impl std::fmt::Display) -> ApiError {
    ApiError(
        StatusCode::UNPROCESSABLE_ENTITY,
        format!(
            "stream_mode {what} is not a stream mode: use one or a list of {}",
            MODES.join(", ")
        ),
    )
}

/// Refuses (422, naming the modes there are) a `stream_mode` that is not absent, `null`, one
/// mode, or a list of modes.
pub fn check(stream_mode: Option<&Value>) -> Result<(), ApiError> {
    match stream_mode {
        None | Some(Value::Null) => Ok(()),
        Some(Value::String(m)) => check_names(std::slice::from_ref(m)),
        Some(Value::Array(a)) => {
            for m in a {
                match m.as_str() {
                    Some(name) if MODES.contains(&name) => {}
                    Some(name) => return Err(unknown(format!("`{name}`"))),
                    None => return Err(unknown(m)),
                }
            }
            Ok(())
        }
        Some(other) => Err(unknown(other)),
    }
}

/// Refuses (422) a mode name that is not in [`MODES`].
pub fn check_names(names: &[String]) -> Result<(), ApiError> {
    match names.iter().find(|m| !MODES.contains(&m.as_str())) {
        Some(m) => Err(unknown(format!("`{m}`"))),
        None => Ok(()),
    }
}

/// Whether a run streaming `modes` needs the state after each superstep in its events
/// ([`planwright::RunOptions::with_values`]): for `values`, and for the checkpoints of
/// `checkpoints` and `debug`.
pub fn needs_values(modes: &[String]) -> bool {
    modes
        .iter()
        .any(|m| m == "values" || m == "checkpoints" || m == "debug")
}

/// The modes a run streams.
#[derive(Clone, Copy, Default)]
struct Wants {
    values: bool,
    updates: bool,
    custom: bool,
    events: bool,
    debug: bool,
    tasks: bool,
    checkpoints: bool,
}

impl Wants {
    fn of(modes: &[String]) -> Self {
        let has = |m: &str| modes.iter().any(|x| x == m);
        Self {
            values: has("values"),
            updates: has("updates"),
            custom: has("custom"),
            events: has("events"),
            debug: has("debug"),
            tasks: has("tasks"),
            checkpoints: has("checkpoints"),
        }
    }
}

/// A started task that has no result yet.
struct Open {
    node: String,
    finished: bool,
    error: Option<String>,
}

/// A superstep's checkpoint, waiting for the next superstep to start.
struct Pending {
    step: u64,
    values: Value,
}

/// What a stored checkpoint's record says, for its event.
#[derive(Clone, Debug, PartialEq)]
pub struct Stored {
    /// Its id.
    pub id: String,
    /// Its parent's id.
    pub parent: Option<String>,
    /// Its step.
    pub step: u64,
    /// Where it came from (`loop`, `input`, …).
    pub source: Value,
    /// The tasks that run from it: node and task id.
    pub next: Vec<(String, String)>,
}

/// Reads a thread's stored checkpoints for the `checkpoints` and `debug` modes.
#[async_trait::async_trait]
pub trait Lookup: Send + Sync {
    /// The newest checkpoint of the thread at `step`, if it is stored.
    async fn at_step(&self, step: u64) -> Option<Stored>;
}

/// [`Lookup`] in a checkpointer: the newest few checkpoints' metadata, then the one record.
pub struct StoredCheckpoints {
    /// Where the thread's checkpoints are.
    pub checkpointer: Arc<dyn Checkpointer>,
    /// The thread.
    pub thread: ThreadId,
}

/// How far back [`StoredCheckpoints`] looks for a step (the run's reader may be a superstep or
/// two behind the run).
const LOOK_BACK: usize = 8;

#[async_trait::async_trait]
impl Lookup for StoredCheckpoints {
    async fn at_step(&self, step: u64) -> Option<Stored> {
        let list = self.checkpointer.list(&self.thread, None, LOOK_BACK).await;
        let (id, parent, meta) = list.ok()?.into_iter().find(|(_, _, m)| m.step == step)?;
        let rec = self.checkpointer.get(&self.thread, id).await.ok()?;
        let bytes = planwright::checkpoint::body_codec::decode(&rec.next_tasks).ok()?;
        let tasks: Vec<Value> = serde_json::from_slice(&bytes).ok()?;
        let next = tasks
            .iter()
            .filter_map(|t| {
                let node = t["node"].as_str()?.to_string();
                // Stored as `[step, index]` (older records: `{"step", "index"}`).
                let (s, i) = match &t["id"] {
                    Value::Array(a) => (a.first()?.as_u64()?, a.get(1)?.as_u64()?),
                    o => (o["step"].as_u64()?, o["index"].as_u64()?),
                };
                Some((node, format!("{s}.{i}")))
            })
            .collect();
        Some(Stored {
            id: id.0.to_string(),
            parent: parent.map(|p| p.0.to_string()),
            step: meta.step,
            source: serde_json::to_value(meta.source).unwrap_or(Value::Null),
            next,
        })
    }
}

/// Turns one run's events into the SSE events (name, data) of the modes it streams. Names are
/// the mode's (`updates`, `messages/partial`, …), with `|namespace` for a subgraph's events.
pub struct Translator {
    modes: Vec<String>,
    want: Wants,
    subgraphs: bool,
    thread_id: String,
    /// The checkpoint namespace (`""` at the top; a subgraph's events come with theirs).
    ns: String,
    messages: Messages,
    /// Tasks started and not yet given a result, by id.
    open: BTreeMap<TaskId, Open>,
    /// The running superstep (its tasks' `TaskId::step`).
    current: Option<u64>,
    /// The state after the last superstep (a task's `input`), when the run streams it.
    last_values: Value,
    pending: Option<Pending>,
    children: HashMap<String, Translator>,
}

impl Translator {
    /// For a run of thread `thread_id` streaming `modes`, with subgraph events when `subgraphs`.
    pub fn new(modes: &[String], subgraphs: bool, thread_id: &str) -> Self {
        Self {
            modes: modes.to_vec(),
            want: Wants::of(modes),
            subgraphs,
            thread_id: thread_id.to_string(),
            ns: String::new(),
            messages: Messages::new(modes),
            open: BTreeMap::new(),
            current: None,
            last_values: Value::Null,
            pending: None,
            children: HashMap::new(),
        }
    }

    /// Whether `values` in the run's [`RunEvent::StateUpdated`] are read: for `values`,
    /// `checkpoints` and `debug` (pass them to [`Translator::on_event`] as the API shows them).
    pub fn wants_values(&self) -> bool {
        self.want.values || self.want.checkpoints || self.want.debug
    }

    fn task_events(&self) -> bool {
        self.want.tasks || self.want.debug
    }

    fn checkpoint_events(&self) -> bool {
        (self.want.checkpoints || self.want.debug) && self.ns.is_empty()
    }

    /// The SSE events `ev` gives; `values` is the state a [`RunEvent::StateUpdated`] carries, as
    /// the API shows it (the top graph's; a subgraph's are sent as they come). A checkpoint
    /// waiting for the next superstep is read from `lookup` and sent first when `ev` starts it.
    pub async fn on_event(
        &mut self,
        ev: &RunEvent,
        values: Option<Value>,
        lookup: &dyn Lookup,
    ) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        match ev {
            RunEvent::NodeStarted { .. } => out.extend(self.flush(lookup, &[]).await),
            RunEvent::Interrupted { interrupts } => {
                out.extend(self.flush(lookup, interrupts).await)
            }
            _ => {}
        }
        out.extend(self.translate(ev, values));
        out
    }

    /// The run's stream ends: a checkpoint still waiting is sent.
    pub async fn finish(&mut self, lookup: &dyn Lookup) -> Vec<(String, Value)> {
        self.flush(lookup, &[]).await
    }

    fn translate(&mut self, ev: &RunEvent, values: Option<Value>) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        if self.want.events && self.ns.is_empty() {
            if let Ok(v) = serde_json::to_value(ev) {
                out.push(("events".to_string(), v));
            }
        }
        match ev {
            RunEvent::NodeStarted {
                node,
                task,
                attempt,
            } => {
                self.current = Some(task.step);
                if *attempt > 1 {
                    // A retry is the same task, already announced.
                    if let Some(o) = self.open.get_mut(task) {
                        o.finished = false;
                        o.error = None;
                    }
                    return out;
                }
                self.open.insert(
                    *task,
                    Open {
                        node: node.clone(),
                        finished: false,
                        error: None,
                    },
                );
                out.extend(self.task_start(node, *task));
            }
            RunEvent::NodeFinished {
                node: _,
                task,
                error,
                ..
            } => {
                if let Some(o) = self.open.get_mut(task) {
                    o.finished = true;
                    // A task that paused ends with an `interrupted` error: its result says so.
                    o.error = error.clone().filter(|e| !e.starts_with("interrupted"));
                }
                out.extend(self.messages.on_event(ev).into_iter().map(named));
            }
            RunEvent::StateUpdated {
                step,
                nodes,
                updates,
                values: raw,
            } => {
                // A subgraph's state is sent as it comes; the top graph's as the API shows it.
                let values = values.or_else(|| (!self.ns.is_empty()).then(|| raw.clone())?);
                let from = self.current;
                let tasks: Vec<Option<TaskId>> = (0..nodes.len())
                    .map(|i| {
                        from.map(|s| TaskId {
                            step: s,
                            index: i as u32,
                        })
                    })
                    .collect();
                if self.want.updates {
                    for (n, u) in nodes.iter().zip(updates) {
                        out.push(("updates".into(), json!({ n.clone(): u })));
                    }
                }
                for ((n, u), t) in nodes.iter().zip(updates).zip(&tasks) {
                    out.extend(self.messages.on_output(n, *t, u).into_iter().map(named));
                }
                if self.task_events() {
                    for ((n, u), t) in nodes.iter().zip(updates).zip(&tasks) {
                        let Some(t) = t else { continue };
                        self.open.remove(t);
                        let result = json!({
                            "id": t.to_string(), "name": n, "error": null,
                            "result": writes(u), "interrupts": [],
                        });
                        out.extend(self.task_event("task_result", t.step, result));
                    }
                }
                self.open.clear();
                if let (true, Some(v)) = (self.want.values, &values) {
                    out.push(("values".into(), v.clone()));
                }
                let values = values.unwrap_or(Value::Null);
                if self.checkpoint_events() {
                    self.pending = Some(Pending {
                        step: *step,
                        values: values.clone(),
                    });
                }
                self.last_values = values;
            }
            RunEvent::Custom { payload, .. } => {
                if self.want.custom {
                    out.push(("custom".into(), payload.clone()));
                }
            }
            RunEvent::Message { .. } => {
                out.extend(self.messages.on_event(ev).into_iter().map(named));
            }
            RunEvent::Interrupted { interrupts } => {
                if self.want.updates {
                    out.push((
                        "updates".into(),
                        json!({"__interrupt__": interrupts.iter().map(interrupt_json).collect::<Vec<_>>()}),
                    ));
                }
                out.extend(self.open_results(interrupts));
            }
            RunEvent::Error {
                node: Some(node), ..
            } => {
                if let Some(o) = self.open.values_mut().find(|o| &o.node == node) {
                    o.finished = true;
                }
                out.extend(self.open_results(&[]));
            }
            RunEvent::Subgraph { namespace, inner } => {
                if self.subgraphs {
                    out.extend(self.subgraph(namespace, inner));
                }
            }
            RunEvent::RunStarted { .. } | RunEvent::RunFinished { .. } | RunEvent::Error { .. } => {
            }
        }
        out
    }

    /// Sends the checkpoint waiting for the next superstep, read from `lookup` (without a
    /// record, as the events tell it: its next tasks those `paused` names).
    async fn flush(&mut self, lookup: &dyn Lookup, paused: &[Interrupt]) -> Vec<(String, Value)> {
        let Some(p) = self.pending.take() else {
            return Vec::new();
        };
        let stored = lookup.at_step(p.step).await;
        let config = |id: Option<&String>| {
            id.map(|id| {
                json!({"configurable": {
                    "thread_id": self.thread_id,
                    "checkpoint_ns": self.ns,
                    "checkpoint_id": id,
                }})
            })
        };
        let next: Vec<(String, String)> = match &stored {
            Some(s) => s.next.clone(),
            None => paused
                .iter()
                .map(|i| (i.node.clone(), i.id.0.clone()))
                .collect(),
        };
        let tasks: Vec<Value> = next
            .iter()
            .map(|(n, id)| {
                let mine: Vec<Value> = paused
                    .iter()
                    .filter(|i| &i.node == n)
                    .map(interrupt_json)
                    .collect();
                json!({"id": id, "name": n, "interrupts": mine, "state": null})
            })
            .collect();
        let payload = json!({
            "config": config(stored.as_ref().map(|s| &s.id)),
            "parent_config": config(stored.as_ref().and_then(|s| s.parent.as_ref())),
            "values": p.values,
            "metadata": {
                "source": stored.as_ref().map_or(json!("loop"), |s| s.source.clone()),
                "step": stored.as_ref().map_or(p.step, |s| s.step),
                "parents": {},
            },
            "next": next.iter().map(|(n, _)| n).collect::<Vec<_>>(),
            "tasks": tasks,
        });
        let mut out = Vec::new();
        if self.want.checkpoints {
            out.push(("checkpoints".into(), payload.clone()));
        }
        if self.want.debug {
            out.push(("debug".into(), debug("checkpoint", p.step, payload)));
        }
        out
    }

    /// A task's start, under `tasks` and `debug`.
    fn task_start(&self, node: &str, task: TaskId) -> Vec<(String, Value)> {
        if !self.task_events() {
            return Vec::new();
        }
        let payload = json!({
            "id": task.to_string(),
            "name": node,
            "input": self.last_values,
            "triggers": [format!("branch:to:{node}")],
        });
        self.task_event("task", task.step, payload)
    }

    fn task_event(&self, kind: &str, step: u64, payload: Value) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        if self.want.debug {
            out.push(("debug".into(), debug(kind, step, payload.clone())));
        }
        if self.want.tasks {
            out.push(("tasks".into(), payload));
        }
        out
    }

    /// The results of the tasks that ended without an update: paused (with their interrupts),
    /// failed (with the error), or finished in a superstep that paused.
    fn open_results(&mut self, interrupts: &[Interrupt]) -> Vec<(String, Value)> {
        if !self.task_events() {
            self.open.clear();
            return Vec::new();
        }
        let mut out = Vec::new();
        for (t, o) in std::mem::take(&mut self.open) {
            let mine: Vec<Value> = interrupts
                .iter()
                .filter(|i| i.node == o.node)
                .map(interrupt_json)
                .collect();
            if !o.finished && mine.is_empty() {
                continue;
            }
            let result = json!({
                "id": t.to_string(), "name": o.node, "error": o.error,
                "result": [], "interrupts": mine,
            });
            out.extend(self.task_event("task_result", t.step, result));
        }
        out
    }

    fn subgraph(&mut self, namespace: &str, inner: &RunEvent) -> Vec<(String, Value)> {
        let ns = if self.ns.is_empty() {
            namespace.to_string()
        } else {
            format!("{}|{namespace}", self.ns)
        };
        let (modes, want, thread) = (&self.modes, self.want, &self.thread_id);
        let child = self
            .children
            .entry(namespace.to_string())
            .or_insert_with(|| Translator {
                modes: modes.clone(),
                want,
                subgraphs: true,
                thread_id: thread.clone(),
                ns,
                messages: Messages::new(modes),
                open: BTreeMap::new(),
                current: None,
                last_values: Value::Null,
                pending: None,
                children: HashMap::new(),
            });
        child
            .translate(inner, None)
            .into_iter()
            .map(|(name, data)| (format!("{name}|{namespace}"), data))
            .map(|(name, data)| (nest(name), data))
            .collect()
    }
}

/// `messages/partial|inner|outer` (a nested subgraph's name after its parent added its own
/// namespace) as `messages/partial|outer|inner`: the mode, then namespaces outermost first.
fn nest(name: String) -> String {
    let mut parts: Vec<&str> = name.split('|').collect();
    if parts.len() > 2 {
        let outer = parts.pop().unwrap_or_default();
        parts.insert(1, outer);
    }
    parts.join("|")
}

fn named((name, data): (&'static str, Value)) -> (String, Value) {
    (name.to_string(), data)
}

/// An interrupt as LangGraph sends it: `{"value", "id"}`.
pub fn interrupt_json(i: &Interrupt) -> Value {
    json!({"value": i.value, "id": i.id.0})
}

/// A node's update as LangGraph's task writes: `[[key, value], …]` for an object, else
/// `[["__return__", update]]`.
fn writes(update: &Value) -> Value {
    match update {
        Value::Object(m) => Value::Array(m.iter().map(|(k, v)| json!([k, v])).collect()),
        Value::Null => json!([]),
        other => json!([["__return__", other]]),
    }
}

fn debug(kind: &str, step: u64, payload: Value) -> Value {
    let mut m = Map::new();
    m.insert("type".into(), kind.into());
    m.insert("timestamp".into(), super::time::now().into());
    m.insert("step".into(), step.into());
    m.insert("payload".into(), payload);
    Value::Object(m)
}

#[cfg(test)]
mod tests {
    use super::*;
    use planwright::ids::InterruptId;

    fn modes(m: &[&str]) -> Vec<String> {
        m.iter().map(|s| s.to_string()).collect()
    }

    fn started(node: &str, step: u64, index: u32) -> RunEvent {
        RunEvent::NodeStarted {
            node: node.into(),
            task: TaskId { step, index },
            attempt: 1,
        }
    }

    fn finished(node: &str, step: u64, index: u32, error: Option<&str>) -> RunEvent {
        RunEvent::NodeFinished {
            node: node.into(),
            task: TaskId { step, index },
            attempt: 1,
            duration_us: 1,
            queued_us: 0,
            error: error.map(String::from),
        }
    }

    fn updated(step: u64, node: &str, update: Value) -> RunEvent {
        RunEvent::StateUpdated {
            step,
            nodes: vec![node.into()],
            updates: vec![update],
            values: None,
        }
    }

    fn paused(node: &str, id: &str) -> RunEvent {
        RunEvent::Interrupted {
            interrupts: vec![Interrupt {
                id: InterruptId(id.into()),
                node: node.into(),
                value: json!({"ask": "ok?"}),
                index: 0,
            }],
        }
    }

    /// Checkpoints as a store holds them: step `n` is checkpoint `n + 1`, its next tasks given.
    struct Fake(HashMap<u64, Vec<&'static str>>);

    #[async_trait::async_trait]
    impl Lookup for Fake {
        async fn at_step(&self, step: u64) -> Option<Stored> {
            let next = self.0.get(&step)?;
            Some(Stored {
                id: (step + 1).to_string(),
                parent: Some(step.to_string()),
                step,
                source: json!("loop"),
                next: next
                    .iter()
                    .enumerate()
                    .map(|(i, n)| (n.to_string(), format!("{step}.{i}")))
                    .collect(),
            })
        }
    }

    fn store() -> Fake {
        Fake(HashMap::from([(1, vec!["b"])]))
    }

    async fn feed(t: &mut Translator, evs: Vec<(RunEvent, Option<Value>)>) -> Vec<(String, Value)> {
        let mut out = Vec::new();
        for (ev, v) in evs {
            out.extend(t.on_event(&ev, v, &store()).await);
        }
        out.extend(t.finish(&store()).await);
        out
    }

    /// A run of `a` (superstep 1, from step 0) then `b` (from step 1), pausing in `b`.
    async fn a_run(t: &mut Translator) -> Vec<(String, Value)> {
        feed(
            t,
            vec![
                (started("a", 0, 0), None),
                (finished("a", 0, 0, None), None),
                (updated(1, "a", json!({"x": 1})), Some(json!({"x": 1}))),
                (started("b", 1, 0), None),
                (finished("b", 1, 0, Some("interrupted: b asks")), None),
                (paused("b", "b@1.0"), None),
            ],
        )
        .await
    }

    fn names(out: &[(String, Value)]) -> Vec<&str> {
        out.iter().map(|(n, _)| n.as_str()).collect()
    }

    #[test]
    fn unknown_modes_are_refused_naming_the_modes_there_are() {
        assert!(check(None).is_ok());
        assert!(check(Some(&json!(["values", "messages-tuple", "debug"]))).is_ok());
        let e = check(Some(&json!(["values", "tokens"]))).unwrap_err();
        assert_eq!(e.0, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            e.1.contains("`tokens`") && e.1.contains("checkpoints"),
            "{}",
            e.1
        );
        assert!(check(Some(&json!("nope"))).is_err());
        assert!(check(Some(&json!(3))).is_err());
        assert!(check(Some(&json!([3]))).is_err());
        assert!(check_names(&modes(&["tasks"])).is_ok());
        assert!(check_names(&modes(&["task"])).is_err());
    }

    #[tokio::test]
    async fn updates_carry_the_interrupt_when_the_run_pauses() {
        let mut t = Translator::new(&modes(&["updates"]), false, "t1");
        let out = a_run(&mut t).await;
        assert_eq!(names(&out), ["updates", "updates"]);
        assert_eq!(out[0].1, json!({"a": {"x": 1}}));
        assert_eq!(
            out[1].1,
            json!({"__interrupt__": [{"value": {"ask": "ok?"}, "id": "b@1.0"}]})
        );
    }

    #[tokio::test]
    async fn tasks_send_each_start_and_result() {
        let mut t = Translator::new(&modes(&["tasks"]), false, "t1");
        let out = a_run(&mut t).await;
        assert_eq!(names(&out), ["tasks", "tasks", "tasks", "tasks"]);
        assert_eq!(
            out[0].1,
            json!({"id": "0.0", "name": "a", "input": null, "triggers": ["branch:to:a"]})
        );
        assert_eq!(
            out[1].1,
            json!({"id": "0.0", "name": "a", "error": null, "result": [["x", 1]], "interrupts": []})
        );
        assert_eq!(out[2].1["name"], "b");
        assert_eq!(out[2].1["input"], json!({"x": 1}), "the state it runs on");
        assert_eq!(
            out[3].1,
            json!({"id": "1.0", "name": "b", "error": null, "result": [],
                   "interrupts": [{"value": {"ask": "ok?"}, "id": "b@1.0"}]})
        );
    }

    #[tokio::test]
    async fn checkpoints_come_before_the_tasks_that_run_from_them() {
        let mut t = Translator::new(&modes(&["checkpoints", "tasks"]), false, "t1");
        let out = a_run(&mut t).await;
        assert_eq!(
            names(&out),
            ["tasks", "tasks", "checkpoints", "tasks", "tasks"]
        );
        let c = &out[2].1;
        assert_eq!(
            c["config"],
            json!({"configurable": {"thread_id": "t1", "checkpoint_ns": "", "checkpoint_id": "2"}})
        );
        assert_eq!(c["parent_config"]["configurable"]["checkpoint_id"], "1");
        assert_eq!(c["values"], json!({"x": 1}));
        assert_eq!(
            c["metadata"],
            json!({"source": "loop", "step": 1, "parents": {}})
        );
        assert_eq!(c["next"], json!(["b"]));
        assert_eq!(
            c["tasks"],
            json!([{"id": "1.0", "name": "b", "interrupts": [], "state": null}])
        );
    }

    #[tokio::test]
    async fn a_pause_before_a_node_names_it_next_when_nothing_is_stored() {
        let mut t = Translator::new(&modes(&["checkpoints"]), false, "t1");
        let out = feed(
            &mut t,
            vec![
                (started("a", 4, 0), None),
                (updated(5, "a", json!({})), Some(json!({"x": 0}))),
                (paused("b", "before:b"), None),
            ],
        )
        .await;
        assert_eq!(names(&out), ["checkpoints"]);
        assert_eq!(out[0].1["config"], Value::Null, "no record");
        assert_eq!(out[0].1["metadata"]["step"], 5);
        assert_eq!(out[0].1["next"], json!(["b"]));
        assert_eq!(out[0].1["tasks"][0]["interrupts"][0]["id"], "before:b");
    }

    #[tokio::test]
    async fn the_last_checkpoint_is_sent_when_the_run_ends() {
        let mut t = Translator::new(&modes(&["checkpoints"]), false, "t1");
        t.on_event(&started("a", 0, 0), None, &store()).await;
        let out = t
            .on_event(&updated(1, "a", json!({})), Some(json!({"x": 0})), &store())
            .await;
        assert!(out.is_empty(), "waits for the next superstep");
        let out = t.finish(&store()).await;
        assert_eq!(names(&out), ["checkpoints"]);
        assert!(t.finish(&store()).await.is_empty(), "sent once");
    }

    #[tokio::test]
    async fn debug_wraps_checkpoints_tasks_and_results() {
        let mut t = Translator::new(&modes(&["debug"]), false, "t1");
        let out = a_run(&mut t).await;
        let kinds: Vec<&str> = out
            .iter()
            .map(|(n, d)| {
                assert_eq!(n, "debug");
                assert!(d["timestamp"].as_str().unwrap().ends_with('Z'), "{d}");
                assert!(d["step"].is_u64(), "{d}");
                d["type"].as_str().unwrap()
            })
            .collect();
        assert_eq!(
            kinds,
            ["task", "task_result", "checkpoint", "task", "task_result"]
        );
        assert_eq!(out[0].1["payload"]["name"], "a");
        assert_eq!(out[2].1["payload"]["next"], json!(["b"]));
    }

    #[tokio::test]
    async fn a_failed_task_has_its_error_as_result() {
        let mut t = Translator::new(&modes(&["tasks"]), false, "t1");
        let out = feed(
            &mut t,
            vec![
                (started("a", 1, 0), None),
                (finished("a", 1, 0, Some("boom")), None),
                (
                    RunEvent::Error {
                        node: Some("a".into()),
                        message: "boom".into(),
                    },
                    None,
                ),
            ],
        )
        .await;
        assert_eq!(names(&out), ["tasks", "tasks"]);
        assert_eq!(out[1].1["error"], "boom");
    }

    #[tokio::test]
    async fn subgraph_events_are_namespaced_only_when_asked() {
        let inner = RunEvent::Subgraph {
            namespace: "child:3.0".into(),
            inner: Box::new(RunEvent::Subgraph {
                namespace: "grandchild:1.0".into(),
                inner: Box::new(updated(1, "leaf", json!({"y": 2}))),
            }),
        };
        let mut off = Translator::new(&modes(&["updates"]), false, "t1");
        assert!(off.on_event(&inner, None, &store()).await.is_empty());
        let mut on = Translator::new(&modes(&["updates", "custom"]), true, "t1");
        let out = on.on_event(&inner, None, &store()).await;
        assert_eq!(
            out,
            vec![(
                "updates|child:3.0|grandchild:1.0".to_string(),
                json!({"leaf": {"y": 2}})
            )]
        );
        let custom = RunEvent::Subgraph {
            namespace: "child:3.0".into(),
            inner: Box::new(RunEvent::Custom {
                node: "leaf".into(),
                task: TaskId { step: 1, index: 0 },
                payload: json!({"p": 1}),
            }),
        };
        assert_eq!(
            on.on_event(&custom, None, &store()).await,
            vec![("custom|child:3.0".to_string(), json!({"p": 1}))]
        );
    }

    #[tokio::test]
    async fn events_are_the_run_events_whole() {
        let mut t = Translator::new(&modes(&["events"]), false, "t1");
        let out = t.on_event(&started("a", 1, 0), None, &store()).await;
        assert_eq!(out.len(), 1);
        assert_eq!(out[0].0, "events");
        assert_eq!(out[0].1["event"], "node_started");
    }
}
