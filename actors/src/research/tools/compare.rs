//! `compare`: lines up what the dependencies found along named dimensions.
//!
//! For each dimension, up to [`PER_DIMENSION`] of the notes the dependencies used that name it,
//! each with its best sentence on it (one stating a figure when it has one) and every figure its
//! sentences on the dimension state, so the brief can put the sources side by side: what each
//! gives, where they agree, where they conflict, and which give nothing. A note *filed under* the
//! dimension (a tag or its title names it) is about it throughout: when none of its sentences
//! names the dimension with a figure, the figures of its other sentences are the dimension's (a
//! note tagged `rag` that says "cost fell from 4.10 EUR to 0.90 EUR with retrieval-augmented
//! generation" gives a figure on `rag`, though no sentence says "rag").

use super::ranking::best_sentence;
use super::{ToolInput, ToolOutcome};
use crate::research::corpus::Term;
use crate::research::figures::Figure;
use crate::research::state::{Finding, StepParams};
use crate::research::text;

/// Findings per dimension at most.
pub const PER_DIMENSION: usize = 4;

/// Runs a comparison; a dimension no note names is reported as such.
pub fn compare(params: &StepParams, input: &ToolInput<'_>) -> ToolOutcome {
    if params.dimensions.is_empty() {
        return ToolOutcome::failed("compare needs at least one dimension in `dimensions`");
    }
    let notes = input.dep_notes_prepared();
    if notes.is_empty() {
        return ToolOutcome::failed("nothing to compare: the dependencies used no notes");
    }
    let mut out = ToolOutcome::default();
    let mut lines = Vec::new();
    for dim in &params.dimensions {
        let terms: Vec<(String, f64)> = dim
            .split('|')
            .flat_map(text::content_terms)
            .map(|t| (t, 1.0))
            .collect();
        // The dimension split once; sentences, title and tags are matched on their prepared
        // words (the same answers as `Note::mentions` and `text::mentions_term` on their text).
        let term = Term::new(dim);
        let mut cells = Vec::new();
        for (note, prepared) in notes.iter().filter(|(_, p)| p.mentions_term(&term)) {
            if cells.len() >= PER_DIMENSION {
                break;
            }
            // The note's sentences, split once when the corpus was prepared, and their figures,
            // extracted once per note.
            let text_of = |i: usize| prepared.sentences[i].text.as_str();
            let all_figures = prepared.sentence_figures();
            let has_figure = |i: &usize| all_figures[*i].iter().any(|f| !f.unit.is_empty());
            let n = prepared.sentences.len();
            let mut on_dim: Vec<usize> = (0..n)
                .filter(|&i| term.named_in(&[&prepared.sentences[i].words]))
                .collect();
            let title_and_tags: Vec<&[String]> = std::iter::once(prepared.title.as_slice())
                .chain(prepared.tags.iter().map(Vec::as_slice))
                .collect();
            let filed_under = term.named_in(&title_and_tags);
            if filed_under && !on_dim.iter().any(has_figure) {
                for i in 0..n {
                    if has_figure(&i) && !on_dim.iter().any(|&j| text_of(j) == text_of(i)) {
                        on_dim.push(i);
                    }
                }
            }
            let figures: Vec<Figure> = on_dim
                .iter()
                .flat_map(|&i| all_figures[i].iter().cloned())
                .filter(|f| !f.unit.is_empty())
                .collect();
            let sentence = on_dim
                .iter()
                .find(|i| has_figure(i))
                .map(|&i| text_of(i).to_string())
                .unwrap_or_else(|| best_sentence(&note.text, &terms));
            let shown: Vec<String> = figures.iter().map(Figure::human).collect();
            cells.push(if shown.is_empty() {
                format!("[{}] no figure", note.id)
            } else {
                format!("[{}] {}", note.id, shown.join(", "))
            });
            out.push_source(&note.id);
            out.findings.push(Finding {
                note_id: note.id.to_string(),
                topic: Some(dim.clone()),
                sentence: sentence.into(),
                figures,
            });
        }
        if cells.is_empty() {
            lines.push(format!(
                "{}: no gathered note mentions it",
                text::primary(dim)
            ));
        } else {
            lines.push(format!("{}: {}", text::primary(dim), cells.join(" | ")));
        }
    }
    out.output = lines.join("\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::research::corpus::Corpus;
    use crate::research::notes::Note;
    use crate::research::state::StepResult;

    fn note(id: &str, title: &str, text: &str, tags: &[&str]) -> Note {
        Note {
            id: id.into(),
            title: title.into(),
            text: text.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn a_note_filed_under_a_dimension_gives_its_figures_on_it() {
        let corpus = Corpus::new(vec![
            note(
                "n1",
                "Cost per resolved conversation",
                "Pilots vary. The cost fell from 4.10 EUR to 0.90 EUR with retrieval-augmented generation.",
                &["rag", "cost"],
            ),
            note(
                "n2",
                "A survey",
                "Nine teams answered. Most use rag somewhere.",
                &["survey"],
            ),
            note(
                "n3",
                "Latency",
                "Answers took 2.5 seconds on average.",
                &["latency"],
            ),
        ]);
        let dep = StepResult {
            sources: vec!["n1".into(), "n2".into(), "n3".into()],
            ..StepResult::default()
        };
        let input = ToolInput {
            goal: "adopt rag",
            corpus: &corpus,
            deps: vec![&dep],
            aspects: vec![],
        };
        let params = StepParams {
            dimensions: vec!["rag".into()],
            ..StepParams::default()
        };
        let out = compare(&params, &input);
        // n1 is tagged `rag`: its figures count, though no sentence names "rag"; n2 names rag
        // but gives no figure; n3 is neither filed under nor about rag.
        assert!(
            out.output.contains("[n1] 4.10 EUR, 0.90 EUR"),
            "{}",
            out.output
        );
        assert!(out.output.contains("[n2] no figure"), "{}", out.output);
        assert!(!out.output.contains("n3"), "{}", out.output);
        let n1 = out.findings.iter().find(|f| f.note_id == "n1").unwrap();
        assert!(n1.sentence.contains("4.10 EUR"), "{}", n1.sentence);
    }
}
