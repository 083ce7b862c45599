//! The assistants a server runs, and which one a thread belongs to. A thread belongs to the
//! assistant of its first run: the binding is kept in the thread's record (`assistant_id`), and
//! every later run, read, cancel and delete of the thread goes to that assistant. A thread
//! without a binding is read as the default assistant's (the first registered: for `serve`,
//! `research`, so threads stored before bindings existed stay research threads).

use super::assistant::Assistant;
use super::errors::ApiError;
use super::AppState;
use planwright::ThreadId;
use serde_json::{json, Value};
use std::sync::Arc;

/// An assistant as the server holds it.
pub type AssistantRef = Arc<dyn Assistant>;

/// Why a set of assistants cannot be served.
#[derive(Debug, thiserror::Error)]
pub enum RegistryError {
    /// No assistant at all.
    #[error("a server needs at least one assistant")]
    Empty,
    /// Two assistants under one id.
    #[error("two assistants are registered as `{0}`")]
    Duplicate(String),
    /// An id a URL path cannot carry as one segment.
    #[error("assistant id `{0}`: use letters, digits, `-`, `_` and `.` (1 to 64 characters)")]
    BadId(String),
}

/// The registered assistants, the first being the default of unbound threads.
pub struct Assistants {
    list: Vec<AssistantRef>,
}

impl Assistants {
    /// Checks and keeps `list`.
    pub fn new(list: Vec<AssistantRef>) -> Result<Self, RegistryError> {
        if list.is_empty() {
            return Err(RegistryError::Empty);
        }
        for (i, a) in list.iter().enumerate() {
            let id = a.id();
            let ok = (1..=64).contains(&id.len())
                && id
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
            if !ok {
                return Err(RegistryError::BadId(id.to_string()));
            }
            if list[..i].iter().any(|b| b.id() == id) {
                return Err(RegistryError::Duplicate(id.to_string()));
            }
        }
        Ok(Self { list })
    }

    /// Every assistant, in registration order.
    pub fn all(&self) -> &[AssistantRef] {
        &self.list
    }

    /// The assistant of threads no run has bound.
    pub fn default_one(&self) -> &AssistantRef {
        &self.list[0]
    }

    /// The assistant an `assistant_id` names, if any.
    pub fn find(&self, id: &str) -> Option<&AssistantRef> {
        self.list.iter().find(|a| a.id() == id)
    }

    /// The assistant an `assistant_id` names (404 naming the ones there are).
    pub fn get(&self, id: &str) -> Result<&AssistantRef, ApiError> {
        self.find(id).ok_or_else(|| {
            // Named as far as a reader needs: the id is the client's, of any length.
            let shown: String = id.chars().take(40).collect();
            let more = if id.chars().nth(40).is_some() {
                "…"
            } else {
                ""
            };
            let ids: Vec<String> = self.list.iter().map(|a| format!("`{}`", a.id())).collect();
            ApiError::not_found(format!(
                "unknown assistant `{shown}{more}`: use {}",
                ids.join(" or ")
            ))
        })
    }
}

/// The assistant a thread record names, if it is bound to one this server has.
fn recorded(state: &AppState, rec: &Value) -> Option<AssistantRef> {
    rec.get("assistant_id")
        .and_then(Value::as_str)
        .and_then(|a| state.assistants.find(a).cloned())
}

/// The assistant that serves `thread` (record `rec`): the bound one, else the default.
pub fn of(state: &AppState, thread: &ThreadId, rec: &Value) -> AssistantRef {
    recorded(state, rec)
        .or_else(|| state.bindings.get(thread.as_str()).map(|a| a.clone()))
        .unwrap_or_else(|| state.assistants.default_one().clone())
}

/// Binds `thread` to `wanted` on its first run, or checks that it is bound to it (409 if not).
/// `rec` is the thread's record; the binding is written into it. A resume (`resume: true`) never
/// binds: a thread no run has bound has nothing paused to resume (400).
pub async fn bind(
    state: &AppState,
    thread: &ThreadId,
    rec: Value,
    wanted: &AssistantRef,
    resume: bool,
) -> Result<(), ApiError> {
    let bound = match recorded(state, &rec) {
        Some(a) => a,
        None => {
            let cached = state.bindings.get(thread.as_str()).map(|a| a.clone());
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
                    state.assistants.default_one().clone()
                }
                None if resume => {
                    return Err(ApiError::bad(
                        planwright::Refusal::NotInterrupted(thread.clone()).to_string(),
                    ))
                }
                None => wanted.clone(),
            };
            // The first of two concurrent first runs wins the thread.
            let a = state
                .bindings
                .entry(thread.to_string())
                .or_insert(candidate)
                .clone();
            if a.id() == wanted.id() && rec.is_object() {
                // Written only over the record read: a thread deleted meanwhile is not brought
                // back, one created again under its id (by another user) keeps its owner, and a
                // binding another replica wrote first stands.
                let now = super::thread_records::update_record(state, thread, &rec, |rec| {
                    if rec.get("assistant_id").and_then(Value::as_str).is_some() {
                        return false;
                    }
                    rec["assistant_id"] = json!(wanted.id());
                    true
                })
                .await?;
                match now {
                    Some(now) => recorded(state, &now).unwrap_or(a),
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
    if bound.id() == wanted.id() {
        Ok(())
    } else {
        Err(ApiError::conflict(format!(
            "thread `{thread}` belongs to assistant `{}`; it cannot run `{}` (create another thread)",
            bound.id(),
            wanted.id()
        )))
    }
}

/// Forgets a deleted thread's binding.
pub fn unbind(state: &AppState, thread: &ThreadId) {
    state.bindings.remove(thread.as_str());
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

    fn research(st: &AppState) -> AssistantRef {
        st.assistants.get("research").unwrap().clone()
    }

    fn acquire(st: &AppState) -> AssistantRef {
        st.assistants.get("acquire").unwrap().clone()
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
        let e = bind(&st, &t, ann.clone(), &research(&st), false)
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
        assert!(bind(&st, &t, ann, &research(&st), false).await.is_err());
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
        super::super::start::mark_cancelled(&st, &t, Some("r-1"))
            .await
            .unwrap();
        bind(&st, &t, ann, &acquire(&st), false).await.unwrap();
        assert_eq!(
            st.checkpointer.thread_metadata(&t).await.unwrap(),
            Some(json!({
                "owner": "ann", "created_at": "2026-11-27T00:00:00.000Z", "metadata": {},
                "cancelled_run": "r-1", "assistant_id": "acquire"
            }))
        );
        // Clearing the mark on a thread that is gone does not create it.
        st.checkpointer.delete_thread(&t).await.unwrap();
        super::super::start::mark_cancelled(&st, &t, None)
            .await
            .unwrap();
        assert_eq!(st.checkpointer.thread_metadata(&t).await.unwrap(), None);
    }
}
