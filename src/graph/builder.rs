//! The graph builder: declare nodes and edges, then `compile()` validates everything once.

use super::command::Command;
use super::route::Route;
use crate::node::{FnNode, Node, NodeBody, NodeContext, NodeError};
use crate::policy::NodeOptions;
use crate::state::State;
use std::future::Future;
use std::sync::Arc;

/// The entry pseudo-node.
pub const START: &str = "__start__";
/// The exit pseudo-node.
pub const END: &str = "__end__";

/// A router: a pure function from the state to a [`Route`].
pub type Router<S> = Arc<dyn Fn(&S) -> Route + Send + Sync>;

/// A subgraph node's runtime side, which a graph carries without looking inside: the engine that
/// runs the graph builds and drives it (`runtime::subgraph`), and only the runtime knows its type.
/// Keeping it opaque keeps `graph/` below the runtime.
pub(crate) type SubgraphPart = Arc<dyn std::any::Any + Send + Sync>;

pub(crate) struct NodeDecl<S: State> {
    pub name: String,
    pub body: NodeBody<S>,
    pub options: NodeOptions,
    pub subgraph: Option<SubgraphPart>,
}

pub(crate) struct ConditionalDecl<S: State> {
    pub from: String,
    pub router: Router<S>,
    /// (label, target node) pairs, in declaration order.
    pub targets: Vec<(String, String)>,
}

/// A conditional edge target: `"node"` (label = node name) or `("label", "node")`.
pub trait IntoTarget {
    /// The (label, node) pair.
    fn into_target(self) -> (String, String);
}

impl IntoTarget for &str {
    fn into_target(self) -> (String, String) {
        (self.to_string(), self.to_string())
    }
}

impl IntoTarget for (&str, &str) {
    fn into_target(self) -> (String, String) {
        (self.0.to_string(), self.1.to_string())
    }
}

/// Builds a graph over state `S`. Every method takes and returns `self`; `compile()` validates.
pub struct StateGraph<S: State> {
    pub(crate) name: String,
    pub(crate) nodes: Vec<NodeDecl<S>>,
    pub(crate) edges: Vec<(String, String)>,
    pub(crate) conditionals: Vec<ConditionalDecl<S>>,
    pub(crate) options: Vec<(String, NodeOptions)>,
    pub(crate) interrupt_before: Vec<String>,
    pub(crate) deferred: Vec<String>,
    /// Command nodes and the targets their `goto` may name.
    pub(crate) commands: Vec<(String, Vec<String>)>,
    pub(crate) interrupt_after: Vec<String>,
    pub(crate) step_limit: u64,
    pub(crate) cache_policies: Vec<(String, crate::cache::CachePolicy<S>)>,
    pub(crate) dictionary: Option<&'static [u8]>,
    pub(crate) retired_dictionaries: Vec<&'static [u8]>,
}

impl<S: State> StateGraph<S> {
    /// An empty graph named `name` (the name appears in diagrams and fingerprints).
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            nodes: Vec::new(),
            edges: Vec::new(),
            conditionals: Vec::new(),
            options: Vec::new(),
            interrupt_before: Vec::new(),
            deferred: Vec::new(),
            commands: Vec::new(),
            interrupt_after: Vec::new(),
            step_limit: 1000,
            cache_policies: Vec::new(),
            dictionary: None,
            retired_dictionaries: Vec::new(),
        }
    }

    /// Adds an async node: `|state: Arc<S>, ctx: NodeContext| async move { Ok(update) }`.
    pub fn add_node<F, Fut>(self, name: &str, f: F) -> Self
    where
        F: Fn(Arc<S>, NodeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<S::Update, NodeError>> + Send + 'static,
    {
        self.push_node(name, NodeBody::Async(Arc::new(FnNode(f))))
    }

    /// Adds a synchronous node, run inline on its actor (no task spawn). It must not block.
    pub fn add_sync_node<F>(self, name: &str, f: F) -> Self
    where
        F: Fn(&S, &NodeContext) -> Result<S::Update, NodeError> + Send + Sync + 'static,
    {
        self.push_node(name, NodeBody::Sync(Arc::new(f)))
    }

    /// Adds an async **command node**: it returns a [`Command`] — its update and where to go
    /// next — instead of a bare update. `targets` are the nodes (or `END`) its `goto` may name;
    /// `compile()` checks them and the diagram shows them as dashed edges.
    pub fn add_command_node<F, Fut, I>(self, name: &str, targets: I, f: F) -> Self
    where
        F: Fn(Arc<S>, NodeContext) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = Result<Command<S::Update>, NodeError>> + Send + 'static,
        I: IntoIterator<Item = &'static str>,
    {
        let f = Arc::new(f);
        let body = move |state: Arc<S>, ctx: NodeContext| {
            let run = f(state, ctx.clone());
            async move {
                let command = run.await?;
                ctx.set_goto(command.goto);
                Ok(command.update)
            }
        };
        self.declare_command(name, targets)
            .push_node(name, NodeBody::Async(Arc::new(FnNode(body))))
    }

    /// Adds a synchronous command node (see [`StateGraph::add_command_node`]), run inline on its
    /// actor. It must not block.
    pub fn add_sync_command_node<F, I>(self, name: &str, targets: I, f: F) -> Self
    where
        F: Fn(&S, &NodeContext) -> Result<Command<S::Update>, NodeError> + Send + Sync + 'static,
        I: IntoIterator<Item = &'static str>,
    {
        let body = move |state: &S, ctx: &NodeContext| {
            let command = f(state, ctx)?;
            ctx.set_goto(command.goto);
            Ok(command.update)
        };
        self.declare_command(name, targets)
            .push_node(name, NodeBody::Sync(Arc::new(body)))
    }

    fn declare_command<I: IntoIterator<Item = &'static str>>(
        mut self,
        name: &str,
        targets: I,
    ) -> Self {
        self.commands.push((
            name.to_string(),
            targets.into_iter().map(str::to_string).collect(),
        ));
        self
    }

    /// Adds a node implemented as a type.
    pub fn add_node_impl(self, name: &str, node: impl Node<S>) -> Self {
        self.push_node(name, NodeBody::Async(Arc::new(node)))
    }

    fn push_node(mut self, name: &str, body: NodeBody<S>) -> Self {
        self.nodes.push(NodeDecl {
            name: name.to_string(),
            body,
            options: NodeOptions::default(),
            subgraph: None,
        });
        self
    }

    /// Adds node `name` with `body` and the runtime's side of a subgraph (`add_subgraph`, which
    /// the runtime defines: it knows how a subgraph runs).
    pub(crate) fn push_subgraph(
        mut self,
        name: &str,
        body: NodeBody<S>,
        part: SubgraphPart,
    ) -> Self {
        self.nodes.push(NodeDecl {
            name: name.to_string(),
            body,
            options: NodeOptions::default(),
            subgraph: Some(part),
        });
        self
    }

    /// Caches a node's answers (see [`crate::cache`]): a call whose key an earlier call had is
    /// answered with that call's update without running the node. Declare it right after the
    /// node; `compile()` refuses a name the graph does not have.
    pub fn cache_policy(mut self, name: &str, policy: crate::cache::CachePolicy<S>) -> Self {
        self.cache_policies.push((name.to_string(), policy));
        self
    }

    /// Sets a node's limits (timeout, retries, concurrency, mailbox).
    pub fn node_options(mut self, name: &str, options: NodeOptions) -> Self {
        self.options.push((name.to_string(), options));
        self
    }

    /// Adds a plain edge. Use [`START`] and [`END`] for the pseudo-nodes.
    pub fn add_edge(mut self, from: &str, to: &str) -> Self {
        self.edges.push((from.to_string(), to.to_string()));
        self
    }

    /// Adds a conditional edge: after `from` runs, `router` picks a label, mapped to a node by
    /// `targets` (`"node"` or `("label", "node")`; use [`END`] to finish).
    pub fn add_conditional_edges<R, I, T>(mut self, from: &str, router: R, targets: I) -> Self
    where
        R: Fn(&S) -> Route + Send + Sync + 'static,
        I: IntoIterator<Item = T>,
        T: IntoTarget,
    {
        self.conditionals.push(ConditionalDecl {
            from: from.to_string(),
            router: Arc::new(router),
            targets: targets.into_iter().map(IntoTarget::into_target).collect(),
        });
        self
    }

    /// Pauses runs before these nodes run (for example plan approval).
    pub fn interrupt_before<I: IntoIterator<Item = &'static str>>(mut self, nodes: I) -> Self {
        self.interrupt_before
            .extend(nodes.into_iter().map(str::to_string));
        self
    }

    /// Makes these nodes **deferred**: a task of a deferred node waits until no other task of the
    /// run is left — every pending branch has finished — and then runs once, however many branches
    /// triggered it (a join across branches of different lengths). See `docs/architecture.md`.
    pub fn defer<I, N>(mut self, nodes: I) -> Self
    where
        I: IntoIterator<Item = N>,
        N: AsRef<str>,
    {
        self.deferred
            .extend(nodes.into_iter().map(|n| n.as_ref().to_string()));
        self
    }

    /// Pauses runs after these nodes run.
    pub fn interrupt_after<I: IntoIterator<Item = &'static str>>(mut self, nodes: I) -> Self {
        self.interrupt_after
            .extend(nodes.into_iter().map(str::to_string));
        self
    }

    /// Supersteps a run may take before it fails (default 1000).
    pub fn step_limit(mut self, steps: u64) -> Self {
        self.step_limit = steps;
        self
    }

    /// Compresses this graph's checkpoint bodies, next tasks and task updates against `dictionary`,
    /// a zstd dictionary (with an id) trained on its own checkpoints: small records, which plain
    /// zstd cannot shrink, then take a fraction of their JSON. Frames name the dictionary's id;
    /// it is registered for the process when the graph compiles, so every record written with it
    /// reads back (see `checkpoint::body_codec`). Changing the dictionary later is safe only while
    /// the old one stays registered ([`retired_dictionary`](Self::retired_dictionary)) for the records
    /// written with it.
    pub fn compression_dictionary(mut self, dictionary: &'static [u8]) -> Self {
        self.dictionary = Some(dictionary);
        self
    }

    /// A dictionary this graph no longer writes with but whose records it must still read (one
    /// that [`compression_dictionary`](Self::compression_dictionary) named before it was
    /// retrained): compiling registers it, so stored threads written with it keep loading.
    pub fn retired_dictionary(mut self, dictionary: &'static [u8]) -> Self {
        self.retired_dictionaries.push(dictionary);
        self
    }
}
