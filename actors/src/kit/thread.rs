//! What a request means on a thread, decided once for every planner: resume a paused thread,
//! continue one a dead process left between supersteps, report one that is paused or finished,
//! or start. A resume for a thread that is unknown or not paused is refused before the engine
//! sees it, so the paused thread is never touched by a bad request.

use planwright::runtime::{RunHandle, ThreadState};
use planwright::{RunError, RunEvent, RunOutcome, RunStatus, State, ThreadId};

/// Why a run on a thread could not be made.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// The resume value is not an answer the planner accepts.
    #[error(transparent)]
    BadResume(Box<dyn std::error::Error + Send + Sync>),
    /// Resume was asked for a thread that is not paused.
    #[error("thread `{0}` is not waiting for an answer; nothing to resume")]
    NotPaused(ThreadId),
    /// Resume or continue was asked for an unknown thread.
    #[error("thread `{0}` does not exist")]
    UnknownThread(ThreadId),
    /// A thread was named without input, and it has no run to show or continue.
    #[error("thread `{0}` has no run to show or continue: give the input to start one")]
    NoRun(ThreadId),
    /// The run was cancelled or suspended.
    #[error("the run stopped early ({0:?}); run the same command again to continue it")]
    Stopped(RunStatus),
    /// The engine failed.
    #[error(transparent)]
    Run(#[from] RunError),
}

impl RunnerError {
    /// A resume value the planner refused, with the planner's error as the message.
    pub fn bad_resume(e: impl std::error::Error + Send + Sync + 'static) -> Self {
        Self::BadResume(Box::new(e))
    }

    /// Whether the request was at fault (a command exits 2), not the run (exit 1).
    pub fn is_bad_input(&self) -> bool {
        matches!(
            self,
            Self::BadResume(_) | Self::NotPaused(_) | Self::UnknownThread(_) | Self::NoRun(_)
        )
    }
}

/// What a request asks on a thread: start with input `I` (or continue or report the thread, if it
/// already has a run), or answer its interrupt with `R`.
#[derive(Clone, Debug)]
pub enum Start<I, R> {
    /// Start a new run with this input, unless the thread already has a run: then continue an
    /// unfinished one, or report a finished or paused one.
    Input(I),
    /// Answer the thread's interrupt.
    Resume(R),
}

/// What to do on a thread.
#[derive(Debug)]
pub enum Decision<S: State, I, R> {
    /// Answer the thread's pending interrupt with this value.
    Resume(R),
    /// Run the thread's pending superstep (a process stopped between supersteps).
    Continue,
    /// The thread is paused and the request brought no answer: report it as it stands.
    Paused(ThreadState<S>),
    /// The thread has finished: report it as it stands.
    Finished(ThreadState<S>),
    /// Start a run with `input`. `existing` is a thread with a state but no run behind it (a
    /// migration hook re-bootstrapped it), `None` a new thread.
    Start {
        /// The request's input.
        input: I,
        /// The thread's state, if it has one.
        existing: Option<ThreadState<S>>,
    },
}

/// Decides what `request` does on `thread`, given its stored state; `finished` tells a finished
/// state from one never run.
pub fn decide<S: State, I, R>(
    thread: &ThreadId,
    request: Start<I, R>,
    existing: Option<ThreadState<S>>,
    finished: impl Fn(&S) -> bool,
) -> Result<Decision<S, I, R>, RunnerError> {
    match (request, existing) {
        (Start::Resume(_), None) => Err(RunnerError::UnknownThread(thread.clone())),
        (Start::Resume(_), Some(ts)) if ts.interrupts.is_empty() => {
            Err(RunnerError::NotPaused(thread.clone()))
        }
        (Start::Resume(value), Some(_)) => Ok(Decision::Resume(value)),
        (Start::Input(_), Some(ts)) if !ts.interrupts.is_empty() => Ok(Decision::Paused(ts)),
        (Start::Input(_), Some(ts)) if !ts.next.is_empty() => Ok(Decision::Continue),
        (Start::Input(_), Some(ts)) if finished(&ts.values) => Ok(Decision::Finished(ts)),
        (Start::Input(input), existing) => Ok(Decision::Start { input, existing }),
    }
}

/// Waits for a run, handing each of its events to `on_event` as it happens (when the run
/// streams events), and every event still queued when it ends.
pub async fn drive<S: State>(
    mut handle: RunHandle<S>,
    on_event: &mut impl FnMut(&RunEvent),
) -> Result<RunOutcome<S>, RunError> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use planwright::ids::InterruptId;
    use planwright::Interrupt;
    use std::sync::Arc;

    planwright::state! {
        /// A test state.
        pub struct S => SUpdate {
            /// Set when the run finished.
            replace done: bool,
        }
    }

    fn ts(done: bool, next: &[&str], paused: bool) -> ThreadState<S> {
        ThreadState {
            values: Arc::new(S { done }),
            checkpoint: None,
            next: next.iter().map(|s| s.to_string()).collect(),
            interrupts: if paused {
                vec![Interrupt {
                    id: InterruptId("i".into()),
                    node: "ask".into(),
                    value: serde_json::json!("why?"),
                    index: 0,
                }]
            } else {
                vec![]
            },
            step: 1,
        }
    }

    fn kind(d: Result<Decision<S, u8, &str>, RunnerError>) -> String {
        match d {
            Ok(Decision::Resume(v)) => format!("resume({v})"),
            Ok(Decision::Continue) => "continue".into(),
            Ok(Decision::Paused(_)) => "paused".into(),
            Ok(Decision::Finished(_)) => "finished".into(),
            Ok(Decision::Start { input, existing }) => {
                format!("start({input}, {})", existing.is_some())
            }
            Err(e) => format!("error: {e}"),
        }
    }

    #[test]
    fn every_request_on_every_kind_of_thread_has_one_decision() {
        let t = ThreadId::new("t");
        let done = |s: &S| s.done;
        let cases = [
            (true, None, "error: thread `t` does not exist"),
            (
                true,
                Some(ts(false, &[], false)),
                "error: thread `t` is not waiting for an answer; nothing to resume",
            ),
            (true, Some(ts(false, &["a"], true)), "resume(yes)"),
            (false, Some(ts(false, &["a"], true)), "paused"),
            (false, Some(ts(false, &["a"], false)), "continue"),
            (false, Some(ts(true, &[], false)), "finished"),
            (false, Some(ts(false, &[], false)), "start(7, true)"),
            (false, None, "start(7, false)"),
        ];
        for (resume, existing, want) in cases {
            let request = if resume {
                Start::Resume("yes")
            } else {
                Start::Input(7)
            };
            assert_eq!(kind(decide(&t, request, existing, done)), want);
        }
    }

    #[test]
    fn refusals_are_bad_input_and_run_failures_are_not() {
        let t = ThreadId::new("t");
        assert!(RunnerError::NotPaused(t.clone()).is_bad_input());
        assert!(RunnerError::UnknownThread(t).is_bad_input());
        assert!(!RunnerError::Stopped(RunStatus::Cancelled).is_bad_input());
    }
}
