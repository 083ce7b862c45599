//! The store: memory shared across threads — what a user prefers, what an assistant learned —
//! where a checkpoint is memory of one thread. Items are JSON objects under a key in a namespace
//! (a tuple of labels such as `("users", "u-42", "prefs")`); a namespace prefix finds every item
//! below it, so a tenant, a user or an assistant each get a subtree.
//!
//! One small trait ([`Store`]) with three backends — [`MemoryStore`], `SqliteStore` (feature
//! `sqlite`), `PostgresStore` (feature `postgres`, on `deadpool-postgres`) — held to one conformance
//! suite (`tests/support/store_suite.rs`) and property tests against the memory model. Nodes reach
//! the engine's store through [`NodeContext::store`](crate::NodeContext::store); the server's
//! `/store` endpoints use the same trait.
//!
//! Semantics every backend keeps:
//! - a namespace has at least one label; labels are non-empty and contain no `.` (the dotted form
//!   is how SQL backends index them, as LangGraph does); keys are non-empty; values are JSON objects;
//! - `put` replaces the item (keeping its `created_at`), `delete` reports whether it was there;
//! - owners: an item records the user who wrote it. A user's write ([`PutOptions::owner`]) and
//!   delete ([`Store::delete_as`]) change only an item that is absent, expired or already theirs —
//!   never another user's, nor one with no owner (what an admin or a node wrote) — and are refused
//!   with [`StoreError::NotOwner`] otherwise; the check and the change are one atomic step in
//!   storage (a conditional upsert or delete in SQL), so two users racing for a key cannot both
//!   win. A user's read ([`Store::get_as`]) sees only their own items. An unrestricted write (no
//!   owner: an admin, a graph's node) replaces any item and keeps the owner it had;
//! - an item with a TTL expires `ttl` after its last write, or its last `get` (reads refresh the TTL,
//!   LangGraph's default); an expired item is invisible to `get`, `search` and `list_namespaces`
//!   at once, and [`Store::sweep`] deletes it;
//! - `search` returns items whose namespace starts with the prefix, whose value has every filter
//!   field equal to the filter's, and (when asked) whose owner matches, ordered by the namespace's
//!   dotted text then key, after `offset`, at most `limit`;
//! - an item keeps the [`Index`] it was put with (what a text query searches: the whole value,
//!   some paths, or nothing); [`Store::search_text`] ranks the items `search` would find by the
//!   lexical relevance of a query to that text ([`lexical`]), with no embedding provider;
//! - times come from the store's [`StoreClock`], by default anchored to tokio's clock so tests use
//!   paused time.

mod clock;
pub mod lexical;
mod memory;
#[cfg(feature = "postgres")]
mod postgres;
mod query;
#[cfg(feature = "sqlite")]
mod sqlite;
mod url;

pub use clock::{system_clock, StoreClock};
pub use lexical::{Index, IndexError, ScoredItem};
pub use memory::MemoryStore;
#[cfg(feature = "postgres")]
pub use postgres::PostgresStore;
pub use query::{NamespaceQuery, SearchQuery};
#[cfg(feature = "sqlite")]
pub use sqlite::SqliteStore;
pub use url::{connect, connect_in};

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::time::Duration;

/// A namespace: labels from the root down.
pub type Namespace = Vec<String>;

/// One stored item.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// Its namespace.
    pub namespace: Namespace,
    /// Its key within the namespace.
    pub key: String,
    /// Its value (a JSON object).
    pub value: Map<String, Value>,
    /// When it was first written, in milliseconds since the Unix epoch.
    pub created_at: u64,
    /// When it was last written.
    pub updated_at: u64,
    /// When it expires (`None`: never).
    pub expires_at: Option<u64>,
    /// Who owns it (set by the server for an authenticated user; `None` for items a node or an
    /// admin created).
    pub owner: Option<String>,
    /// What of its value a text query searches.
    #[serde(default)]
    pub index: Index,
}

/// How to write an item.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PutOptions {
    /// Expire the item this long after its last write or read (`None`: never).
    pub ttl: Option<Duration>,
    /// The writing user. `Some(user)`: only an item that is absent, expired or already `user`'s
    /// is written, and `user` is recorded as its owner; another's item (or one with no owner) is
    /// left as it is and the put answers [`StoreError::NotOwner`]. `None` (an admin, a graph's
    /// node): any item is replaced, keeping the owner it had (none for a new item).
    pub owner: Option<String>,
    /// What of the value a text query searches ([`Store::search_text`]); replaced with the item.
    pub index: Index,
}

impl PutOptions {
    /// Options with a TTL.
    pub fn ttl(ttl: Duration) -> Self {
        Self {
            ttl: Some(ttl),
            ..Self::default()
        }
    }
}

/// Why a store call failed.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// The namespace is empty or has a bad label.
    #[error("bad namespace {namespace:?}: {reason}")]
    BadNamespace {
        /// The namespace.
        namespace: Namespace,
        /// What is wrong.
        reason: &'static str,
    },
    /// The key is empty.
    #[error("an item key must not be empty")]
    EmptyKey,
    /// A user's put or delete refused: the live item belongs to another user, or to no user (an
    /// admin or a node wrote it). Nothing was changed.
    #[error("item {namespace:?}/{key} is not the caller's: another user (or no user) owns it")]
    NotOwner {
        /// The item's namespace.
        namespace: Namespace,
        /// Its key.
        key: String,
    },
    /// A connection string the store cannot use.
    #[error("bad store URL `{url}`: {reason}")]
    BadUrl {
        /// The URL.
        url: String,
        /// What is wrong.
        reason: String,
    },
    /// A stored row does not decode (corrupt data is an error, never a default).
    #[error("stored item {namespace:?}/{key} is corrupt: {reason}")]
    Corrupt {
        /// Its namespace (dotted).
        namespace: String,
        /// Its key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// The backend failed.
    #[error("store backend error during {op}: {source}")]
    Backend {
        /// What was being done.
        op: &'static str,
        /// Why.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
}

impl StoreError {
    /// A user's write or delete of `namespace`/`key` refused.
    pub(crate) fn not_owner(namespace: &[String], key: &str) -> Self {
        Self::NotOwner {
            namespace: namespace.to_vec(),
            key: key.to_string(),
        }
    }

    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    pub(crate) fn backend(
        op: &'static str,
        e: impl Into<Box<dyn std::error::Error + Send + Sync>>,
    ) -> Self {
        Self::Backend {
            op,
            source: e.into(),
        }
    }
}

/// Cross-thread key-value memory. See the module docs for what every backend guarantees.
#[async_trait]
pub trait Store: Send + Sync + 'static {
    /// A short name for reports (`memory`, `sqlite`, `postgres`).
    fn backend_name(&self) -> &'static str;

    /// Writes `value` under `key` in `namespace`, replacing what was there — for a user's write
    /// (`opts.owner` set) only an item that is absent, expired or theirs, else
    /// [`StoreError::NotOwner`] with nothing changed (see [`PutOptions::owner`]). The check and
    /// the write are one atomic step.
    async fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: Map<String, Value>,
        opts: PutOptions,
    ) -> Result<Item, StoreError>;

    /// The live item, if any; refreshes its TTL.
    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, StoreError>;

    /// The live item if it is `user`'s, refreshing its TTL; `None` when there is none, or when it
    /// belongs to another user or to no user (its TTL then stays as it was).
    async fn get_as(
        &self,
        namespace: &[String],
        key: &str,
        user: &str,
    ) -> Result<Option<Item>, StoreError>;

    /// Deletes the item; true if a live one was there.
    async fn delete(&self, namespace: &[String], key: &str) -> Result<bool, StoreError>;

    /// Deletes the item if it is `user`'s: true if a live item of theirs was there, false if no
    /// live item was, [`StoreError::NotOwner`] (nothing deleted) if the live item belongs to
    /// another user or to no user. The check and the delete are one atomic step.
    async fn delete_as(
        &self,
        namespace: &[String],
        key: &str,
        user: &str,
    ) -> Result<bool, StoreError>;

    /// Live items matching `query`.
    async fn search(&self, query: &SearchQuery) -> Result<Vec<Item>, StoreError>;

    /// The live items `search` finds for `query`'s prefix, filter and owner whose indexed text
    /// holds a word of `text`, ranked by lexical relevance ([`lexical::rank`]: BM25 over these
    /// candidates), then paged by `query.offset` and `query.limit`. Items put with
    /// [`Index::Off`] are never found.
    ///
    /// Every candidate is read to rank them, so the cost grows with the items under the prefix
    /// that pass the filter (not with the page). Backends share this default; one may push the
    /// word match into storage as long as the answer stays the same.
    async fn search_text(
        &self,
        query: &SearchQuery,
        text: &str,
    ) -> Result<Vec<ScoredItem>, StoreError> {
        check_prefix(&query.namespace_prefix)?;
        let all = self.search(&query.clone().page(usize::MAX, 0)).await?;
        Ok(lexical::rank(text, all)
            .into_iter()
            .skip(query.offset)
            .take(query.limit)
            .collect())
    }

    /// Namespaces holding live items, matching `query`.
    async fn list_namespaces(&self, query: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError>;

    /// Deletes every expired item; returns how many.
    async fn sweep(&self) -> Result<u64, StoreError>;
}

/// Checks a namespace (at least one label, labels non-empty and without `.`).
pub fn check_namespace(namespace: &[String]) -> Result<(), StoreError> {
    let bad = |reason| StoreError::BadNamespace {
        namespace: namespace.to_vec(),
        reason,
    };
    if namespace.is_empty() {
        return Err(bad("a namespace needs at least one label"));
    }
    if namespace.iter().any(|l| l.is_empty()) {
        return Err(bad("labels must not be empty"));
    }
    if namespace.iter().any(|l| l.contains('.')) {
        return Err(bad("labels must not contain `.`"));
    }
    Ok(())
}

/// Checks a namespace prefix used to search (may be empty: everything).
pub fn check_prefix(prefix: &[String]) -> Result<(), StoreError> {
    if prefix.is_empty() {
        Ok(())
    } else {
        check_namespace(prefix)
    }
}

pub(crate) fn check_item(namespace: &[String], key: &str) -> Result<(), StoreError> {
    check_namespace(namespace)?;
    if key.is_empty() {
        return Err(StoreError::EmptyKey);
    }
    Ok(())
}

/// The dotted text of a namespace (how SQL backends store it).
pub(crate) fn dotted(namespace: &[String]) -> String {
    namespace.join(".")
}

/// A namespace from its dotted text.
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(crate) fn undotted(text: &str) -> Namespace {
    text.split('.').map(str::to_string).collect()
}
