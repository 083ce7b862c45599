//! Typed identifiers.
//!
//! Every id that crosses a module boundary is a newtype, so a thread id can never be passed where a
//! checkpoint id is expected. Ids that users choose (threads) are strings; ids the runtime mints
//! (runs, checkpoints, tasks) are numbers or derived deterministically so a resumed run recomputes
//! exactly the same task ids it saved writes under.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

/// A conversation thread: the unit of durable state. May carry a namespace suffix such as
/// `{conversation_id}:planner:v2`.
///
/// Shared text (`Arc<str>`): a run copies its thread's id into every record, task write, event
/// and map it keeps, and a copy is a reference count, not an allocation that the checkpoint
/// writer's thread then frees.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct ThreadId(std::sync::Arc<str>);

impl ThreadId {
    /// Wraps a user-chosen thread id.
    pub fn new(id: impl Into<String>) -> Self {
        Self(id.into().into())
    }

    /// Builds the namespaced id `{base}:{namespace}` (for example `c42:planner:v2`).
    pub fn namespaced(base: &str, namespace: &str) -> Self {
        Self(format!("{base}:{namespace}").into())
    }

    /// The id as a string slice.
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// The part before the first `:`: the conversation this thread belongs to.
    pub fn base(&self) -> &str {
        self.0.split(':').next().unwrap_or(&self.0[..])
    }

    /// The part after the first `:`, if any (for example `planner:v2`).
    pub fn namespace(&self) -> Option<&str> {
        self.0.split_once(':').map(|(_, ns)| ns)
    }
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl From<&str> for ThreadId {
    fn from(s: &str) -> Self {
        Self::new(s)
    }
}

impl From<String> for ThreadId {
    fn from(s: String) -> Self {
        Self(s.into())
    }
}

/// A checkpoint's position in its thread: 1 for the first checkpoint, then one more per superstep.
/// Checkpoint ids are only unique within a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct CheckpointId(pub u64);

impl fmt::Display for CheckpointId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A node's index in its compiled graph.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct NodeId(pub u32);

impl NodeId {
    /// The index into the compiled graph's node table.
    pub fn index(self) -> usize {
        self.0 as usize
    }
}

/// One execution of a graph on a thread (a run starts, and ends finished, interrupted, failed or
/// cancelled).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct RunId(pub u64);

static NEXT_RUN: AtomicU64 = AtomicU64::new(1);

impl RunId {
    /// A process-unique run id.
    pub fn next() -> Self {
        Self(NEXT_RUN.fetch_add(1, Ordering::Relaxed))
    }
}

impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "run-{}", self.0)
    }
}

/// A task within a superstep: `step.index`. Deterministic, so a resumed run finds the writes a
/// task saved before a crash under the same id.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct TaskId {
    /// The superstep (equals the id of the checkpoint the task runs from).
    pub step: u64,
    /// The task's position in its superstep's task list.
    pub index: u32,
}

impl fmt::Display for TaskId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.step, self.index)
    }
}

/// A stable interrupt id: the task that raised it plus the interrupt's index within that task.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InterruptId(pub String);

impl InterruptId {
    /// The id of interrupt `n` raised by task `task` of thread step.
    pub fn for_task(task: TaskId, node: &str) -> Self {
        Self(format!("{node}@{task}"))
    }

    /// The id of the `index`-th `interrupt` call of task `task` (the first keeps `for_task`'s id).
    pub fn for_call(task: TaskId, node: &str, index: u32) -> Self {
        match index {
            0 => Self::for_task(task, node),
            n => Self(format!("{node}@{task}#{n}")),
        }
    }
}

impl fmt::Display for InterruptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::ThreadId;

    /// A copy of a thread id shares its text; ids compare, order, print and serialise as text.
    #[test]
    fn a_thread_id_copy_shares_its_text_and_reads_as_text() {
        let a = ThreadId::new(String::from("c42:planner:v2"));
        let b = a.clone();
        assert!(std::ptr::eq(a.as_str(), b.as_str()));
        assert_eq!(a, ThreadId::from("c42:planner:v2"));
        assert!(ThreadId::from("a") < ThreadId::from("b"));
        assert_eq!((a.base(), a.namespace()), ("c42", Some("planner:v2")));
        assert_eq!(a.to_string(), "c42:planner:v2");
        assert_eq!(serde_json::to_string(&a).unwrap(), "\"c42:planner:v2\"");
        let back: ThreadId = serde_json::from_str("\"c42:planner:v2\"").unwrap();
        assert_eq!(back, a);
    }
}
