//! A compiled graph in the shape of LangGraph's `/assistants/{id}/graph`: what the SDKs'
//! `get_graph` and the studio draw.

use planwright::graph::{CompiledRouter, Target};
use planwright::CompiledGraph;
use serde_json::{json, Value};

fn target_name<S: planwright::State>(g: &CompiledGraph<S>, t: &Target) -> String {
    match t {
        Target::Node(id) => g.node(*id).name.to_string(),
        Target::End => "__end__".into(),
    }
}

/// A compiled graph as LangGraph's `/assistants/{id}/graph` shape: `nodes` (`__start__`, every
/// node, `__end__`) and `edges` (`source`, `target`, `conditional`, and the router's label as
/// `data`), plus the graph's Mermaid text.
pub fn graph_json<S: planwright::State>(g: &CompiledGraph<S>) -> Value {
    let mut nodes = vec![json!({"id": "__start__", "type": "schema", "data": "__start__"})];
    for n in g.nodes() {
        nodes.push(json!({
            "id": &*n.name, "type": "runnable", "data": {"name": &*n.name},
            "interrupt_before": n.interrupt_before, "interrupt_after": n.interrupt_after,
        }));
    }
    nodes.push(json!({"id": "__end__", "type": "schema", "data": "__end__"}));
    let mut edges = Vec::new();
    let mut out = |source: &str, plain: &[Target], router: Option<&CompiledRouter<S>>| {
        for t in plain {
            edges
                .push(json!({"source": source, "target": target_name(g, t), "conditional": false}));
        }
        for (label, t) in router.map(|r| r.labels.as_slice()).unwrap_or_default() {
            edges.push(json!({"source": source, "target": target_name(g, t), "conditional": true, "data": label}));
        }
    };
    out("__start__", g.start_edges(), g.start_router());
    for n in g.nodes() {
        out(&n.name, &n.edges, n.router.as_ref());
    }
    json!({"nodes": nodes, "edges": edges, "mermaid": g.mermaid()})
}
