//! Running the planner on a conversation's thread `{conversation_id}:planner:v2`: start it, continue
//! one whose process died, resume a paused one, answer questions from an [`AnswerSource`] until
//! one has no answer, and re-bootstrap a conversation whose checkpoint another topology version
//! wrote (the old `{conversation_id}:planner` thread, or a v2 thread with another fingerprint),
//! keeping every collected value.

use super::graph::Topology;
use super::input::rebootstrap;
use super::stages::user::answer_text;
use super::state::{FieldState, FieldUpdate, Status};
use crate::kit::{self, Decision};
use planwright::{Engine, Resume, RunError, RunOptions, RunOutcome, RunStatus, ThreadId};
use serde_json::{json, Value};
use std::sync::Arc;

/// Answers the planner's questions.
pub trait AnswerSource: Send {
    /// The answer to `question` about `field`, or `None` to leave the run paused.
    fn answer(&mut self, field: &str, question: &str) -> Option<String>;
}

/// No answers: every question pauses the run.
pub struct NoAnswers;

impl AnswerSource for NoAnswers {
    fn answer(&mut self, _: &str, _: &str) -> Option<String> {
        None
    }
}

impl AnswerSource for std::collections::BTreeMap<String, String> {
    fn answer(&mut self, field: &str, _: &str) -> Option<String> {
        self.get(field).cloned()
    }
}

/// How a run on a conversation ended.
#[derive(Clone, Debug)]
pub struct AcquireRun {
    /// The thread.
    pub thread: ThreadId,
    /// The state.
    pub state: Arc<FieldState>,
    /// The question the run is paused on (`{"field", "question"}`), if any.
    pub pending: Option<Value>,
    /// What was done first: `started`, `continued`, `resumed`, `rebootstrapped` or `stored`.
    pub action: &'static str,
}

impl AcquireRun {
    /// `ok`, `aborted` or `interrupted`.
    pub fn status(&self) -> &'static str {
        match (&self.pending, self.state.status) {
            (Some(_), _) => "interrupted",
            (None, Status::Ok) => "ok",
            _ => "aborted",
        }
    }

    /// The contract's JSON result.
    pub fn output_json(&self) -> Value {
        let thread = self.thread.to_string();
        let mut out = super::output::output_json(
            &self.state,
            self.pending.as_ref().map(|p| (p, thread.as_str())),
        );
        out["status"] = json!(self.status());
        out["thread_id"] = json!(thread);
        out
    }
}

pub use crate::kit::RunnerError;

/// What to do: start with an input (unless the thread exists: then continue or report it), or
/// answer the paused question.
pub type Start = kit::Start<Box<FieldUpdate>, String>;

/// The thread of a conversation under a topology.
pub fn thread_for(conversation: &str, topology: Topology) -> ThreadId {
    ThreadId::new(format!("{conversation}:{}", topology.namespace()))
}

/// The conversation id of a thread id or conversation id.
pub fn conversation_of(id: &str) -> &str {
    id.strip_suffix(":planner:v2")
        .or_else(|| id.strip_suffix(":planner"))
        .unwrap_or(id)
}

/// A state as an update writing every field (to start a thread from a re-bootstrapped state).
pub fn as_update(s: &FieldState) -> Result<FieldUpdate, RunError> {
    Ok(serde_json::from_value(serde_json::to_value(s)?)?)
}

/// The migration hook of the planner's engines: any checkpoint of another graph version
/// re-bootstraps.
pub fn migration(old: FieldState, _fingerprint: &str) -> Result<FieldState, String> {
    Ok(rebootstrap(&old))
}

fn pending_of(out: &RunOutcome<FieldState>) -> Option<Value> {
    out.interrupts.first().map(|i| i.value.clone())
}

/// Runs `start` on `conversation`, answering questions from `answers` while it has them.
pub async fn run(
    engine: &Engine<FieldState>,
    topology: Topology,
    conversation: &str,
    start: Start,
    answers: &mut dyn AnswerSource,
) -> Result<AcquireRun, RunnerError> {
    let thread = thread_for(conversation, topology);
    let existing = engine.get_state(&thread).await?;
    let opts = RunOptions::default;
    let decision = kit::decide(&thread, start, existing, |s| s.status != Status::Running)?;
    let (mut out, action) = match decision {
        Decision::Resume(text) => (
            engine
                .resume(thread.clone(), Resume::Value(json!(text)), opts())
                .await?,
            "resumed",
        ),
        Decision::Paused(ts) => {
            let pending = ts.interrupts.first().map(|i| i.value.clone());
            match pending.as_ref().and_then(|p| ask(answers, p)) {
                Some(a) => (
                    engine
                        .resume(thread.clone(), Resume::Value(json!(a)), opts())
                        .await?,
                    "resumed",
                ),
                None => {
                    return Ok(AcquireRun {
                        thread,
                        state: ts.values,
                        pending,
                        action: "stored",
                    })
                }
            }
        }
        Decision::Continue => (
            engine.continue_run(thread.clone(), opts()).await?,
            "continued",
        ),
        Decision::Finished(ts) => {
            return Ok(AcquireRun {
                thread,
                state: ts.values,
                pending: None,
                action: "stored",
            })
        }
        Decision::Start {
            existing: Some(_), ..
        } => (
            // A thread re-bootstrapped by the migration hook: run it from the start.
            engine
                .run(thread.clone(), FieldUpdate::default(), opts())
                .await?,
            "rebootstrapped",
        ),
        Decision::Start {
            input: update,
            existing: None,
        } => {
            let prior = match topology {
                Topology::Staged => engine
                    .get_state(&thread_for(conversation, Topology::Plan))
                    .await?
                    .filter(|ts| !ts.values.schema.fields.is_empty()),
                Topology::Plan => None,
            };
            match prior {
                Some(ts) => {
                    let fresh = rebootstrap(&ts.values);
                    (
                        engine
                            .run(thread.clone(), as_update(&fresh)?, opts())
                            .await?,
                        "rebootstrapped",
                    )
                }
                None => (
                    engine.run(thread.clone(), *update, opts()).await?,
                    "started",
                ),
            }
        }
    };
    loop {
        match out.status {
            RunStatus::Finished => {
                return Ok(AcquireRun {
                    thread,
                    state: out.state,
                    pending: None,
                    action,
                })
            }
            RunStatus::Interrupted => {
                let pending = pending_of(&out);
                match pending.as_ref().and_then(|p| ask(answers, p)) {
                    Some(a) => {
                        out = engine
                            .resume(thread.clone(), Resume::Value(json!(a)), opts())
                            .await?;
                    }
                    None => {
                        return Ok(AcquireRun {
                            thread,
                            state: out.state,
                            pending,
                            action,
                        })
                    }
                }
            }
            other => return Err(RunnerError::Stopped(other)),
        }
    }
}

fn ask(answers: &mut dyn AnswerSource, pending: &Value) -> Option<String> {
    let field = pending.get("field").map(answer_text).unwrap_or_default();
    let question = pending.get("question").map(answer_text).unwrap_or_default();
    answers.answer(&field, &question)
}
