//! What the searches and `compare` share: how many notes a search returns, how query terms are
//! weighed, and which sentence of a note best shows them.

use crate::research::corpus::Corpus;
use crate::research::text;

/// Default number of notes a search returns.
pub const DEFAULT_LIMIT: u32 = 3;

/// Each term with a weight that grows with its rarity among the notes (`1 + ln(N / df)`), so a
/// sentence naming the rare section term beats one naming only the common topic words.
pub fn weigh_terms(terms: &[String], corpus: &Corpus) -> Vec<(String, f64)> {
    let n = corpus.notes().len().max(1) as f64;
    terms
        .iter()
        .map(|t| {
            let df = corpus.document_frequency(t).max(1) as f64;
            (t.clone(), 1.0 + (n / df).ln())
        })
        .collect()
}

/// The sentence of `text` with the largest total weight of the terms it mentions (the first on
/// a tie).
pub fn best_sentence(text_: &str, terms: &[(String, f64)]) -> String {
    let mut best: Option<(f64, &str)> = None;
    for s in text::sentences(text_) {
        let score: f64 = terms
            .iter()
            .filter(|(t, _)| text::has_word_prefix(s, t))
            .map(|(_, w)| w)
            .sum();
        if best.as_ref().is_none_or(|(b, _)| score > *b) {
            best = Some((score, s));
        }
    }
    best.map(|(_, s)| s.to_string()).unwrap_or_default()
}
