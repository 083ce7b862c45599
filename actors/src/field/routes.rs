//! The routers: each reads the state and returns a label; none changes anything. The single
//! `plan` node uses the same routers to walk its stages, so both topologies branch alike.

use super::state::{Action, FieldState};

fn action(s: &FieldState) -> Option<Action> {
    s.decision.as_ref().map(|d| d.action)
}

/// After `tick`: `finish`, `ask_user` (bootstrap question) or `prepare`.
pub fn after_tick(s: &FieldState) -> &'static str {
    match action(s) {
        Some(Action::Finish) => "finish",
        Some(Action::AskUser) => "ask_user",
        _ => "prepare",
    }
}

/// After `calc_gate`: `finish` or `acquire`.
pub fn after_calc_gate(s: &FieldState) -> &'static str {
    match action(s) {
        Some(Action::Finish) => "finish",
        _ => "acquire",
    }
}

/// After `acquire`: `enforce_policy` with a deterministic decision, else `decide`.
pub fn after_acquire(s: &FieldState) -> &'static str {
    if s.decision.is_some() {
        "enforce_policy"
    } else {
        "decide"
    }
}

/// After `decide`: `finish` when the model failed, else `enforce_policy`.
pub fn after_decide(s: &FieldState) -> &'static str {
    if s.llm_failed {
        "finish"
    } else {
        "enforce_policy"
    }
}

/// After `enforce_policy` (and after the single `plan` node): the decision's action.
pub fn after_policy(s: &FieldState) -> &'static str {
    action(s).unwrap_or(Action::Finish).as_str()
}

/// After `search`: `observe` when there are hits, else back to the loop's entry.
pub fn after_search(s: &FieldState) -> &'static str {
    if s.last_observation.is_some() {
        "observe"
    } else {
        "loop"
    }
}
