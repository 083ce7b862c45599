//! A run request as the API takes it (`POST …/runs`, `/runs/wait`, `/runs/stream`, and the
//! stateless and batch forms): its fields, what each means, and the checks it passes before
//! anything is recorded. Kept whole in the run's record, so a queued run starts after a restart as
//! it was asked for.

use super::errors::ApiError;
use super::AppState;
use axum::http::StatusCode;
use planwright::CheckpointId;
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
    /// The stream modes (one or a list of [`super::stream::modes::MODES`]).
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
    /// A run config; only `configurable.checkpoint_id` is read (`RemoteGraph` sends it there).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    config: Option<Value>,
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
            Some(Value::String(s)) => super::inspect::checkpoint_id(&s).map(Some),
            Some(other) => Err(ApiError::bad(format!(
                "checkpoint_id must be a string, not {other}"
            ))),
        }
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

    /// The checks a request passes before anything is recorded: a known assistant, stored fields
    /// within their cap ([`super::fields`]: everything the request keeps beside its `input` and
    /// `command`), a known strategy, metadata that is an object, a well-formed checkpoint.
    pub fn check(&self, state: &AppState) -> Result<(), ApiError> {
        state.assistants.get(&self.assistant_id)?;
        super::fields::check_size("metadata", self.metadata.as_ref())?;
        super::fields::check_size("config", self.config.as_ref())?;
        super::fields::check_size("checkpoint", self.checkpoint.as_ref())?;
        super::fields::check_size("stream_mode", self.stream_mode.as_ref())?;
        super::stream::modes::check(self.stream_mode.as_ref())?;
        self.checkpoint()?;
        self.cancel_on_disconnect()?;
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

