//! Lexical search over stored items: what a search `query` does here, where LangGraph embeds
//! the query and the items and ranks by vector similarity. No embedding provider is needed: an
//! item's *indexed text* (the fields its [`Index`] names, or the whole value) is cut into words,
//! and the candidates are ranked by BM25 — the classic term-frequency / inverse-document-frequency
//! score of search engines — against the query's words.
//!
//! The rules (each held by a test below):
//! - words are runs of letters and digits, compared lower-cased: `"Beta-2"` is `beta` and `2`;
//! - an item with [`Index::Off`] is never found by a query; an item none of whose words is a
//!   query word is left out (its score would be 0: listing it would pad the page with items that
//!   do not match);
//! - every item returned has a score above 0; the order is by score (highest first), then by the
//!   namespace's dotted text and the key, so the order never depends on how candidates arrive;
//! - the statistics (how many candidates hold a word, their mean length) are taken over the
//!   candidates of this one search — the items of the prefix that pass the filter — so a score
//!   compares items of one search, not searches with each other.

use super::Item;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::collections::{BTreeMap, BTreeSet, HashMap};

/// What of an item's value a text query searches (LangGraph's `index` argument of a put).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "Value", try_from = "Value")]
pub enum Index {
    /// The whole value (what a put without `index` asks for).
    #[default]
    Value,
    /// Nothing: a text query never finds the item (`index: false`).
    Off,
    /// The text at these paths of the value (`index: ["text", "meta.title", "tags[*]"]`).
    Paths(Vec<IndexPath>),
}

/// One path into a value: fields by name (`a.b`), list elements by position (`[0]`, `[-1]`:
/// the last) or all of them (`[*]`, and `*` for every field of an object); `$` is the whole value.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexPath {
    text: String,
    steps: Vec<Step>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Step {
    Field(String),
    AnyField,
    Element(i64),
    AnyElement,
}

/// Why an `index` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IndexError {
    /// `index` is neither `false`, null, nor a list of paths.
    #[error("`index` must be false, null or a list of field paths, not {0}")]
    Shape(String),
    /// A path does not parse.
    #[error("index path `{path}` is malformed: {reason}")]
    BadPath {
        /// The path as given.
        path: String,
        /// What is wrong.
        reason: &'static str,
    },
}

impl IndexPath {
    /// Parses a path (`a.b`, `items[0].text`, `tags[*]`, `*`, `$`).
    pub fn parse(path: &str) -> Result<Self, IndexError> {
        let bad = |reason| IndexError::BadPath {
            path: path.to_string(),
            reason,
        };
        let mut steps = Vec::new();
        if path == "$" {
            return Ok(Self {
                text: path.to_string(),
                steps,
            });
        }
        if path.is_empty() {
            return Err(bad("it is empty"));
        }
        for part in path.split('.') {
            let (name, mut rest) = match part.find('[') {
                Some(i) => part.split_at(i),
                None => (part, ""),
            };
            match name {
                "" if rest.is_empty() => return Err(bad("a field name is empty")),
                "" if steps.is_empty() => return Err(bad("it starts with `[`")),
                "" => {}
                "*" => steps.push(Step::AnyField),
                n => steps.push(Step::Field(n.to_string())),
            }
            while !rest.is_empty() {
                let close = rest.find(']').ok_or_else(|| bad("a `[` is not closed"))?;
                let inside = &rest[1..close];
                steps.push(match inside {
                    "*" => Step::AnyElement,
                    n => Step::Element(
                        n.parse()
                            .map_err(|_| bad("`[...]` holds neither a number nor `*`"))?,
                    ),
                });
                rest = &rest[close + 1..];
                if !rest.is_empty() && !rest.starts_with('[') {
                    return Err(bad("text follows a `]`"));
                }
            }
        }
        Ok(Self {
            text: path.to_string(),
            steps,
        })
    }

    /// The path as it was written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The values this path reaches in `root`.
    fn select<'v>(&self, root: &'v Value) -> Vec<&'v Value> {
        let mut here = vec![root];
        for step in &self.steps {
            here = here
                .into_iter()
                .flat_map(|v| -> Vec<&'v Value> {
                    match (step, v) {
                        (Step::Field(f), Value::Object(m)) => m.get(f).into_iter().collect(),
                        (Step::AnyField, Value::Object(m)) => m.values().collect(),
                        (Step::AnyElement, Value::Array(a)) => a.iter().collect(),
                        (Step::Element(i), Value::Array(a)) => {
                            let at = if *i < 0 { a.len() as i64 + i } else { *i };
                            usize::try_from(at)
                                .ok()
                                .and_then(|at| a.get(at))
                                .into_iter()
                                .collect()
                        }
                        _ => Vec::new(),
                    }
                })
                .collect();
        }
        here
    }
}

impl Index {
    /// The index a put's `index` argument asks for: null (or absent) the whole value, `false`
    /// nothing, a list of strings those paths.
    pub fn from_json(v: &Value) -> Result<Self, IndexError> {
        match v {
            Value::Null => Ok(Self::Value),
            Value::Bool(false) => Ok(Self::Off),
            Value::Array(paths) => paths
                .iter()
                .map(|p| match p {
                    Value::String(s) => IndexPath::parse(s),
                    other => Err(IndexError::Shape(format!("a list holding {other}"))),
                })
                .collect::<Result<_, _>>()
                .map(Self::Paths),
            other => Err(IndexError::Shape(other.to_string())),
        }
    }

    /// The JSON form [`Index::from_json`] reads (how the SQL backends store it).
    pub fn to_json(&self) -> Value {
        match self {
            Self::Value => Value::Null,
            Self::Off => Value::Bool(false),
            Self::Paths(p) => p.iter().map(|p| Value::from(p.as_str())).collect(),
        }
    }

    /// The index stored as text in a SQL column (`None`: the whole value, the column's NULL).
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn to_column(&self) -> Option<String> {
        match self {
            Self::Value => None,
            other => Some(other.to_json().to_string()),
        }
    }

    /// The index read back from a SQL column; one that does not decode is
    /// [`super::StoreError::Corrupt`].
    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn from_column(
        text: Option<&str>,
        namespace: &str,
        key: &str,
    ) -> Result<Self, super::StoreError> {
        let corrupt = |reason: String| super::StoreError::Corrupt {
            namespace: namespace.to_string(),
            key: key.to_string(),
            reason,
        };
        let Some(text) = text else {
            return Ok(Self::Value);
        };
        let v: Value =
            serde_json::from_str(text).map_err(|e| corrupt(format!("index is not JSON: {e}")))?;
        Self::from_json(&v).map_err(|e| corrupt(e.to_string()))
    }

    /// The words of `value` this index covers; `None` for [`Index::Off`].
    pub fn words(&self, value: &Map<String, Value>) -> Option<Vec<String>> {
        let mut out = Vec::new();
        match self {
            Self::Off => return None,
            Self::Value => value.values().for_each(|v| leaf_words(v, &mut out)),
            Self::Paths(paths) => {
                let root = Value::Object(value.clone());
                for p in paths {
                    p.select(&root)
                        .into_iter()
                        .for_each(|v| leaf_words(v, &mut out));
                }
            }
        }
        Some(out)
    }
}

impl From<Index> for Value {
    fn from(i: Index) -> Self {
        i.to_json()
    }
}

impl TryFrom<Value> for Index {
    type Error = IndexError;
    fn try_from(v: Value) -> Result<Self, IndexError> {
        Self::from_json(&v)
    }
}

/// The words of the strings and numbers under `v` (object keys are structure, not text).
fn leaf_words(v: &Value, out: &mut Vec<String>) {
    match v {
        Value::String(s) => out.extend(words(s)),
        Value::Number(n) => out.extend(words(&n.to_string())),
        Value::Array(a) => a.iter().for_each(|v| leaf_words(v, out)),
        Value::Object(m) => m.values().for_each(|v| leaf_words(v, out)),
        Value::Bool(_) | Value::Null => {}
    }
}

/// The words of `text`: runs of letters and digits, lower-cased.
pub fn words(text: &str) -> impl Iterator<Item = String> + '_ {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
}

/// An item a text query found, with its relevance (BM25: above 0, higher is more relevant,
/// comparable within one search).
#[derive(Clone, Debug, PartialEq)]
pub struct ScoredItem {
    /// The item.
    pub item: Item,
    /// Its relevance to the query.
    pub score: f64,
}

/// BM25's term-frequency saturation.
const K1: f64 = 1.2;
/// BM25's length normalisation.
const B: f64 = 0.75;

/// Ranks `candidates` against `query` (see the module docs): the ones holding a query word, by
/// score then namespace and key. A query without words finds nothing.
pub fn rank(query: &str, candidates: Vec<Item>) -> Vec<ScoredItem> {
    let terms: BTreeSet<String> = words(query).collect();
    let docs: Vec<(Item, BTreeMap<String, u32>, usize)> = candidates
        .into_iter()
        .filter_map(|item| {
            let w = item.index.words(&item.value)?;
            let len = w.len();
            let mut tf = BTreeMap::new();
            for word in w.into_iter().filter(|w| terms.contains(w)) {
                *tf.entry(word).or_insert(0u32) += 1;
            }
            Some((item, tf, len))
        })
        .collect();
    let n = docs.len() as f64;
    let mean_len = (docs.iter().map(|d| d.2).sum::<usize>() as f64 / n.max(1.0)).max(1.0);
    let idf: HashMap<&String, f64> = terms
        .iter()
        .map(|t| {
            let df = docs.iter().filter(|d| d.1.contains_key(t)).count() as f64;
            (t, (1.0 + (n - df + 0.5) / (df + 0.5)).ln())
        })
        .collect();
    let mut found: Vec<ScoredItem> = docs
        .into_iter()
        .filter(|(_, tf, _)| !tf.is_empty())
        .map(|(item, tf, len)| {
            let norm = K1 * (1.0 - B + B * len as f64 / mean_len);
            let score = tf
                .iter()
                .map(|(t, &f)| idf[t] * f64::from(f) * (K1 + 1.0) / (f64::from(f) + norm))
                .sum();
            ScoredItem { item, score }
        })
        .collect();
    found.sort_by(|a, b| {
        b.score
            .total_cmp(&a.score)
            .then_with(|| a.item.namespace.join(".").cmp(&b.item.namespace.join(".")))
            .then_with(|| a.item.key.cmp(&b.item.key))
    });
    found
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::json;

    fn item(ns: &str, key: &str, value: Value, index: Index) -> Item {
        let Value::Object(value) = value else {
            panic!("test values are objects")
        };
        Item {
            namespace: ns.split('.').map(str::to_string).collect(),
            key: key.to_string(),
            value,
            created_at: 0,
            updated_at: 0,
            expires_at: None,
            owner: None,
            index,
        }
    }

    fn paths(p: &[&str]) -> Index {
        Index::from_json(&json!(p)).unwrap()
    }

    fn keys(found: &[ScoredItem]) -> Vec<&str> {
        found.iter().map(|s| s.item.key.as_str()).collect()
    }

    #[test]
    fn paths_parse_and_malformed_ones_are_named() {
        for ok in [
            "a", "a.b", "a[0]", "a[-1].b", "a[*]", "*", "a.*.b", "$", "a[0][1]",
        ] {
            IndexPath::parse(ok).unwrap_or_else(|e| panic!("{ok}: {e}"));
        }
        for bad in ["", "a..b", "a[", "a[x]", "a[0]b", "[0]"] {
            let e = IndexPath::parse(bad).unwrap_err().to_string();
            assert!(e.contains(&format!("`{bad}`")), "{e}");
        }
        assert!(Index::from_json(&json!(true)).is_err());
        assert!(Index::from_json(&json!([1])).is_err());
        assert_eq!(Index::from_json(&json!(false)).unwrap(), Index::Off);
        assert_eq!(Index::from_json(&Value::Null).unwrap(), Index::Value);
    }

    #[test]
    fn an_index_round_trips_through_json() {
        for i in [Index::Value, Index::Off, paths(&["a.b", "c[*]"])] {
            assert_eq!(Index::from_json(&i.to_json()).unwrap(), i);
            let text = serde_json::to_string(&i).unwrap();
            assert_eq!(serde_json::from_str::<Index>(&text).unwrap(), i);
        }
    }

    #[test]
    fn paths_select_fields_elements_and_wildcards() {
        let v = json!({"a": {"b": "Bee"}, "tags": ["one", "two"], "n": 42, "flag": true,
                       "notes": [{"t": "first"}, {"t": "last"}]})
        .as_object()
        .unwrap()
        .clone();
        let w = |p: &[&str]| paths(p).words(&v).unwrap();
        assert_eq!(w(&["a.b"]), ["bee"]);
        assert_eq!(w(&["tags[*]"]), ["one", "two"]);
        assert_eq!(w(&["tags[-1]"]), ["two"]);
        assert_eq!(w(&["notes[*].t"]), ["first", "last"]);
        assert_eq!(w(&["notes[5].t", "missing", "a.b.c"]), Vec::<String>::new());
        assert_eq!(w(&["n"]), ["42"]);
        assert_eq!(w(&["$"]), Index::Value.words(&v).unwrap());
        assert!(Index::Off.words(&v).is_none());
        assert!(
            !Index::Value
                .words(&v)
                .unwrap()
                .contains(&"tags".to_string()),
            "keys are not text"
        );
    }

    #[test]
    fn words_are_lower_cased_runs_of_letters_and_digits() {
        let w: Vec<String> = words("Beta-2, ÉLAN  x_y").collect();
        assert_eq!(w, ["beta", "2", "élan", "x", "y"]);
    }

    #[test]
    fn more_occurrences_and_rarer_words_rank_higher() {
        let c = vec![
            item(
                "a",
                "once",
                json!({"text": "rust is fast and safe"}),
                Index::Value,
            ),
            item(
                "a",
                "twice",
                json!({"text": "rust rust and more"}),
                Index::Value,
            ),
            item("a", "none", json!({"text": "python only"}), Index::Value),
            item("a", "rare", json!({"text": "tokio and rust"}), Index::Value),
        ];
        let found = rank("Rust tokio", c);
        assert_eq!(keys(&found), ["rare", "twice", "once"]);
        assert!(found.iter().all(|s| s.score > 0.0));
    }

    #[test]
    fn only_indexed_text_is_searched_and_unindexed_items_never_found() {
        let c = vec![
            item(
                "a",
                "title",
                json!({"title": "beta", "body": "x"}),
                paths(&["title"]),
            ),
            item(
                "a",
                "body",
                json!({"title": "x", "body": "beta"}),
                paths(&["title"]),
            ),
            item("a", "off", json!({"title": "beta"}), Index::Off),
            item("a", "whole", json!({"body": "beta"}), Index::Value),
        ];
        assert_eq!(keys(&rank("beta", c)), ["title", "whole"]);
    }

    #[test]
    fn a_query_without_words_finds_nothing() {
        let c = vec![item("a", "k", json!({"t": "anything"}), Index::Value)];
        assert!(rank("  ?! ", c.clone()).is_empty());
        assert!(rank("", c).is_empty());
    }

    const VOCAB: [&str; 6] = ["alpha", "beta", "gamma", "delta", "Alpha", "beta-gamma"];

    fn candidate() -> impl Strategy<Value = (usize, usize, Vec<usize>, u8)> {
        (
            0..3usize,
            0..4usize,
            prop::collection::vec(0..6usize, 0..6),
            0..3u8,
        )
    }

    fn build(spec: &[(usize, usize, Vec<usize>, u8)]) -> Vec<Item> {
        let mut seen = BTreeSet::new();
        spec.iter()
            .filter(|(n, k, _, _)| seen.insert((*n, *k)))
            .map(|(n, k, ws, ix)| {
                let text: Vec<&str> = ws.iter().map(|w| VOCAB[*w]).collect();
                let index = match ix {
                    0 => Index::Value,
                    1 => Index::Off,
                    _ => paths(&["text"]),
                };
                item(
                    ["x", "x.y", "z"][*n],
                    &format!("k{k}"),
                    json!({"text": text.join(" "), "other": "alpha"}),
                    index,
                )
            })
            .collect()
    }

    proptest! {
        #[test]
        fn ranking_invariants(
            spec in prop::collection::vec(candidate(), 0..10),
            query in prop::collection::vec(0..6usize, 0..3),
            rotate in 0..10usize,
        ) {
            let items = build(&spec);
            let q: Vec<&str> = query.iter().map(|w| VOCAB[*w]).collect();
            let q = q.join(" ");
            let found = rank(&q, items.clone());
            let terms: BTreeSet<String> = words(&q).collect();
            // Exactly the indexed items holding a query word, each once, each scored above 0.
            let want: BTreeSet<(Vec<String>, String)> = items
                .iter()
                .filter(|i| i.index.words(&i.value).is_some_and(|w| w.iter().any(|w| terms.contains(w))))
                .map(|i| (i.namespace.clone(), i.key.clone()))
                .collect();
            let got: BTreeSet<(Vec<String>, String)> =
                found.iter().map(|s| (s.item.namespace.clone(), s.item.key.clone())).collect();
            prop_assert_eq!(got.len(), found.len());
            prop_assert_eq!(&got, &want);
            prop_assert!(found.iter().all(|s| s.score > 0.0 && s.score.is_finite()));
            // Ordered by score, then namespace and key.
            for w in found.windows(2) {
                let (a, b) = (&w[0], &w[1]);
                prop_assert!(a.score > b.score || (a.score == b.score
                    && (a.item.namespace.join("."), &a.item.key) < (b.item.namespace.join("."), &b.item.key)));
            }
            // The order the candidates arrive in changes nothing.
            let mut turned = items.clone();
            let len = turned.len().max(1);
            turned.rotate_left(rotate % len);
            turned.reverse();
            prop_assert_eq!(rank(&q, turned), found.clone());
            // The query's case and punctuation change nothing.
            prop_assert_eq!(rank(&format!(" {}!", q.to_uppercase()), items), found);
        }
    }
}
