//! Running the planner on a thread: start, continue a thread whose process died, resume a paused
//! one, or report a finished one, with the same result object either way.
//!
//! Storage is optional: with a checkpointer, threads survive the process; without, they live in
//! the engine's memory. Resume values are checked before the engine sees them, so a bad one is
//! refused without touching the paused thread.

use super::nodes::review::{parse_review, ReviewError};
use super::state::{ResearchState, ResearchUpdate};
use planwright::{Engine, Resume, RunError, RunEvent, RunOptions, RunStatus, ThreadId};
use serde_json::Value;
use std::sync::Arc;

/// How a run on a thread ended (or where the thread already stood).
#[derive(Clone, Debug)]
pub struct ResearchRun {
    /// The thread.
    pub thread: ThreadId,
    /// `ok`, `needs_review`, `failed` or `interrupted`.
    pub status: String,
    /// The state.
    pub state: Arc<ResearchState>,
    /// The interrupt payload (plan, accepted actions, and an `error` after a rejected answer).
    pub interrupt: Option<Value>,
    /// What was done: `started`, `continued`, `resumed`, `stored` (a finished or paused thread,
    /// reported without running).
    pub action: &'static str,
}

/// Why a run could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The resume value is not one of the three accepted answers.
    #[error(transparent)]
    BadResume(#[from] ReviewError),
    /// Resume was asked for a thread that is not paused.
    #[error("thread `{0}` is not waiting for approval; nothing to resume")]
    NotPaused(ThreadId),
    /// Resume or continue was asked for an unknown thread.
    #[error("thread `{0}` does not exist")]
    UnknownThread(ThreadId),
    /// The run was cancelled or suspended.
    #[error("the run stopped early ({0:?}); run the same command again to continue it")]
    Stopped(RunStatus),
    /// The engine failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

/// What to do on a thread.
#[derive(Clone, Debug)]
pub enum Start {
    /// Start a new run with this input, unless the thread already has a run: then continue an
    /// unfinished one, or report a finished or paused one.
    Input(Box<ResearchUpdate>),
    /// Answer the thread's approval interrupt.
    Resume(Value),
}

fn finished(
    thread: ThreadId,
    out: planwright::RunOutcome<ResearchState>,
    action: &'static str,
) -> Result<ResearchRun, RunnerError> {
    match out.status {
        RunStatus::Finished => Ok(ResearchRun {
            thread,
            status: out.state.status.clone(),
            state: out.state,
            interrupt: None,
            action,
        }),
        RunStatus::Interrupted => Ok(ResearchRun {
            thread,
            status: "interrupted".into(),
            state: out.state,
            interrupt: out.interrupts.first().map(|i| i.value.clone()),
            action,
        }),
        other => Err(RunnerError::Stopped(other)),
    }
}

/// Runs `start` on `thread`; `on_event` sees the run's events as they happen (for progress).
pub async fn run(
    engine: &Engine<ResearchState>,
    thread: ThreadId,
    start: Start,
    mut on_event: impl FnMut(&RunEvent),
) -> Result<ResearchRun, RunnerError> {
    let existing = engine.get_state(&thread).await?;
    match start {
        Start::Resume(value) => {
            parse_review(&value)?;
            let Some(ts) = existing else {
                return Err(RunnerError::UnknownThread(thread));
            };
            if ts.interrupts.is_empty() {
                return Err(RunnerError::NotPaused(thread));
            }
            let handle = engine
                .start_resume(
                    thread.clone(),
                    Resume::Value(value),
                    RunOptions::streaming(),
                )
                .await?;
            let out = drive(handle, &mut on_event).await?;
            finished(thread, out, "resumed")
        }
        Start::Input(update) => match existing {
            Some(ts) if !ts.interrupts.is_empty() => Ok(ResearchRun {
                thread,
                status: "interrupted".into(),
                state: ts.values,
                interrupt: ts.interrupts.first().map(|i| i.value.clone()),
                action: "stored",
            }),
            Some(ts) if !ts.next.is_empty() => {
                let out = engine
                    .continue_run(thread.clone(), RunOptions::default())
                    .await?;
                finished(thread, out, "continued")
            }
            Some(ts) if !ts.values.status.is_empty() => Ok(ResearchRun {
                thread,
                status: ts.values.status.clone(),
                state: ts.values,
                interrupt: None,
                action: "stored",
            }),
            _ => {
                let handle = engine
                    .start(thread.clone(), *update, RunOptions::streaming())
                    .await?;
                let out = drive(handle, &mut on_event).await?;
                finished(thread, out, "started")
            }
        },
    }
}

async fn drive(
    mut handle: planwright::runtime::RunHandle<ResearchState>,
    on_event: &mut impl FnMut(&RunEvent),
) -> Result<planwright::RunOutcome<ResearchState>, RunError> {
    let Some(mut rx) = handle.events.take() else {
        return handle.wait().await;
    };
    let wait = handle.wait();
    tokio::pin!(wait);
    loop {
        tokio::select! {
            biased;
            ev = rx.recv() => match ev {
                Some(e) => on_event(&e),
                None => return wait.await,
            },
            out = &mut wait => {
                while let Ok(e) = rx.try_recv() {
                    on_event(&e);
                }
                return out;
            }
        }
    }
}
