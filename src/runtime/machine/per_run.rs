//! What a run may set beyond the graph's defaults — extra `interrupt_before` / `interrupt_after`
//! nodes and a step limit — resolved once against the graph when the run is launched, so a bad
//! node name is refused before anything runs and the supervisor asks by node id.
//!
//! Per-run pauses add to the graph's (a node pauses if either asks); the per-run step limit
//! replaces the graph's for that run.

use super::superstep::TaskSpec;
use crate::context::RunContext;
use crate::events::Interrupt;
use crate::graph::CompiledGraph;
use crate::ids::NodeId;
use crate::runtime::error::{Refusal, RunError};
use crate::runtime::run::RunOptions;
use crate::state::State;

/// A run's resolved settings.
#[derive(Clone, Debug, Default)]
pub(crate) struct PerRun {
    before: Vec<bool>,
    after: Vec<bool>,
    step_limit: Option<u64>,
    /// The run's context, handed to every task.
    pub context: Option<RunContext>,
}

impl PerRun {
    /// Resolves `opts` against `graph`: an unknown node name is [`Refusal::UnknownNode`], a zero
    /// step limit [`Refusal::BadOptions`].
    pub fn resolve<S: State>(
        graph: &CompiledGraph<S>,
        opts: &RunOptions,
    ) -> Result<Self, RunError> {
        let n = graph.nodes().len();
        let mark = |names: &[String]| -> Result<Vec<bool>, RunError> {
            let mut v = vec![false; if names.is_empty() { 0 } else { n }];
            for name in names {
                let id = graph
                    .node_id(name)
                    .ok_or_else(|| Refusal::UnknownNode(name.clone()))?;
                v[id.index()] = true;
            }
            Ok(v)
        };
        if opts.step_limit == Some(0) {
            return Err(Refusal::BadOptions("step_limit must be at least 1".into()).into());
        }
        Ok(Self {
            before: mark(&opts.interrupt_before)?,
            after: mark(&opts.interrupt_after)?,
            step_limit: opts.step_limit,
            context: opts.context.clone(),
        })
    }

    /// True when the run (or the graph) pauses after `node`.
    pub fn pauses_after<S: State>(&self, graph: &CompiledGraph<S>, node: NodeId) -> bool {
        graph.node(node).interrupt_after || self.after.get(node.index()).copied().unwrap_or(false)
    }

    /// The pauses the run (and the graph) ask for ahead of `next`: one per task whose node pauses.
    pub fn pauses_ahead_of<S: State>(
        &self,
        graph: &CompiledGraph<S>,
        next: &[TaskSpec],
    ) -> Vec<Interrupt> {
        next.iter()
            .filter(|t| self.pauses_before(graph, t.node_id))
            .map(|t| t.static_pause("before"))
            .collect()
    }

    /// True when the run (or the graph) pauses before `node`.
    pub fn pauses_before<S: State>(&self, graph: &CompiledGraph<S>, node: NodeId) -> bool {
        graph.node(node).interrupt_before || self.before.get(node.index()).copied().unwrap_or(false)
    }

    /// The run's step limit: its own, or the graph's.
    pub fn step_limit<S: State>(&self, graph: &CompiledGraph<S>) -> u64 {
        self.step_limit.unwrap_or_else(|| graph.step_limit())
    }
}
