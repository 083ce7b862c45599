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

/// A stable interrupt id: a digest of the task that raised it plus the call's index within that
/// task, as 32 lowercase hex digits.
///
/// Why a digest and not the readable `node@step.index`: LangGraph treats a resume map
/// (`Command(resume={id: value})`) as answers by id only when every key has this shape (its
/// `is_xxh3_128_hexdigest`); a LangGraph parent graph that runs one of our graphs as a
/// `RemoteGraph` node forwards such a map to the server, and any other key makes it keep the
/// values to itself. The node that asked travels beside the id ([`crate::Interrupt::node`]).
/// Interrupts stored before ids were digests keep the ids they were stored with.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(transparent)]
pub struct InterruptId(pub String);

impl InterruptId {
    /// The id of the first interrupt raised by task `task` of `node`.
    pub fn for_task(task: TaskId, node: &str) -> Self {
        Self::for_call(task, node, 0)
    }

    /// The id of the `index`-th `interrupt` call of task `task` of `node`: the FNV-1a 128-bit
    /// digest of `node@step.index` (`#index` appended after the first call), in hex. Stable
    /// across processes and versions: a paused thread's id is the one a client was shown.
    pub fn for_call(task: TaskId, node: &str, index: u32) -> Self {
        let text = match index {
            0 => format!("{node}@{task}"),
            n => format!("{node}@{task}#{n}"),
        };
        Self(format!("{:032x}", fnv1a_128(text.as_bytes())))
    }

    /// True when `id` has the shape of a digest id: 32 lowercase hex digits (LangGraph's test
    /// for the keys of a resume map).
    pub fn is_digest(id: &str) -> bool {
        id.len() == 32 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    }
}

/// FNV-1a, 128 bits: small, dependency-free and fixed by its specification.
pub(crate) fn fnv1a_128(bytes: &[u8]) -> u128 {
    const OFFSET: u128 = 0x6c62272e07bb014262b821756295c58d;
    const PRIME: u128 = 0x0000000001000000000000000000013b;
    bytes
        .iter()
        .fold(OFFSET, |h, b| (h ^ u128::from(*b)).wrapping_mul(PRIME))
}

impl fmt::Display for InterruptId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// A random version-4 UUID in its text form (`xxxxxxxx-xxxx-4xxx-[89ab]xxx-xxxxxxxxxxxx`): the
/// ids a server mints for threads, runs and assistants, and the thread ids every Agent Server
/// accepts (LangGraph's refuses anything but a UUID).
pub fn random_uuid() -> String {
    use rand::Rng;
    let mut rng = rand::rng();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        rng.random::<u32>(),
        rng.random::<u16>(),
        rng.random::<u16>() & 0xfff,
        (rng.random::<u16>() & 0x3fff) | 0x8000,
        rng.random::<u64>() & 0xffff_ffff_ffff
    )
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

    /// Interrupt ids are digests LangGraph reads as ids: 32 lowercase hex digits, one per call,
    /// the same in every process.
    #[test]
    fn interrupt_ids_are_stable_hex_digests_one_per_call() {
        use super::{InterruptId, TaskId};
        let t = TaskId { step: 3, index: 1 };
        let first = InterruptId::for_call(t, "review", 0);
        assert!(InterruptId::is_digest(&first.0), "{first}");
        assert_eq!(first, InterruptId::for_task(t, "review"));
        assert_ne!(first, InterruptId::for_call(t, "review", 1));
        assert_ne!(
            first,
            InterruptId::for_call(TaskId { step: 3, index: 2 }, "review", 0)
        );
        // FNV-1a 128 of the empty input is its offset basis: the digest follows the standard.
        assert_eq!(
            format!("{:032x}", super::fnv1a_128(b"")),
            "6c62272e07bb014262b821756295c58d"
        );
        assert!(!InterruptId::is_digest("review@3.1"));
        assert!(!InterruptId::is_digest(&first.0.to_uppercase()));
    }
}
