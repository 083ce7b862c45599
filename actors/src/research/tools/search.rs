//! `search`: BM25 ranking over the notes, with a relevance floor and an optional topic filter.

use super::ranking::{best_sentence, weigh_terms, DEFAULT_LIMIT};
use super::ToolOutcome;
use crate::research::corpus::{Corpus, Term};
use crate::research::state::{Finding, StepParams};
use crate::research::text;

/// A hit scoring below this share of the best hit is not relevant enough to use.
const RELEVANCE_FLOOR: f64 = 0.2;

/// Runs a search. A step serving an aspect ranks by it (see `tools::aspect`; `siblings` are the
/// plan's other aspects); otherwise: the best `limit` notes for `query` that score at least a
/// fifth of the best hit and, when `require_any` is given, mention at least one of its terms.
pub fn search(params: &StepParams, corpus: &Corpus, siblings: &[String]) -> ToolOutcome {
    if let Some(aspect) = params.aspect.as_deref().filter(|a| !a.trim().is_empty()) {
        return super::aspect::search_aspect(aspect, params, corpus, siblings);
    }
    let notes = corpus.notes();
    let Some(query) = params.query.as_deref().filter(|q| !q.trim().is_empty()) else {
        return ToolOutcome::failed("search needs a non-empty `query`");
    };
    let hits = corpus.bm25().search(query, notes.len());
    let top = hits.first().map_or(0.0, |h| h.score);
    let limit = params.limit.unwrap_or(DEFAULT_LIMIT).max(1) as usize;
    let weighted = weigh_terms(&text::content_terms(query), corpus);
    let mut out = ToolOutcome::default();
    let mut lines = Vec::new();
    // The topic terms split once, not once per hit.
    let require: Vec<Term> = params.require_any.iter().map(|t| Term::new(t)).collect();
    for hit in hits {
        if out.sources.len() >= limit || hit.score < top * RELEVANCE_FLOOR {
            break;
        }
        let note = &notes[hit.doc];
        let prepared = corpus.prepared(hit.doc);
        if !require.is_empty() && !require.iter().any(|t| prepared.mentions_term(t)) {
            continue;
        }
        let sentence = best_sentence(&note.text, &weighted);
        lines.push(format!("[{}] {}: {}", note.id, note.title, sentence));
        out.push_source(&note.id);
        out.findings.push(Finding {
            figures: Vec::new(),
            note_id: note.id.to_string(),
            topic: None,
            sentence: sentence.into(),
        });
    }
    out.output = if lines.is_empty() {
        format!("no relevant note for \"{query}\"")
    } else {
        format!(
            "{} note(s) for \"{query}\":\n{}",
            lines.len(),
            lines.join("\n")
        )
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::research::notes::Note;

    fn note(id: &str, text: &str) -> Note {
        Note {
            id: id.into(),
            title: id.into(),
            text: text.into(),
            tags: [].into(),
        }
    }

    #[test]
    fn finds_relevant_notes_and_quotes_them() {
        let notes = vec![
            note("a", "Heat pumps cut heating bills. They are quiet."),
            note("b", "Retrieval grounds answers in documents."),
            note("c", "Heat pumps need outdoor space."),
        ];
        let params = StepParams {
            query: Some("heat pumps bills".into()),
            ..StepParams::default()
        };
        let out = search(&params, &Corpus::new(notes), &[]);
        assert_eq!(out.sources, vec!["a", "c"]);
        assert_eq!(&*out.findings[0].sentence, "Heat pumps cut heating bills.");
    }

    #[test]
    fn topic_filter_and_empty_query() {
        let notes = vec![note("a", "Costs rose."), note("b", "Heat pump costs fell.")];
        let params = StepParams {
            query: Some("costs".into()),
            require_any: vec!["heat".into()],
            ..StepParams::default()
        };
        let notes = Corpus::new(notes);
        assert_eq!(search(&params, &notes, &[]).sources, vec!["b"]);
        assert!(search(&StepParams::default(), &notes, &[]).error.is_some());
    }
}
