//! The offline decomposer: proposes `base × share × per-unit` from what the corpus says about a
//! field, the common shape of a count that is rarely published directly ("offices of companies with
//! more than 20 employees" = companies × share with more than 20 employees × offices per company).
//!
//! In the hits for the field's description it looks for a *base* count (a number followed by a
//! noun other than the field's own), a *share* (a percentage in a sentence that mentions the
//! description's qualifier, the description's terms other than the field's noun), and a *per-unit*
//! rate (a number followed by the field's noun). It needs the base and one of the other two. Each
//! component's description is the sentence it was seen in, so searching for it finds it again.

use super::offline_extract::{stem, terms, words_after};
use super::DecomposeRequest;
use crate::field::numbers::readings;
use crate::field::schema::{Decomposition, ValueType};
use std::collections::BTreeMap;

fn identifier(word: &str) -> String {
    let mut s: String = word
        .to_lowercase()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    if !s.starts_with(|c: char| c.is_ascii_alphabetic()) {
        s.insert_str(0, "c_");
    }
    s
}

fn unique(name: String, taken: &[String]) -> String {
    let mut n = name.clone();
    let mut i = 2;
    while taken.contains(&n) {
        n = format!("{name}_{i}");
        i += 1;
    }
    n
}

/// True when the word after the number at `offset` is a currency code (`310 USD`): a price, not
/// a count.
fn has_uppercase_code(text: &str, offset: usize) -> bool {
    text[offset..]
        .split_whitespace()
        .nth(1)
        .map(|w| w.trim_matches(|c: char| !c.is_alphanumeric()))
        .is_some_and(|w| w.len() == 3 && w.chars().all(|c| c.is_ascii_uppercase()))
}

/// The offline decomposition, or why none was found.
pub fn decompose(req: &DecomposeRequest) -> Result<Decomposition, String> {
    let field = req
        .field
        .as_ref()
        .ok_or_else(|| "the request names no field".to_string())?;
    let noun = stem(field.name.split('_').next().unwrap_or(&field.name));
    let qualifier: Vec<String> = field
        .description
        .as_deref()
        .map(terms)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| *t != noun)
        .collect();
    let mut base = None;
    let mut share = None;
    let mut per_unit = None;
    for doc in &req.hits {
        for r in readings(&doc.text, ValueType::Ratio) {
            let next = words_after(&doc.text, &r);
            let word = next.first().cloned().unwrap_or_default();
            let first = stem(&word);
            let sentence = terms(&r.quote);
            if r.percent {
                if share.is_none() && qualifier.iter().any(|q| sentence.contains(q)) {
                    share = Some(r.quote.clone());
                }
            } else if first == noun {
                per_unit.get_or_insert(r.quote.clone());
            } else if base.is_none()
                && first.len() > 2
                && first.chars().all(|c| c.is_alphabetic())
                && !qualifier.contains(&first)
                && !has_uppercase_code(&doc.text, r.offset)
            {
                base = Some((word, r.quote.clone()));
            }
        }
    }
    let (base_noun, base_quote) =
        base.ok_or_else(|| format!("no base count for `{}` in the corpus", field.name))?;
    if share.is_none() && per_unit.is_none() {
        return Err(format!(
            "no share or per-unit rate for `{}` in the corpus",
            field.name
        ));
    }
    let mut taken: Vec<String> = req.existing.clone();
    taken.push(field.name.clone());
    let base_name = unique(identifier(&base_noun), &taken);
    taken.push(base_name.clone());
    let mut components = vec![base_name.clone()];
    let mut descriptions = BTreeMap::from([(base_name.clone(), base_quote)]);
    let mut types = BTreeMap::new();
    if let Some(q) = share {
        let n = unique(format!("{base_name}_share"), &taken);
        taken.push(n.clone());
        descriptions.insert(n.clone(), q);
        types.insert(n.clone(), ValueType::Ratio);
        components.push(n);
    }
    if let Some(q) = per_unit {
        let n = unique(
            identifier(&format!("{}_per_{}", field.name, stem(&base_noun))),
            &taken,
        );
        descriptions.insert(n.clone(), q);
        components.push(n);
    }
    Ok(Decomposition {
        field: field.name.clone(),
        formula: components.join(" * "),
        components,
        descriptions,
        types,
    })
}
