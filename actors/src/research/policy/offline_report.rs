//! Offline brief writing: quoted findings, each cited, within the word budget.
//!
//! Nothing is paraphrased, so nothing can be invented: every body sentence is a sentence of a note,
//! followed by that note's id. Findings are taken round-robin across sections (so every section
//! gets its best finding before any gets a second) until `max_words` is spent; a sentence already
//! used is not repeated. Gaps are listed as unresolved questions.

use super::{Report, SynthesisRequest};
use crate::research::text;
use std::collections::HashSet;

/// Writes the brief.
pub fn write_report(req: &SynthesisRequest) -> Report {
    let budget = req.constraints.max_words as usize;
    let mut used: HashSet<&str> = HashSet::new();
    let mut bodies: Vec<Vec<String>> = vec![Vec::new(); req.sections.len()];
    let mut words = 0usize;
    let deepest = req
        .sections
        .iter()
        .map(|s| s.findings.len())
        .max()
        .unwrap_or(0);
    'rounds: for round in 0..deepest {
        for (i, section) in req.sections.iter().enumerate() {
            let Some(f) = section.findings.get(round) else {
                continue;
            };
            let line = if used.insert(f.sentence.as_str()) {
                match &f.topic {
                    Some(t) => format!("On {}: {} [{}]", text::primary(t), f.sentence, f.note_id),
                    None => format!("{} [{}]", f.sentence, f.note_id),
                }
            } else if let Some(t) = &f.topic {
                // Already quoted above: a comparison still says which note speaks to what.
                format!("On {}: see [{}] above.", text::primary(t), f.note_id)
            } else {
                continue;
            };
            let n = text::word_count(&line);
            if words + n > budget && words > 0 {
                break 'rounds;
            }
            words += n;
            bodies[i].push(line);
        }
    }
    let mut out = format!("# Research brief: {}\n", req.goal);
    if let Some(a) = &req.constraints.audience {
        out.push_str(&format!("\nFor {a}.\n"));
    }
    if let Some(d) = &req.constraints.deadline {
        out.push_str(&format!("Deadline: {d}.\n"));
    }
    for (section, body) in req.sections.iter().zip(&bodies) {
        // A section whose findings were all quoted in earlier sections adds nothing.
        if body.is_empty() && !section.findings.is_empty() {
            continue;
        }
        out.push_str(&format!("\n## {}\n\n", section.title));
        if body.is_empty() {
            out.push_str("No source note covers this section.\n");
        } else {
            out.push_str(&body.join("\n"));
            out.push('\n');
        }
    }
    out.push_str("\n## Unresolved questions\n\n");
    if req.knowledge_gaps.is_empty() {
        out.push_str("None found in the notes.\n");
    } else {
        for g in &req.knowledge_gaps {
            out.push_str(&format!("- {g}\n"));
        }
    }
    let cited: Vec<&(String, String)> = req
        .sources
        .iter()
        .filter(|(id, _)| {
            bodies
                .iter()
                .flatten()
                .any(|l| l.contains(&format!("[{id}]")))
        })
        .collect();
    if !cited.is_empty() {
        out.push_str("\n## Sources\n\n");
        for (id, title) in cited {
            out.push_str(&format!("- [{id}] {title}\n"));
        }
    }
    Report { text: out }
}
