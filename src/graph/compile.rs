//! Compiling: checking a declared graph (names, edges, reachability, dictionaries) and freezing it
//! into a [`CompiledGraph`] with its diagram and fingerprint.

use super::builder::{StateGraph, END, START};
use super::compiled::{CompiledGraph, CompiledNode, CompiledRouter, GraphInner, Target};
use super::error::GraphError;
use super::mermaid;
use crate::ids::NodeId;
use crate::policy::NodeOptions;
use crate::state::State;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Arc;

impl<S: State> StateGraph<S> {
    /// Validates the graph and freezes it.
    pub fn compile(self) -> Result<CompiledGraph<S>, GraphError> {
        compile(self)
    }
}

fn is_terminal(name: &str) -> bool {
    name == START || name == END
}

fn compile<S: State>(mut g: StateGraph<S>) -> Result<CompiledGraph<S>, GraphError> {
    if g.step_limit == 0 {
        return Err(GraphError::ZeroStepLimit);
    }
    let dictionary = match g.dictionary {
        None => None,
        Some(bytes) => Some(crate::checkpoint::body_codec::dictionary(bytes)?),
    };
    for bytes in &g.retired_dictionaries {
        crate::checkpoint::body_codec::dictionary(bytes)?;
    }
    let mut by_name = HashMap::new();
    for (i, n) in g.nodes.iter().enumerate() {
        if is_terminal(&n.name) || n.name.is_empty() {
            return Err(GraphError::ReservedName(n.name.clone()));
        }
        if by_name.insert(n.name.clone(), NodeId(i as u32)).is_some() {
            return Err(GraphError::DuplicateNode(n.name.clone()));
        }
    }
    let resolve = |from: &str, to: &str| -> Result<Target, GraphError> {
        if from == END || to == START {
            return Err(GraphError::BadTerminalEdge {
                from: from.into(),
                to: to.into(),
            });
        }
        for name in [from, to] {
            if !is_terminal(name) && !by_name.contains_key(name) {
                return Err(GraphError::UnknownNode {
                    from: from.into(),
                    to: to.into(),
                    missing: name.into(),
                });
            }
        }
        Ok(if to == END {
            Target::End
        } else {
            Target::Node(by_name[to])
        })
    };

    let mut edges: Vec<Vec<Target>> = vec![Vec::new(); g.nodes.len()];
    let mut start_edges = Vec::new();
    for (from, to) in &g.edges {
        let t = resolve(from, to)?;
        let list = if from == START {
            &mut start_edges
        } else {
            &mut edges[by_name[from.as_str()].index()]
        };
        if !list.contains(&t) {
            list.push(t);
        }
    }

    let mut routers: Vec<Option<CompiledRouter<S>>> = (0..g.nodes.len()).map(|_| None).collect();
    let mut start_router = None;
    for c in g.conditionals {
        if c.targets.is_empty() {
            return Err(GraphError::NoTargets(c.from.clone()));
        }
        let mut labels: Vec<(String, Target)> = Vec::new();
        for (label, to) in &c.targets {
            if labels.iter().any(|(l, _)| l == label) {
                return Err(GraphError::DuplicateLabel {
                    node: c.from.clone(),
                    label: label.clone(),
                });
            }
            labels.push((label.clone(), resolve(&c.from, to)?));
        }
        let slot = if c.from == START {
            &mut start_router
        } else {
            &mut routers[by_name[c.from.as_str()].index()]
        };
        if slot.is_some() {
            return Err(GraphError::TwoRouters(c.from.clone()));
        }
        *slot = Some(CompiledRouter {
            router: c.router,
            labels,
        });
    }

    let mut commands: Vec<Option<Vec<(String, Target)>>> = vec![None; g.nodes.len()];
    for (name, targets) in &g.commands {
        if targets.is_empty() {
            return Err(GraphError::CommandWithoutTargets(name.clone()));
        }
        if g.cache_policies.iter().any(|(n, _)| n == name) {
            return Err(GraphError::CachedCommand(name.clone()));
        }
        let mut table: Vec<(String, Target)> = Vec::new();
        for to in targets {
            let t = resolve(name, to)?;
            if !table.iter().any(|(_, x)| *x == t) {
                table.push((to.clone(), t));
            }
        }
        commands[by_name[name.as_str()].index()] = Some(table);
    }

    let mut options: Vec<NodeOptions> = g.nodes.iter().map(|n| n.options.clone()).collect();
    for (name, o) in g.options {
        let id = by_name.get(&name).ok_or(GraphError::UnknownNodeIn {
            what: "node_options",
            name: name.clone(),
        })?;
        options[id.index()] = o;
    }
    let mut caches: Vec<Option<Arc<crate::cache::CacheStats>>> = vec![None; g.nodes.len()];
    for (name, policy) in g.cache_policies {
        let id = by_name.get(&name).ok_or(GraphError::UnknownNodeIn {
            what: "cache_policy",
            name: name.clone(),
        })?;
        let decl = &mut g.nodes[id.index()];
        let (body, stats) = crate::cache::wrap(decl.body.clone(), policy);
        decl.body = body;
        caches[id.index()] = Some(stats);
    }
    let mut deferred = vec![false; g.nodes.len()];
    for name in &g.deferred {
        let id = by_name.get(name).ok_or(GraphError::UnknownNodeIn {
            what: "defer",
            name: name.clone(),
        })?;
        deferred[id.index()] = true;
    }
    let mut flags = vec![(false, false); g.nodes.len()];
    for (what, list, after) in [
        ("interrupt_before", &g.interrupt_before, false),
        ("interrupt_after", &g.interrupt_after, true),
    ] {
        for name in list {
            let id = by_name.get(name).ok_or(GraphError::UnknownNodeIn {
                what,
                name: name.clone(),
            })?;
            if after {
                flags[id.index()].1 = true;
            } else {
                flags[id.index()].0 = true;
            }
        }
    }

    // Successor lists for reachability, with END as index n.
    let n = g.nodes.len();
    let succ = |targets: &mut dyn Iterator<Item = Target>| -> Vec<usize> {
        targets
            .map(|t| match t {
                Target::Node(id) => id.index(),
                Target::End => n,
            })
            .collect()
    };
    let mut adj: Vec<Vec<usize>> = (0..n)
        .map(|i| {
            let conditional = routers[i]
                .iter()
                .flat_map(|r| r.labels.iter().map(|(_, t)| *t));
            let command = commands[i].iter().flatten().map(|(_, t)| *t);
            succ(&mut edges[i].iter().copied().chain(conditional).chain(command))
        })
        .collect();
    adj.push(Vec::new());
    let entry: Vec<usize> = succ(
        &mut start_edges.iter().copied().chain(
            start_router
                .iter()
                .flat_map(|r| r.labels.iter().map(|(_, t)| *t)),
        ),
    );
    if entry.is_empty() {
        return Err(GraphError::NoEntry);
    }
    let reached = bfs(&adj, &entry);
    if let Some(i) = (0..n).find(|&i| !reached.contains(&i)) {
        return Err(GraphError::Unreachable(g.nodes[i].name.clone()));
    }
    let mut reverse: Vec<Vec<usize>> = vec![Vec::new(); n + 1];
    for (from, tos) in adj.iter().enumerate() {
        for &to in tos {
            reverse[to].push(from);
        }
    }
    let reaches_end = bfs(&reverse, &[n]);
    if let Some(i) = (0..n).find(|&i| !reaches_end.contains(&i)) {
        return Err(GraphError::CannotReachEnd(g.nodes[i].name.clone()));
    }

    let names: Vec<&str> = g.nodes.iter().map(|n| n.name.as_str()).collect();
    let mut diagram = mermaid::render(
        &g.name,
        &names,
        &start_edges,
        start_router.as_ref(),
        &edges,
        &routers,
        &commands,
    );
    // Deferred nodes change when tasks run, so they are part of the topology (a Mermaid comment:
    // graphs without them keep their diagram and fingerprint).
    let deferred_names: Vec<&str> = names
        .iter()
        .zip(&deferred)
        .filter(|(_, d)| **d)
        .map(|(n, _)| *n)
        .collect();
    if !deferred_names.is_empty() {
        if !diagram.ends_with('\n') {
            diagram.push('\n');
        }
        diagram.push_str(&format!("    %% deferred: {}\n", deferred_names.join(", ")));
    }
    let subgraph_names: Vec<&str> = g
        .nodes
        .iter()
        .filter(|n| n.subgraph.is_some())
        .map(|n| n.name.as_str())
        .collect();
    if !subgraph_names.is_empty() {
        if !diagram.ends_with('\n') {
            diagram.push('\n');
        }
        diagram.push_str(&format!(
            "    %% subgraphs: {}\n",
            subgraph_names.join(", ")
        ));
    }
    // Topology only: a state that gains fields with defaults still loads old checkpoints, so
    // field names are deliberately not part of the fingerprint.
    let fingerprint = format!("{:016x}", fnv1a(diagram.bytes()));

    let nodes: Vec<CompiledNode<S>> = g
        .nodes
        .into_iter()
        .zip(options)
        .zip(edges)
        .zip(routers)
        .zip(flags)
        .zip(caches)
        .zip(deferred)
        .zip(commands)
        .map(
            |(
                ((((((decl, options), edges), router), (before, after)), cache), deferred),
                command,
            )| {
                CompiledNode {
                    name: Arc::from(decl.name.as_str()),
                    subgraph: decl.subgraph,
                    body: decl.body,
                    options,
                    edges,
                    router,
                    command,
                    interrupt_before: before,
                    interrupt_after: after,
                    deferred,
                    cache,
                }
            },
        )
        .collect();
    let has_command_nodes = nodes.iter().any(|n: &CompiledNode<S>| n.command.is_some());
    Ok(CompiledGraph {
        inner: Arc::new(GraphInner {
            name: g.name,
            nodes,
            start_edges,
            start_router,
            by_name,
            step_limit: g.step_limit,
            mermaid: diagram,
            fingerprint,
            has_command_nodes,
            dictionary,
        }),
    })
}

fn bfs(adj: &[Vec<usize>], from: &[usize]) -> HashSet<usize> {
    let mut seen: HashSet<usize> = from.iter().copied().collect();
    let mut queue: VecDeque<usize> = from.iter().copied().collect();
    while let Some(i) = queue.pop_front() {
        for &j in &adj[i] {
            if seen.insert(j) {
                queue.push_back(j);
            }
        }
    }
    seen
}

/// FNV-1a, 64 bit: a stable hash that does not change between Rust releases.
pub(crate) fn fnv1a(bytes: impl Iterator<Item = u8>) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in bytes {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}
