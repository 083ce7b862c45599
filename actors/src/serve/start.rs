//! Starting a checked run on its assistant: new input, a resume, a continue from the newest
//! checkpoint, or a time-travel branch first; the thread's first run binds it to the assistant,
//! and a cancel recorded in the thread's record makes new input replace the unfinished superstep.

use super::assistant::{AssistantRun, EditError, Start};
use super::assistants::{self, AssistantRef};
use super::errors::ApiError;
use super::run_body::RunBody;
use super::thread_records::{existing, record, update_record};
use super::AppState;
use axum::http::StatusCode;
use planwright::{CheckpointId, EventSwitch, Refusal, RunError, RunOptions, ThreadId};
use serde_json::{json, Value};

/// Starts (or resumes) the run of a checked request on the assistant, its events built while
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
    // `body` passed `RunBody::check` where it was accepted (`lifecycle::begin`, or when queued).
    // `interrupt` and `rollback` made room before the run got here (`cancel::make_room`).
    let mut opts = body.options(&assistant.node_names(), state.durability)?;
    if body.strategy() == "enqueue" {
        opts = opts.enqueue();
    }
    opts = opts.events_while(events);
    opts = opts.context(body.request(thread.as_str()));
    if super::publish::wants_values(body.stream_mode.as_ref().unwrap_or(&Value::Null)) {
        opts = opts.with_values();
    }
    let body_checkpoint = body.checkpoint()?;
    // Whether the request resumes is `RunBody::resume`'s call; the thread's pending interrupts
    // matter to it only for a `RemoteGraph` node's re-run (input with `__pregel_resuming`).
    let pending: Vec<String> = if body.pregel_resuming() && body.input.is_some() {
        let view = assistant.view(&thread).await.map_err(ApiError::internal)?;
        view.map(|v| v.interrupts.iter().map(|i| i.id.0.clone()).collect())
            .unwrap_or_default()
    } else {
        Vec::new()
    };
    let resume = body.resume(&pending)?;
    if let Some((update, goto)) = body.command_edit()? {
        if resume.is_some() && !goto.is_empty() {
            return Err(ApiError::bad(
                "command.goto together with command.resume: answer the interrupt, or send the \
                 thread elsewhere, not both in one run"
                    .to_string(),
            ));
        }
        let checked = update
            .map(|u| assistant.check_update(u))
            .transpose()
            .map_err(ApiError::bad)?;
        match (checked, &resume) {
            (Some(update), Some(r)) => {
                // `command: {"update", "resume"}`: the update is written with the answer and
                // applied before the paused node runs again (`Engine::start_resume_updated`).
                let answer = assistant
                    .check(&thread, Start::Resume(r.clone()))
                    .map_err(ApiError::bad)?;
                assistants::bind(state, &thread, rec, &assistant, true).await?;
                branch_if_asked(id, &body_checkpoint, &assistant, &thread).await?;
                let h = assistant
                    .start_updated(thread.clone(), update, answer, opts)
                    .await
                    .map_err(|e| run_error(id, e))?;
                if after_cancel {
                    mark_cancelled(state, &thread, None).await?;
                }
                return Ok((thread, assistant, h));
            }
            (checked, _) => {
                // `command: {"update", "goto"}`: written to the thread before the run goes on
                // from it.
                assistants::bind(state, &thread, rec.clone(), &assistant, false).await?;
                branch_if_asked(id, &body_checkpoint, &assistant, &thread).await?;
                assistant
                    .update_goto(&thread, checked, &goto)
                    .await
                    .map_err(|e| match e {
                        EditError::Values(v) => ApiError::bad(v),
                        EditError::Run(e) => run_error(id, e),
                    })?;
                return continue_thread(state, id, thread, rec, assistant, opts).await;
            }
        }
    }
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
    let replace = branch_if_asked(id, &body_checkpoint, &assistant, &thread).await? || after_cancel;
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
pub(super) fn run_error(id: &str, e: RunError) -> ApiError {
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

/// The thread a run asks for: the caller's existing thread, or, with `if_not_exists: "create"`,
/// a new one the caller owns (404 otherwise).
pub async fn thread_for_run(
    state: &AppState,
    id: &str,
    body: &RunBody,
) -> Result<(ThreadId, Value), ApiError> {
    match existing(state, id).await {
        Err(e) if body.if_not_exists.as_deref() == Some("create") => {
            super::errors::check_thread_id(id)?;
            let owner = super::auth::caller().map(|p| p.user);
            let thread = ThreadId::new(id);
            let rec = json!({"metadata": {}, "created_at": super::time::now(), "owner": owner});
            let created = state
                .checkpointer
                .create_thread(&thread, rec)
                .await
                .map_err(ApiError::internal)?;
            if !created {
                // Made by someone else a moment ago: theirs, or the caller's to use.
                return existing(state, id).await.map_err(|_| e);
            }
            existing(state, id).await
        }
        other => other,
    }
}
