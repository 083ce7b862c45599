//! The notes of a conversation, kept out of the per-superstep state when they can be.
//!
//! Held in the state, every note (13 KB for the bundled corpus) would be in every snapshot of
//! every conversation and serialised into every model request. A [`NoteSet`] is either
//! the **bundled** corpus — a name, since every process has it compiled in — or the caller's notes
//! **inline**. Nodes read the notes through [`NoteSet::notes`], shared (`Arc`) between the state's
//! copies; nothing in a checkpoint grows with the bundled corpus.

use super::corpus::Corpus;
use super::notes::{self, Note};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::sync::{Arc, OnceLock};

/// A conversation's notes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum NoteSet {
    /// The bundled corpus (`fixtures/research/notes.json`), stored as its name.
    #[default]
    Bundled,
    /// The caller's notes (prepared for searching when the set is made or loaded).
    Inline(Arc<Corpus>),
}

/// The name a bundled set is stored under.
pub const BUNDLED: &str = "bundled";

fn bundled() -> &'static Corpus {
    static NOTES: OnceLock<Corpus> = OnceLock::new();
    // The bundled corpus is checked by a unit test; a broken build would have no notes, and
    // every search would report the gap rather than panic.
    NOTES.get_or_init(|| Corpus::new(notes::bundled().unwrap_or_default()))
}

impl NoteSet {
    /// The caller's notes — stored by name when they are exactly the bundled corpus (a client
    /// that sends the bundled notes explicitly costs no more than one that leaves them out).
    pub fn from_notes(notes: Vec<Note>) -> Self {
        if notes.as_slice() == bundled().notes() {
            Self::Bundled
        } else {
            Self::inline(notes)
        }
    }

    /// The caller's notes, stored inline.
    pub fn inline(notes: Vec<Note>) -> Self {
        Self::Inline(Arc::new(Corpus::new(notes)))
    }

    /// The notes prepared for searching.
    pub fn corpus(&self) -> &Corpus {
        match self {
            Self::Bundled => bundled(),
            Self::Inline(c) => c,
        }
    }

    /// The notes.
    pub fn notes(&self) -> &[Note] {
        self.corpus().notes()
    }

    /// A note by id.
    pub fn get(&self, id: &str) -> Option<&Note> {
        self.notes().iter().find(|n| *n.id == *id)
    }

    /// How many notes.
    pub fn len(&self) -> usize {
        self.notes().len()
    }

    /// Whether there is no note.
    pub fn is_empty(&self) -> bool {
        self.notes().is_empty()
    }

    /// Iterates over the notes.
    pub fn iter(&self) -> std::slice::Iter<'_, Note> {
        self.notes().iter()
    }
}

impl Serialize for NoteSet {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        match self {
            Self::Bundled => {
                #[derive(Serialize)]
                struct Named<'a> {
                    corpus: &'a str,
                    count: usize,
                }
                Named {
                    corpus: BUNDLED,
                    count: bundled().notes().len(),
                }
                .serialize(s)
            }
            Self::Inline(c) => c.notes().serialize(s),
        }
    }
}

impl<'de> Deserialize<'de> for NoteSet {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Stored {
            Inline(Vec<Note>),
            Named { corpus: String },
        }
        match Stored::deserialize(d)? {
            Stored::Inline(n) => Ok(Self::inline(n)),
            Stored::Named { corpus } if corpus == BUNDLED => Ok(Self::Bundled),
            Stored::Named { corpus } => Err(serde::de::Error::custom(format!(
                "unknown note corpus `{corpus}` (only `{BUNDLED}` is built in)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_set_is_stored_by_name_and_inline_notes_as_themselves() {
        let json = serde_json::to_value(NoteSet::Bundled).unwrap();
        assert_eq!(json["corpus"], BUNDLED);
        let back: NoteSet = serde_json::from_value(json).unwrap();
        assert_eq!(back, NoteSet::Bundled);
        assert!(back.len() >= 40);
        let mine = NoteSet::inline(vec![Note {
            id: "a".into(),
            title: "A".into(),
            text: "x".into(),
            tags: [].into(),
        }]);
        let json = serde_json::to_value(&mine).unwrap();
        assert!(json.is_array());
        assert_eq!(serde_json::from_value::<NoteSet>(json).unwrap(), mine);
        assert_eq!(
            NoteSet::from_notes(notes::bundled().unwrap()),
            NoteSet::Bundled
        );
        let bad = serde_json::from_value::<NoteSet>(serde_json::json!({"corpus": "x"}));
        assert!(bad
            .unwrap_err()
            .to_string()
            .contains("unknown note corpus `x`"));
    }
}
