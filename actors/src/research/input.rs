//! What a caller gives the planner: `{"input": goal, "constraints": {...}, "source_notes": [...]}`,
//! checked before any node runs (a blank goal, bad notes or bad constraints never reach a model).

use super::constraints::{Constraints, ConstraintsError};
use super::note_set::NoteSet;
use super::notes::{self, Note, NotesError};
use super::state::{ResearchState, ResearchUpdate};
use serde::{Deserialize, Serialize};

/// A research request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct ResearchInput {
    /// The research goal.
    pub input: String,
    /// Constraints (an object; missing keys take their defaults).
    #[serde(default)]
    pub constraints: serde_json::Value,
    /// The notes to research; absent or `null`: the bundled corpus.
    #[serde(default)]
    pub source_notes: Option<Vec<Note>>,
}

/// Why a request was rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InputError {
    /// The goal is empty or only whitespace.
    #[error("the goal is blank: give a research goal")]
    BlankGoal,
    /// The constraints are malformed.
    #[error(transparent)]
    Constraints(#[from] ConstraintsError),
    /// The notes are malformed.
    #[error(transparent)]
    Notes(#[from] NotesError),
    /// The input could not be written into a state (a bug, not a user error).
    #[error("cannot build the initial state: {0}")]
    State(String),
}

/// The run's input as an update to an empty state.
pub fn initial_update(input: ResearchInput) -> Result<ResearchUpdate, InputError> {
    if input.input.trim().is_empty() {
        return Err(InputError::BlankGoal);
    }
    let constraints = Constraints::from_json(&input.constraints)?;
    let source_notes = match input.source_notes {
        Some(list) => {
            notes::check_notes(&list)?;
            NoteSet::from_notes(list)
        }
        None => NoteSet::Bundled,
    };
    Ok(ResearchUpdate::default()
        .input(input.input)
        .constraints(constraints)
        .source_notes(source_notes))
}

/// The state a run starts from.
pub fn initial_state(input: ResearchInput) -> Result<ResearchState, InputError> {
    let update = initial_update(input)?;
    let mut state = ResearchState::default();
    planwright::reducer::apply_one(&mut state, update)
        .map_err(|e| InputError::State(e.to_string()))?;
    Ok(state)
}
