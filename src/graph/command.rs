//! A node's answer that says where to go next: an update together with a [`Route`] (LangGraph's
//! `Command(update=..., goto=...)`).
//!
//! Routing normally belongs to routers, which read the state. Some decisions are made by the node
//! that does the work (a tool call that picks the next agent, a handoff), and writing them into the
//! state only for a router to read them back is noise. A *command node* declares the nodes it may
//! go to when it is added (`StateGraph::add_command_node`), so `compile()` still checks every
//! target and the diagram still shows them; at run time its `goto` is resolved against that
//! table exactly as a router's route is (a label is a target node's name).

use super::route::Route;

/// An update and where to go next.
#[derive(Clone, Debug, PartialEq)]
pub struct Command<U> {
    /// The node's update, merged like any other.
    pub update: U,
    /// Where to go next besides the node's plain edges: one node (`Route::To`), several
    /// (`Route::Many`), fan-out tasks (`Route::Send`) or a dependency batch (`Route::Dag`). Node
    /// names and `END` must be among the targets declared at `add_command_node`. `None` follows
    /// only the node's edges.
    pub goto: Option<Route>,
}

impl<U> Command<U> {
    /// The update, then `goto`.
    pub fn goto(update: U, goto: impl Into<Route>) -> Self {
        Self {
            update,
            goto: Some(goto.into()),
        }
    }

    /// The update, following only the node's plain edges.
    pub fn update(update: U) -> Self {
        Self { update, goto: None }
    }
}
