//! Every `compile()` error names its culprit; the Mermaid export is deterministic.

use planwright::graph::{Route, StateGraph, END, START};
use planwright::{GraphError, NodeContext, NodeError, NodeOptions};

planwright::state! {
    /// A minimal state.
    pub struct S => SU {
        replace n: u32,
    }
}

fn noop(_: &S, _: &NodeContext) -> Result<SU, NodeError> {
    Ok(SU::default())
}

fn base() -> StateGraph<S> {
    StateGraph::new("g").add_sync_node("a", noop)
}

fn err(g: StateGraph<S>) -> GraphError {
    match g.compile() {
        Ok(_) => panic!("expected a compile error"),
        Err(e) => e,
    }
}

#[test]
fn a_valid_graph_compiles() {
    assert!(base()
        .add_edge(START, "a")
        .add_edge("a", END)
        .compile()
        .is_ok());
}

#[test]
fn duplicate_node() {
    let e = err(base()
        .add_sync_node("a", noop)
        .add_edge(START, "a")
        .add_edge("a", END));
    assert_eq!(e, GraphError::DuplicateNode("a".into()));
    assert!(e.to_string().contains("`a`"));
}

#[test]
fn reserved_names() {
    for name in [START, END, ""] {
        let e = err(StateGraph::<S>::new("g")
            .add_sync_node(name, noop)
            .add_edge(START, END));
        assert_eq!(e, GraphError::ReservedName(name.into()));
    }
}

#[test]
fn edge_to_an_unknown_node() {
    let e = err(base().add_edge(START, "a").add_edge("a", "ghost"));
    assert_eq!(
        e,
        GraphError::UnknownNode {
            from: "a".into(),
            to: "ghost".into(),
            missing: "ghost".into()
        }
    );
    assert!(e.to_string().contains("`ghost`"));
}

#[test]
fn edge_from_an_unknown_node() {
    let e = err(base()
        .add_edge(START, "a")
        .add_edge("a", END)
        .add_edge("ghost", "a"));
    assert!(matches!(e, GraphError::UnknownNode { missing, .. } if missing == "ghost"));
}

#[test]
fn conditional_edge_to_an_undeclared_target() {
    let e = err(base().add_edge(START, "a").add_conditional_edges(
        "a",
        |_: &S| Route::to("x"),
        [("x", "ghost"), ("y", END)],
    ));
    assert!(matches!(e, GraphError::UnknownNode { missing, .. } if missing == "ghost"));
}

#[test]
fn options_and_interrupts_for_unknown_nodes() {
    let g = || base().add_edge(START, "a").add_edge("a", END);
    assert_eq!(
        err(g().node_options("ghost", NodeOptions::default())),
        GraphError::UnknownNodeIn {
            what: "node_options",
            name: "ghost".into()
        }
    );
    assert_eq!(
        err(g().interrupt_before(["ghost"])),
        GraphError::UnknownNodeIn {
            what: "interrupt_before",
            name: "ghost".into()
        }
    );
    assert_eq!(
        err(g().interrupt_after(["ghost"])),
        GraphError::UnknownNodeIn {
            what: "interrupt_after",
            name: "ghost".into()
        }
    );
}

#[test]
fn no_entry() {
    assert_eq!(err(base().add_edge("a", END)), GraphError::NoEntry);
}

#[test]
fn unreachable_node() {
    let e = err(base()
        .add_sync_node("island", noop)
        .add_edge(START, "a")
        .add_edge("a", END)
        .add_edge("island", END));
    assert_eq!(e, GraphError::Unreachable("island".into()));
    assert!(e.to_string().contains("`island`"));
}

#[test]
fn end_unreachable() {
    let e = err(base()
        .add_sync_node("trap", noop)
        .add_edge(START, "a")
        .add_conditional_edges(
            "a",
            |_: &S| Route::to("end"),
            [("end", END), ("trap", "trap")],
        )
        .add_edge("trap", "trap"));
    assert_eq!(e, GraphError::CannotReachEnd("trap".into()));
}

#[test]
fn router_without_targets() {
    let e = err(base()
        .add_edge(START, "a")
        .add_edge("a", END)
        .add_conditional_edges("a", |_: &S| Route::to("x"), Vec::<(&str, &str)>::new()));
    assert_eq!(e, GraphError::NoTargets("a".into()));
}

#[test]
fn duplicate_label() {
    let e = err(base().add_edge(START, "a").add_conditional_edges(
        "a",
        |_: &S| Route::to("x"),
        [("x", END), ("x", "a")],
    ));
    assert_eq!(
        e,
        GraphError::DuplicateLabel {
            node: "a".into(),
            label: "x".into()
        }
    );
}

#[test]
fn two_routers_on_one_node() {
    let e = err(base()
        .add_edge(START, "a")
        .add_conditional_edges("a", |_: &S| Route::to("x"), [("x", END)])
        .add_conditional_edges("a", |_: &S| Route::to("y"), [("y", END)]));
    assert_eq!(e, GraphError::TwoRouters("a".into()));
}

#[test]
fn edges_out_of_end_or_into_start() {
    let e = err(base()
        .add_edge(START, "a")
        .add_edge("a", END)
        .add_edge(END, "a"));
    assert!(matches!(e, GraphError::BadTerminalEdge { from, .. } if from == END));
    let e = err(base().add_edge(START, "a").add_edge("a", START));
    assert!(matches!(e, GraphError::BadTerminalEdge { to, .. } if to == START));
}

#[test]
fn zero_step_limit() {
    let e = err(base().add_edge(START, "a").add_edge("a", END).step_limit(0));
    assert_eq!(e, GraphError::ZeroStepLimit);
}

fn looped() -> StateGraph<S> {
    StateGraph::new("looped")
        .add_sync_node("a", noop)
        .add_sync_node("b", noop)
        .add_edge(START, "a")
        .add_edge("a", "b")
        .add_conditional_edges(
            "b",
            |s: &S| Route::to(if s.n > 2 { "done" } else { "again" }),
            [("again", "a"), ("done", END)],
        )
}

#[test]
fn mermaid_export_is_deterministic_with_solid_and_dashed_labelled_edges() {
    let m1 = looped().compile().unwrap().mermaid().to_string();
    let m2 = looped().compile().unwrap().mermaid().to_string();
    assert_eq!(m1, m2);
    assert!(m1.contains("flowchart TD"));
    assert!(m1.contains("__start__ --> a"));
    assert!(m1.contains("a --> b"));
    assert!(m1.contains("b -.->|again| a"));
    assert!(m1.contains("b -.->|done| __end__"));
}

#[test]
fn fingerprint_changes_with_topology_only() {
    let f1 = looped().compile().unwrap().fingerprint().to_string();
    let f2 = looped().compile().unwrap().fingerprint().to_string();
    assert_eq!(f1, f2);
    let f3 = looped()
        .add_sync_node("c", noop)
        .add_edge("a", "c")
        .add_edge("c", END)
        .compile()
        .unwrap()
        .fingerprint()
        .to_string();
    assert_ne!(f1, f3);
}
