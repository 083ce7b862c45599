//! `summarize`: an extractive summary: the sentences of the gathered notes most about the goal.

use super::{ToolInput, ToolOutcome};
use crate::research::corpus::has_prefix_in;
use crate::research::state::{Finding, StepParams};
use crate::research::text;

/// Default number of sentences.
pub const DEFAULT_SENTENCES: u32 = 4;

/// Picks up to `max_sentences` sentences from the notes the dependencies used, scored by how many
/// goal terms they mention, at most one per note, best first (ties: note order).
pub fn summarize(params: &StepParams, input: &ToolInput<'_>) -> ToolOutcome {
    let notes = input.dep_notes_prepared();
    if notes.is_empty() {
        return ToolOutcome::failed("nothing to summarize: the dependencies used no notes");
    }
    let terms = text::topic_terms(input.goal);
    // A term is mentioned as `text::has_word_prefix` finds it: some word starts with its stem,
    // looked up in the sentence's prepared words (split and sorted once per note).
    let stems: Vec<&str> = terms.iter().map(|t| text::stem(t)).collect();
    let mut scored: Vec<(usize, usize, &str, &str)> = Vec::new();
    for (order, (note, prepared)) in notes.iter().enumerate() {
        let best = prepared
            .sentences
            .iter()
            .map(|s| {
                let score = stems
                    .iter()
                    .filter(|t| has_prefix_in(&s.words, s.beginnings, t))
                    .count();
                (score, s.text.as_str())
            })
            .fold(None::<(usize, &str)>, |acc, (score, s)| match acc {
                Some((b, _)) if b >= score => acc,
                _ => Some((score, s)),
            });
        if let Some((score, sentence)) = best {
            scored.push((score, order, sentence, &*note.id));
        }
    }
    scored.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(&b.1)));
    let max = params.max_sentences.unwrap_or(DEFAULT_SENTENCES).max(1) as usize;
    let mut out = ToolOutcome::default();
    let mut lines = Vec::new();
    for (_, _, sentence, id) in scored.into_iter().take(max) {
        lines.push(format!("{sentence} [{id}]"));
        out.push_source(id);
        out.findings.push(Finding {
            figures: Vec::new(),
            note_id: id.to_string(),
            topic: None,
            sentence: sentence.into(),
        });
    }
    out.output = lines.join(" ");
    out
}
