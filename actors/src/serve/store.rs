//! The `/store` endpoints of the LangGraph Server API over the runtime's [`Store`](planwright::store::Store): the same
//! cross-thread memory the graphs' nodes read and write (`NodeContext::store`).
//!
//! - `PUT /store/items` `{"namespace": [...], "key", "value": {...}, "ttl": minutes?,
//!   "index": false | ["path", ...]?}` → 204
//! - `GET /store/items?namespace=a.b&key=k` → the item, or 404
//! - `DELETE /store/items` `{"namespace": [...], "key"}` → 204 (404 when there was none)
//! - `POST /store/items/search` `{"namespace_prefix", "filter", "limit", "offset", "query"?}` →
//!   `{"items"}`; with a `query`, only items whose indexed text holds one of its words, best
//!   first, each with its `score` ([`Store::search_text`](planwright::store::Store::search_text):
//!   lexical BM25 ranking, no embeddings; docs/server.md says how it differs from LangGraph's)
//! - `POST /store/namespaces` `{"prefix", "suffix", "max_depth", "limit", "offset"}` →
//!   `{"namespaces"}`
//!
//! Items are JSON objects; times are RFC 3339 (UTC).
//!
//! Owners: a user's write records them as the item's owner ([`owner`]; an admin's keeps the
//! owner the item has), and a user reaches only their own items — the store checks it in the same atomic step as the change
//! ([`Store::put`](planwright::store::Store::put), `get_as`, `delete_as`), so a read-then-write
//! race cannot hand one user's item to another. For a user, another user's item and an item with
//! no owner (written by an admin, with auth off, or by a graph's node) are alike:
//! - `PUT` answers 403: a write cannot hide that the key is taken (writing a free key succeeds),
//!   so it says plainly that the item is not the caller's, without naming its owner;
//! - `GET` and `DELETE` answer 404, as for an item that does not exist (as another user's
//!   thread answers), and the item's TTL is not refreshed;
//! - search and `POST /store/namespaces` list only the caller's items and the namespaces holding
//!   them. An admin's requests are unrestricted.

use super::auth::Principal;
use super::errors::ApiError;
use super::time::rfc3339;
use super::AppState;
use axum::extract::rejection::{JsonRejection, QueryRejection};
use axum::extract::{Query, State};
use axum::http::StatusCode;
use axum::Json;
use planwright::store::{Index, Item, NamespaceQuery, PutOptions, SearchQuery, StoreError};
use serde::Deserialize;
use serde_json::{json, Map, Value};
use std::sync::Arc;
use std::time::Duration;

/// How often the server deletes expired items (they are invisible from the moment they expire;
/// this reclaims their space).
pub const SWEEP_EVERY: Duration = Duration::from_secs(300);

/// Deletes expired items every `every` until the server stops; a failed sweep is logged and
/// tried again next time.
pub fn spawn_sweeper(
    store: Arc<dyn planwright::store::Store>,
    every: Duration,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(async move {
        let mut tick = tokio::time::interval(every);
        tick.tick().await;
        loop {
            tick.tick().await;
            match store.sweep().await {
                Ok(0) => {}
                Ok(n) => tracing::debug!(deleted = n, "store sweep"),
                Err(e) => tracing::warn!(error = %planwright::ErrorChain(&e), "store sweep failed"),
            }
        }
    })
}

/// The most items or namespaces one call returns.
const MAX_LIMIT: usize = 1000;

/// The owner of a request's items: the authenticated user, so each user reaches their own items;
/// `None` for an admin (or with no auth), who reaches all. Taken from the [`Principal`] the auth
/// middleware puts in the request (never from anything the client sends).
pub fn owner(me: &Principal) -> Option<String> {
    (!me.admin).then(|| me.user.clone())
}

fn store_error(e: StoreError) -> ApiError {
    match e {
        e @ (StoreError::BadNamespace { .. } | StoreError::EmptyKey) => {
            ApiError::bad(e.to_string())
        }
        StoreError::NotOwner { namespace, key } => ApiError(
            StatusCode::FORBIDDEN,
            format!(
                "item `{key}` in namespace {namespace:?} belongs to another user: it is not yours to write"
            ),
        ),
        e => ApiError::internal(e),
    }
}

/// The first label of the server's own records in the store (created assistants, crons and their
/// firings): `/store` writes and deletes there are refused (403), so no client forges or removes
/// them; they change only through their own endpoints.
pub const RESERVED: &str = "__planwright__";

fn check_writable(namespace: &[String]) -> Result<(), ApiError> {
    if namespace.first().map(String::as_str) == Some(RESERVED) {
        return Err(ApiError(
            StatusCode::FORBIDDEN,
            format!(
                "namespace {namespace:?} holds the server's own records: use /assistants and \
                 /runs/crons"
            ),
        ));
    }
    Ok(())
}

fn no_item(namespace: &[String], key: &str) -> ApiError {
    ApiError::not_found(format!("no item `{key}` in namespace {namespace:?}"))
}

fn item_json(i: &Item) -> Value {
    json!({
        "namespace": i.namespace,
        "key": i.key,
        "value": i.value,
        "created_at": rfc3339(i.created_at),
        "updated_at": rfc3339(i.updated_at),
        "expires_at": i.expires_at.map(rfc3339),
    })
}

fn limit(n: Option<usize>, default: usize) -> Result<usize, ApiError> {
    match n.unwrap_or(default) {
        0 => Err(ApiError::bad("limit must be at least 1")),
        n if n > MAX_LIMIT => Err(ApiError::bad(format!(
            "limit {n} is above the maximum of {MAX_LIMIT}"
        ))),
        n => Ok(n),
    }
}

/// `PUT /store/items`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PutBody {
    namespace: Vec<String>,
    key: String,
    value: Value,
    /// Minutes (LangGraph's unit); absent or null: never expires.
    #[serde(default)]
    ttl: Option<f64>,
    /// What a text search matches: absent or null the whole value, `false` nothing, a list of
    /// field paths the text at those paths.
    #[serde(default)]
    index: Option<Value>,
}

/// `PUT /store/items`: writes an item (204); 403 when it is another user's (or no user's).
pub async fn put_item(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<Principal>,
    body: Result<Json<PutBody>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let Json(b) = body?;
    check_writable(&b.namespace)?;
    let value: Map<String, Value> = match b.value {
        Value::Object(m) => m,
        other => {
            return Err(ApiError::bad(format!(
                "`value` must be a JSON object, not {other}"
            )))
        }
    };
    let ttl = match b.ttl {
        None => None,
        Some(m) if m.is_finite() && m > 0.0 && m <= 1e9 => Some(Duration::from_secs_f64(m * 60.0)),
        Some(m) => {
            return Err(ApiError::bad(format!(
                "`ttl` is in minutes and must be positive, not {m}"
            )))
        }
    };
    let index = Index::from_json(b.index.as_ref().unwrap_or(&Value::Null))
        .map_err(|e| ApiError::bad(e.to_string()))?;
    let opts = PutOptions {
        ttl,
        owner: owner(&me),
        index,
    };
    state
        .store
        .put(&b.namespace, &b.key, value, opts)
        .await
        .map_err(store_error)?;
    Ok(StatusCode::NO_CONTENT)
}

/// `GET /store/items` query.
#[derive(Deserialize)]
pub struct GetQuery {
    /// Dotted namespace (`a.b`).
    namespace: Option<String>,
    key: String,
}

/// `GET /store/items`: one item, or 404 (also for an item the caller may not see).
pub async fn get_item(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<Principal>,
    query: Result<Query<GetQuery>, QueryRejection>,
) -> Result<Json<Value>, ApiError> {
    let Query(q) = query.map_err(|e| ApiError::bad(e.body_text()))?;
    let ns: Vec<String> = match q.namespace.as_deref() {
        None | Some("") => Vec::new(),
        Some(s) => s.split('.').map(str::to_string).collect(),
    };
    let found = match owner(&me) {
        Some(me) => state.store.get_as(&ns, &q.key, &me).await,
        None => state.store.get(&ns, &q.key).await,
    };
    match found.map_err(store_error)? {
        Some(i) => Ok(Json(item_json(&i))),
        None => Err(no_item(&ns, &q.key)),
    }
}

/// `DELETE /store/items`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct DeleteBody {
    namespace: Vec<String>,
    key: String,
}

/// `DELETE /store/items`: deletes an item (204), or 404 when there is none (or the caller may
/// not see it).
pub async fn delete_item(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<Principal>,
    body: Result<Json<DeleteBody>, JsonRejection>,
) -> Result<StatusCode, ApiError> {
    let Json(b) = body?;
    check_writable(&b.namespace)?;
    let deleted = match owner(&me) {
        Some(me) => state.store.delete_as(&b.namespace, &b.key, &me).await,
        None => state.store.delete(&b.namespace, &b.key).await,
    };
    match deleted {
        Ok(true) => Ok(StatusCode::NO_CONTENT),
        Ok(false) | Err(StoreError::NotOwner { .. }) => Err(no_item(&b.namespace, &b.key)),
        Err(e) => Err(store_error(e)),
    }
}

/// `POST /store/items/search`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SearchBody {
    #[serde(default)]
    namespace_prefix: Vec<String>,
    #[serde(default)]
    filter: Option<Map<String, Value>>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
    /// Words to look for in the items' indexed text: the answer is ranked by lexical relevance
    /// (empty or blank: a plain search).
    #[serde(default)]
    query: Option<String>,
    /// Accepted for compatibility (searches never refresh TTLs).
    #[serde(default)]
    #[allow(dead_code)]
    refresh_ttl: Option<bool>,
}

/// `POST /store/items/search`: items under a prefix, filtered and paged (the caller's own, for a
/// user); with a `query`, the ones matching its words, best first, each with its `score`.
pub async fn search_items(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<Principal>,
    body: Result<Json<SearchBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    let text = b.query.filter(|q| !q.trim().is_empty());
    if let Some(t) = &text {
        if planwright::store::lexical::words(t).next().is_none() {
            return Err(ApiError::bad(format!(
                "`query` {t:?} has no word to look for (a run of letters or digits)"
            )));
        }
    }
    let q = SearchQuery {
        namespace_prefix: b.namespace_prefix,
        filter: b.filter.unwrap_or_default(),
        owner: owner(&me),
        limit: limit(b.limit, 10)?,
        offset: b.offset.unwrap_or(0),
    };
    let items: Vec<Value> = match text {
        None => {
            let items = state.store.search(&q).await.map_err(store_error)?;
            items.iter().map(item_json).collect()
        }
        Some(t) => {
            let hits = state.store.search_text(&q, &t).await.map_err(store_error)?;
            hits.iter()
                .map(|h| {
                    let mut v = item_json(&h.item);
                    v["score"] = json!(h.score);
                    v
                })
                .collect()
        }
    };
    Ok(Json(json!({ "items": items })))
}

/// `POST /store/namespaces`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NamespacesBody {
    #[serde(default)]
    prefix: Vec<String>,
    #[serde(default)]
    suffix: Vec<String>,
    #[serde(default)]
    max_depth: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
    #[serde(default)]
    offset: Option<usize>,
}

/// `POST /store/namespaces`: namespaces holding items (the caller's items, for a user).
pub async fn list_namespaces(
    State(state): State<Arc<AppState>>,
    axum::Extension(me): axum::Extension<Principal>,
    body: Result<Json<NamespacesBody>, JsonRejection>,
) -> Result<Json<Value>, ApiError> {
    let Json(b) = body?;
    if b.max_depth == Some(0) {
        return Err(ApiError::bad("max_depth must be at least 1"));
    }
    let q = NamespaceQuery {
        prefix: b.prefix,
        suffix: b.suffix,
        max_depth: b.max_depth,
        owner: owner(&me),
        limit: limit(b.limit, 100)?,
        offset: b.offset.unwrap_or(0),
    };
    let namespaces = state.store.list_namespaces(&q).await.map_err(store_error)?;
    Ok(Json(json!({ "namespaces": namespaces })))
}

#[cfg(test)]
mod sweep_tests {
    use super::spawn_sweeper;
    use planwright::store::{MemoryStore, PutOptions, Store};
    use serde_json::Map;
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn the_sweeper_deletes_expired_items_on_its_period() {
        let store = Arc::new(MemoryStore::new());
        let ns = vec!["t".to_string()];
        store
            .put(
                &ns,
                "k",
                Map::new(),
                PutOptions::ttl(Duration::from_secs(10)),
            )
            .await
            .unwrap();
        let sweeper = spawn_sweeper(store.clone(), Duration::from_secs(60));
        tokio::time::sleep(Duration::from_secs(61)).await;
        assert_eq!(
            store.sweep().await.unwrap(),
            0,
            "the sweeper already deleted it"
        );
        sweeper.abort();
    }
}
