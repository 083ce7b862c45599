//! Citation checking: every `[note-id]` in a brief must name a note the brief's evidence used.
//!
//! A sentence citing anything else is removed and reported as a knowledge gap, so a model that
//! invents a source cannot get an unsupported claim into the brief.

use std::collections::HashSet;

/// The ids cited in `text` as `[id]` (ids: letters, digits, `-`, `_`, `.`, `:`; not followed by
/// `(`, which would be a Markdown link).
pub fn cited_ids(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let bytes = text.as_bytes();
    let mut i = 0;
    while let Some(open) = text[i..].find('[') {
        let start = i + open + 1;
        let Some(len) = text[start..].find(']') else {
            break;
        };
        let id = &text[start..start + len];
        let after = start + len + 1;
        let link = bytes.get(after) == Some(&b'(');
        let valid = !id.is_empty()
            && id
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
        if valid && !link {
            out.push(id.to_string());
        }
        i = after.min(text.len());
    }
    out
}

/// Removes every sentence of `text` that cites an id outside `allowed`; returns the cleaned text
/// and one gap per removed sentence.
pub fn enforce(text: &str, allowed: &HashSet<String>) -> (String, Vec<String>) {
    let mut gaps = Vec::new();
    let mut lines = Vec::new();
    for line in text.lines() {
        let bad: Vec<String> = cited_ids(line)
            .into_iter()
            .filter(|id| !allowed.contains(id))
            .collect();
        if bad.is_empty() {
            lines.push(line.to_string());
            continue;
        }
        let kept: Vec<String> = super::text::sentences(line)
            .into_iter()
            .filter(|sentence| {
                let unknown: Vec<String> = cited_ids(sentence)
                    .into_iter()
                    .filter(|id| !allowed.contains(id))
                    .collect();
                if unknown.is_empty() {
                    return true;
                }
                gaps.push(format!(
                    "unsupported claim removed from the brief (cites unknown source {}): {}",
                    unknown.join(", "),
                    sentence
                ));
                false
            })
            .collect();
        if !kept.is_empty() {
            lines.push(kept.join(" "));
        }
    }
    let mut out = lines.join("\n");
    if text.ends_with('\n') {
        out.push('\n');
    }
    (out, gaps)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_citations_but_not_links() {
        assert_eq!(
            cited_ids("A [rag-01]. B [x y] and [link](http://e) [n_2]."),
            vec!["rag-01", "n_2"]
        );
    }

    #[test]
    fn removes_sentences_citing_unknown_notes() {
        let allowed: HashSet<String> = ["a".to_string()].into();
        let (text, gaps) = enforce("Good [a]. Made up [zz]. Fine.\nAlso [a].\n", &allowed);
        assert_eq!(text, "Good [a]. Fine.\nAlso [a].\n");
        assert_eq!(gaps.len(), 1);
        assert!(gaps[0].contains("zz"), "{gaps:?}");
    }
}
