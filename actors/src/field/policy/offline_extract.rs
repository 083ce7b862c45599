//! The offline extractor: reads a field's value from search hits by matching the field's name and
//! description against each number's sentence.
//!
//! Scoring, per reading of the right type in rank order: two points per field term found in the
//! sentence or the document title, and three more when one of the two words after the number is the
//! field's head noun (the first word of its name: `dentists` for `dentists_per_100k`), else one
//! when it is any field term. Ratio fields take percentages or plain numbers in 0–1; number fields
//! skip percentages; a field whose unit is a currency needs a currency next to the number. Values
//! already attributed to another field from the same document are not reused. The best score wins,
//! ties going to the better-ranked hit; a score of zero is no match.

use super::{ExtractAnswer, ExtractRequest, Extraction};
use crate::field::numbers::{readings, Reading};
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

fn has_currency(text: &str, r: &Reading, currency: Option<&str>) -> bool {
    let before = text[..r.offset].trim_end();
    if before.ends_with(['$', '€', '£', '¥']) {
        return true;
    }
    let after: Vec<&str> = text[r.offset..]
        .split_whitespace()
        .skip(1)
        .take(2)
        .collect();
    after.iter().any(|w| {
        let w = w.trim_matches(|c: char| !c.is_alphanumeric());
        (w.len() == 3 && w.chars().all(|c| c.is_ascii_uppercase()))
            || currency.is_some_and(|c| w.eq_ignore_ascii_case(c))
            || ["dollars", "euros", "pounds"].contains(&w.to_lowercase().as_str())
    })
}

/// The offline extraction.
pub fn extract(req: &ExtractRequest) -> ExtractAnswer {
    let Some(field) = &req.field else {
        return ExtractAnswer::default();
    };
    let mut wanted = terms(&field.name.replace('_', " "));
    if let Some(d) = &field.description {
        wanted.extend(terms(d));
    }
    let head = field.name.split('_').next().map(stem).unwrap_or_default();
    let currency_unit = field
        .unit
        .as_deref()
        .is_some_and(|u| u.contains("currency"));
    let mut best: Option<(u32, Extraction)> = None;
    for doc in &req.hits {
        let title = terms(&doc.title);
        for r in readings(&doc.text, field.value_type) {
            let fits = match field.value_type {
                ValueType::Ratio => (r.percent || r.value <= 1.0) && (0.0..=1.0).contains(&r.value),
                ValueType::Number => !r.percent,
                ValueType::Text => false,
            };
            if !fits
                || (currency_unit && !has_currency(&doc.text, &r, req.currency.as_deref()))
                || req
                    .taken
                    .iter()
                    .any(|(id, v)| *id == doc.id && (v - r.value).abs() <= 1e-9 * v.abs().max(1.0))
            {
                continue;
            }
            let mut context = terms(&r.quote);
            context.extend(title.iter().cloned());
            let overlap = wanted.intersection(&context).count() as u32;
            if overlap == 0 {
                continue;
            }
            let after: Vec<String> = words_after(&doc.text, &r).iter().map(|w| stem(w)).collect();
            let bonus = if after.contains(&head) {
                3
            } else if after.iter().any(|w| wanted.contains(w)) {
                1
            } else {
                0
            };
            let score = overlap * 2 + bonus;
            if best.as_ref().is_none_or(|(b, _)| score > *b) {
                best = Some((
                    score,
                    Extraction {
                        value: r.value,
                        quote: r.quote.clone(),
                        source_id: doc.id.clone(),
                    },
                ));
            }
        }
    }
    ExtractAnswer {
        found: best.map(|(_, e)| e),
    }
}
