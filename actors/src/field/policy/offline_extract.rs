//! The offline extractor: finds the sentence about the field among the search hits, then reads it
//! as the field means it ([`crate::field::reading`]).
//!
//! Scoring, per sentence with a reading for the field, in rank order: two points per field term
//! found in the sentence or the document title, and three more when a candidate number is followed
//! by the field's head noun (the first word of its name: `dentists` for `dentists_per_100k`), else
//! one when by any field term. Values already attributed to another field from the same document
//! are not reused. The best score wins, ties going to the better-ranked hit; a score of zero is no
//! match. The winning sentence's verdict is the answer: one reading, or candidates to ask about.

use super::{ExtractAnswer, ExtractRequest, Extraction};
use crate::field::numbers::{sentences, Reading};
use crate::field::reading::context::Period;
use crate::field::reading::finding::Finding;
use crate::field::reading::scan::{style_of, Style};
use crate::field::reading::{read_field_in, FieldSpec, Verdict};
use crate::field::schema::ValueType;
use std::collections::BTreeSet;

const STOPWORDS: &[&str] = &[
    "the", "a", "an", "of", "in", "on", "at", "for", "to", "and", "or", "with", "that", "by", "is",
    "are", "per", "each", "than", "more", "from", "as", "its", "their", "number", "one", "it",
    "be", "was", "were", "has", "have", "this", "these", "those",
];

/// A token reduced to a comparable form: lower case, a plural `s` dropped.
pub(crate) fn stem(t: &str) -> String {
    let t = t.to_lowercase();
    if t.len() > 4 && t.ends_with("ies") {
        format!("{}y", &t[..t.len() - 3])
    } else if t.len() > 3 && t.ends_with('s') && !t.ends_with("ss") {
        t[..t.len() - 1].to_string()
    } else {
        t
    }
}

/// The content terms of a text: stemmed tokens without stopwords.
pub(crate) fn terms(text: &str) -> BTreeSet<String> {
    crate::tools::bm25::tokenize(text)
        .iter()
        .filter(|t| !STOPWORDS.contains(&t.as_str()))
        .map(|t| stem(t))
        .collect()
}

/// The (up to two) words after the number at `r.offset` in `text`, lower case, punctuation
/// trimmed.
pub(crate) fn words_after(text: &str, r: &Reading) -> Vec<String> {
    text[r.offset..]
        .split_whitespace()
        .skip(1)
        .take(2)
        .map(|w| {
            w.trim_matches(|c: char| !c.is_alphanumeric())
                .to_lowercase()
        })
        .collect()
}

/// What the reader needs to know of the request's field.
pub(crate) fn spec(req: &ExtractRequest, field: &crate::field::schema::Field) -> FieldSpec {
    let mut wanted = terms(&field.name.replace('_', " "));
    let description = field.description.clone().unwrap_or_default();
    wanted.extend(terms(&description));
    let lower = description.to_lowercase();
    let year = crate::field::reading::scan::mentions(&description, Style::DecimalDot)
        .iter()
        .find(|m| m.year_like)
        .map(|m| m.value as i32);
    FieldSpec {
        ratio: field.value_type == ValueType::Ratio,
        money: field
            .unit
            .as_deref()
            .is_some_and(|u| u.contains("currency")),
        period: field.unit.as_deref().and_then(Period::of_unit),
        terms: wanted,
        head: field.name.split('_').next().map(stem).unwrap_or_default(),
        latest: ["latest", "current", "most recent", "today", "newest", "now"]
            .iter()
            .any(|w| lower.contains(w)),
        year,
        region: req.region.clone(),
        currency: req.currency.clone(),
        rates: req.rates.clone(),
        about: format!("{} {}", req.about, description),
    }
}

fn taken(req: &ExtractRequest, doc: &str, v: f64) -> bool {
    req.taken
        .iter()
        .any(|(id, t)| id == doc && (t - v).abs() <= 1e-9 * t.abs().max(1.0))
}

/// The offline extraction.
pub fn extract(req: &ExtractRequest) -> ExtractAnswer {
    let Some(field) = &req.field else {
        return ExtractAnswer::default();
    };
    if field.value_type == ValueType::Text {
        return ExtractAnswer::default();
    }
    let spec = spec(req, field);
    let mut best: Option<(u32, ExtractAnswer)> = None;
    for doc in &req.hits {
        let title = terms(&doc.title);
        let style = style_of(&doc.text);
        // The note a shared currency sign is read in: the document, its title included.
        let note = format!("{}\n{}", doc.title, doc.text);
        for (_, quote) in sentences(&doc.text) {
            let verdict = match read_field_in(quote, &note, style, &spec) {
                Verdict::Read(r) if taken(req, &doc.id, r.value) => continue,
                Verdict::Ask {
                    mut candidates,
                    why,
                } => {
                    candidates.retain(|c| !taken(req, &doc.id, c.value));
                    match candidates.len() {
                        0 => continue,
                        1 => Verdict::Read(candidates.remove(0)),
                        _ => Verdict::Ask { candidates, why },
                    }
                }
                Verdict::Confirm { ref reading, .. } if taken(req, &doc.id, reading.value) => {
                    continue
                }
                Verdict::Nothing => continue,
                v => v,
            };
            let mut context = terms(quote);
            context.extend(title.iter().cloned());
            let overlap = spec.terms.intersection(&context).count() as u32;
            if overlap == 0 {
                continue;
            }
            let spans: Vec<&str> = match &verdict {
                Verdict::Read(r) | Verdict::Confirm { reading: r, .. } => vec![r.span.as_str()],
                Verdict::Ask { candidates, .. } => {
                    candidates.iter().map(|c| c.span.as_str()).collect()
                }
                Verdict::Nothing => vec![],
            };
            let after: Vec<String> = spans
                .iter()
                .filter_map(|sp| quote.find(sp).map(|at| at + sp.len()))
                .flat_map(|end| {
                    quote[end..]
                        .split_whitespace()
                        .take(2)
                        .map(|w| {
                            stem(
                                &w.trim_matches(|c: char| !c.is_alphanumeric())
                                    .to_lowercase(),
                            )
                        })
                        .collect::<Vec<_>>()
                })
                .collect();
            let bonus = if after.contains(&spec.head) {
                3
            } else if after.iter().any(|w| spec.terms.contains(w)) {
                1
            } else {
                0
            };
            let score = overlap * 2 + bonus;
            if best.as_ref().is_some_and(|(b, _)| score <= *b) {
                continue;
            }
            let answer = match verdict {
                Verdict::Read(r) => ExtractAnswer {
                    found: Some(Extraction {
                        value: r.value,
                        quote: quote.to_string(),
                        source_id: doc.id.clone(),
                        span: Some(r.span),
                        conversions: r.conversions,
                    }),
                    ask: None,
                },
                Verdict::Ask { candidates, why } => ExtractAnswer {
                    found: None,
                    ask: Some(Finding {
                        source_id: doc.id.clone(),
                        quote: quote.to_string(),
                        candidates,
                        why,
                        open: None,
                    }),
                },
                Verdict::Confirm { reading, open, why } => ExtractAnswer {
                    found: None,
                    ask: Some(Finding {
                        source_id: doc.id.clone(),
                        quote: quote.to_string(),
                        candidates: vec![reading],
                        why,
                        open: Some(open),
                    }),
                },
                Verdict::Nothing => continue,
            };
            best = Some((score, answer));
        }
    }
    best.map(|(_, a)| a).unwrap_or_default()
}
