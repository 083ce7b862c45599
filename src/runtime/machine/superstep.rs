//! The graph's rules between supersteps: how a finished superstep's updates merge into the state,
//! and which tasks run next.
//!
//! Given the compiled graph, the state, and the tasks of a superstep with their updates, these
//! functions say how the state changes and what runs next; the superstep machine
//! ([`step`](super::step)) owns the rules inside one superstep. Nothing here spawns, awaits or stores:
//! the supervisor actor drives these functions and does the I/O, so every scheduling rule is tested
//! without actors (see `tests/superstep_rules.rs`).
//!
//! Rules:
//! - A superstep's updates merge in **task order**, never completion order, so runs are deterministic.
//! - After the merge, every finished task contributes its node's next tasks, in task order: its
//!   plain edges, then its router's answer evaluated on the merged state. A node triggered by
//!   several plain edges or labels in one superstep runs once (that is the join); each `Send` is a
//!   task of its own.
//! - A [`Dag`](crate::graph::Dag) batch is one superstep whose tasks start as soon as their own
//!   dependencies finish; a task sees the superstep's state plus its transitive dependencies'
//!   updates, applied in task order.

use crate::events::Interrupt;
use crate::graph::{CompiledGraph, CompiledRouter, Route, Target};
use crate::ids::{InterruptId, NodeId, TaskId};
use crate::reducer::MergeCtx;
use crate::runtime::error::RunError;
use crate::state::State;
use serde::{Deserialize, Serialize};
use std::borrow::Borrow;
use std::sync::Arc;

/// A task of a superstep: which node runs, with what input, after which sibling tasks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TaskSpec {
    /// Deterministic id: `(step, index)`, stored as `[step, index]` (the older
    /// `{"step":…,"index":…}` form still reads).
    #[serde(with = "stored_task_id")]
    pub id: TaskId,
    /// The node's name: the stable identity stored in checkpoints.
    pub node: Arc<str>,
    /// The node's index in this graph: not stored (a loaded task is resolved by its name, which
    /// survives a graph that renumbers its nodes).
    #[serde(skip_serializing, default)]
    pub node_id: NodeId,
    /// The fan-out input, for `Send` and dependency-driven tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input: Option<Arc<serde_json::Value>>,
    /// Indexes (within the superstep) of the tasks that must finish first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub after: Vec<u32>,
    /// At most this many tasks of this task's dependency batch run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_limit: Option<u32>,
    /// The first index of this task's dependency batch (tasks sharing it share the limit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch: Option<u32>,
    /// A deferred node's task that is waiting for the run's other tasks to finish (stored after
    /// the superstep's runnable tasks; see [`schedule`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub deferred: bool,
}

impl TaskSpec {
    /// The node's name as an owned string, for the records, writes, events and interrupts that
    /// carry it. Copied from the `str` directly: `Arc<str>::to_string()` goes through
    /// `fmt::Display`, which has no fast path for it, on every event of every task.
    pub fn node_name(&self) -> String {
        String::from(&*self.node)
    }

    /// The interrupt of a static pause (`interrupt_before`/`interrupt_after`) `at` this task:
    /// `at` is `"before"` or `"after"`, the id `at:task`, no value.
    pub fn static_pause(&self, at: &str) -> Interrupt {
        Interrupt {
            id: InterruptId(format!("{at}:{}", self.id)),
            node: self.node_name(),
            value: serde_json::Value::Null,
            index: 0,
        }
    }
}

/// How a checkpoint's next tasks store their ids: a pair, a third of the bytes of the named form
/// in the checkpoints a run writes each superstep.
mod stored_task_id {
    use crate::ids::TaskId;
    use serde::{Deserialize, Deserializer, Serialize, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Either {
        Pair(u64, u32),
        Named { step: u64, index: u32 },
    }

    pub fn serialize<Se: Serializer>(id: &TaskId, s: Se) -> Result<Se::Ok, Se::Error> {
        (id.step, id.index).serialize(s)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<TaskId, D::Error> {
        Ok(match Either::deserialize(d)? {
            Either::Pair(step, index) | Either::Named { step, index } => TaskId { step, index },
        })
    }
}

struct NextBuilder<'g, S: State> {
    graph: &'g CompiledGraph<S>,
    step: u64,
    triggered: Vec<bool>,
    tasks: Vec<TaskSpec>,
}

impl<S: State> NextBuilder<'_, S> {
    fn push(
        &mut self,
        node_id: NodeId,
        input: Option<Arc<serde_json::Value>>,
        after: Vec<u32>,
        batch: Option<(u32, Option<u32>)>,
    ) {
        let index = self.tasks.len() as u32;
        self.tasks.push(TaskSpec {
            id: TaskId {
                step: self.step,
                index,
            },
            node: self.graph.node(node_id).name.clone(),
            node_id,
            input,
            after,
            batch: batch.map(|b| b.0),
            batch_limit: batch.and_then(|b| b.1),
            deferred: false,
        });
    }

    fn trigger(&mut self, target: Target) {
        if let Target::Node(id) = target {
            if !self.triggered[id.index()] {
                self.triggered[id.index()] = true;
                self.push(id, None, Vec::new(), None);
            }
        }
    }

    fn follow(
        &mut self,
        from: &str,
        edges: &[Target],
        router: Option<&CompiledRouter<S>>,
        state: &S,
    ) -> Result<(), RunError> {
        for &t in edges {
            self.trigger(t);
        }
        let Some(router) = router else { return Ok(()) };
        self.route(from, &router.labels, (router.router)(state))
    }

    /// Adds the tasks `route` asks for, resolved against a label table (a router's targets, or a
    /// command node's, whose labels are the targets' names).
    fn route(
        &mut self,
        from: &str,
        labels: &[(String, Target)],
        route: Route,
    ) -> Result<(), RunError> {
        let resolve = |label: &str| {
            labels
                .iter()
                .find(|(l, _)| l == label)
                .map(|(_, t)| *t)
                .ok_or_else(|| RunError::UnknownLabel {
                    node: from.to_string(),
                    label: label.to_string(),
                    targets: labels
                        .iter()
                        .map(|(l, _)| l.as_str())
                        .collect::<Vec<_>>()
                        .join(", "),
                })
        };
        let send_target = |node: &str| -> Result<NodeId, RunError> {
            match labels.iter().find(|(label, t)| {
                label == node
                    || matches!(t, Target::Node(id) if &*self.graph.node(*id).name == node)
            }) {
                Some((_, Target::Node(id))) => Ok(*id),
                _ => Err(RunError::UnknownSendTarget {
                    node: from.to_string(),
                    target: node.to_string(),
                }),
            }
        };
        match route {
            Route::To(label) => self.trigger(resolve(&label)?),
            Route::Many(labels) => {
                for label in labels {
                    self.trigger(resolve(&label)?);
                }
            }
            Route::Send(sends) => {
                for s in sends {
                    let id = send_target(&s.node)?;
                    self.push(id, Some(Arc::new(s.input)), Vec::new(), None);
                }
            }
            Route::Dag(dag) => {
                let base = self.tasks.len() as u32;
                let limit = dag.max_parallel.map(|m| m.max(1) as u32);
                let keys: Vec<&str> = dag.tasks.iter().map(|t| t.key.as_str()).collect();
                for (i, k) in keys.iter().enumerate() {
                    if keys[..i].contains(k) {
                        return Err(RunError::BadDag {
                            node: from.into(),
                            reason: format!("key `{k}` appears twice"),
                        });
                    }
                }
                let mut resolved = Vec::with_capacity(dag.tasks.len());
                for t in &dag.tasks {
                    let mut after = Vec::with_capacity(t.after.len());
                    for dep in &t.after {
                        let pos =
                            keys.iter()
                                .position(|k| k == dep)
                                .ok_or_else(|| RunError::BadDag {
                                    node: from.into(),
                                    reason: format!(
                                        "task `{}` waits for unknown key `{dep}`",
                                        t.key
                                    ),
                                })?;
                        after.push(pos);
                    }
                    resolved.push(after);
                }
                if let Some(cycle) = find_cycle(&resolved) {
                    let path: Vec<&str> = cycle.iter().map(|&i| keys[i]).collect();
                    return Err(RunError::BadDag {
                        node: from.into(),
                        reason: format!("dependency cycle {}", path.join(" -> ")),
                    });
                }
                for (t, after) in dag.tasks.into_iter().zip(resolved) {
                    let id = send_target(&t.node)?;
                    let after = after.into_iter().map(|p| base + p as u32).collect();
                    self.push(id, Some(Arc::new(t.input)), after, Some((base, limit)));
                }
            }
        }
        Ok(())
    }
}

/// Finds a cycle in a dependency list (`deps[i]` = what `i` waits for); returns its path, closed.
fn find_cycle(deps: &[Vec<usize>]) -> Option<Vec<usize>> {
    // 0 = unvisited, 1 = on the stack, 2 = done.
    let mut mark = vec![0u8; deps.len()];
    let mut stack: Vec<usize> = Vec::new();
    fn visit(
        i: usize,
        deps: &[Vec<usize>],
        mark: &mut [u8],
        stack: &mut Vec<usize>,
    ) -> Option<Vec<usize>> {
        mark[i] = 1;
        stack.push(i);
        for &d in &deps[i] {
            if mark[d] == 1 {
                let start = stack.iter().position(|&s| s == d).unwrap_or(0);
                let mut cycle = stack[start..].to_vec();
                cycle.push(d);
                return Some(cycle);
            }
            if mark[d] == 0 {
                if let Some(c) = visit(d, deps, mark, stack) {
                    return Some(c);
                }
            }
        }
        stack.pop();
        mark[i] = 2;
        None
    }
    (0..deps.len()).find_map(|i| {
        if mark[i] == 0 {
            visit(i, deps, &mut mark, &mut stack)
        } else {
            None
        }
    })
}

/// The tasks of the first superstep (`step`), from START's edges and router.
pub fn start_tasks<S: State>(
    graph: &CompiledGraph<S>,
    state: &S,
    step: u64,
) -> Result<Vec<TaskSpec>, RunError> {
    let mut b = NextBuilder {
        graph,
        step,
        triggered: vec![false; graph.nodes().len()],
        tasks: Vec::new(),
    };
    b.follow(
        crate::graph::START,
        graph.start_edges(),
        graph.start_router(),
        state,
    )?;
    Ok(b.tasks)
}

/// Merges a superstep's updates into `state` in task order: the `i`-th update belongs to
/// `tasks[i]` (by value, or unboxed by the caller as it goes).
pub fn merge<S: State>(
    state: &mut S,
    tasks: &[TaskSpec],
    updates: impl IntoIterator<Item = S::Update>,
) -> Result<(), RunError> {
    let mut ctx = MergeCtx::new();
    for (task, update) in tasks.iter().zip(updates) {
        ctx.set_writer(&task.node);
        state.apply(update, &mut ctx)?;
    }
    Ok(())
}

/// The tasks of superstep `step`, given the tasks that just finished and the merged state.
pub fn next_tasks<S: State>(
    graph: &CompiledGraph<S>,
    state: &S,
    finished: &[TaskSpec],
    step: u64,
) -> Result<Vec<TaskSpec>, RunError> {
    next_tasks_after(graph, state, finished, &[], step)
}

/// [`next_tasks`] when command nodes among the finished tasks said where to go: `gotos[i]` is
/// task `i`'s `Command::goto` (missing or `None`: only its edges and router). A goto is followed
/// after the node's edges and router, in task order, and resolved against the targets the node
/// declared; one naming anything else fails the run (`UnknownLabel` / `UnknownSendTarget`).
pub fn next_tasks_after<S: State>(
    graph: &CompiledGraph<S>,
    state: &S,
    finished: &[TaskSpec],
    gotos: &[Option<Route>],
    step: u64,
) -> Result<Vec<TaskSpec>, RunError> {
    let mut b = NextBuilder {
        graph,
        step,
        triggered: vec![false; graph.nodes().len()],
        tasks: Vec::new(),
    };
    for (i, task) in finished.iter().enumerate() {
        let node = graph.node(task.node_id);
        b.follow(&node.name, &node.edges, node.router.as_ref(), state)?;
        if let (Some(Some(goto)), Some(table)) = (gotos.get(i), &node.command) {
            b.route(&node.name, table, goto.clone())?;
        }
    }
    Ok(b.tasks)
}

/// Splits a superstep's tasks into those that run now and the deferred ones that wait.
///
/// `next` are the tasks the finished superstep's edges asked for; `waiting` the deferred tasks
/// carried from earlier supersteps. An edge-triggered task of a deferred node
/// (`StateGraph::defer`) waits while any other task is left; a deferred node triggered again
/// while it waits still runs once (the join). `Send` and plan tasks of a deferred node carry their
/// own input and run as sent. When nothing else is left,
/// the waiting tasks run. Runnable tasks are renumbered `(step, 0..)`, and dependency indexes
/// follow; waiting tasks are numbered after them and flagged, which is how they are stored in a
/// checkpoint's `next_tasks` (see [`stored_next`] and [`split_stored`]).
pub fn schedule<S: State>(
    graph: &CompiledGraph<S>,
    next: Vec<TaskSpec>,
    waiting: Vec<TaskSpec>,
    step: u64,
) -> (Vec<TaskSpec>, Vec<TaskSpec>) {
    // The common case — nothing waits and nothing defers — costs no allocation: `next` is already
    // numbered `(step, 0..)` by `next_tasks`.
    if waiting.is_empty() && !next.iter().any(|t| graph.node(t.node_id).deferred) {
        return (next, waiting);
    }
    let mut run = Vec::new();
    let mut wait: Vec<TaskSpec> = waiting;
    let mut moved = vec![None; next.len()];
    for (i, t) in next.into_iter().enumerate() {
        // Only edge-triggered tasks wait: a `Send` or plan task carries its own input and runs
        // as sent, like LangGraph's push tasks.
        let defers = graph.node(t.node_id).deferred
            && t.input.is_none()
            && t.after.is_empty()
            && t.batch.is_none();
        if defers {
            if !wait.iter().any(|w| w.node_id == t.node_id) {
                wait.push(t);
            }
        } else {
            moved[i] = Some(run.len() as u32);
            run.push(t);
        }
    }
    for t in run.iter_mut() {
        t.after = t.after.iter().filter_map(|&a| moved[a as usize]).collect();
        t.batch = t.batch.and_then(|b| moved[b as usize]);
    }
    if run.is_empty() {
        run = wait;
        wait = Vec::new();
    }
    for (i, t) in run.iter_mut().enumerate() {
        t.id = TaskId {
            step,
            index: i as u32,
        };
        t.deferred = false;
    }
    let base = run.len() as u32;
    for (i, t) in wait.iter_mut().enumerate() {
        t.id = TaskId {
            step,
            index: base + i as u32,
        };
        t.deferred = true;
    }
    (run, wait)
}

/// The tasks as a checkpoint stores them: the runnable ones, then the waiting deferred ones.
pub fn stored_next(run: &[TaskSpec], waiting: &[TaskSpec]) -> Vec<TaskSpec> {
    run.iter().chain(waiting).cloned().collect()
}

/// A checkpoint's stored tasks split back into runnable and waiting ([`stored_next`]'s inverse).
pub fn split_stored(tasks: Vec<TaskSpec>) -> (Vec<TaskSpec>, Vec<TaskSpec>) {
    tasks.into_iter().partition(|t| !t.deferred)
}

/// The state a dependency-driven task sees: `base` plus the updates of its transitive
/// dependencies, in task order.
pub fn dag_view<S: State>(
    base: &S,
    tasks: &[TaskSpec],
    updates: &[Option<impl Borrow<S::Update>>],
    i: usize,
) -> Result<S, RunError> {
    let mut needed = vec![false; tasks.len()];
    let mut stack: Vec<usize> = tasks[i].after.iter().map(|&d| d as usize).collect();
    while let Some(d) = stack.pop() {
        if d < needed.len() && !needed[d] {
            needed[d] = true;
            stack.extend(tasks[d].after.iter().map(|&x| x as usize));
        }
    }
    let mut view = base.clone();
    let mut ctx = MergeCtx::new();
    for (j, need) in needed.iter().enumerate() {
        if *need {
            if let Some(u) = &updates[j] {
                ctx.set_writer(&tasks[j].node);
                view.apply(u.borrow().clone(), &mut ctx)?;
            }
        }
    }
    Ok(view)
}

#[cfg(test)]
mod tests {
    use super::find_cycle;

    #[test]
    fn finds_a_cycle_and_its_path() {
        let deps = vec![vec![], vec![2], vec![3], vec![1]];
        let cycle = find_cycle(&deps).unwrap();
        assert_eq!(cycle.first(), cycle.last());
        assert_eq!(cycle.len(), 4);
    }

    #[test]
    fn stored_tasks_are_compact_and_the_older_form_still_reads() {
        use super::TaskSpec;
        use crate::ids::{NodeId, TaskId};
        let task = TaskSpec {
            id: TaskId { step: 5, index: 2 },
            node: "execute_step".into(),
            node_id: NodeId(6),
            input: Some(std::sync::Arc::new(serde_json::json!({"step": "s1"}))),
            after: vec![0],
            batch_limit: Some(4),
            batch: Some(0),
            deferred: false,
        };
        let stored = serde_json::to_string(&task).unwrap();
        assert_eq!(
            stored,
            r#"{"id":[5,2],"node":"execute_step","input":{"step":"s1"},"after":[0],"batch_limit":4,"batch":0}"#
        );
        let back: TaskSpec = serde_json::from_str(&stored).unwrap();
        assert_eq!(back.id, task.id);
        assert_eq!(
            back.node_id,
            NodeId(0),
            "resolved by name on load, not stored"
        );
        let older = r#"{"id":{"step":5,"index":2},"node":"execute_step","node_id":6,"input":{"step":"s1"},"after":[0],"batch_limit":4,"batch":0}"#;
        let back: TaskSpec = serde_json::from_str(older).unwrap();
        assert_eq!(back, task);
        assert!(serde_json::from_str::<TaskSpec>(r#"{"id":"5.2","node":"x"}"#).is_err());
    }

    #[test]
    fn no_cycle_in_a_diamond() {
        let deps = vec![vec![], vec![0], vec![0], vec![1, 2]];
        assert!(find_cycle(&deps).is_none());
    }
}
