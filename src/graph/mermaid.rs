//! Mermaid export of a compiled topology. Deterministic: nodes in declaration order, edges grouped
//! by source in declaration order, so regenerated docs diff cleanly.

use super::compiled::{CompiledRouter, Target};
use crate::state::State;
use std::fmt::Write;

fn id(names: &[&str], t: Target) -> String {
    match t {
        Target::Node(n) => names[n.index()].to_string(),
        Target::End => "__end__".to_string(),
    }
}

pub(crate) fn render<S: State>(
    title: &str,
    names: &[&str],
    start_edges: &[Target],
    start_router: Option<&CompiledRouter<S>>,
    edges: &[Vec<Target>],
    routers: &[Option<CompiledRouter<S>>],
    commands: &[Option<Vec<(String, Target)>>],
) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "---\ntitle: {title}\n---\nflowchart TD");
    let _ = writeln!(out, "    __start__([START])");
    for name in names {
        let _ = writeln!(out, "    {name}[{name}]");
    }
    let _ = writeln!(out, "    __end__([END])");
    let mut emit = |from: &str,
                    plain: &[Target],
                    router: Option<&CompiledRouter<S>>,
                    command: &[(String, Target)]| {
        for t in plain {
            let _ = writeln!(out, "    {from} --> {}", id(names, *t));
        }
        for (label, t) in router.iter().flat_map(|r| r.labels.iter()) {
            let _ = writeln!(out, "    {from} -.->|{label}| {}", id(names, *t));
        }
        // A command node's goto targets: dashed and unlabelled, as LangGraph draws them.
        for (_, t) in command {
            let _ = writeln!(out, "    {from} -.-> {}", id(names, *t));
        }
    };
    emit("__start__", start_edges, start_router, &[]);
    for (i, name) in names.iter().enumerate() {
        let command = commands[i].as_deref().unwrap_or_default();
        emit(name, &edges[i], routers[i].as_ref(), command);
    }
    out
}
