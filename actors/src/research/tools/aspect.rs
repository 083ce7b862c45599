//! Aspect-aware ranking for `search` steps that serve a section of the brief.
//!
//! With the goal's words plus the aspect as a step's query, the goal's words (present in every
//! note of the corpus) would swamp the aspect and one general note would turn up under every
//! section. Here the aspect decides and the goal only breaks ties:
//!
//! - **Aspect filter.** A note qualifies only if its title, its tags or one of its sentences names
//!   the aspect (any `|` alternative, by word stem; the lexicon's related words count half).
//! - **Titles weighted.** A title naming the aspect counts as much as three sentences doing so.
//! - **What a note adds.** A sentence that names several aspects at once (the plan's other
//!   aspects, or any the lexicon knows) counts for this one only by its share, so an overview note
//!   that mentions every aspect in passing ranks below notes about this aspect, and a note that
//!   serves a sibling aspect competes only with what it says about this one. A sentence that
//!   states a figure counts more than one that only names the aspect.
//! - **On the goal's topic.** In a tagged corpus, a note must carry a tag that at least half of
//!   the notes mentioning the goal's topic terms carry (so a note need not repeat the subject's
//!   name to be about it, and a note that shares one generic word with the goal is not); untagged
//!   notes must mention a topic term.
//! - **Goal's salient terms.** The query's other words (the goal's terms weighted by rarity, or
//!   what a chat model wrote) break ties among equally on-aspect notes.
//!
//! The finding quoted for a note is its best sentence naming the aspect (its best sentence on
//! the goal's terms when only the title or tags do), so a section holds sentences about its
//! aspect.

use super::ToolOutcome;
use crate::research::corpus::{has_prefix_in, Beginnings, Corpus, Notes, Prepared, Term};
use crate::research::lexicon;
use crate::research::notes::Note;
use crate::research::state::{Finding, StepParams};
use crate::research::text;
use crate::tools::bm25::tokenize;
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex, OnceLock};

/// Weight of a title that names the aspect, in sentences.
const TITLE_WEIGHT: f64 = 3.0;
/// Weight of a tag that names the aspect, in sentences.
const TAG_WEIGHT: f64 = 1.0;
/// Weight of a lexicon word related to the aspect, against the aspect's own words.
const RELATED_WEIGHT: f64 = 0.5;
/// Extra weight of a sentence that states a figure.
const FIGURE_BONUS: f64 = 0.5;
/// Most the goal's salient terms add to a note's score.
const SALIENT_WEIGHT: f64 = 0.5;
/// A note scoring below this share of the best is not relevant enough.
const RELEVANCE_FLOOR: f64 = 0.3;

/// Word lists of a term's alternatives ("response time|latency" → [[response, time], [latency]]).
fn alternatives(term: &str) -> Vec<Vec<String>> {
    term.split('|')
        .map(|alt| {
            let words = text::content_terms(alt);
            if words.is_empty() {
                tokenize(alt)
            } else {
                words
            }
        })
        .filter(|w| !w.is_empty())
        .collect()
}

/// Whether `tokens` (sorted, see `corpus::Sentence::words`; `b` their beginnings) name one of
/// the alternatives (every word of it, by stem).
fn names(tokens: &[String], b: Beginnings, alts: &[Vec<String>]) -> bool {
    alts.iter().any(|words| {
        words
            .iter()
            .all(|w| has_prefix_in(tokens, b, text::stem(w)))
    })
}

/// An aspect to match: its own alternatives and the lexicon's related words.
struct Matcher {
    /// The aspect as the plan names it (what the corpus remembers its notes by).
    aspect: String,
    own: Vec<Vec<String>>,
    related: Vec<Vec<String>>,
}

impl Matcher {
    fn new(aspect: &str) -> Self {
        let own = alternatives(aspect);
        let related = own
            .iter()
            .flat_map(|words| lexicon::synonyms(&words.join(" ")))
            .flat_map(alternatives)
            .collect();
        Self {
            aspect: aspect.to_string(),
            own,
            related,
        }
    }

    /// The notes that name the aspect or a related word anywhere (title, tags or text): a
    /// sentence can name it only if its note does, so a note that does not is skipped whole.
    /// Looked up in the corpus's word index (asking each note's words was 0.9 % of a research
    /// load); `in_notes_asked_one_by_one` in the tests is the rule it answers.
    fn notes_naming(&self, corpus: &Corpus) -> Notes {
        let alternatives = self.own.iter().chain(&self.related).cloned().collect();
        corpus.mentioning(&Term::from_alternatives(alternatives))
    }

    /// What `corpus` says about this aspect ([`AspectView`]), worked out on the first search for
    /// it and remembered by the corpus.
    fn view(&self, corpus: &Corpus) -> Arc<AspectView> {
        corpus.remembered_view(&self.aspect, || AspectView::new(self, corpus))
    }

    /// 1 for the aspect's own words, a half for a related word, 0 otherwise (`tokens` sorted,
    /// `b` their beginnings or [`Beginnings::ANY`]).
    fn weight(&self, tokens: &[String], b: Beginnings) -> f64 {
        if names(tokens, b, &self.own) {
            1.0
        } else if names(tokens, b, &self.related) {
            RELATED_WEIGHT
        } else {
            0.0
        }
    }
}

/// Which notes of a corpus name an aspect, and how strongly each of their titles, tags and
/// sentences does ([`Matcher::weight`]): a pure function of the corpus and the aspect's text,
/// kept by the corpus ([`Corpus::remembered_view`]). Every search step asked it again of every
/// note for its own aspect and, sentence by sentence, for each sibling aspect of the plan (~2.3 %
/// of a research load's instructions); the rest of the ranking (the query's salient terms) is
/// the step's own.
struct AspectView {
    /// The notes that name the aspect or a related word anywhere.
    naming: Notes,
    /// By note (empty for a note that does not name it).
    notes: Vec<NoteWeights>,
}

/// How strongly one note's parts name an aspect.
#[derive(Default)]
struct NoteWeights {
    title: f64,
    /// The best of its tags.
    tag: f64,
    /// Each sentence's, in order.
    sentences: Vec<f64>,
}

impl AspectView {
    fn new(matcher: &Matcher, corpus: &Corpus) -> Self {
        let naming = matcher.notes_naming(corpus);
        let notes = corpus
            .iter()
            .enumerate()
            .map(|(i, (_, prepared))| {
                if !naming.contains(i) {
                    return NoteWeights::default();
                }
                NoteWeights {
                    title: matcher.weight(&prepared.title, Beginnings::ANY),
                    tag: prepared
                        .tags
                        .iter()
                        .map(|t| matcher.weight(t, Beginnings::ANY))
                        .fold(0.0, f64::max),
                    sentences: prepared
                        .sentences
                        .iter()
                        .map(|s| matcher.weight(&s.words, s.beginnings))
                        .collect(),
                }
            })
            .collect();
        Self { naming, notes }
    }

    /// The weight of sentence `j` of note `i` (0 when the note does not name the aspect).
    fn sentence(&self, i: usize, j: usize) -> f64 {
        self.notes[i].sentences.get(j).copied().unwrap_or(0.0)
    }
}

/// Most aspects [`matcher_of`] keeps; past it, it starts again (aspect names are few in practice;
/// the bound keeps a stream of distinct ones from growing memory).
const MATCHER_MEMO: usize = 1024;

/// The matcher of `aspect`, built once per process: a plan's aspects come back in every search
/// step of every conversation, and building one (splitting and stemming the aspect and its
/// lexicon synonyms, for the step's aspect and each sibling) was ~1.5 % of a research load.
fn matcher_of(aspect: &str) -> Arc<Matcher> {
    static MEMO: LazyLock<Mutex<HashMap<String, Arc<Matcher>>>> = LazyLock::new(Default::default);
    if let Some(m) = MEMO.lock().unwrap_or_else(|p| p.into_inner()).get(aspect) {
        return m.clone();
    }
    let made = Arc::new(Matcher::new(aspect));
    let mut memo = MEMO.lock().unwrap_or_else(|p| p.into_inner());
    if memo.len() >= MATCHER_MEMO {
        memo.clear();
    }
    memo.insert(aspect.to_string(), made.clone());
    made
}

/// Matchers of every aspect the lexicon knows, built once: the lexicon is fixed, so no search
/// splits and stems its words again.
fn lexicon_matchers() -> &'static [Matcher] {
    static MATCHERS: OnceLock<Vec<Matcher>> = OnceLock::new();
    MATCHERS.get_or_init(|| lexicon::aspect_keys().map(Matcher::new).collect())
}

// A sentence's lexicon aspects fit in one `u64` mask.
const _: () = assert!(lexicon::SYNONYMS.len() <= 64);

/// Per sentence of `note`, the lexicon's aspects it names (bit `i`: `lexicon_matchers()[i]`), made
/// once per note, so a sentence on the searched aspect does not ask every lexicon aspect again on
/// every search.
fn lexicon_aspects(note: &Prepared) -> &[u64] {
    note.lexicon_aspects.get_or_init(|| {
        note.sentences
            .iter()
            .map(|s| {
                lexicon_matchers()
                    .iter()
                    .enumerate()
                    .filter(|(_, m)| m.weight(&s.words, s.beginnings) > 0.0)
                    .fold(0u64, |mask, (i, _)| mask | 1 << i)
            })
            .collect()
    })
}

fn has_figure(sentence: &str) -> bool {
    sentence.chars().any(|c| c.is_ascii_digit())
}

/// Tags carried by at least half of the notes that mention a topic term.
fn topical_tags(corpus: &Corpus, mention_topic: &Notes) -> Vec<String> {
    let on_topic: Vec<&Note> = corpus
        .notes()
        .iter()
        .enumerate()
        .filter(|(i, _)| mention_topic.contains(*i))
        .map(|(_, n)| n)
        .collect();
    // Per call (one corpus's tags): a fast hash, not a DoS-resistant one.
    let mut counts: HashMap<&str, usize, foldhash::fast::RandomState> = HashMap::default();
    for n in &on_topic {
        for t in n.tags.iter() {
            *counts.entry(t.as_str()).or_default() += 1;
        }
    }
    let mut tags: Vec<String> = counts
        .into_iter()
        .filter(|(_, c)| *c * 2 >= on_topic.len().max(2))
        .map(|(t, _)| t.to_string())
        .collect();
    tags.sort();
    tags
}

struct Scored<'a> {
    note: &'a Note,
    score: f64,
    /// Borrowed from the prepared note: only the notes kept are copied out.
    sentence: &'a str,
}

/// Ranks `notes` for the step's aspect; `siblings` are the plan's other aspects.
pub fn search_aspect(
    aspect: &str,
    params: &StepParams,
    corpus: &Corpus,
    siblings: &[String],
) -> ToolOutcome {
    let matcher = matcher_of(aspect);
    if matcher.own.is_empty() {
        return ToolOutcome::failed(format!("aspect `{aspect}` has no words to search for"));
    }
    let own_words: Vec<&String> = matcher.own.iter().flatten().collect();
    let is_own = |t: &str| own_words.iter().any(|a| text::stem(a) == text::stem(t));
    // The other aspects a sentence may be about: the plan's siblings, and the lexicon's (as a
    // mask over each sentence's precomputed lexicon aspects).
    let is_other = |m: &Matcher| !m.own.iter().flatten().any(|w| is_own(w));
    let other_siblings: Vec<Arc<AspectView>> = siblings
        .iter()
        .map(|s| matcher_of(s))
        .filter(|m| is_other(m))
        .map(|m| m.view(corpus))
        .collect();
    let other_lexicon: u64 = lexicon_matchers()
        .iter()
        .enumerate()
        .filter(|(_, m)| is_other(m))
        .fold(0u64, |mask, (i, _)| mask | 1 << i);
    let salient: Vec<String> = params
        .query
        .as_deref()
        .map(text::content_terms)
        .unwrap_or_default()
        .into_iter()
        .filter(|t| !is_own(t))
        .collect();
    let weights = super::ranking::weigh_terms(&salient, corpus);
    let salient_total: f64 = weights.iter().map(|(_, w)| w).sum();
    // Which notes name the topic, and each salient term: looked up in the corpus's word index
    // (and remembered there) instead of asked of each note.
    let mut mention_topic = Notes::none(corpus.notes().len());
    for t in &params.require_any {
        mention_topic.union_with(&corpus.mentioning_text(t));
    }
    let salient_notes: Vec<(Arc<Notes>, f64)> = weights
        .iter()
        .map(|(t, w)| (corpus.mentioning_text(t), *w))
        .collect();
    let tags = topical_tags(corpus, &mention_topic);
    let limit = params.limit.unwrap_or(super::ranking::DEFAULT_LIMIT).max(1) as usize;
    let view = matcher.view(corpus);
    let mut scored: Vec<Scored> = Vec::new();
    for (i, (note, prepared)) in corpus.iter().enumerate() {
        let on_topic = if params.require_any.is_empty() {
            true
        } else if note.tags.is_empty() || tags.is_empty() {
            mention_topic.contains(i)
        } else {
            note.tags.iter().any(|t| tags.contains(t))
        };
        if !on_topic || !view.naming.contains(i) {
            continue;
        }
        let weights_here = &view.notes[i];
        let title = weights_here.title * TITLE_WEIGHT;
        let tag = weights_here.tag * TAG_WEIGHT;
        let mut on_aspect = 0.0;
        let mut best: Option<(f64, &str)> = None;
        let mut fallback: Option<(f64, &str)> = None;
        let lexicon_of = lexicon_aspects(prepared);
        for (j, ((sentence, lexicon_mask), w)) in prepared
            .sentences
            .iter()
            .zip(lexicon_of)
            .zip(&weights_here.sentences)
            .enumerate()
        {
            let (s, tokens, b) = (sentence.text.as_str(), &sentence.words, sentence.beginnings);
            let salient_score: f64 = weights
                .iter()
                .filter(|(t, _)| has_prefix_in(tokens, b, text::stem(t)))
                .map(|(_, w)| w)
                .sum();
            let w = *w;
            if w > 0.0 {
                let shared = other_siblings
                    .iter()
                    .filter(|v| v.sentence(i, j) > 0.0)
                    .count()
                    + (lexicon_mask & other_lexicon).count_ones() as usize;
                let figure = if has_figure(s) { FIGURE_BONUS } else { 0.0 };
                let value = w * (1.0 + figure) / (1.0 + shared as f64);
                on_aspect += value;
                let rank = value + 0.1 * salient_score;
                if best.as_ref().is_none_or(|(b, _)| rank > *b) {
                    best = Some((rank, s));
                }
            } else if fallback.as_ref().is_none_or(|(b, _)| salient_score > *b) {
                fallback = Some((salient_score, s));
            }
        }
        if on_aspect == 0.0 && title == 0.0 && tag == 0.0 {
            continue;
        }
        let salient_note: f64 = salient_notes
            .iter()
            .filter(|(notes, _)| notes.contains(i))
            .map(|(_, w)| w)
            .sum();
        let score = title
            + tag
            + on_aspect.sqrt() * 2.0
            + SALIENT_WEIGHT * salient_note / salient_total.max(1e-9);
        let Some((_, sentence)) = best.or(fallback) else {
            continue;
        };
        scored.push(Scored {
            note,
            score,
            sentence,
        });
    }
    // Stable: ties keep corpus order.
    scored.sort_by(|a, b| b.score.total_cmp(&a.score));
    let top = scored.first().map_or(0.0, |s| s.score);
    let mut out = ToolOutcome::default();
    let mut ids = Vec::new();
    for s in scored
        .into_iter()
        .take_while(|s| s.score >= top * RELEVANCE_FLOOR)
        .take(limit)
    {
        ids.push(s.note.id.clone());
        out.push_source(&s.note.id);
        out.findings.push(Finding {
            figures: Vec::new(),
            note_id: s.note.id.to_string(),
            topic: None,
            sentence: s.sentence.into(),
        });
    }
    // The sentences are in `findings`; the readable output names the notes only.
    out.output = if ids.is_empty() {
        format!("no note is about {}", text::primary(aspect))
    } else {
        format!(
            "{} note(s) on {}: {}",
            ids.len(),
            text::primary(aspect),
            ids.join(", ")
        )
    };
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    /// Whether `note` names the matcher's aspect or a related word: every word of an
    /// alternative, by stem, anywhere in the note.
    fn in_notes_asked_one_by_one(m: &Matcher, note: &Prepared) -> bool {
        m.own
            .iter()
            .chain(&m.related)
            .any(|words| words.iter().all(|w| note.has_word(w)))
    }

    proptest! {
        /// The word index finds the notes each note's own words name (aspects with lexicon
        /// synonyms, several words and `|` alternatives; notes from a small vocabulary, titles and
        /// tags among them). The remembered view of an aspect is what its matcher says of every
        /// title, tag and sentence, and a sentence of a note outside `naming` never names it (so
        /// the view may leave those notes empty); asked again, the corpus hands back the same view.
        #[test]
        fn the_notes_naming_an_aspect_and_its_view_are_each_notes_own_answer(
            notes in proptest::collection::vec(
                proptest::collection::vec("(cost|costs|price|risk|latency|response|time|heat|staff|a|\\.)", 0..12),
                0..20,
            ),
            aspect in "(cost|risks|latency|response time|staffing|heat)(\\|(price|risk))?",
        ) {
            let corpus = Corpus::new(
                notes
                    .iter()
                    .enumerate()
                    .map(|(i, words)| Note {
                        id: format!("n{i}").into(),
                        title: words.first().cloned().unwrap_or_default().into(),
                        text: words.join(" ").into(),
                        tags: words.last().cloned().into_iter().collect::<Vec<_>>().into(),
                    })
                    .collect(),
            );
            let m = Matcher::new(&aspect);
            let view = m.view(&corpus);
            for (i, (_, p)) in corpus.iter().enumerate() {
                let named = view.naming.contains(i);
                prop_assert_eq!(named, in_notes_asked_one_by_one(&m, p), "note {}", i);
                let title = m.weight(&p.title, Beginnings::ANY);
                prop_assert_eq!(view.notes[i].title, if named { title } else { 0.0 });
                prop_assert!(named || title == 0.0);
                for (j, st) in p.sentences.iter().enumerate() {
                    let w = m.weight(&st.words, st.beginnings);
                    prop_assert_eq!(view.sentence(i, j), w, "note {} sentence {}", i, j);
                }
            }
            prop_assert!(Arc::ptr_eq(&view, &m.view(&corpus)));
        }
    }

    #[test]
    fn views_of_different_types_under_one_key_are_kept_apart() {
        let corpus = Corpus::new(Vec::new());
        let first = corpus.remembered_view("k", || 1u32);
        assert_eq!(*corpus.remembered_view("k", || 2u32), 1, "remembered");
        assert!(Arc::ptr_eq(&first, &corpus.remembered_view("k", || 3u32)));
        assert_eq!(
            *corpus.remembered_view("k", || "other".to_string()),
            "other"
        );
        // Neither answer displaced the other.
        assert!(Arc::ptr_eq(&first, &corpus.remembered_view("k", || 4u32)));
        assert_eq!(
            *corpus.remembered_view("k", || "another".to_string()),
            "other"
        );
    }

    #[test]
    fn a_notes_lexicon_aspects_are_what_each_matcher_says_of_each_sentence() {
        let note = Note {
            id: "n".into(),
            title: "Running costs".into(),
            text: "The price rose by 4 %. Response time fell to 80 ms at p95. It rained.".into(),
            tags: [].into(),
        };
        let corpus = Corpus::new(vec![note.clone()]);
        let p = corpus.prepared(0);
        let masks = lexicon_aspects(p).to_vec();
        assert_eq!(masks.len(), p.sentences.len());
        for (s, mask) in p.sentences.iter().zip(&masks) {
            for (i, m) in lexicon_matchers().iter().enumerate() {
                assert_eq!(
                    mask >> i & 1 == 1,
                    m.weight(&s.words, Beginnings::ANY) > 0.0,
                    "{}",
                    s.text
                );
            }
        }
        // Sentences on an aspect and one on none.
        assert!(masks[0] != 0 && masks[1] != 0 && masks[2] == 0, "{masks:?}");
        // What was worked out is not part of the note's preparation.
        assert_eq!(*p, *Corpus::new(vec![note]).prepared(0));
    }
}
