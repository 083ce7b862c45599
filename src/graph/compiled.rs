//! The compiled, validated graph: node table, resolved edges, diagram and fingerprint.

use super::builder::{Router, SubgraphPart};
use crate::ids::NodeId;
use crate::node::NodeBody;
use crate::policy::NodeOptions;
use crate::state::State;
use std::collections::HashMap;
use std::sync::Arc;

/// Where an edge leads.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Target {
    /// A node.
    Node(NodeId),
    /// The end of the run.
    End,
}

/// A conditional edge after compilation.
pub struct CompiledRouter<S: State> {
    /// The router function.
    pub router: Router<S>,
    /// Label → target, in declaration order.
    pub labels: Vec<(String, Target)>,
}

impl<S: State> CompiledRouter<S> {
    /// The target a label maps to.
    pub fn resolve(&self, label: &str) -> Option<Target> {
        self.labels
            .iter()
            .find(|(l, _)| l == label)
            .map(|(_, t)| *t)
    }
}

/// One node of a compiled graph.
pub struct CompiledNode<S: State> {
    /// Its name.
    pub name: Arc<str>,
    /// What it runs.
    pub body: NodeBody<S>,
    /// Its limits.
    pub options: NodeOptions,
    /// Plain edges out of it.
    pub edges: Vec<Target>,
    /// Its conditional edge, if any.
    pub router: Option<CompiledRouter<S>>,
    /// For a command node, the targets its `goto` may name (label = the target's name).
    pub command: Option<Vec<(String, Target)>>,
    /// For a subgraph node, the parent engine's handle on it.
    pub(crate) subgraph: Option<SubgraphPart>,
    /// Pause before it runs.
    pub interrupt_before: bool,
    /// Pause after it runs.
    pub interrupt_after: bool,
    /// Waits until every other task of the run has finished (see `StateGraph::defer`).
    pub deferred: bool,
    /// Its cache's counters, when it has a cache policy.
    pub cache: Option<Arc<crate::cache::CacheStats>>,
}

pub(crate) struct GraphInner<S: State> {
    pub name: String,
    pub nodes: Vec<CompiledNode<S>>,
    pub start_edges: Vec<Target>,
    pub start_router: Option<CompiledRouter<S>>,
    pub by_name: HashMap<String, NodeId>,
    pub step_limit: u64,
    pub mermaid: String,
    pub fingerprint: String,
    /// Whether any node is a command node (the supervisor keeps goto slots only then).
    pub has_command_nodes: bool,
    /// The zstd dictionary its checkpoints are compressed against, if it names one.
    pub dictionary: Option<&'static crate::checkpoint::body_codec::Dictionary>,
}

/// A validated graph, cheap to clone and share between engines and threads.
pub struct CompiledGraph<S: State> {
    pub(crate) inner: Arc<GraphInner<S>>,
}

impl<S: State> Clone for CompiledGraph<S> {
    fn clone(&self) -> Self {
        Self {
            inner: self.inner.clone(),
        }
    }
}

impl<S: State> CompiledGraph<S> {
    /// The graph's name.
    pub fn name(&self) -> &str {
        &self.inner.name
    }

    /// The nodes, indexed by [`NodeId`].
    pub fn nodes(&self) -> &[CompiledNode<S>] {
        &self.inner.nodes
    }

    /// A node by id.
    pub fn node(&self, id: NodeId) -> &CompiledNode<S> {
        &self.inner.nodes[id.index()]
    }

    /// A node's id by name.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.inner.by_name.get(name).copied()
    }

    /// Plain edges out of START.
    pub fn start_edges(&self) -> &[Target] {
        &self.inner.start_edges
    }

    /// The conditional edge out of START, if any.
    pub fn start_router(&self) -> Option<&CompiledRouter<S>> {
        self.inner.start_router.as_ref()
    }

    /// Supersteps a run may take.
    pub fn step_limit(&self) -> u64 {
        self.inner.step_limit
    }

    /// The topology as a Mermaid flowchart: plain edges solid, conditional edges dashed and
    /// labelled. Deterministic, so a checked-in copy can be diffed against it.
    pub fn mermaid(&self) -> &str {
        &self.inner.mermaid
    }

    /// Whether any node is a command node (`StateGraph::add_command_node`).
    pub fn has_command_nodes(&self) -> bool {
        self.inner.has_command_nodes
    }

    /// A hash of the topology and the state's field names: a checkpoint written by a graph with
    /// another fingerprint needs migrating.
    pub fn fingerprint(&self) -> &str {
        &self.inner.fingerprint
    }

    /// The zstd dictionary this graph's checkpoints are compressed against
    /// ([`StateGraph::compression_dictionary`](crate::graph::StateGraph::compression_dictionary)).
    pub fn body_dictionary(&self) -> Option<&'static crate::checkpoint::body_codec::Dictionary> {
        self.inner.dictionary
    }
}
