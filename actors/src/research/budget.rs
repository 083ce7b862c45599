//! What a model call carries: only the notes its call needs, within a token budget.
//!
//! A plan, repair or replan request that carried every note (~3,000 prompt tokens for the
//! bundled corpus) would spend most of a research conversation's CPU serialising and parsing
//! notes the call does not use. A call gets the notes ranked best for its own query (the goal
//! and its sections for a plan; the open gaps for a replan), at most [`MAX_NOTES`], while their
//! estimated tokens fit the constraint `note_tokens` (a note that does not fit whole is cut to its
//! first sentence).

use super::corpus::Corpus;
use super::notes::Note;
use super::text;

/// Notes a call carries at most.
pub const MAX_NOTES: usize = 8;

/// Estimated tokens of a note in a request (4 characters a token, plus the JSON's keys).
pub fn note_tokens(note: &Note) -> u32 {
    let chars = note.id.len()
        + note.title.len()
        + note.text.len()
        + note.tags.iter().map(|t| t.len() + 3).sum::<usize>()
        + 40;
    chars.div_ceil(4) as u32
}

/// The notes for a call whose subject is `query`: best first, within `budget` tokens.
pub fn notes_for_call(corpus: &Corpus, query: &str, budget: u32) -> Vec<Note> {
    let notes = corpus.notes();
    let mut out = Vec::new();
    let mut spent = 0u32;
    for hit in corpus.bm25().search(query, MAX_NOTES) {
        let note = &notes[hit.doc];
        let whole = note_tokens(note);
        if spent + whole <= budget {
            spent += whole;
            out.push(note.clone());
            continue;
        }
        let first = text::sentences(&note.text).into_iter().next();
        let cut = Note {
            text: first.unwrap_or_default().into(),
            ..note.clone()
        };
        let t = note_tokens(&cut);
        if !cut.text.is_empty() && spent + t <= budget {
            spent += t;
            out.push(cut);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn note(id: &str, text: &str) -> Note {
        Note {
            id: id.into(),
            title: id.into(),
            text: text.into(),
            tags: [].into(),
        }
    }

    #[test]
    fn a_call_gets_the_best_notes_within_its_budget() {
        let long = "Heat pumps cut bills. ".repeat(40);
        let notes = Corpus::new(vec![
            note("a", "Heat pumps cut heating bills."),
            note("b", "Retrieval grounds answers."),
            note("c", &long),
        ]);
        let all = notes_for_call(&notes, "heat pumps bills", 10_000);
        let ids: Vec<&str> = all.iter().map(|n| &*n.id).collect();
        assert_eq!(ids.len(), 2, "only notes on the query: {ids:?}");
        let tight = notes_for_call(&notes, "heat pumps bills", 40);
        assert!(tight.iter().map(note_tokens).sum::<u32>() <= 40);
        // The long note, if carried, is cut to its first sentence.
        for n in &tight {
            assert!(n.text.len() < 100, "{}", n.id);
        }
        assert!(notes_for_call(&notes, "heat pumps", 0).is_empty());
    }
}
