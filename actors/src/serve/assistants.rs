//! The assistants a thread can run — `research` (the research planner) and `acquire` (the
//! field-acquisition planner) — each on its own engine over the same storage. A thread belongs to
//! the assistant of its first run: the binding is kept in the thread's record (`assistant_id`),
//! and every later run, read, cancel and delete of the thread goes to that assistant's engine. A
//! thread without a binding is read as a research thread (threads stored before `acquire` existed
//! are research threads).

use super::errors::ApiError;
use super::{acquire, AppState};
use crate::field::FieldState;
use crate::research::{self, output_json, ResearchState};
use planwright::runtime::RunHandle;
use planwright::{CheckpointId, Interrupt, RunError, RunEvent, RunId, RunOptions, RunStatus};
use planwright::{EventSwitch, RunOutcome, ThreadId};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// An assistant.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Assistant {
    /// The research planner.
    Research,
    /// The field-acquisition planner.
    Acquire,
}

impl Assistant {
    /// Every assistant.
    pub const ALL: [Assistant; 2] = [Assistant::Research, Assistant::Acquire];

    /// Its `assistant_id`.
    pub fn as_str(self) -> &'static str {
        match self {
            Assistant::Research => "research",
            Assistant::Acquire => "acquire",
        }
    }

    /// The assistant an `assistant_id` names (404 for another).
    pub fn parse(id: &str) -> Result<Self, ApiError> {
        match id {
            "research" => Ok(Assistant::Research),
            "acquire" => Ok(Assistant::Acquire),
            other => {
                // Named as far as a reader needs: the id is the client's, of any length.
                let shown: String = other.chars().take(40).collect();
                let more = if other.chars().nth(40).is_some() {
                    "…"
                } else {
                    ""
                };
                Err(ApiError::not_found(format!(
                    "unknown assistant `{shown}{more}`: use `research` or `acquire`"
                )))
            }
        }
    }
}

/// The assistant a thread record names, if it is bound.
fn recorded(rec: &Value) -> Option<Assistant> {
    rec.get("assistant_id")
        .and_then(Value::as_str)
        .and_then(|a| Assistant::parse(a).ok())
}

/// The assistant whose engine serves `thread` (record `rec`): the bound one, else research.
pub fn of(state: &AppState, thread: &ThreadId, rec: &Value) -> Assistant {
    recorded(rec)
        .or_else(|| state.bindings.get(thread.as_str()).map(|a| *a))
        .unwrap_or(Assistant::Research)
}

/// Binds `thread` to `wanted` on its first run, or checks that it is bound to it (409 if not).
/// `rec` is the thread's record; the binding is written into it. A resume (`resume: true`) never
/// binds: a thread no run has bound has nothing paused to resume (400).
pub async fn bind(
    state: &AppState,
    thread: &ThreadId,
    rec: Value,
    wanted: Assistant,
    resume: bool,
) -> Result<(), ApiError> {
    let bound = match recorded(&rec) {
        Some(a) => a,
        None => {
            let cached = state.bindings.get(thread.as_str()).map(|a| *a);
            let candidate = match cached {
                Some(a) => a,
                // A thread with checkpoints but no binding was stored before bindings existed.
                None if !state
                    .checkpointer
                    .list(thread, None, 1)
                    .await
                    .map_err(ApiError::internal)?
                    .is_empty() =>
                {
                    Assistant::Research
                }
                None if resume => {
                    return Err(ApiError::bad(
                        planwright::Refusal::NotInterrupted(thread.clone()).to_string(),
                    ))
                }
                None => wanted,
            };
            // The first of two concurrent first runs wins the thread.
            let a = *state
                .bindings
                .entry(thread.to_string())
                .or_insert(candidate);
            if a == wanted && rec.is_object() {
                // Written only over the record read: a thread deleted meanwhile is not brought
                // back, one created again under its id (by another user) keeps its owner, and a
                // binding another replica wrote first stands.
                let now = super::handlers::update_record(state, thread, &rec, |rec| {
                    if recorded(rec).is_some() {
                        return false;
                    }
                    rec["assistant_id"] = json!(wanted.as_str());
                    true
                })
                .await?;
                match now {
                    Some(now) => recorded(&now).unwrap_or(a),
                    None => {
                        state.bindings.remove(thread.as_str());
                        return Err(ApiError::not_found(format!(
                            "thread `{thread}` does not exist"
                        )));
                    }
                }
            } else {
                a
            }
        }
    };
    if bound == wanted {
        Ok(())
    } else {
        Err(ApiError::conflict(format!(
            "thread `{thread}` belongs to assistant `{}`; it cannot run `{}` (create another thread)",
            bound.as_str(),
            wanted.as_str()
        )))
    }
}

/// Forgets a deleted thread's binding.
pub fn unbind(state: &AppState, thread: &ThreadId) {
    state.bindings.remove(thread.as_str());
}

/// A started run of either assistant.
pub enum AnyHandle {
    /// A research run.
    Research(RunHandle<ResearchState>),
    /// An acquire run.
    Acquire(RunHandle<FieldState>),
}

/// How a run ended: its status and its values (`__interrupt__` included when paused).
pub struct Outcome {
    /// Finished, interrupted, cancelled or suspended.
    pub status: RunStatus,
    /// The values.
    pub values: Value,
}

impl AnyHandle {
    /// The run.
    pub fn run_id(&self) -> RunId {
        match self {
            AnyHandle::Research(h) => h.run_id,
            AnyHandle::Acquire(h) => h.run_id,
        }
    }

    /// The run's events, when it streams them (once).
    pub fn take_events(&mut self) -> Option<mpsc::UnboundedReceiver<RunEvent>> {
        match self {
            AnyHandle::Research(h) => h.events.take(),
            AnyHandle::Acquire(h) => h.events.take(),
        }
    }

    /// Waits for the run to end.
    pub async fn wait(self) -> Result<Outcome, RunError> {
        Ok(match self {
            AnyHandle::Research(h) => {
                let out = h.wait().await?;
                Outcome {
                    status: out.status,
                    values: research_values(&out),
                }
            }
            AnyHandle::Acquire(h) => {
                let out = h.wait().await?;
                Outcome {
                    status: out.status,
                    values: acquire::values(&out),
                }
            }
        })
    }
}

fn interrupts_json(list: &[Interrupt]) -> Value {
    list.iter()
        .map(|i| json!({"value": i.value, "id": i.id.0}))
        .collect()
}

/// A research run's result as values (the `research --json` keys, plus `__interrupt__` when
/// paused).
pub fn research_values(out: &RunOutcome<ResearchState>) -> Value {
    let status = if out.status == RunStatus::Interrupted {
        "interrupted"
    } else {
        out.state.status.as_str()
    };
    let mut v = output_json(&out.state, status);
    if out.status == RunStatus::Interrupted {
        v["__interrupt__"] = interrupts_json(&out.interrupts);
    }
    v
}

/// A thread's current position, whichever assistant it belongs to.
pub struct ThreadView {
    /// The values (the assistant's JSON keys).
    pub values: Value,
    /// Nodes to run next.
    pub next: Vec<String>,
    /// Pending interrupts.
    pub interrupts: Vec<Interrupt>,
    /// The newest checkpoint.
    pub checkpoint: Option<CheckpointId>,
    /// Supersteps so far.
    pub step: u64,
    /// The planner failed (research `failed`, acquire `aborted`).
    pub failed: bool,
}

/// The thread's position on its assistant's engine (`None`: nothing stored yet).
pub async fn view(
    state: &AppState,
    a: Assistant,
    thread: &ThreadId,
) -> Result<Option<ThreadView>, RunError> {
    Ok(match a {
        Assistant::Research => state.research.get_state(thread).await?.map(|s| ThreadView {
            values: output_json(&s.values, &s.values.status),
            failed: s.values.status == "failed",
            next: s.next,
            interrupts: s.interrupts,
            checkpoint: s.checkpoint,
            step: s.step,
        }),
        Assistant::Acquire => state.acquire.get_state(thread).await?.map(|s| {
            let pending = s.interrupts.first().map(|i| i.value.clone());
            ThreadView {
                values: acquire::thread_values(&s.values, pending.as_ref(), thread),
                failed: acquire::failed(&s.values),
                next: s.next,
                interrupts: s.interrupts,
                checkpoint: s.checkpoint,
                step: s.step,
            }
        }),
    })
}

/// The values of a state the engine streamed as JSON (a superstep's
/// [`RunEvent::StateUpdated`] `values`), as [`view`] shows a thread mid-run.
pub fn values_of(a: Assistant, thread: &ThreadId, state: Value) -> serde_json::Result<Value> {
    Ok(match a {
        Assistant::Research => {
            let s: ResearchState = serde_json::from_value(state)?;
            output_json(&s, &s.status)
        }
        Assistant::Acquire => {
            let s: FieldState = serde_json::from_value(state)?;
            acquire::thread_values(&s, None, thread)
        }
    })
}

/// The values at one checkpoint of the thread.
pub async fn values_at(
    state: &AppState,
    a: Assistant,
    thread: &ThreadId,
    id: CheckpointId,
) -> Result<Value, RunError> {
    Ok(match a {
        Assistant::Research => {
            let s = state.research.state_at(thread, id).await?;
            research::output_json(&s, &s.status)
        }
        Assistant::Acquire => {
            let s = state.acquire.state_at(thread, id).await?;
            acquire::thread_values(&s, None, thread)
        }
    })
}

/// The thread's checkpoints, newest first, older than `before` if given.
pub async fn history(
    state: &AppState,
    _a: Assistant,
    thread: &ThreadId,
    before: Option<CheckpointId>,
    limit: usize,
) -> Result<Vec<planwright::runtime::CheckpointInfo>, RunError> {
    let list = state.checkpointer.list(thread, before, limit).await?;
    Ok(list
        .into_iter()
        .map(
            |(id, parent, metadata)| planwright::runtime::CheckpointInfo {
                id,
                parent,
                metadata,
            },
        )
        .collect())
}

/// True while the thread has a run in progress.
pub fn is_running(state: &AppState, a: Assistant, thread: &ThreadId) -> bool {
    match a {
        Assistant::Research => state.research.is_running(thread),
        Assistant::Acquire => state.acquire.is_running(thread),
    }
}

/// Waits until the thread has no run going on its assistant's engine.
pub async fn wait_idle(state: &AppState, a: Assistant, thread: &ThreadId) {
    match a {
        Assistant::Research => state.research.wait_idle(thread).await,
        Assistant::Acquire => state.acquire.wait_idle(thread).await,
    }
}

/// Cancels the thread's run, if any.
pub fn cancel(state: &AppState, a: Assistant, thread: &ThreadId) {
    match a {
        Assistant::Research => {
            state.research.cancel(thread);
        }
        Assistant::Acquire => {
            state.acquire.cancel(thread);
        }
    }
}

/// Takes the thread back to checkpoint `at` (time travel on the same thread).
pub async fn branch(
    state: &AppState,
    a: Assistant,
    thread: &ThreadId,
    at: CheckpointId,
) -> Result<CheckpointId, RunError> {
    match a {
        Assistant::Research => state.research.branch(thread, at).await,
        Assistant::Acquire => state.acquire.branch(thread, at).await,
    }
}

/// Deletes the thread and everything stored for it.
pub async fn delete(state: &AppState, a: Assistant, thread: &ThreadId) -> Result<(), RunError> {
    match a {
        Assistant::Research => state.research.delete_thread(thread).await,
        Assistant::Acquire => state.acquire.delete_thread(thread).await,
    }?;
    unbind(state, thread);
    Ok(())
}

/// Continues the thread from its last checkpoint (a run a stopped server left mid-superstep);
/// with `values`, its events carry the state after each superstep ([`RunOptions::with_values`]).
pub async fn start_continue(
    state: &AppState,
    a: Assistant,
    thread: ThreadId,
    events: EventSwitch,
    values: bool,
) -> Result<AnyHandle, RunError> {
    let mut opts = RunOptions::default().events_while(events);
    if values {
        opts = opts.with_values();
    }
    Ok(match a {
        Assistant::Research => {
            AnyHandle::Research(state.research.start_continue(thread, opts).await?)
        }
        Assistant::Acquire => AnyHandle::Acquire(state.acquire.start_continue(thread, opts).await?),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::{state, ServeArgs};
    use axum::http::StatusCode;
    use std::sync::Arc;

    async fn memory_state() -> Arc<AppState> {
        let args = ServeArgs {
            checkpoint: "memory:".into(),
            model: "offline".into(),
            ..ServeArgs::default()
        };
        state(&args).await.expect("a server on memory: starts")
    }

    #[tokio::test]
    async fn binding_a_thread_read_before_it_changed_hands_leaves_the_new_owners_record() {
        let st = memory_state().await;
        let t = ThreadId::new("taken");
        let ann = json!({"owner": "ann", "created_at": "2026-11-27T00:00:00.000Z", "metadata": {}});
        assert!(st
            .checkpointer
            .create_thread(&t, ann.clone())
            .await
            .unwrap());
        // Ann's first run read her record; before it binds, her thread is deleted and Bob
        // creates the id.
        st.checkpointer.delete_thread(&t).await.unwrap();
        let bob = json!({"owner": "bob", "created_at": "2026-11-27T00:00:01.000Z", "metadata": {}});
        assert!(st
            .checkpointer
            .create_thread(&t, bob.clone())
            .await
            .unwrap());
        let e = bind(&st, &t, ann.clone(), Assistant::Research, false)
            .await
            .unwrap_err();
        assert_eq!(e.0, StatusCode::NOT_FOUND, "{}", e.1);
        assert_eq!(
            st.checkpointer.thread_metadata(&t).await.unwrap(),
            Some(bob),
            "Bob's record keeps its owner"
        );
        // Deleted and not created again: the bind does not bring Ann's record back.
        st.checkpointer.delete_thread(&t).await.unwrap();
        assert!(bind(&st, &t, ann, Assistant::Research, false)
            .await
            .is_err());
        assert_eq!(st.checkpointer.thread_metadata(&t).await.unwrap(), None);
    }

    #[tokio::test]
    async fn a_bind_keeps_what_was_written_since_its_read_and_a_cancel_mark_keeps_the_owner() {
        let st = memory_state().await;
        let t = ThreadId::new("busy");
        let ann = json!({"owner": "ann", "created_at": "2026-11-27T00:00:00.000Z", "metadata": {}});
        assert!(st
            .checkpointer
            .create_thread(&t, ann.clone())
            .await
            .unwrap());
        // A cancel is marked after the bind's read: the bind adds its assistant beside it.
        super::super::handlers::mark_cancelled(&st, &t, Some("r-1"))
            .await
            .unwrap();
        bind(&st, &t, ann, Assistant::Acquire, false).await.unwrap();
        assert_eq!(
            st.checkpointer.thread_metadata(&t).await.unwrap(),
            Some(json!({
                "owner": "ann", "created_at": "2026-11-27T00:00:00.000Z", "metadata": {},
                "cancelled_run": "r-1", "assistant_id": "acquire"
            }))
        );
        // Clearing the mark on a thread that is gone does not create it.
        st.checkpointer.delete_thread(&t).await.unwrap();
        super::super::handlers::mark_cancelled(&st, &t, None)
            .await
            .unwrap();
        assert_eq!(st.checkpointer.thread_metadata(&t).await.unwrap(), None);
    }
}
