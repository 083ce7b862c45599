//! `compare`: lines up what the dependencies found along named dimensions.

use super::search::best_sentence;
use super::{ToolInput, ToolOutcome};
use crate::research::state::{Finding, StepParams};
use crate::research::text;

/// Findings per dimension at most.
const PER_DIMENSION: usize = 2;

/// For each dimension, up to two notes among those the dependencies used that mention it, each
/// with its best sentence on it; a dimension no note mentions is reported as such.
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
            let sentence = best_sentence(&note.text, &terms);
            cells.push(format!("[{}] {}", note.id, sentence));
            out.push_source(&note.id);
            out.findings.push(Finding {
                note_id: note.id.clone(),
                topic: Some(dim.clone()),
                sentence,
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
