//! The endpoints of runs on a thread and `/ok`. The thread endpoints are in `threads.rs`.

use super::assistant::{AssistantRun, Start};
use super::assistants::{self, AssistantRef};
use super::errors::ApiError;
pub(super) use super::threads::{existing, get_thread, placement, update_record};
use super::threads::record;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::StatusCode;
use axum::Json;
use planwright::{CheckpointId, EventSwitch, Refusal, RunError, RunOptions, RunStatus, ThreadId};
use rand::Rng;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use std::sync::Arc;

type ApiResult = Result<Json<Value>, ApiError>;

/// How long `/ok` waits for its storage probe: a database that does not answer within this is
/// reported unreachable, so a health check hears back quickly even while the database stalls
/// (or every pooled connection is held by requests waiting for it).
pub const OK_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// `GET /ok`: readiness. 200 `{"ok": true}` once the threads a stopped server left mid-run have
/// been picked up and the storage answers; 503 with `status` `recovering` or `storage
/// unreachable` (and why) before that, so a load balancer sends nothing here yet. The storage
/// probe is one round trip (`Checkpointer::ping`), bounded by [`OK_PROBE_TIMEOUT`]; the per-client
/// request cap does not apply here ([`super::listen::UNCAPPED_PATHS`]), so probes go through
/// [`ProbeGate`]: however many callers ask at once, storage sees one probe at a time. Why the storage is
/// unreachable (`detail`) goes only to an admin (the `--token` holder, an admin of the token file
/// or a JWT; anyone, with auth off): another user or a caller without a token hears the status
/// alone.
pub async fn ok(
    State(state): State<Arc<AppState>>,
    caller: Option<axum::Extension<super::auth::Principal>>,
) -> (StatusCode, Json<Value>) {
    if !state.recovered.load(std::sync::atomic::Ordering::Acquire) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"ok": false, "status": "recovering"})),
        );
    }
    let probe = state
        .ok_probe
        .probe(|| async {
            match tokio::time::timeout(OK_PROBE_TIMEOUT, state.checkpointer.ping()).await {
                Ok(answer) => answer.map_err(|e| planwright::ErrorChain(&e).to_string()),
                Err(_) => Err(format!(
                    "no answer to the storage probe within {OK_PROBE_TIMEOUT:?}"
                )),
            }
        })
        .await;
    match probe {
        Ok(()) => (StatusCode::OK, Json(json!({"ok": true}))),
        Err(e) => {
            tracing::warn!(error = %e, "readiness: storage unreachable");
            let mut body = json!({"ok": false, "status": "storage unreachable"});
            // The error's causes name the database, its host and port: an operator's business.
            if caller.is_some_and(|c| c.admin) {
                body["detail"] = e.into();
            }
            (StatusCode::SERVICE_UNAVAILABLE, Json(body))
        }
    }
}

/// `/ok`'s storage probes, one at a time. `/ok` is outside the per-client cap, so without this
/// a caller could send thousands at once and each would take a pooled connection (for up to
/// [`OK_PROBE_TIMEOUT`] while the database is down) from the requests that need one. A caller
/// takes the answer of a probe that ended after it arrived (as fresh as its own would be), and
/// otherwise probes itself while the others wait.
#[derive(Default)]
pub struct ProbeGate {
    /// When the last probe ended, and its answer.
    last: tokio::sync::Mutex<Option<(tokio::time::Instant, Result<(), String>)>>,
}

impl ProbeGate {
    /// The answer of `probe`, or of one that ended since this call began.
    pub async fn probe<F, Fut>(&self, probe: F) -> Result<(), String>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let arrived = tokio::time::Instant::now();
        let mut last = self.last.lock().await;
        if let Some((ended, answer)) = &*last {
            if *ended >= arrived {
                return answer.clone();
            }
        }
        let answer = probe().await;
        *last = Some((tokio::time::Instant::now(), answer.clone()));
        answer
    }
}

/// A fresh id for a thread or a run (a random version-4 UUID).
pub fn new_uuid() -> String {
    let mut rng = rand::rng();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        rng.random::<u32>(),
        rng.random::<u16>(),
        rng.random::<u16>() & 0xfff,
        rng.random::<u16>(),
        rng.random::<u64>() & 0xffff_ffff_ffff
    )
}

/// A run request (kept whole in the run's record, so a queued run starts after a restart as it
/// was asked for).
#[derive(Deserialize, Serialize)]
pub struct RunBody {
    assistant_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    input: Option<Value>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    command: Option<Value>,
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

/// Checks a run request and starts (or resumes) the run on the assistant, its events built while
/// `events` is on. The thread's first run binds it to the run's assistant.
pub async fn start_run(
    state: &AppState,
    id: &str,
    body: RunBody,
    events: EventSwitch,
) -> Result<(ThreadId, AssistantRef, Box<dyn AssistantRun>), ApiError> {
    let assistant = state.assistants.get(&body.assistant_id)?.clone();
    let (thread, rec) = existing(state, id).await?;
    // A thread whose last run was cancelled takes new input in place of its unfinished superstep.
    let after_cancel = rec.get(CANCELLED_RUN).is_some_and(|v| !v.is_null());
    body.check(state)?;
    // `interrupt` and `rollback` made room before the run got here (`lifecycle::make_room`).
    let mut opts = match body.strategy() {
        "enqueue" => RunOptions::default().enqueue(),
        _ => RunOptions::default(),
    };
    opts = opts.events_while(events);
    if super::publish::wants_values(body.stream_mode.as_ref().unwrap_or(&Value::Null)) {
        opts = opts.with_values();
    }
    let resume = body.command.as_ref().and_then(|c| c.get("resume")).cloned();
    let body_checkpoint = body.checkpoint()?;
    if resume.is_none() && body.input.is_none() {
        if body_checkpoint.is_some() {
            // A replay: the thread must already belong to this assistant.
            let bound = assistants::of(state, &thread, &rec);
            if bound.id() != assistant.id() {
                return Err(ApiError::conflict(format!(
                    "thread `{id}` belongs to assistant `{}`, not `{}`",
                    bound.id(),
                    assistant.id()
                )));
            }
            branch_if_asked(id, &body_checkpoint, &assistant, &thread).await?;
        }
        return continue_thread(state, id, thread, rec, assistant, opts).await;
    }
    // Everything the request says is checked before the thread is bound or anything runs.
    let is_resume = resume.is_some();
    let start = match (resume, body.input) {
        (Some(resume), _) => Start::Resume(resume),
        (None, input) => Start::Input(input.unwrap_or_default()),
    };
    let checked = assistant
        .check(&thread, start)
        .map_err(|e| ApiError::bad(e.to_string()))?;
    assistants::bind(state, &thread, rec, &assistant, is_resume).await?;
    let replace =
        branch_if_asked(id, &body_checkpoint, &assistant, &thread).await? || after_cancel;
    if !is_resume && !assistant.takes_input_when_finished() {
        // A thread that keeps its result: new input needs a new thread.
        if let Some(v) = assistant
            .view(&thread)
            .await
            .map_err(ApiError::internal)?
            .filter(|v| v.next.is_empty() && v.interrupts.is_empty())
        {
            return Err(ApiError::conflict(format!(
                "thread `{id}` has finished its {} run (status {}); start a new thread for new input",
                assistant.id(),
                v.values["status"]
            )));
        }
    }
    match assistant
        .start(thread.clone(), checked, replace, opts)
        .await
    {
        Ok(h) => {
            if after_cancel {
                mark_cancelled(state, &thread, None).await?;
            }
            Ok((thread, assistant, h))
        }
        Err(e) => Err(run_error(id, e)),
    }
}

/// Takes the thread back to the run's `checkpoint_id`, when it names one (time travel:
/// `Engine::branch`). True when it did: new input then replaces the branch's pending superstep.
async fn branch_if_asked(
    id: &str,
    at: &Option<CheckpointId>,
    assistant: &AssistantRef,
    thread: &ThreadId,
) -> Result<bool, ApiError> {
    let Some(at) = *at else { return Ok(false) };
    assistant.branch(thread, at).await.map_err(|e| match e {
        RunError::Checkpoint(planwright::checkpoint::CheckpointError::NotFound { .. }) => ApiError(
            StatusCode::NOT_FOUND,
            format!("thread `{id}` has no checkpoint {}", at.0),
        ),
        e => run_error(id, e),
    })?;
    Ok(true)
}

/// A run with neither input nor a resume goes on from the thread's newest checkpoint, as
/// LangGraph's `input: null` does: only when that checkpoint has work left and nothing paused.
async fn continue_thread(
    state: &AppState,
    id: &str,
    thread: ThreadId,
    rec: Value,
    assistant: AssistantRef,
    opts: RunOptions,
) -> Result<(ThreadId, AssistantRef, Box<dyn AssistantRun>), ApiError> {
    let view = assistant.view(&thread).await.map_err(ApiError::internal)?;
    match &view {
        Some(v) if !v.next.is_empty() && v.interrupts.is_empty() => {}
        Some(v) if !v.interrupts.is_empty() => {
            return Err(ApiError::bad(format!(
                "thread `{id}` is waiting for an answer: resume it with `command: {{\"resume\": …}}`"
            )))
        }
        _ => {
            return Err(ApiError::bad(format!(
                "a run needs `input`, or `command: {{\"resume\": …}}`; thread `{id}` has no unfinished superstep to continue"
            )))
        }
    }
    assistants::bind(state, &thread, rec, &assistant, true).await?;
    let h = assistant
        .start_continue(thread.clone(), opts)
        .await
        .map_err(|e| run_error(id, e))?;
    mark_cancelled(state, &thread, None).await?;
    Ok((thread, assistant, h))
}

/// The thread record's key naming the run that was cancelled last (absent once a run starts).
pub const CANCELLED_RUN: &str = "cancelled_run";

/// Records (`Some(run_id)`) or clears (`None`) a cancel in the thread's record, so a restart
/// does not continue the cancelled run and new input replaces its unfinished superstep.
pub async fn mark_cancelled(
    state: &AppState,
    thread: &ThreadId,
    run_id: Option<&str>,
) -> Result<(), ApiError> {
    let Some(rec) = record(state, thread).await? else {
        return Ok(());
    };
    // Written only over the record read here: a thread deleted meanwhile stays deleted, and one
    // created again under its id keeps its owner.
    update_record(state, thread, &rec, |rec| {
        let Some(obj) = rec.as_object_mut() else {
            return false;
        };
        match run_id {
            Some(r) => obj.insert(CANCELLED_RUN.into(), json!(r)).as_ref() != Some(&json!(r)),
            None => obj.remove(CANCELLED_RUN).is_some(),
        }
    })
    .await
    .map(|_| ())
}

/// A run error as an HTTP answer: refusals are the client's 4xx (or 503 while stopping), every
/// other error a 500.
fn run_error(id: &str, e: RunError) -> ApiError {
    let RunError::Refused(refusal) = e else {
        return ApiError::internal(e);
    };
    match refusal {
        Refusal::ThreadBusy(_) => ApiError::conflict(format!(
            "thread `{id}` has a run in progress (multitask_strategy reject)"
        )),
        Refusal::ShuttingDown => ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            "the server is stopping; try again after it restarts".into(),
        ),
        r @ Refusal::UnknownThread(_) => ApiError::not_found(r.to_string()),
        r @ Refusal::NoCheckpointer(_) => ApiError::internal(r),
        r @ (Refusal::NotInterrupted(_)
        | Refusal::BadResume { .. }
        | Refusal::Interrupted(_)
        | Refusal::UnfinishedRun(_)
        | Refusal::NothingToContinue(_)
        | Refusal::BadOptions(_)
        | Refusal::UnknownNode(_)) => ApiError::bad(r.to_string()),
    }
}

/// `POST /threads/{thread_id}/runs/wait`: runs (or resumes) the thread and returns its values.
pub async fn run_wait(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<RunBody>, JsonRejection>,
) -> ApiResult {
    let Json(body) = body?;
    let cancel_on_disconnect = body.cancel_on_disconnect()?;
    let (rec, thread, assistant, handle) = match super::lifecycle::begin(&state, &id, body).await? {
        super::lifecycle::Begun::Here(rec, thread, assistant, handle) => {
            (rec, thread, assistant, handle)
        }
        // Another replica took the run over before it started here: its end is the answer.
        super::lifecycle::Begun::Elsewhere(rec) => {
            return super::lifecycle::outcome(&state, &rec).await.map(Json)
        }
    };
    let taken = rec.clone();
    // Sees whether the run's end here is its end, or it went on on another replica.
    let end = super::lifecycle::watch_end(&state, &rec.run_id);
    // Dropped with this handler's future when the client hangs up first: then it cancels the run.
    let hang_up = cancel_on_disconnect.then(|| super::follow::CancelOnDrop::new(&state, &rec));
    // The run's end is recorded by a task of its own: a client that hangs up does not leave the
    // record `running` for ever.
    let (st, t) = (state.clone(), thread.clone());
    let ended = tokio::spawn(async move {
        super::publish::drive(&st, &rec, assistant, &t, handle, false).await
    });
    let result = ended
        .await
        .map_err(|e| ApiError::internal(format!("the run's task failed: {e}")))?;
    if let Some(g) = hang_up {
        g.disarm();
    }
    if super::lifecycle::ended_elsewhere(&end) {
        // Another replica took the run over (this one was too slow to renew its lease, or its
        // writes were refused): the answer is the run's, wherever it ends.
        return super::lifecycle::outcome(&state, &taken).await.map(Json);
    }
    match result {
        Ok(out) if out.status == RunStatus::Suspended => Err(ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the server is stopping; thread `{id}` is checkpointed and continues when it restarts"),
        )),
        Ok(out) => Ok(Json(out.values)),
        Err(e) => Err(run_error(&id, e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn callers_of_ok_at_once_share_one_storage_probe() {
        let gate = Arc::new(ProbeGate::default());
        let probes = Arc::new(AtomicUsize::new(0));
        // A stalled database: each probe takes the whole timeout and fails.
        let ask = |gate: Arc<ProbeGate>, probes: Arc<AtomicUsize>| async move {
            gate.probe(|| async {
                probes.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(OK_PROBE_TIMEOUT).await;
                Err("no answer".to_string())
            })
            .await
        };
        let callers: Vec<_> = (0..200)
            .map(|_| tokio::spawn(ask(gate.clone(), probes.clone())))
            .collect();
        for c in callers {
            assert_eq!(c.await.unwrap(), Err("no answer".to_string()));
        }
        // The first probes; the others arrived before it ended and share its answer (a caller
        // whose task ran after it started probes once more at most).
        assert!(probes.load(Ordering::SeqCst) <= 2, "{probes:?}");
        // A caller after that probe ended probes anew: an answer is never older than its call.
        let n = probes.load(Ordering::SeqCst);
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        let fresh = gate.probe(|| async { Ok(()) }).await;
        assert_eq!(fresh, Ok(()));
        assert_eq!(probes.load(Ordering::SeqCst), n);
    }
}
