//! A run request as the API takes it (`POST …/runs`, `/runs/wait`, `/runs/stream`, and the
//! stateless and batch forms): its fields, what each means, and the checks it passes before
//! anything is recorded. Kept whole in the run's record, so a queued run starts after a restart as
//! it was asked for.

use super::assistant::ResumeAsk;
use super::errors::ApiError;
use super::run_request::RunRequest;
use super::AppState;
use axum::http::StatusCode;
use planwright::{CheckpointId, Durability, RunOptions};
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};

/// A run request (kept whole in the run's record, so a queued run starts after a restart as it
/// was asked for).
#[derive(Deserialize, Serialize)]
pub struct RunBody {
    /// The assistant to run.
    pub(super) assistant_id: String,
    /// The input, merged into the thread's state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) input: Option<Value>,
    /// `{"resume", "update", "goto"}`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(super) command: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    multitask_strategy: Option<String>,
    /// Free-form metadata of the run (a JSON object).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    metadata: Option<Value>,
    /// The stream modes (one or a list of [`super::stream_modes::MODES`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_mode: Option<Value>,
    /// Whether subgraphs' events are streamed too, under `mode|namespace`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_subgraphs: Option<bool>,
    /// Whether the run's events are all kept in the run event log, so clients can follow it from
    /// any replica from its start and rejoin with `Last-Event-ID` (`GET …/runs/{run_id}/stream`).
    /// Always true for `runs/stream`. Without it a run's events are stored only from the moment a
    /// client follows it (`publish::drive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stream_resumable: Option<bool>,
    /// `runs/stream` and `runs/wait`: what happens to the run when the client hangs up before it
    /// ends — `continue` (the default: it runs on, and can be joined) or `cancel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_disconnect: Option<String>,
    /// Time travel: run from this past checkpoint of the thread (the SDKs' `checkpoint_id`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checkpoint_id: Option<String>,
    /// Time travel, as `{"checkpoint_id": …}` (the SDKs' `checkpoint`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    checkpoint: Option<Value>,
    /// A run config; `configurable.checkpoint_id` is read (`RemoteGraph` sends it there), and
    /// `configurable.__pregel_resuming` / `__pregel_resume_map` ([`RunBody::resume`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    config: Option<Value>,
    /// The run's context (kept with the run; the graph's nodes read their own settings).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    context: Option<Value>,
    /// Pause before these nodes (`"*"`: every node), as well as where the graph says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interrupt_before: Option<Value>,
    /// Pause after these nodes (`"*"`: every node), as well as where the graph says.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    interrupt_after: Option<Value>,
    /// A thread that does not exist: `reject` (404, the default) or `create` it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub if_not_exists: Option<String>,
    /// Stateless runs: `delete` the thread made for the run when it ends (the default) or `keep`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub on_completion: Option<String>,
    /// How checkpoints are stored: `sync` (the default), `async` or `exit`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    durability: Option<String>,
    /// Start the run this many seconds from now (it waits `pending`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub after_seconds: Option<f64>,
    /// A URL that gets the run's record and values with a POST when it ends (retried).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub webhook: Option<String>,
}

/// A command's `update` (values, if any) and `goto` (node names, maybe none).
pub type CommandEdit = (Option<Value>, Vec<String>);

/// `base` with `over`'s keys on top (objects one level deep, so `configurable` merges too).
fn under(base: Value, over: Option<Value>) -> Value {
    let (Value::Object(mut out), Some(Value::Object(over))) = (base.clone(), over.clone()) else {
        return over.filter(|o| !o.is_null()).unwrap_or(base);
    };
    for (k, v) in over {
        match (out.get_mut(&k), v) {
            (Some(Value::Object(a)), Value::Object(b)) => a.extend(b),
            (_, v) => {
                out.insert(k, v);
            }
        }
    }
    Value::Object(out)
}

/// The node a `Send`-style goto object names (`{"node": …, "arg": …}`).
fn node_of_send(o: &serde_json::Map<String, Value>) -> Result<String, ApiError> {
    o.get("node")
        .and_then(Value::as_str)
        .map(String::from)
        .ok_or_else(|| ApiError::bad("command.goto: an object names its `node`".to_string()))
}

/// The multitask strategies: what a run does when its thread is busy.
pub const STRATEGIES: [&str; 4] = ["reject", "enqueue", "interrupt", "rollback"];

impl RunBody {
    /// The assistant the request names.
    pub fn assistant(&self) -> &str {
        &self.assistant_id
    }

    /// The multitask strategy the request asks for (`reject` when it names none).
    pub fn strategy(&self) -> &str {
        self.multitask_strategy.as_deref().unwrap_or("reject")
    }

    /// The run's metadata (`{}` when none was given).
    pub fn metadata(&self) -> Value {
        self.metadata.clone().unwrap_or_else(|| json!({}))
    }

    /// What the run's nodes see of the request on `thread` ([`RunRequest`]).
    pub fn request(&self, thread: &str) -> RunRequest {
        let metadata = self.metadata();
        // An assistant created over the API is resolved to its graph, its id kept in metadata.
        let assistant_id = metadata["assistant_id"]
            .as_str()
            .unwrap_or(&self.assistant_id)
            .to_string();
        RunRequest {
            thread_id: thread.to_string(),
            assistant_id,
            graph_id: self.assistant_id.clone(),
            config: self.config.clone().unwrap_or(Value::Null),
            context: self.context.clone().unwrap_or(Value::Null),
            metadata,
        }
    }

    /// Waits for the thread instead of being refused when it is busy (a queued run's turn).
    pub fn wait_for_thread(&mut self) {
        self.multitask_strategy = Some("enqueue".into());
    }

    /// The past checkpoint the run starts from (time travel), from `checkpoint_id`,
    /// `checkpoint.checkpoint_id` or `config.configurable.checkpoint_id`, in that order.
    pub fn checkpoint(&self) -> Result<Option<CheckpointId>, ApiError> {
        let named = self
            .checkpoint_id
            .clone()
            .map(Value::String)
            .or_else(|| self.checkpoint.as_ref()?.get("checkpoint_id").cloned())
            .or_else(|| {
                self.config
                    .as_ref()?
                    .pointer("/configurable/checkpoint_id")
                    .cloned()
            });
        match named {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => super::ids::checkpoint_id(&s).map(Some),
            Some(other) => Err(ApiError::bad(format!(
                "checkpoint_id must be a string, not {other}"
            ))),
        }
    }

    /// True when the request says it resumes a paused superstep (`RemoteGraph` run as a node of
    /// a LangGraph parent that is resuming: `config.configurable.__pregel_resuming`).
    pub fn pregel_resuming(&self) -> bool {
        self.config
            .as_ref()
            .and_then(|c| c.pointer("/configurable/__pregel_resuming"))
            .is_some_and(|v| v == &Value::Bool(true))
    }

    /// The answer the request brings to its thread's pending interrupts (`pending`: their ids,
    /// empty when the thread is not paused), or `None` when it brings none: the one place that
    /// says whether a request resumes. LangGraph's rules:
    /// - `command.resume`: an object whose keys are all interrupt ids in LangGraph's form (32
    ///   lowercase hex digits) answers by id; any other value is the one answer.
    /// - `input` on a paused thread with `configurable.__pregel_resuming` (a `RemoteGraph` node
    ///   re-run by its resuming parent, which sends its original input again): a resume, the
    ///   input unused. With `configurable.__pregel_resume_map` (the parent was resumed with
    ///   `Command(resume={id: value})`), the values whose ids are pending answer by id (400
    ///   naming the ids when none is); without one, no answer: the parent kept a single resume
    ///   value in its own process, so the paused node runs again and asks again.
    pub fn resume(&self, pending: &[String]) -> Result<Option<ResumeAsk>, ApiError> {
        if let Some(v) = self.command.as_ref().and_then(|c| c.get("resume")) {
            return Ok(Some(match v {
                Value::Object(m)
                    if !m.is_empty()
                        && m.keys().all(|k| planwright::ids::InterruptId::is_digest(k)) =>
                {
                    ResumeAsk::ById(m.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
                }
                v => ResumeAsk::Value(v.clone()),
            }));
        }
        if self.input.is_none() || pending.is_empty() || !self.pregel_resuming() {
            return Ok(None);
        }
        let map = self
            .config
            .as_ref()
            .and_then(|c| c.pointer("/configurable/__pregel_resume_map"));
        let Some(map) = map.filter(|m| !m.is_null()) else {
            return Ok(Some(ResumeAsk::NoAnswer));
        };
        let Some(map) = map.as_object() else {
            return Err(ApiError::bad(format!(
                "configurable.__pregel_resume_map must map interrupt ids to values, not {map}"
            )));
        };
        let answers: std::collections::BTreeMap<String, Value> = map
            .iter()
            .filter(|(k, _)| pending.contains(k))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        if answers.is_empty() {
            return Err(ApiError::bad(format!(
                "configurable.__pregel_resume_map answers interrupts {} but the thread waits \
                 on {}",
                map.keys().cloned().collect::<Vec<_>>().join(", "),
                pending.join(", ")
            )));
        }
        Ok(Some(ResumeAsk::ById(answers)))
    }

    /// `command.update` and `command.goto` (LangGraph's `Command`): values written to the state
    /// before the run, and the nodes it runs first (a name or a list; `Send`-style objects
    /// `{"node": …}` are read by their node).
    pub fn command_edit(&self) -> Result<Option<CommandEdit>, ApiError> {
        let Some(c) = &self.command else {
            return Ok(None);
        };
        let update = c.get("update").filter(|u| !u.is_null()).cloned();
        let goto = match c.get("goto") {
            None | Some(Value::Null) => Vec::new(),
            Some(Value::String(s)) => vec![s.clone()],
            Some(Value::Object(o)) => vec![node_of_send(o)?],
            Some(Value::Array(list)) => list
                .iter()
                .map(|g| match g {
                    Value::String(s) => Ok(s.clone()),
                    Value::Object(o) => node_of_send(o),
                    other => Err(ApiError::bad(format!(
                        "command.goto: expected node names, not {other}"
                    ))),
                })
                .collect::<Result<_, _>>()?,
            Some(other) => {
                return Err(ApiError::bad(format!(
                    "command.goto: expected a node name or a list of them, not {other}"
                )))
            }
        };
        Ok((update.is_some() || !goto.is_empty()).then_some((update, goto)))
    }

    /// The run's options from the request: pauses before/after nodes (checked against the
    /// graph's `nodes`, 422 naming them) and the durability (`default` when it names none;
    /// with neither, the engine's).
    pub fn options(
        &self,
        nodes: &[String],
        default: Option<Durability>,
    ) -> Result<RunOptions, ApiError> {
        let mut opts = RunOptions::default();
        let pick = |field: &str, v: &Option<Value>| -> Result<Vec<String>, ApiError> {
            let names: Vec<String> = match v {
                None | Some(Value::Null) => return Ok(Vec::new()),
                Some(Value::String(s)) if s == "*" => return Ok(nodes.to_vec()),
                Some(Value::String(s)) => vec![s.clone()],
                Some(Value::Array(list)) => list
                    .iter()
                    .map(|n| n.as_str().map(String::from))
                    .collect::<Option<_>>()
                    .ok_or_else(|| ApiError::bad(format!("{field}: expected node names")))?,
                Some(other) => {
                    return Err(ApiError::bad(format!(
                        "{field}: expected \"*\" or a list of node names, not {other}"
                    )))
                }
            };
            match names.iter().find(|n| !nodes.contains(n)) {
                Some(bad) => Err(ApiError(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!(
                        "{field}: the graph has no node `{bad}` (its nodes: {})",
                        nodes.join(", ")
                    ),
                )),
                None => Ok(names),
            }
        };
        opts = opts.interrupt_before(pick("interrupt_before", &self.interrupt_before)?);
        opts = opts.interrupt_after(pick("interrupt_after", &self.interrupt_after)?);
        let durability = match self.durability.as_deref() {
            None => default,
            Some(name) => Some(
                parse_durability(name)
                    .map_err(|e| ApiError(StatusCode::UNPROCESSABLE_ENTITY, e))?,
            ),
        };
        if let Some(d) = durability {
            opts = opts.durability(d);
        }
        Ok(opts)
    }

    /// Whether the run is cancelled when its client hangs up (`on_disconnect: "cancel"`).
    pub fn cancel_on_disconnect(&self) -> Result<bool, ApiError> {
        match self.on_disconnect.as_deref() {
            None | Some("continue") => Ok(false),
            Some("cancel") => Ok(true),
            Some(other) => Err(ApiError::bad(format!(
                "on_disconnect `{other}`: use cancel or continue"
            ))),
        }
    }

    /// Resolves the assistant the request names ([`super::assistant_records::resolve`]): an
    /// assistant created over the API runs its graph, with its config and context under the
    /// run's own (the run's keys win). The request then names the graph, and its metadata keeps
    /// the assistant it asked for (`metadata.assistant_id`, `metadata.assistant_version`). A
    /// registered graph resolves to itself and changes nothing.
    pub async fn resolve_assistant(&mut self, state: &AppState) -> Result<(), ApiError> {
        let r = super::assistant_records::resolve(state, &self.assistant_id).await?;
        if r.graph.id() == self.assistant_id {
            return Ok(());
        }
        let mut metadata = self.metadata();
        if let Some(m) = metadata.as_object_mut() {
            m.entry("assistant_id").or_insert(json!(r.assistant_id));
            m.entry("assistant_version").or_insert(json!(r.version));
        }
        self.metadata = Some(metadata);
        self.config = Some(under(r.config, self.config.take()));
        self.context = Some(under(r.context, self.context.take()));
        self.assistant_id = r.graph.id().to_string();
        Ok(())
    }

    /// The checks a request passes before anything is recorded: a known assistant, stored fields
    /// within their cap ([`super::fields`]: everything the request keeps beside its `input` and
    /// `command`), a known strategy, metadata that is an object, a well-formed checkpoint.
    pub fn check(&self, state: &AppState) -> Result<(), ApiError> {
        state.assistants.get(&self.assistant_id)?;
        super::fields::check_size("metadata", self.metadata.as_ref())?;
        super::fields::check_size("config", self.config.as_ref())?;
        super::fields::check_size("checkpoint", self.checkpoint.as_ref())?;
        super::fields::check_size("stream_mode", self.stream_mode.as_ref())?;
        super::stream_modes::check(self.stream_mode.as_ref())?;
        super::fields::check_size("context", self.context.as_ref())?;
        self.checkpoint()?;
        self.cancel_on_disconnect()?;
        self.command_edit()?;
        self.options(
            &state.assistants.get(&self.assistant_id)?.node_names(),
            state.durability,
        )?;
        match self.if_not_exists.as_deref() {
            None | Some("reject") | Some("create") => {}
            Some(other) => {
                return Err(ApiError(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("if_not_exists `{other}`: use reject or create"),
                ))
            }
        }
        match self.on_completion.as_deref() {
            None | Some("delete") | Some("keep") => {}
            Some(other) => {
                return Err(ApiError(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("on_completion `{other}`: use delete or keep"),
                ))
            }
        }
        if let Some(s) = self.after_seconds {
            if !(0.0..=86_400.0 * 366.0).contains(&s) {
                return Err(ApiError(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    format!("after_seconds must be between 0 and a year, not {s}"),
                ));
            }
        }
        if let Some(url) = &self.webhook {
            if !(url.starts_with("http://") || url.starts_with("https://")) || url.len() > 2048 {
                return Err(ApiError(
                    StatusCode::UNPROCESSABLE_ENTITY,
                    "webhook must be an http:// or https:// URL".to_string(),
                ));
            }
        }
        if !STRATEGIES.contains(&self.strategy()) {
            return Err(ApiError::bad(format!(
                "multitask_strategy `{}`: use one of {}",
                self.strategy(),
                STRATEGIES.join(", ")
            )));
        }
        match &self.metadata {
            None | Some(Value::Object(_)) => Ok(()),
            Some(other) => Err(ApiError(
                StatusCode::UNPROCESSABLE_ENTITY,
                format!("metadata must be a JSON object, not {other}"),
            )),
        }
    }
}

/// A durability by its API name: `sync`, `async` or `exit`; anything else is named back.
pub fn parse_durability(name: &str) -> Result<Durability, String> {
    match name {
        "sync" => Ok(Durability::Sync),
        "async" => Ok(Durability::Async),
        "exit" => Ok(Durability::Exit),
        other => Err(format!("durability `{other}`: use sync, async or exit")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn body(mut v: Value) -> RunBody {
        v["assistant_id"] = json!("a");
        serde_json::from_value(v).expect("a run body")
    }

    const ID: &str = "0123456789abcdef0123456789abcdef";

    #[test]
    fn a_run_names_its_durability_or_gets_the_servers_or_the_engines() {
        let nodes = ["a".to_string()];
        let named = body(json!({"durability": "exit"}));
        let opts = named.options(&nodes, Some(Durability::Async)).unwrap();
        assert_eq!(
            opts.durability,
            Some(Durability::Exit),
            "the request's wins"
        );
        let unnamed = body(json!({}));
        let opts = unnamed.options(&nodes, Some(Durability::Async)).unwrap();
        assert_eq!(
            opts.durability,
            Some(Durability::Async),
            "then the server's"
        );
        assert_eq!(unnamed.options(&nodes, None).unwrap().durability, None);
        let bad = body(json!({"durability": "sometimes"}));
        let e = bad.options(&nodes, None).unwrap_err();
        assert_eq!(e.0, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(
            e.1.contains("sometimes") && e.1.contains("sync, async or exit"),
            "{}",
            e.1
        );
    }

    /// Every way a request can answer a paused thread, and the ways it does not, read by the
    /// one rule.
    #[test]
    fn one_rule_says_whether_and_how_a_request_resumes() {
        let pending = [ID.to_string()];
        let resuming = |map: Option<Value>| {
            let mut conf = json!({"__pregel_resuming": true});
            if let Some(m) = map {
                conf["__pregel_resume_map"] = m;
            }
            body(json!({"input": {"x": 1}, "config": {"configurable": conf}}))
        };
        let by_id = |v: Value| ResumeAsk::ById([(ID.to_string(), v)].into());
        // `command.resume`: a map of digest ids answers by id, anything else is the answer.
        let cases = [
            (
                body(json!({"command": {"resume": {ID: 1}}})),
                Some(by_id(json!(1))),
            ),
            (
                body(json!({"command": {"resume": {"action": "approve"}}})),
                Some(ResumeAsk::Value(json!({"action": "approve"}))),
            ),
            (
                body(json!({"command": {"resume": "yes"}})),
                Some(ResumeAsk::Value(json!("yes"))),
            ),
            // A `RemoteGraph` node's re-run: by id from the parent's map, ids not pending
            // left out; with no map, no answer.
            (
                resuming(Some(
                    json!({ID: "ok", "ffffffffffffffffffffffffffffffff": 2}),
                )),
                Some(by_id(json!("ok"))),
            ),
            (resuming(None), Some(ResumeAsk::NoAnswer)),
            // Plain input is input.
            (body(json!({"input": {"x": 1}})), None),
        ];
        for (b, want) in cases {
            assert_eq!(b.resume(&pending).unwrap(), want);
        }
        // On a thread that is not paused, a re-run's input is input.
        assert_eq!(resuming(None).resume(&[]).unwrap(), None);
        // A map that answers none of the pending interrupts is refused, naming both.
        let other = "ffffffffffffffffffffffffffffffff";
        let e = resuming(Some(json!({other: 1})))
            .resume(&pending)
            .unwrap_err();
        assert_eq!(e.0, StatusCode::BAD_REQUEST);
        assert!(e.1.contains(other) && e.1.contains(ID), "{}", e.1);
    }
}
