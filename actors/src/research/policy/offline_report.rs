//! Offline brief writing: quoted findings, each cited, within the word budget, and a comparison
//! that puts the sources side by side.
//!
//! Nothing is paraphrased, so nothing can be invented: every sentence of an aspect section is a
//! sentence of a note about that aspect, followed by the note's id. Aspect findings are taken
//! round-robin across sections (every section gets its best finding before any gets a second)
//! until `max_words` is spent; a sentence is never repeated. The comparison lists, per dimension,
//! the figures each source gives (rounded for people, with units), then says where they agree,
//! where they differ and which sources give none. A draft (a run stopped for review) says so at
//! the top and marks each unsupported section as a gap where it stands.

use super::{Report, SectionInput, SectionKind, SynthesisRequest};
use crate::research::figures::{human, Figure};
use crate::research::state::Finding;
use crate::research::text;
use std::collections::HashSet;

/// Figures of different sources agree when the largest is at most this much above the smallest.
const AGREEMENT: f64 = 1.15;

/// Writes the brief.
pub fn write_report(req: &SynthesisRequest) -> Report {
    let budget = req.constraints.max_words as usize;
    let title_of = |id: &str| {
        req.sources
            .iter()
            .find(|(s, _)| s == id)
            .map(|(_, t)| t.as_str())
            .unwrap_or_default()
    };
    let mut used: HashSet<&str> = HashSet::new();
    let mut bodies: Vec<Vec<String>> = vec![Vec::new(); req.sections.len()];
    let mut words = 0usize;
    // Comparisons first: they are compact, and what the brief is for.
    for (i, section) in req.sections.iter().enumerate() {
        if section.kind == SectionKind::Comparison {
            bodies[i] = compare_lines(section, &title_of);
            words += bodies[i].iter().map(|l| text::word_count(l)).sum::<usize>();
        }
    }
    let quoted = |k: SectionKind| {
        req.sections
            .iter()
            .enumerate()
            .filter(move |(_, s)| s.kind == k)
            .map(|(i, _)| i)
            .collect::<Vec<_>>()
    };
    for order in [quoted(SectionKind::Aspect), quoted(SectionKind::Summary)] {
        let deepest = order
            .iter()
            .map(|&i| req.sections[i].findings.len())
            .max()
            .unwrap_or(0);
        'rounds: for round in 0..deepest {
            for &i in &order {
                let Some(f) = req.sections[i].findings.get(round) else {
                    continue;
                };
                if !used.insert(&*f.sentence) {
                    continue;
                }
                let line = format!("{} [{}]", f.sentence, f.note_id);
                let n = text::word_count(&line);
                if words + n > budget && words > 0 {
                    break 'rounds;
                }
                words += n;
                bodies[i].push(line);
            }
        }
    }
    let mut out = format!("# Research brief: {}\n", req.goal);
    if let Some(reason) = &req.draft_reason {
        out.push_str(&format!(
            "\n> **Draft — needs review.** {reason}\n> Sections marked *Gap* have no supporting note yet.\n"
        ));
    }
    if let Some(a) = &req.constraints.audience {
        out.push_str(&format!("\nFor {a}.\n"));
    }
    if let Some(d) = &req.constraints.deadline {
        out.push_str(&format!("Deadline: {d}.\n"));
    }
    for (section, body) in req.sections.iter().zip(&bodies) {
        if body.is_empty() && section.gap.is_none() {
            // Everything it had was quoted above (a summary), or nothing was found.
            if section.kind == SectionKind::Aspect && section.findings.is_empty() {
                out.push_str(&format!(
                    "\n## {}\n\nNo source note covers this section.\n",
                    section.title
                ));
            }
            continue;
        }
        out.push_str(&format!("\n## {}\n\n", section.title));
        if let Some(gap) = &section.gap {
            out.push_str(&format!("*Gap:* {gap}\n"));
        }
        if !body.is_empty() {
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

/// A unit's name for grouping ("%" and "percent" are one unit).
fn unit_key(unit: &str) -> &str {
    if unit == "%" {
        "percent"
    } else {
        unit
    }
}

/// The comparison, per dimension: each source's figures, then agreement, conflict and silence.
fn compare_lines<'a>(section: &'a SectionInput, title_of: &dyn Fn(&str) -> &'a str) -> Vec<String> {
    let mut dims: Vec<&str> = section.dimensions.iter().map(String::as_str).collect();
    for f in &section.findings {
        if let Some(t) = f.topic.as_deref() {
            if !dims.contains(&t) {
                dims.push(t);
            }
        }
    }
    let mut lines = Vec::new();
    for dim in dims {
        let name = text::primary(dim);
        let found: Vec<&Finding> = section
            .findings
            .iter()
            .filter(|f| f.topic.as_deref() == Some(dim))
            .collect();
        if !lines.is_empty() {
            lines.push(String::new());
        }
        lines.push(format!("**{}**", capitalise(name)));
        if found.is_empty() {
            lines.push(format!("- No gathered source speaks to {name}."));
            continue;
        }
        // Sources without a figure on the dimension are named bare, not cited: "gives no figure"
        // is the brief's statement about the source, not a claim the source must support.
        let mut silent = Vec::new();
        for f in &found {
            let title = title_of(&f.note_id);
            if f.figures.is_empty() {
                silent.push(f.note_id.clone());
                continue;
            }
            let shown: Vec<String> = f.figures.iter().map(Figure::human).collect();
            lines.push(format!(
                "- [{}] {}: {}",
                f.note_id,
                if title.is_empty() { "source" } else { title },
                shown.join(", ")
            ));
        }
        lines.extend(verdicts(name, &found));
        if silent.len() == found.len() {
            lines.push(format!(
                "- None of the sources on {name} gives a figure ({}): see the section above for what they say.",
                silent.join(", ")
            ));
        } else if !silent.is_empty() {
            lines.push(format!("- No figure on {name} from {}.", silent.join(", ")));
        }
    }
    lines
}

/// Where sources that give figures in the same unit agree or differ.
fn verdicts(name: &str, found: &[&Finding]) -> Vec<String> {
    let mut units: Vec<&str> = Vec::new();
    for f in found {
        for fig in &f.figures {
            let u = unit_key(&fig.unit);
            if !units.contains(&u) {
                units.push(u);
            }
        }
    }
    let mut out = Vec::new();
    for unit in units {
        // (note, lowest, highest) of each source giving figures in this unit.
        let ranges: Vec<(&str, f64, f64)> = found
            .iter()
            .filter_map(|f| {
                let vals: Vec<f64> = f
                    .figures
                    .iter()
                    .filter(|x| unit_key(&x.unit) == unit)
                    .map(|x| x.value)
                    .collect();
                let lo = vals.iter().copied().reduce(f64::min)?;
                let hi = vals.iter().copied().reduce(f64::max)?;
                Some((f.note_id.as_str(), lo, hi))
            })
            .collect();
        if ranges.len() < 2 {
            continue;
        }
        let with_unit = |v: f64| format!("{} {unit}", human(v));
        let (lo_id, lo) = ranges
            .iter()
            .map(|r| (r.0, r.1))
            .reduce(|a, b| if b.1 < a.1 { b } else { a })
            .unwrap_or(("", 0.0));
        let (hi_id, hi) = ranges
            .iter()
            .map(|r| (r.0, r.2))
            .reduce(|a, b| if b.1 > a.1 { b } else { a })
            .unwrap_or(("", 0.0));
        let overlap = ranges.iter().map(|r| r.1).fold(f64::MIN, f64::max)
            <= ranges.iter().map(|r| r.2).fold(f64::MAX, f64::min) * AGREEMENT;
        let ids: Vec<String> = ranges.iter().map(|r| format!("[{}]", r.0)).collect();
        if overlap && lo > 0.0 && hi <= lo * AGREEMENT.powi(2) {
            out.push(format!(
                "- The sources agree on {name}: {} give {}.",
                ids.join(" and "),
                if lo == hi {
                    with_unit(lo)
                } else {
                    format!("{}–{}", human(lo), with_unit(hi))
                }
            ));
        } else {
            out.push(format!(
                "- The sources differ on {name}: from {} [{lo_id}] to {} [{hi_id}].",
                with_unit(lo),
                with_unit(hi)
            ));
        }
    }
    out
}

fn capitalise(s: &str) -> String {
    let mut c = s.chars();
    match c.next() {
        Some(f) => f.to_uppercase().collect::<String>() + c.as_str(),
        None => String::new(),
    }
}
