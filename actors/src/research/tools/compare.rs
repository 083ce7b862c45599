//! `compare`: lines up what the dependencies found along named dimensions.
//!
//! For each dimension, up to [`PER_DIMENSION`] of the notes the dependencies used that name it,
//! each with its best sentence on it (one stating a figure when it has one) and every figure its
//! sentences on the dimension state, so the brief can put the sources side by side: what each
//! gives, where they agree, where they conflict, and which give nothing.

use super::search::best_sentence;
use super::{ToolInput, ToolOutcome};
use crate::research::figures::{self, Figure};
use crate::research::state::{Finding, StepParams};
use crate::research::text;

/// Findings per dimension at most.
pub const PER_DIMENSION: usize = 4;

/// Runs a comparison; a dimension no note names is reported as such.
pub fn compare(params: &StepParams, input: &ToolInput<'_>) -> ToolOutcome {
    if params.dimensions.is_empty() {
        return ToolOutcome::failed("compare needs at least one dimension in `dimensions`");
    }
    let notes = input.dep_notes();
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
        let mut cells = Vec::new();
        for note in notes.iter().filter(|n| n.mentions(dim)) {
            if cells.len() >= PER_DIMENSION {
                break;
            }
            let on_dim: Vec<String> = text::sentences(&note.text)
                .into_iter()
                .filter(|s| text::mentions_term(std::iter::once(s.as_str()), dim))
                .collect();
            let figures: Vec<Figure> = on_dim
                .iter()
                .flat_map(|s| figures::extract(s))
                .filter(|f| !f.unit.is_empty())
                .collect();
            let sentence = on_dim
                .iter()
                .find(|s| figures::extract(s).iter().any(|f| !f.unit.is_empty()))
                .cloned()
                .unwrap_or_else(|| best_sentence(&note.text, &terms));
            let shown: Vec<String> = figures.iter().map(Figure::human).collect();
            cells.push(if shown.is_empty() {
                format!("[{}] no figure", note.id)
            } else {
                format!("[{}] {}", note.id, shown.join(", "))
            });
            out.push_source(&note.id);
            out.findings.push(Finding {
                note_id: note.id.clone(),
                topic: Some(dim.clone()),
                sentence,
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
