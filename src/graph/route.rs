//! What a router returns: a label, several labels, or fan-out tasks.
//!
//! A router is a pure function of the state: it reads and returns a [`Route`]; it never changes the
//! state. Labels are mapped to nodes by the conditional edge's target table, so a router can say
//! `"retry"` while the graph decides which node that is.

use serde::{Deserialize, Serialize};
use std::borrow::Cow;

/// A fan-out task: run `node` with its own `input` (LangGraph's `Send`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Send {
    /// The node to run; must be one of the conditional edge's targets.
    pub node: Cow<'static, str>,
    /// The task's own input, visible as `NodeContext::input`.
    pub input: serde_json::Value,
}

impl Send {
    /// A fan-out task.
    pub fn new(node: impl Into<Cow<'static, str>>, input: serde_json::Value) -> Self {
        Self {
            node: node.into(),
            input,
        }
    }
}

/// A fan-out task in a dependency-driven batch.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DagTask {
    /// A key unique within the batch, named by other tasks' `after`.
    pub key: String,
    /// The node to run.
    pub node: Cow<'static, str>,
    /// The task's input.
    pub input: serde_json::Value,
    /// Keys of the tasks that must finish before this one starts.
    pub after: Vec<String>,
}

/// Fan-out tasks that run dependency-driven: each starts as soon as the tasks it names in `after`
/// finish, without waiting for unrelated siblings. A task sees the superstep's state plus the
/// updates of its (transitive) dependencies, applied in task order. The whole batch is one
/// superstep: its updates are merged in task order when every task is done.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Dag {
    /// The tasks, in the order their updates merge.
    pub tasks: Vec<DagTask>,
    /// At most this many tasks of the batch run at once (`None`: no limit beyond the node's own).
    pub max_parallel: Option<usize>,
}

/// A router's answer (or a command node's `goto`, stored with its pending write).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Route {
    /// Go to the node the label maps to.
    To(Cow<'static, str>),
    /// Go to several nodes at once (parallel branches in the next superstep).
    Many(Vec<Cow<'static, str>>),
    /// Fan out: one task per `Send`, all in the next superstep.
    Send(Vec<Send>),
    /// Fan out dependency-driven (see [`Dag`]).
    Dag(Dag),
}

impl Route {
    /// Route to a label.
    pub fn to(label: impl Into<Cow<'static, str>>) -> Self {
        Self::To(label.into())
    }
}

impl From<&'static str> for Route {
    fn from(label: &'static str) -> Self {
        Self::To(Cow::Borrowed(label))
    }
}

impl From<String> for Route {
    fn from(label: String) -> Self {
        Self::To(Cow::Owned(label))
    }
}
