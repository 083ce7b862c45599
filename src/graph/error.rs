//! Errors found when a graph is compiled: each names the culprit.

/// Why `compile()` rejected a graph.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GraphError {
    /// Two nodes share a name.
    #[error("node `{0}` is declared twice")]
    DuplicateNode(String),
    /// A node was given a reserved name.
    #[error("`{0}` is reserved and cannot name a node")]
    ReservedName(String),
    /// An edge names a node that was never declared.
    #[error("edge `{from} -> {to}` names `{missing}`, which is not a node")]
    UnknownNode {
        /// The edge's source.
        from: String,
        /// The edge's target.
        to: String,
        /// The undeclared name.
        missing: String,
    },
    /// Options or interrupts were set for a node that was never declared.
    #[error("{what} names `{name}`, which is not a node")]
    UnknownNodeIn {
        /// What named it (`node_options`, `interrupt_before`, ...).
        what: &'static str,
        /// The undeclared name.
        name: String,
    },
    /// Nothing starts the graph.
    #[error("graph has no entry: add an edge from START")]
    NoEntry,
    /// A node cannot be reached from START.
    #[error("node `{0}` is unreachable from START")]
    Unreachable(String),
    /// From a node, END cannot be reached: a run entering it could never finish.
    #[error("END cannot be reached from node `{0}`")]
    CannotReachEnd(String),
    /// A conditional edge without targets.
    #[error("conditional edge from `{0}` has no targets")]
    NoTargets(String),
    /// A conditional edge maps one label twice.
    #[error("conditional edge from `{node}` maps label `{label}` twice")]
    DuplicateLabel {
        /// The edge's source.
        node: String,
        /// The repeated label.
        label: String,
    },
    /// A node has two conditional edges.
    #[error("node `{0}` has more than one conditional edge")]
    TwoRouters(String),
    /// An edge leaves END or enters START.
    #[error("edge `{from} -> {to}` is not allowed: nothing leaves END and nothing enters START")]
    BadTerminalEdge {
        /// The edge's source.
        from: String,
        /// The edge's target.
        to: String,
    },
    /// The step limit is zero.
    #[error("step limit must be at least 1")]
    ZeroStepLimit,
    /// A command node declared no targets for its `goto`.
    #[error("command node `{0}` declares no targets: name the nodes its goto may go to, or add it with add_node")]
    CommandWithoutTargets(String),
    /// A command node has a cache policy: a cached answer would lose where it said to go.
    #[error("command node `{0}` cannot have a cache policy: a cached answer has no goto")]
    CachedCommand(String),
    /// The compression dictionary cannot be used.
    #[error("compression dictionary: {0}")]
    Dictionary(#[from] crate::checkpoint::body_codec::DictionaryError),
}
