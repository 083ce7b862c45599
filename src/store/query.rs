//! Search and namespace-listing queries, and the matching rules every backend shares (the SQL
//! backends push prefix, owner and order into SQL and use these for the rest).

use super::{Item, Namespace};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Which items [`Store::search`](super::Store::search) returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SearchQuery {
    /// Only items whose namespace starts with these labels (empty: all).
    pub namespace_prefix: Namespace,
    /// Only items whose value has each of these top-level fields, equal to the given value.
    pub filter: Map<String, Value>,
    /// Only items of this owner.
    pub owner: Option<String>,
    /// At most this many (default 10).
    pub limit: usize,
    /// Skip this many first (default 0).
    pub offset: usize,
}

impl Default for SearchQuery {
    fn default() -> Self {
        Self {
            namespace_prefix: Vec::new(),
            filter: Map::new(),
            owner: None,
            limit: 10,
            offset: 0,
        }
    }
}

impl SearchQuery {
    /// Items under `prefix`.
    pub fn under<I: IntoIterator<Item = S>, S: Into<String>>(prefix: I) -> Self {
        Self {
            namespace_prefix: prefix.into_iter().map(Into::into).collect(),
            ..Self::default()
        }
    }

    /// Adds an equality filter on a top-level field.
    pub fn with(mut self, field: impl Into<String>, value: Value) -> Self {
        self.filter.insert(field.into(), value);
        self
    }

    /// Sets the page.
    pub fn page(mut self, limit: usize, offset: usize) -> Self {
        self.limit = limit;
        self.offset = offset;
        self
    }

    /// Whether `item`'s value passes the filter.
    pub fn value_matches(&self, value: &Map<String, Value>) -> bool {
        self.filter.iter().all(|(k, v)| value.get(k) == Some(v))
    }

    /// Whether `item` passes prefix, owner and filter.
    pub fn matches(&self, item: &Item) -> bool {
        item.namespace.starts_with(&self.namespace_prefix)
            && (self.owner.is_none() || item.owner == self.owner)
            && self.value_matches(&item.value)
    }
}

/// Which namespaces [`Store::list_namespaces`](super::Store::list_namespaces) returns.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct NamespaceQuery {
    /// Only namespaces starting with these labels.
    pub prefix: Namespace,
    /// Only namespaces ending with these labels.
    pub suffix: Namespace,
    /// Namespaces cut to this many labels (and then deduplicated).
    pub max_depth: Option<usize>,
    /// Only namespaces holding a live item of this owner (`None`: any item).
    pub owner: Option<String>,
    /// At most this many (default 100).
    pub limit: usize,
    /// Skip this many first.
    pub offset: usize,
}

impl Default for NamespaceQuery {
    fn default() -> Self {
        Self {
            prefix: Vec::new(),
            suffix: Vec::new(),
            max_depth: None,
            owner: None,
            limit: 100,
            offset: 0,
        }
    }
}

impl NamespaceQuery {
    /// The answer from every namespace holding a live item (of `owner`, when set; in any order,
    /// with repeats): filtered, cut to `max_depth`, deduplicated, ordered by dotted text, paged.
    pub fn answer(&self, all: impl IntoIterator<Item = Namespace>) -> Vec<Namespace> {
        let mut out: Vec<Namespace> = all
            .into_iter()
            .filter(|ns| ns.starts_with(&self.prefix) && ns.ends_with(&self.suffix))
            .map(|mut ns| {
                if let Some(d) = self.max_depth {
                    ns.truncate(d);
                }
                ns
            })
            .collect();
        out.sort_by_key(|ns| super::dotted(ns));
        out.dedup();
        out.into_iter().skip(self.offset).take(self.limit).collect()
    }
}
