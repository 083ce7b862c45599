//! A corpus of notes prepared once for searching: each note's words, sentences and tags already
//! tokenised, a sorted word list per note for "does it mention this term" by binary search, and
//! the BM25 index.
//!
//! Tokenising every note again for every term a search checks, and rebuilding the BM25 index for
//! every call, would be a quarter of a research conversation's CPU. A [`Corpus`] is built
//! once per note set: once per process for the bundled corpus, once per loaded thread for a
//! caller's notes (see `note_set`).

use super::notes::Note;
use super::text;
use crate::tools::bm25::{tokenize, Bm25Index};
use std::any::Any;
use std::sync::Arc;

/// A sentence of a note with its words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sentence {
    /// The sentence, verbatim.
    pub text: String,
    /// Its lower-case words, sorted, without repeats (see [`has_prefix`]).
    pub words: Vec<String>,
    /// The two-letter beginnings of its words, to rule most prefixes out before searching them.
    pub beginnings: Beginnings,
}

/// A set of the first two bytes of words, hashed into 128 bits: a word starts with a prefix of
/// two bytes or more only if it begins with the prefix's first two, so a prefix whose bit is
/// clear is in none of the words. The aspect search asks each sentence about every word of its
/// aspect, its siblings' and its query's; most are in no word of the sentence, and each binary
/// search for one compared strings (`memcmp` was ~5 % of a research load's samples).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Beginnings(u128);

impl Beginnings {
    /// Rules nothing out (for word lists too short to be worth it).
    pub const ANY: Beginnings = Beginnings(u128::MAX);

    /// The beginnings of `words`.
    pub fn of(words: &[String]) -> Self {
        Beginnings(words.iter().fold(0, |m, w| m | Self::bit(w.as_bytes())))
    }

    fn bit(word: &[u8]) -> u128 {
        match word {
            [a, b, ..] => 1 << ((u32::from(*a) * 31 + u32::from(*b)) % 128),
            // A one-byte word starts with no prefix of two bytes.
            _ => 0,
        }
    }

    /// False only if no word of the set can start with `prefix`.
    pub fn may_start(self, prefix: &str) -> bool {
        prefix.len() < 2 || self.0 & Self::bit(prefix.as_bytes()) != 0
    }
}

/// [`has_prefix`] that asks the binary search only when `beginnings` (of `sorted`) allow it.
pub fn has_prefix_in(sorted: &[String], beginnings: Beginnings, prefix: &str) -> bool {
    beginnings.may_start(prefix) && has_prefix(sorted, prefix)
}

/// Whether a word of `sorted` (sorted, as [`Sentence::words`]) starts with `prefix`: a binary
/// search, where scanning every word for every term and aspect word was the search tool's
/// largest cost.
pub fn has_prefix(sorted: &[String], prefix: &str) -> bool {
    let i = sorted.partition_point(|w| w.as_str() < prefix);
    sorted.get(i).is_some_and(|w| w.starts_with(prefix))
}

fn sorted_words(mut words: Vec<String>) -> Vec<String> {
    words.sort();
    words.dedup();
    words
}

/// One note, prepared.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Prepared {
    /// The title's words, sorted, without repeats.
    pub title: Vec<String>,
    /// Each tag's words, sorted, without repeats.
    pub tags: Vec<Vec<String>>,
    /// The text's sentences.
    pub sentences: Vec<Sentence>,
    /// Every word of title, text and tags, sorted, without repeats.
    vocabulary: Vec<String>,
    /// Per sentence, which of the lexicon's aspects it names (bit `i`: the `i`-th aspect), worked
    /// out on the first aspect search that reads it (`tools::aspect`).
    pub(crate) lexicon_aspects: Derived<Vec<u64>>,
    /// Per sentence, the figures it states ([`figures::extract`](super::figures::extract)),
    /// worked out on first use (`compare` reads them for every dimension a note names).
    sentence_figures: Derived<Vec<Vec<super::figures::Figure>>>,
    /// What the note offers a claim citing it (`citations`), worked out on first use: every
    /// brief that cites the note checks its sentences against it.
    pub(crate) citation_evidence: Derived<super::citations::NoteEvidence>,
}

/// A value worked out from the rest of a [`Prepared`] when first needed: not part of what the
/// note is, so two preparations of one note are equal whether or not either has it yet.
#[derive(Clone, Debug, Default)]
pub(crate) struct Derived<T>(std::sync::OnceLock<T>);

impl<T> Derived<T> {
    /// The value, made by `make` the first time.
    pub(crate) fn get_or_init(&self, make: impl FnOnce() -> T) -> &T {
        self.0.get_or_init(make)
    }
}

impl<T> PartialEq for Derived<T> {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl<T> Eq for Derived<T> {}

impl Prepared {
    fn new(note: &Note) -> Self {
        let title = sorted_words(tokenize(&note.title));
        let tags: Vec<Vec<String>> = note
            .tags
            .iter()
            .map(|t| sorted_words(tokenize(t)))
            .collect();
        let sentences: Vec<Sentence> = text::sentences(&note.text)
            .into_iter()
            .map(|s| {
                let words = sorted_words(tokenize(s));
                Sentence {
                    beginnings: Beginnings::of(&words),
                    words,
                    text: s.to_string(),
                }
            })
            .collect();
        let mut vocabulary: Vec<String> = title
            .iter()
            .chain(tags.iter().flatten())
            .chain(sentences.iter().flat_map(|s| s.words.iter()))
            .cloned()
            .collect();
        vocabulary.sort();
        vocabulary.dedup();
        Self {
            title,
            tags,
            sentences,
            vocabulary,
            lexicon_aspects: Derived::default(),
            sentence_figures: Derived::default(),
            citation_evidence: Derived::default(),
        }
    }

    /// The figures each sentence states, in sentence order (each `figures::extract` of the
    /// sentence's text).
    pub fn sentence_figures(&self) -> &[Vec<super::figures::Figure>] {
        self.sentence_figures.get_or_init(|| {
            self.sentences
                .iter()
                .map(|s| super::figures::extract(&s.text))
                .collect()
        })
    }

    /// Whether some word of the note starts with the stem of `word` (as `text::has_word_prefix`).
    pub fn has_word(&self, word: &str) -> bool {
        has_prefix(&self.vocabulary, text::stem(word))
    }

    /// Whether the note mentions `term` (as `Note::mentions`: `|` alternatives, every content word
    /// of an alternative, by stem).
    pub fn mentions(&self, term: &str) -> bool {
        self.mentions_term(&Term::new(term))
    }

    /// [`Prepared::mentions`] for a term split once ([`Term::new`]), for loops over many notes.
    pub fn mentions_term(&self, term: &Term) -> bool {
        // The vocabulary holds every word of title, text and tags: `has_word`'s lookup.
        term.named_in(&[&self.vocabulary])
    }
}

/// A search term split into its `|` alternatives' words, once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Term {
    alternatives: Vec<Vec<String>>,
}

impl Term {
    /// Splits `term` as `Note::mentions` does.
    pub fn new(term: &str) -> Self {
        Self {
            alternatives: term
                .to_lowercase()
                .split('|')
                .map(|alt| {
                    let words = text::content_terms(alt);
                    if words.is_empty() {
                        tokenize(alt)
                    } else {
                        words
                    }
                })
                .collect(),
        }
    }
}

impl Term {
    /// A term of these alternatives, each a list of words already split (as [`Term::new`] splits
    /// them); an empty alternative names nothing.
    pub(crate) fn from_alternatives(alternatives: Vec<Vec<String>>) -> Self {
        Self { alternatives }
    }

    /// Whether the words of `fields` (each sorted, as [`Sentence::words`] and
    /// [`Prepared::title`]) mention the term as [`text::mentions_term`] would mention it in those
    /// fields' text: an alternative's every word starts some word of some field, by stem.
    pub fn named_in(&self, fields: &[&[String]]) -> bool {
        self.alternatives.iter().any(|words| {
            !words.is_empty()
                && words.iter().all(|w| {
                    let stem = text::stem(w);
                    fields.iter().any(|f| has_prefix(f, stem))
                })
        })
    }
}

/// Notes prepared for searching.
#[derive(Debug)]
pub struct Corpus {
    notes: Vec<Note>,
    prepared: Vec<Prepared>,
    bm25: Bm25Index,
    /// [`Corpus::remembered_view`]: what was worked out about the corpus, by the answer's type and
    /// its key, as asked (at most [`VIEWS_MEMO`] of each type).
    views: std::sync::Mutex<ViewsMemo>,
    /// Every word of the notes with the notes holding it, built on the first
    /// [`Corpus::mentioning`].
    words: std::sync::OnceLock<WordIndex>,
}

/// The notes' words, sorted, each with the set of notes that hold it: which notes mention a
/// term is then a binary search per word instead of one per word and note.
#[derive(Debug)]
struct WordIndex {
    words: Vec<String>,
    holders: Vec<Notes>,
}

/// A set of notes, by their place in the corpus.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Notes(Vec<u64>);

impl Notes {
    /// No note of a corpus of `len` notes.
    pub(crate) fn none(len: usize) -> Self {
        Self(vec![0; len.div_ceil(64)])
    }

    fn all(len: usize) -> Self {
        let mut s = Self::none(len);
        for i in 0..len {
            s.insert(i);
        }
        s
    }

    fn insert(&mut self, i: usize) {
        self.0[i / 64] |= 1 << (i % 64);
    }

    /// Whether note `i` is in the set.
    pub fn contains(&self, i: usize) -> bool {
        self.0.get(i / 64).is_some_and(|b| b >> (i % 64) & 1 == 1)
    }

    /// Adds the notes of `other`.
    pub fn union_with(&mut self, other: &Notes) {
        self.0.iter_mut().zip(&other.0).for_each(|(a, b)| *a |= b);
    }

    fn intersect_with(&mut self, other: &Notes) {
        self.0.iter_mut().zip(&other.0).for_each(|(a, b)| *a &= b);
    }

    /// How many notes.
    pub fn len(&self) -> usize {
        self.0.iter().map(|b| b.count_ones() as usize).sum()
    }

    /// Whether there is none.
    pub fn is_empty(&self) -> bool {
        self.0.iter().all(|b| *b == 0)
    }
}

impl WordIndex {
    fn new(prepared: &[Prepared]) -> Self {
        let mut by_word: std::collections::BTreeMap<&str, Notes> = Default::default();
        for (i, p) in prepared.iter().enumerate() {
            for w in &p.vocabulary {
                by_word
                    .entry(w.as_str())
                    .or_insert_with(|| Notes::none(prepared.len()))
                    .insert(i);
            }
        }
        let (words, holders) = by_word.into_iter().map(|(w, n)| (w.to_string(), n)).unzip();
        Self { words, holders }
    }

    /// The notes holding a word that starts with `word`'s stem ([`Prepared::has_word`]).
    fn with_word(&self, word: &str, len: usize) -> Notes {
        let prefix = text::stem(word);
        let from = self.words.partition_point(|w| w.as_str() < prefix);
        let mut out = Notes::none(len);
        for (w, holders) in self.words[from..].iter().zip(&self.holders[from..]) {
            if !w.starts_with(prefix) {
                break;
            }
            out.union_with(holders);
        }
        out
    }
}

/// Most answers of one type a corpus remembers.
const VIEWS_MEMO: usize = 4096;

/// Views of the corpus worked out, by their type and then their key ([`Corpus::remembered_view`]).
/// A fast hash: the keys are the planner's own terms and aspects, looked up several times per
/// search step.
type ViewsMemo = std::collections::HashMap<
    std::any::TypeId,
    std::collections::HashMap<String, Arc<dyn Any + Send + Sync>, foldhash::fast::RandomState>,
    foldhash::fast::RandomState,
>;

impl PartialEq for Corpus {
    fn eq(&self, other: &Self) -> bool {
        self.notes == other.notes
    }
}

impl Eq for Corpus {}

impl Corpus {
    /// Prepares `notes`.
    pub fn new(notes: Vec<Note>) -> Self {
        let prepared = notes.iter().map(Prepared::new).collect();
        let bodies: Vec<String> = notes.iter().map(Note::searchable).collect();
        let bm25 = Bm25Index::build(
            notes
                .iter()
                .zip(&bodies)
                .map(|(n, b)| (&*n.title, b.as_str())),
        );
        Self {
            notes,
            prepared,
            bm25,
            views: Default::default(),
            words: Default::default(),
        }
    }

    /// The notes, in order.
    pub fn notes(&self) -> &[Note] {
        &self.notes
    }

    /// The prepared form of note `i`.
    pub fn prepared(&self, i: usize) -> &Prepared {
        &self.prepared[i]
    }

    /// Notes with their prepared forms.
    pub fn iter(&self) -> impl Iterator<Item = (&Note, &Prepared)> {
        self.notes.iter().zip(&self.prepared)
    }

    /// The BM25 index over title, text and tags.
    pub fn bm25(&self) -> &Bm25Index {
        &self.bm25
    }

    /// The index of the note with id `id`.
    pub fn position(&self, id: &str) -> Option<usize> {
        self.notes.iter().position(|n| *n.id == *id)
    }

    /// The notes that mention `term` (exactly those whose [`Prepared::mentions_term`] holds).
    pub fn mentioning(&self, term: &Term) -> Notes {
        let len = self.notes.len();
        let index = self.words.get_or_init(|| WordIndex::new(&self.prepared));
        let mut out = Notes::none(len);
        for words in term.alternatives.iter().filter(|w| !w.is_empty()) {
            let mut all = Notes::all(len);
            for w in words {
                all.intersect_with(&index.with_word(w, len));
            }
            out.union_with(&all);
        }
        out
    }

    /// The notes that mention the term written `term` ([`Term::new`]), remembered by its text: a
    /// corpus does not change, so neither does the answer. Every search step weighs its query's
    /// terms by rarity and filters by its topic terms, and the same terms come back step after
    /// step (splitting a term and looking its words up was ~2.5 % of a research load's
    /// instructions).
    pub fn mentioning_text(&self, term: &str) -> Arc<Notes> {
        self.remembered_view(term, || self.mentioning(&Term::new(term)))
    }

    /// What was worked out about this corpus as a `T` for `key` (`make`, run only when it is not
    /// remembered): the notes mentioning a term ([`Corpus::mentioning_text`]), and the aspect
    /// search's view of an aspect (which notes name it and how strongly each title, tag and
    /// sentence does), since every search step of every conversation on the corpus asks them
    /// again of the same terms and aspects. `key` must decide the answer among those of type `T`;
    /// answers of different types under one key are kept apart.
    pub(crate) fn remembered_view<T: Any + Send + Sync>(
        &self,
        key: &str,
        make: impl FnOnce() -> T,
    ) -> Arc<T> {
        let lock = || self.views.lock().unwrap_or_else(|p| p.into_inner());
        let kind = std::any::TypeId::of::<T>();
        let found = lock()
            .get(&kind)
            .and_then(|of_kind| of_kind.get(key).cloned());
        if let Some(view) = found.and_then(|v| v.downcast::<T>().ok()) {
            return view;
        }
        let view = Arc::new(make());
        let mut memo = lock();
        let of_kind = memo.entry(kind).or_default();
        if of_kind.len() < VIEWS_MEMO {
            of_kind.insert(key.to_string(), view.clone());
        }
        view
    }

    /// How many notes mention `term`.
    pub fn document_frequency(&self, term: &str) -> usize {
        self.mentioning_text(term).len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        /// The beginnings never rule out a prefix some word starts with.
        #[test]
        fn beginnings_rule_out_only_prefixes_no_word_has(
            words in proptest::collection::vec("[a-e]{1,5}", 0..12),
            prefix in "[a-e]{0,3}",
        ) {
            let sorted = sorted_words(words);
            let b = Beginnings::of(&sorted);
            prop_assert_eq!(has_prefix_in(&sorted, b, &prefix), has_prefix(&sorted, &prefix));
            prop_assert_eq!(has_prefix_in(&sorted, Beginnings::ANY, &prefix), has_prefix(&sorted, &prefix));
        }
    }

    fn note(title: &str, text: &str, tags: &[&str]) -> Note {
        Note {
            id: "n".into(),
            title: title.into(),
            text: text.into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
        }
    }

    #[test]
    fn mentions_agrees_with_the_notes_own_check() {
        let n = note(
            "Risks",
            "Hallucinated answers are costly. Response time rose.",
            &["customer-support"],
        );
        let p = Prepared::new(&n);
        for term in [
            "risk",
            "cost",
            "support",
            "price",
            "response time",
            "staffing|answers",
            "rose",
        ] {
            assert_eq!(p.mentions(term), n.mentions(term), "{term}");
        }
    }

    #[test]
    fn each_sentences_figures_are_what_extract_finds_in_it() {
        let n = note(
            "Costs",
            "Hosting costs 4.10 EUR per month. Latency fell to 35 ms. No figure here.",
            &[],
        );
        let p = Prepared::new(&n);
        let figures = p.sentence_figures();
        assert_eq!(figures.len(), p.sentences.len());
        for (s, f) in p.sentences.iter().zip(figures) {
            assert_eq!(f, &super::super::figures::extract(&s.text), "{}", s.text);
        }
        assert_eq!(figures[0][0].unit, "EUR per month");
        assert!(figures[2].is_empty());
    }

    proptest! {
        #[test]
        fn mentions_matches_note_mentions_on_any_words(
            words in proptest::collection::vec("[a-z]{1,8}", 1..12),
            term in "[a-z]{1,8}( [a-z]{1,8})?",
        ) {
            let n = note(&words[0], &words.join(" "), &[]);
            prop_assert_eq!(Prepared::new(&n).mentions(&term), n.mentions(&term));
        }

        /// A term named in a sentence's or the title's and tags' prepared words is exactly a
        /// term `text::mentions_term` finds in their text (mixed case, punctuation, `|`
        /// alternatives, stems and prefixes).
        #[test]
        fn named_in_matches_mentions_term_on_text(
            sentence in proptest::collection::vec("(Cost|costs|price|Pric|risk|risks|latency|heat|pump|pumps|a|io|the|of)[,.;]?", 0..10),
            title in proptest::collection::vec("(Cost|risk|heat|pump|latency|of)", 0..4),
            tags in proptest::collection::vec("(cost|risks|pump-heat|io)", 0..3),
            term in "(cost|costs|price|Risk|latency|heat pump|pumps|io|the)(\\|(cost|risk|heat of))?",
        ) {
            let text = format!("{}.", sentence.join(" "));
            let n = Note { tags: tags.clone().into(), ..note(&title.join(" "), &text, &[]) };
            let p = Prepared::new(&n);
            let split = Term::new(&term);
            for s in &p.sentences {
                prop_assert_eq!(
                    split.named_in(&[&s.words]),
                    text::mentions_term(std::iter::once(s.text.as_str()), &term),
                    "{:?}", s.text
                );
            }
            let fields: Vec<&[String]> = std::iter::once(p.title.as_slice())
                .chain(p.tags.iter().map(Vec::as_slice))
                .collect();
            prop_assert_eq!(
                split.named_in(&fields),
                text::mentions_term(
                    n.tags.iter().map(String::as_str).chain(std::iter::once(&*n.title)),
                    &term
                )
            );
        }

        /// The corpus's word index finds exactly the notes each note's own check finds (words
        /// from a small vocabulary, so notes share them and stems and prefixes meet).
        #[test]
        fn mentioning_is_each_notes_own_check(
            notes in proptest::collection::vec(
                proptest::collection::vec("(cost|costs|price|pric|risk|risks|latency|heat|pump|pumps|a|io)", 0..8),
                0..70,
            ),
            term in "(cost|costs|price|risk|latency|heat pump|pumps|io)(\\|(cost|risk|heat))?",
        ) {
            let corpus = Corpus::new(
                notes
                    .iter()
                    .enumerate()
                    .map(|(i, words)| {
                        let mut n = note(&format!("t{i}"), &words.join(" "), &[]);
                        n.id = format!("n{i}").into();
                        n
                    })
                    .collect(),
            );
            let split = Term::new(&term);
            let found = corpus.mentioning(&split);
            for (i, (_, p)) in corpus.iter().enumerate() {
                prop_assert_eq!(found.contains(i), p.mentions_term(&split), "note {}", i);
            }
            prop_assert_eq!(
                found.len(),
                corpus.iter().filter(|(_, p)| p.mentions_term(&split)).count()
            );
            // Asked by its text, the answer is the same the first time and when remembered.
            prop_assert_eq!(&*corpus.mentioning_text(&term), &found);
            prop_assert_eq!(&*corpus.mentioning_text(&term), &found);
            prop_assert_eq!(corpus.document_frequency(&term), found.len());
        }
    }
}
