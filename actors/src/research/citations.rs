//! Citation checking: every `[note-id]` in a brief must name a note the brief's evidence used,
//! and the note must support the sentence that cites it.
//!
//! A sentence citing anything else, or citing notes none of which supports it, is removed and
//! reported as a knowledge gap, so a model that invents a source — or cites a real note for a
//! claim the note does not make — cannot get an unsupported claim into the brief. "Supports" is
//! checked without a model: every figure the sentence states appears in the note, and at least
//! [`MIN_SHARED`] of the sentence's content words appear in the note's title or text.

use super::corpus::{has_prefix, Corpus};
use super::figures;
use super::notes::Note;
use super::text;
use crate::tools::bm25::tokenize;
use std::collections::HashSet;

/// Share of a claim's content words that the cited note must contain.
pub const MIN_SHARED: f64 = 0.5;

/// The ids cited in `text` as `[id]` (ids: letters, digits, `-`, `_`, `.`, `:`; not followed by
/// `(`, which would be a Markdown link).
pub fn cited_ids(text: &str) -> Vec<&str> {
    citations(text).map(|(_, id)| id).collect()
}

/// Each citation of `text`: the byte range of its `[id]` and the id ([`cited_ids`]' rule).
fn citations(text: &str) -> impl Iterator<Item = (std::ops::Range<usize>, &str)> {
    let bytes = text.as_bytes();
    let mut i = 0;
    std::iter::from_fn(move || loop {
        let open = i + text[i..].find('[')?;
        let start = open + 1;
        let len = text[start..].find(']')?;
        let id = &text[start..start + len];
        let after = start + len + 1;
        i = after.min(text.len());
        let link = bytes.get(after) == Some(&b'(');
        let valid = !id.is_empty()
            && id
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '_' | '.' | ':'));
        if valid && !link {
            return Some((open..after, id));
        }
    })
}

/// `text` with each of its citations replaced by a space: what a claim says, without its sources.
fn without_citations(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut from = 0;
    for (span, _) in citations(text) {
        out.push_str(&text[from..span.start]);
        out.push(' ');
        from = span.end;
    }
    out.push_str(&text[from..]);
    out
}

/// Whether `note` supports `claim`: the claim's figures are the note's, and at least half of its
/// content words (citations left out) are in the note.
pub fn supports(note: &Note, claim: &str) -> bool {
    NoteEvidence::of(note).supports(&Claim::of(claim))
}

/// What [`supports`] reads of a note (its title and text, and the figures they state): made once
/// per note of a corpus and kept with the note's preparation ([`enforce_supported`]), since every
/// brief that cites the note checks its sentences against it.
#[derive(Clone, Debug, Default)]
pub(crate) struct NoteEvidence {
    /// The words of title and text, lower-case, sorted, without repeats: a claim's word is looked
    /// up with a binary search ([`has_prefix`]) where it scanned the whole text.
    words: Vec<String>,
    values: Vec<f64>,
}

impl NoteEvidence {
    fn of(note: &Note) -> Self {
        let text = format!("{} {}", note.title, note.text);
        let values = figures::extract(&text).iter().map(|f| f.value).collect();
        let mut words = tokenize(&text);
        words.sort_unstable();
        words.dedup();
        Self { words, values }
    }

    /// Whether this note supports `claim`: each of its figures is one of the note's (within
    /// 0.5 %), and at least [`MIN_SHARED`] of its content words start a word of the note.
    fn supports(&self, claim: &Claim) -> bool {
        let figures_ok = claim.values.iter().all(|f| {
            self.values
                .iter()
                .any(|v| (v - f).abs() <= f.abs() * 0.005 + 1e-9)
        });
        if claim.stems.is_empty() {
            return figures_ok;
        }
        let shared = claim
            .stems
            .iter()
            .filter(|w| has_prefix(&self.words, w))
            .count();
        figures_ok && shared as f64 >= MIN_SHARED * claim.stems.len() as f64
    }
}

/// What [`NoteEvidence::supports`] reads of a claim, worked out once however many notes it cites:
/// its figures and the stems of its content words (numbers aside), citations left out.
struct Claim {
    values: Vec<f64>,
    stems: Vec<String>,
}

impl Claim {
    fn of(claim: &str) -> Self {
        let bare = without_citations(claim);
        let values = figures::extract(&bare).iter().map(|f| f.value).collect();
        let stems = text::content_terms(&bare)
            .into_iter()
            .filter(|w| !w.chars().all(|c| c.is_ascii_digit()))
            .map(|w| text::stem(&w).to_string())
            .collect();
        Claim { values, stems }
    }
}

/// Removes every sentence of `text` that cites an id outside `allowed`; returns the cleaned text
/// and one gap per removed sentence.
pub fn enforce(text: &str, allowed: &HashSet<String>) -> (String, Vec<String>) {
    enforce_with(text, &|id| allowed.contains(id), None)
}

/// Like [`enforce`] for the notes of `corpus` whose ids are in `allowed`, and also removes a
/// sentence when none of the notes it cites supports it ([`supports`]). The brief's source list
/// (lines `- [id] title` under `## Sources`) is kept. What a note offers as evidence is worked out
/// once per note of the corpus, for every brief that cites it.
pub fn enforce_supported(
    text: &str,
    allowed: &HashSet<&str>,
    corpus: &Corpus,
) -> (String, Vec<String>) {
    let citable = |id: &str| allowed.contains(id).then(|| corpus.position(id)).flatten();
    enforce_with(
        text,
        &|id| citable(id).is_some(),
        Some(&|id| citable(id).map(|i| evidence_of(corpus, i))),
    )
}

/// Like [`enforce_supported`], where the brief may also cite `extra` notes (a tool server's
/// results, read as notes: `ToolCall::as_note`), checked the same way. A corpus note wins over an
/// extra one of the same id.
pub fn enforce_supported_with(
    text: &str,
    allowed: &HashSet<&str>,
    corpus: &Corpus,
    extra: &[Note],
) -> (String, Vec<String>) {
    if extra.is_empty() {
        return enforce_supported(text, allowed, corpus);
    }
    let extra: Vec<(&str, NoteEvidence)> = extra
        .iter()
        .map(|n| (&*n.id, NoteEvidence::of(n)))
        .collect();
    let citable = |id: &str| allowed.contains(id).then(|| corpus.position(id)).flatten();
    let extra_of = |id: &str| {
        allowed
            .contains(id)
            .then(|| extra.iter().find(|(x, _)| *x == id).map(|(_, e)| e))
            .flatten()
    };
    enforce_with(
        text,
        &|id| citable(id).is_some() || extra_of(id).is_some(),
        Some(&|id| match citable(id) {
            Some(i) => Some(evidence_of(corpus, i)),
            None => extra_of(id),
        }),
    )
}

/// The evidence note `i` of `corpus` offers, made on first use.
fn evidence_of(corpus: &Corpus, i: usize) -> &NoteEvidence {
    corpus
        .prepared(i)
        .citation_evidence
        .get_or_init(|| NoteEvidence::of(&corpus.notes()[i]))
}

/// A cited note's evidence, by id (`None`: not citable).
type EvidenceOf<'a> = dyn Fn(&str) -> Option<&'a NoteEvidence> + 'a;

fn enforce_with(
    text: &str,
    allowed: &dyn Fn(&str) -> bool,
    evidence: Option<&EvidenceOf<'_>>,
) -> (String, Vec<String>) {
    let mut gaps = Vec::new();
    // The kept lines, joined by newlines as they are written: `sep` goes before each one.
    let mut out = String::with_capacity(text.len());
    let mut sep = "";
    let mut in_sources = false;
    for line in text.lines() {
        if let Some(h) = line.strip_prefix("## ") {
            in_sources = h.trim().eq_ignore_ascii_case("sources");
        }
        if in_sources || citations(line).next().is_none() {
            out.push_str(std::mem::replace(&mut sep, "\n"));
            out.push_str(line);
            continue;
        }
        let kept: Vec<&str> = super::text::sentences(line)
            .into_iter()
            .filter(|sentence| {
                let cited = cited_ids(sentence);
                let unknown: Vec<&str> = cited.iter().copied().filter(|id| !allowed(id)).collect();
                if !unknown.is_empty() {
                    gaps.push(format!(
                        "unsupported claim removed from the brief (cites unknown source {}): {}",
                        unknown.join(", "),
                        sentence
                    ));
                    return false;
                }
                let Some(evidence) = evidence else {
                    return true;
                };
                if cited.is_empty() {
                    return true;
                }
                let claim = Claim::of(sentence);
                if cited
                    .iter()
                    .any(|id| evidence(id).is_some_and(|e| e.supports(&claim)))
                {
                    return true;
                }
                gaps.push(format!(
                    "unsupported claim removed from the brief ({} does not support it): {}",
                    cited.join(", "),
                    sentence
                ));
                false
            })
            .collect();
        if !kept.is_empty() {
            out.push_str(std::mem::replace(&mut sep, "\n"));
            for (i, sentence) in kept.iter().enumerate() {
                if i > 0 {
                    out.push(' ');
                }
                out.push_str(sentence);
            }
        }
    }
    if text.ends_with('\n') {
        out.push('\n');
    }
    (out, gaps)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// A claim's word is in a note's evidence exactly when `text::has_word_prefix` finds it
        /// in the note's title and text (mixed case, punctuation, stems, prefixes).
        #[test]
        fn evidence_words_answer_as_the_text_scan(
            title in "(Heat|pump|costs|Risk|io)( (Heat|pump|costs|Risk|io)){0,3}",
            text in "((Heat|pumps|cost|risks|latency|the|Über|io|a)[,.;]? ){0,12}",
            word in "(heat|pump|pumps|cost|costs|risk|risks|latency|über|io|the|x)",
        ) {
            let note = Note { id: "n".into(), title: title.as_str().into(), text: text.as_str().into(), tags: [].into() };
            let evidence = NoteEvidence::of(&note);
            prop_assert_eq!(
                has_prefix(&evidence.words, text::stem(&word)),
                text::has_word_prefix(&format!("{title} {text}"), &word)
            );
        }
    }

    #[test]
    fn finds_citations_but_not_links() {
        assert_eq!(
            cited_ids("A [rag-01]. B [x y] and [link](http://e) [n_2]."),
            vec!["rag-01", "n_2"]
        );
    }

    #[test]
    fn a_claim_without_its_citations_keeps_links_and_bracketed_words() {
        assert_eq!(
            without_citations("Costs fell [c-1][c-2], see [docs](http://e) [x y] [c-1]."),
            "Costs fell   , see [docs](http://e) [x y]  ."
        );
        assert_eq!(without_citations("No sources."), "No sources.");
        assert_eq!(without_citations("Open [a"), "Open [a");
    }

    #[test]
    fn a_claim_its_note_does_not_support_is_removed() {
        let note = Note {
            id: "c".into(),
            title: "Cost per resolved conversation".into(),
            text: "The cost per resolved conversation fell from 4.10 EUR to 0.90 EUR.".into(),
            tags: [].into(),
        };
        let corpus = Corpus::new(vec![note]);
        let brief = "The cost per resolved conversation fell to 0.90 EUR [c]. \
                     Costs fell to 0.50 EUR per conversation [c]. \
                     Agents were happier with shorter shifts [c].\n\n## Sources\n\n- [c] Cost\n";
        let (text, gaps) = enforce_supported(brief, &["c"].into(), &corpus);
        assert!(
            text.starts_with("The cost per resolved conversation fell to 0.90 EUR [c].\n"),
            "{text}"
        );
        assert!(text.contains("- [c] Cost"), "{text}");
        assert_eq!(gaps.len(), 2, "{gaps:?}");
        assert!(gaps[0].contains("0.50 EUR"), "{gaps:?}");
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
