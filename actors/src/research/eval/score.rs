//! Scoring one finished run against its labels: pure, so the metrics are tested without a graph.
//!
//! - **recall@k** per aspect: of the notes labelled for the aspect, the share its search step
//!   found, out of at most `k` (a step that may return 3 notes is not blamed for a fourth).
//! - **citation precision**: of the citations in the brief's body, the share that cite a note
//!   labelled for the section they stand in (the comparison and the summary may cite any labelled
//!   note); distractor citations are listed by name.
//! - **gaps**: an aspect is reported as a gap when no complete search step serves it; compared
//!   with the labelled gaps for precision and recall.

use super::set::Expect;
use crate::research::citations;
use crate::research::state::{ResearchState, StepStatus};
use crate::research::text;
use crate::research::tools::SEARCH_DEFAULT_LIMIT;
use serde::Serialize;
use std::collections::BTreeSet;

/// How one aspect's search did.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct AspectScore {
    /// The aspect (a required section).
    pub aspect: String,
    /// The notes its complete search steps found.
    pub found: Vec<String>,
    /// How many notes are labelled for it.
    pub relevant: usize,
    /// Labelled notes found.
    pub hits: usize,
    /// `hits / min(k, relevant)`; `None` for an aspect with no labelled note (a gap).
    pub recall: Option<f64>,
}

/// The citations of a brief.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct CitationScore {
    /// Citations in the body (a note cited twice in a section counts once there).
    pub total: usize,
    /// Citations of a note labelled for their section.
    pub supported: usize,
    /// `(section, note)` of each citation that is not.
    pub unsupported: Vec<(String, String)>,
    /// Distractor notes cited anywhere.
    pub distractors: Vec<String>,
}

/// Gaps expected and reported.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct GapScore {
    /// Labelled gaps.
    pub expected: Vec<String>,
    /// Aspects the run reported as gaps.
    pub reported: Vec<String>,
    /// Reported and expected.
    pub true_positives: usize,
}

/// A goal's scores.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct GoalScore {
    /// Per required section.
    pub aspects: Vec<AspectScore>,
    /// Of the brief.
    pub citations: CitationScore,
    /// Of the gaps.
    pub gaps: GapScore,
}

fn same_aspect(a: &str, b: &str) -> bool {
    text::primary(a).eq_ignore_ascii_case(text::primary(b))
}

/// Whether a step's aspect (alternatives separated by `|`, as merged or widened steps have)
/// serves `aspect`.
fn serves(step_aspect: &str, aspect: &str) -> bool {
    step_aspect.split('|').any(|alt| same_aspect(alt, aspect))
}

/// The notes found for `aspect` by complete search steps (plan order, no repeats), and whether
/// any complete step serves it.
fn found_for(state: &ResearchState, aspect: &str) -> (Vec<String>, bool) {
    let mut found = Vec::new();
    let mut served = false;
    for step in state.active_steps() {
        let serves = step.tool == "search"
            && step.status == StepStatus::Complete
            && step.aspect().is_some_and(|a| serves(a, aspect));
        if !serves {
            continue;
        }
        served = true;
        for id in state
            .step_results
            .get(&step.id)
            .map(|r| r.sources.as_slice())
            .unwrap_or_default()
        {
            if !found.contains(id) {
                found.push(id.clone());
            }
        }
    }
    (found, served)
}

/// The brief's body sections: `(heading, text)`, without the source list and the questions.
fn body_sections(report: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for line in report.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            out.push((h.trim().to_string(), String::new()));
        } else if let Some((_, body)) = out.last_mut() {
            body.push_str(line);
            body.push('\n');
        }
    }
    out.retain(|(h, _)| {
        let h = h.to_lowercase();
        h != "sources" && h != "unresolved questions"
    });
    out
}

/// Scores a finished run. `k` is the number of notes a search step may return.
pub fn score(state: &ResearchState, expect: &Expect, k: usize) -> GoalScore {
    let k = k.max(1);
    let mut aspects = Vec::new();
    let mut reported = Vec::new();
    for (aspect, labelled) in &expect.aspects {
        let (found, served) = found_for(state, aspect);
        if !served {
            reported.push(aspect.clone());
        }
        let hits = found.iter().filter(|id| labelled.contains(id)).count();
        let recall = (!labelled.is_empty()).then(|| hits as f64 / k.min(labelled.len()) as f64);
        aspects.push(AspectScore {
            aspect: aspect.clone(),
            found,
            relevant: labelled.len(),
            hits,
            recall,
        });
    }
    let any_labelled: BTreeSet<&String> = expect.aspects.values().flatten().collect();
    let mut citations = CitationScore::default();
    let report = if state.final_report.is_empty() {
        state
            .final_output
            .get("draft_report")
            .and_then(|v| v.as_str())
            .unwrap_or_default()
    } else {
        state.final_report.as_str()
    };
    for (heading, body) in body_sections(report) {
        let labelled = expect
            .aspects
            .iter()
            .find(|(a, _)| heading.eq_ignore_ascii_case(text::primary(a)))
            .map(|(_, ids)| ids);
        let cited: BTreeSet<String> = citations::cited_ids(&body)
            .into_iter()
            .map(str::to_string)
            .collect();
        for id in cited {
            citations.total += 1;
            let ok = match labelled {
                Some(ids) => ids.contains(&id),
                None => any_labelled.contains(&id),
            };
            if ok {
                citations.supported += 1;
            } else {
                citations.unsupported.push((heading.clone(), id.clone()));
            }
            if expect.distractors.contains(&id) && !citations.distractors.contains(&id) {
                citations.distractors.push(id);
            }
        }
    }
    let true_positives = reported
        .iter()
        .filter(|a| expect.gaps.iter().any(|g| same_aspect(g, a)))
        .count();
    GoalScore {
        aspects,
        citations,
        gaps: GapScore {
            expected: expect.gaps.clone(),
            reported,
            true_positives,
        },
    }
}

/// Recall@k of a search that returns `found` for `labelled` (for callers scoring retrieval alone).
pub fn recall_at_k(found: &[String], labelled: &[String], k: usize) -> Option<f64> {
    if labelled.is_empty() {
        return None;
    }
    let hits = found
        .iter()
        .take(k.max(1))
        .filter(|id| labelled.contains(id))
        .count();
    Some(hits as f64 / k.max(1).min(labelled.len()) as f64)
}

/// The default `k`: what a search step returns when its plan does not say.
pub const DEFAULT_K: usize = SEARCH_DEFAULT_LIMIT as usize;
