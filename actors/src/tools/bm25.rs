//! BM25 ranking over a small in-memory corpus: the local search both planners use.
//!
//! Okapi BM25 with the usual defaults (k1 = 1.2, b = 0.75). Tokens are lower-cased alphanumeric runs;
//! numbers stay tokens, so "12,000 clinics" matches a query for "clinics". Ties are broken by
//! document order, so results are deterministic.

use std::collections::HashMap;

/// A document to index.
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Document {
    /// Unique id, cited in provenance.
    pub id: String,
    /// Title (indexed with the text).
    pub title: String,
    /// Body text.
    pub text: String,
}

/// A ranked hit.
#[derive(Clone, Debug, PartialEq)]
pub struct Hit {
    /// Index of the document in the corpus.
    pub doc: usize,
    /// Its BM25 score (> 0).
    pub score: f64,
}

/// A BM25 index.
#[derive(Clone, Debug, Default)]
pub struct Bm25Index {
    doc_len: Vec<f64>,
    avg_len: f64,
    /// By term. A fast hash: the index is searched for every model call's notes and every
    /// search step, and the terms are the corpus's own words (SipHash was most of a lookup).
    postings: HashMap<String, Vec<(usize, u32)>, foldhash::fast::RandomState>,
}

const K1: f64 = 1.2;
const B: f64 = 0.75;

/// Splits text into lower-case alphanumeric tokens.
pub fn tokenize(text: &str) -> Vec<String> {
    raw_tokens(text).map(str::to_lowercase).collect()
}

/// Hands each of [`tokenize`]'s tokens to `f`, in order, lower-cased in one reused buffer: for
/// callers that keep few of them (nothing is allocated per token).
pub fn for_each_token(text: &str, mut f: impl FnMut(&str)) {
    // Room for most words at once: grown a byte at a time from empty, the buffer was reallocated
    // two or three times per call.
    let mut word = String::with_capacity(32);
    for tok in raw_tokens(text) {
        lowercase_into(tok, &mut word);
        f(&word);
    }
}

impl Bm25Index {
    /// Indexes documents given as (title, text) pairs, in order.
    pub fn build<'a>(docs: impl IntoIterator<Item = (&'a str, &'a str)>) -> Self {
        let mut index = Self::default();
        for (i, (title, text)) in docs.into_iter().enumerate() {
            let mut counts: HashMap<String, u32> = HashMap::new();
            let mut len = 0usize;
            for tok in tokenize(title).into_iter().chain(tokenize(text)) {
                *counts.entry(tok).or_default() += 1;
                len += 1;
            }
            index.doc_len.push(len as f64);
            let mut terms: Vec<_> = counts.into_iter().collect();
            terms.sort();
            for (term, tf) in terms {
                index.postings.entry(term).or_default().push((i, tf));
            }
        }
        let n = index.doc_len.len().max(1) as f64;
        index.avg_len = index.doc_len.iter().sum::<f64>() / n;
        index
    }

    /// Indexes [`Document`]s.
    pub fn from_documents(docs: &[Document]) -> Self {
        Self::build(docs.iter().map(|d| (d.title.as_str(), d.text.as_str())))
    }

    /// Number of indexed documents.
    pub fn len(&self) -> usize {
        self.doc_len.len()
    }

    /// True when nothing is indexed.
    pub fn is_empty(&self) -> bool {
        self.doc_len.is_empty()
    }

    /// The `limit` best documents for `query`, best first; documents matching no query term are
    /// not returned.
    pub fn search(&self, query: &str, limit: usize) -> Vec<Hit> {
        let n = self.doc_len.len() as f64;
        // One score per document (corpora are small: a dense vector costs less than a map),
        // summed in the query's sorted term order, as `rank_once` sums them.
        let mut scores = vec![0.0f64; self.doc_len.len()];
        // The query's terms the index holds, borrowed from the index: a query's words are looked
        // up in one reused buffer, not each copied into a `String` of its own.
        let mut terms: Vec<(&str, &[(usize, u32)])> = Vec::new();
        for_each_token(query, |word| {
            if let Some((term, posting)) = self.postings.get_key_value(word) {
                terms.push((term.as_str(), posting.as_slice()));
            }
        });
        terms.sort_unstable_by_key(|&(term, _)| term);
        terms.dedup_by_key(|&mut (term, _)| term);
        for (_, posting) in terms {
            let idf = idf(n, posting.len() as f64);
            for &(doc, tf) in posting {
                scores[doc] += term_score(idf, tf, self.doc_len[doc], self.avg_len);
            }
        }
        ranked(scores.into_iter().enumerate(), limit)
    }
}

/// The query's distinct tokens, sorted (the order scores are summed in).
fn query_terms(query: &str) -> Vec<String> {
    let mut terms = tokenize(query);
    terms.sort();
    terms.dedup();
    terms
}

/// A term's inverse document frequency among `n` documents, `df` of which hold it.
fn idf(n: f64, df: f64) -> f64 {
    ((n - df + 0.5) / (df + 0.5) + 1.0).ln()
}

/// What a term held `tf` times adds to the score of a document of `len` tokens.
fn term_score(idf: f64, tf: u32, len: f64, avg_len: f64) -> f64 {
    let tf = f64::from(tf);
    let norm = 1.0 - B + B * len / avg_len.max(1e-9);
    idf * tf * (K1 + 1.0) / (tf + K1 * norm)
}

/// The `limit` best of `scores` (by document) above zero, best first, ties by document order.
fn ranked(scores: impl IntoIterator<Item = (usize, f64)>, limit: usize) -> Vec<Hit> {
    let mut hits: Vec<Hit> = scores
        .into_iter()
        .filter(|(_, s)| *s > 0.0)
        .map(|(doc, score)| Hit { doc, score })
        .collect();
    hits.sort_by(|a, b| b.score.total_cmp(&a.score).then(a.doc.cmp(&b.doc)));
    hits.truncate(limit);
    hits
}

/// What `Bm25Index::build(docs).search(query, limit)` returns, for a query over documents that
/// are not searched again: only the query's terms are counted, so no posting list is built for
/// the documents' other words (the offline planner ranks a request's notes this way once per call).
pub fn rank_once<'a>(
    docs: impl IntoIterator<Item = (&'a str, &'a str)>,
    query: &str,
    limit: usize,
) -> Vec<Hit> {
    let terms = query_terms(query);
    // Per document: its length and how often it holds each query term.
    let mut docs_tf: Vec<(f64, Vec<u32>)> = Vec::new();
    let mut word = String::new();
    for (title, text) in docs {
        let mut tf = vec![0u32; terms.len()];
        let mut len = 0usize;
        for tok in raw_tokens(title).chain(raw_tokens(text)) {
            len += 1;
            lowercase_into(tok, &mut word);
            if let Ok(k) = terms.binary_search_by(|t| t.as_str().cmp(&word)) {
                tf[k] += 1;
            }
        }
        docs_tf.push((len as f64, tf));
    }
    let n = docs_tf.len() as f64;
    let avg_len = docs_tf.iter().map(|d| d.0).sum::<f64>() / n.max(1.0);
    let idfs: Vec<f64> = (0..terms.len())
        .map(|k| idf(n, docs_tf.iter().filter(|d| d.1[k] > 0).count() as f64))
        .collect();
    // Summed from 0.0 in the same order as `search` (terms sorted), so the scores are the same
    // bits; a document holding no query term scores 0.0 and is left out by `ranked`, as there.
    let scores = docs_tf.iter().enumerate().map(|(doc, (len, tf))| {
        let score = tf
            .iter()
            .zip(&idfs)
            .filter(|(f, _)| **f > 0)
            .fold(0.0, |score, (&f, &idf)| {
                score + term_score(idf, f, *len, avg_len)
            });
        (doc, score)
    });
    ranked(scores, limit)
}

/// The alphanumeric runs of `text`, as they are (see [`tokenize`]).
fn raw_tokens(text: &str) -> impl Iterator<Item = &str> {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|t| !t.is_empty())
}

/// `word` becomes `tok.to_lowercase()`, in a buffer that is reused.
fn lowercase_into(tok: &str, word: &mut String) {
    word.clear();
    if tok.is_ascii() {
        word.push_str(tok);
        word.make_ascii_lowercase();
    } else if tok.contains('\u{3A3}') {
        // A capital sigma lower-cases by its place in the word: leave it to the library.
        word.push_str(&tok.to_lowercase());
    } else {
        word.extend(tok.chars().flat_map(char::to_lowercase));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn corpus() -> Bm25Index {
        Bm25Index::build([
            (
                "Dental clinics",
                "There are 12,000 dental clinics in Germany.",
            ),
            ("Pricing", "Practice software costs 1,200 EUR per year."),
            ("Weather", "It rains a lot in autumn."),
        ])
    }

    #[test]
    fn ranks_the_matching_document_first() {
        let hits = corpus().search("how many dental clinics", 3);
        assert_eq!(hits[0].doc, 0);
        assert!(
            hits.iter().all(|h| h.doc != 2),
            "unrelated document returned: {hits:?}"
        );
    }

    #[test]
    fn no_match_gives_no_hits() {
        assert!(corpus().search("quantum chromodynamics", 5).is_empty());
    }

    #[test]
    fn limit_is_respected_and_order_is_stable() {
        let index = Bm25Index::build([("a", "x y"), ("b", "x y"), ("c", "x y")]);
        let hits = index.search("x", 2);
        assert_eq!(hits.iter().map(|h| h.doc).collect::<Vec<_>>(), vec![0, 1]);
    }

    proptest::proptest! {
        /// Ranking once gives exactly the index's hits and scores, for any documents and query
        /// (words drawn from a small vocabulary, with capitals and a Greek sigma, so they repeat).
        #[test]
        fn ranking_once_matches_the_index(
            docs in proptest::collection::vec(
                ("[a-cA-C Σσς]{0,12}", "(alpha|beta|Gamma|ΟΔΟΣ|x1|[a-c]{1,3}|,| ){0,30}"),
                0..8,
            ),
            query in "(alpha|beta|gamma|οδος|x1|[a-c]{1,3}| ){0,6}",
            limit in 0usize..10,
        ) {
            let docs: Vec<(&str, &str)> =
                docs.iter().map(|(t, x)| (t.as_str(), x.as_str())).collect();
            let want = Bm25Index::build(docs.iter().copied()).search(&query, limit);
            proptest::prop_assert_eq!(rank_once(docs.iter().copied(), &query, limit), want);
        }
    }

    #[test]
    fn tokenizer_keeps_numbers_and_lowercases() {
        assert_eq!(
            tokenize("12,000 Dental-Clinics"),
            vec!["12", "000", "dental", "clinics"]
        );
    }
}
