//! Source notes: the only facts the planner may use, supplied by the caller or bundled.
//!
//! The bundled corpus (`fixtures/research/notes.json`) is compiled in, so the planner runs with no
//! file and no network. Notes are checked when loaded: unique, non-empty ids and non-empty text,
//! because evidence and citations name notes by id.

use super::text;
use serde::{Deserialize, Serialize};
use std::collections::HashSet;
use std::sync::Arc;

/// A source note. Its fields are shared text: a model call's notes, a plan's and a view's are
/// copies of the corpus's, and copying one is a few reference counts, not five allocations.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Note {
    /// Unique id, cited in evidence and in the brief.
    pub id: Arc<str>,
    /// Title.
    pub title: Arc<str>,
    /// Body.
    pub text: Arc<str>,
    /// Topic tags.
    #[serde(default)]
    pub tags: Arc<[String]>,
}

impl Note {
    /// Whether the note mentions `term` in its title, text or tags (see `text::mentions_term`:
    /// word prefixes, `|` alternatives, all words of a phrase).
    pub fn mentions(&self, term: &str) -> bool {
        let fields = [&*self.title, &*self.text]
            .into_iter()
            .chain(self.tags.iter().map(String::as_str));
        text::mentions_term(fields, &term.to_lowercase())
    }

    /// Title, text and tags as one searchable text.
    pub fn searchable(&self) -> String {
        format!("{} {}", self.text, self.tags.join(" "))
    }
}

const BUNDLED: &str = include_str!("../../../fixtures/research/notes.json");

/// Why notes were rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotesError {
    /// Not a JSON array of notes.
    #[error("malformed notes: {0}")]
    Malformed(String),
    /// The array is empty.
    #[error("the notes list is empty")]
    Empty,
    /// A note without an id or text.
    #[error("note #{index} has an empty `{field}`")]
    EmptyField {
        /// Position in the list (from 0).
        index: usize,
        /// The empty field.
        field: &'static str,
    },
    /// Two notes share an id.
    #[error("note id `{0}` appears more than once")]
    DuplicateId(String),
}

/// Parses and checks a JSON array of notes.
pub fn parse_notes(json: &str) -> Result<Vec<Note>, NotesError> {
    let notes: Vec<Note> =
        serde_json::from_str(json).map_err(|e| NotesError::Malformed(e.to_string()))?;
    check_notes(&notes)?;
    Ok(notes)
}

/// Checks notes: non-empty list, non-empty ids and text, unique ids.
pub fn check_notes(notes: &[Note]) -> Result<(), NotesError> {
    if notes.is_empty() {
        return Err(NotesError::Empty);
    }
    let mut seen = HashSet::new();
    for (index, n) in notes.iter().enumerate() {
        if n.id.trim().is_empty() {
            return Err(NotesError::EmptyField { index, field: "id" });
        }
        if n.text.trim().is_empty() {
            return Err(NotesError::EmptyField {
                index,
                field: "text",
            });
        }
        if !seen.insert(&*n.id) {
            return Err(NotesError::DuplicateId(n.id.to_string()));
        }
    }
    Ok(())
}

/// The bundled fixture corpus.
pub fn bundled() -> Result<Vec<Note>, NotesError> {
    parse_notes(BUNDLED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bundled_corpus_loads() {
        let notes = bundled().unwrap();
        assert!(notes.len() >= 40, "{} notes", notes.len());
    }

    #[test]
    fn bad_notes_are_named() {
        assert_eq!(parse_notes("[]"), Err(NotesError::Empty));
        let dup = r#"[{"id":"a","title":"t","text":"x"},{"id":"a","title":"u","text":"y"}]"#;
        assert_eq!(parse_notes(dup), Err(NotesError::DuplicateId("a".into())));
        assert!(matches!(
            parse_notes("{\"id\":1}"),
            Err(NotesError::Malformed(_))
        ));
    }

    #[test]
    fn mentions_matches_word_prefixes() {
        let n = Note {
            id: "n".into(),
            title: "Risks".into(),
            text: "Hallucinated answers are costly.".into(),
            tags: ["customer-support".into()].into(),
        };
        assert!(n.mentions("risk"));
        assert!(n.mentions("cost"));
        assert!(n.mentions("support"));
        assert!(!n.mentions("price"));
    }
}
