//! Running the planner on a thread: start, continue a thread whose process died, resume a paused
//! one, or report a finished one, with the same result object either way.
//!
//! Storage is optional: with a checkpointer, threads survive the process; without, they live in
//! the engine's memory. Resume values are checked before the engine sees them, so a bad one is
//! refused without touching the paused thread.

use super::nodes::review::parse_review;
use super::state::{ResearchState, ResearchUpdate};
use crate::kit::{self, Decision};
use planwright::{Engine, Resume, RunEvent, RunOptions, RunStatus, ThreadId};
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

pub use crate::kit::RunnerError;

/// What to do on a thread: start with an input (or continue or report the thread), or answer
/// its approval interrupt. An input of `None` only reopens a thread: it shows a finished or paused
/// one and continues an unfinished one, and is refused (`RunnerError::NoRun`) for a thread with
/// no run.
pub type Start = kit::Start<Option<Box<ResearchUpdate>>, Value>;

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
    if let Start::Resume(value) = &start {
        parse_review(value).map_err(RunnerError::bad_resume)?;
    }
    let existing = engine.get_state(&thread).await?;
    match kit::decide(&thread, start, existing, |s| !s.status.is_empty())? {
        Decision::Paused(ts) => Ok(ResearchRun {
            thread,
            status: "interrupted".into(),
            state: ts.values,
            interrupt: ts.interrupts.first().map(|i| i.value.clone()),
            action: "stored",
        }),
        Decision::Finished(ts) => Ok(ResearchRun {
            thread,
            status: ts.values.status.clone(),
            state: ts.values,
            interrupt: None,
            action: "stored",
        }),
        Decision::Continue => {
            let out = engine
                .continue_run(thread.clone(), RunOptions::default())
                .await?;
            finished(thread, out, "continued")
        }
        Decision::Resume(value) => {
            let handle = engine
                .start_resume(
                    thread.clone(),
                    Resume::Value(value),
                    RunOptions::streaming(),
                )
                .await?;
            let out = kit::drive(handle, &mut on_event).await?;
            finished(thread, out, "resumed")
        }
        // A thread named without a goal is shown or continued, never started.
        Decision::Start { input: None, .. } => Err(RunnerError::NoRun(thread)),
        Decision::Start {
            input: Some(update),
            ..
        } => {
            let handle = engine
                .start(thread.clone(), *update, RunOptions::streaming())
                .await?;
            let out = kit::drive(handle, &mut on_event).await?;
            finished(thread, out, "started")
        }
    }
}
