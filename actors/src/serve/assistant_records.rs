//! Assistants created through the API (`POST /assistants`): a graph the server serves, with a
//! config, a context, metadata, a name and a description of their own, versioned. They live in
//! the server's [`Store`] under a namespace of the server's own ([`NAMESPACE`], their versions
//! under [`VERSIONS`]), so they outlive a restart and every replica on the same store sees them.
//! The graphs registered in code are assistants too — system assistants, whose id is their graph
//! id — read-only and never stored.
//!
//! Writes that must not collide are single atomic steps of the store: an id is claimed by a put
//! that succeeds only when the key is free ([`PutOptions::owner`] set to a token of this write
//! alone: the store writes an absent key and refuses one another writer holds), and so is each
//! new version number. Two replicas creating one id: one creates it, the other finds it taken.
//! Two updates of one assistant at once: each gets a version of its own; the assistant's current
//! version is the one written last.
//!
//! [`resolve`] maps any assistant id — a registered graph's or a created assistant's — to the
//! graph that runs it and the config and context it runs with: what a run naming the id starts.

use super::assistants::AssistantRef;
use super::errors::ApiError;
use super::AppState;
use planwright::store::{PutOptions, SearchQuery, Store, StoreError};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

/// Where created assistants live in the store (one item per assistant, its current version).
pub const NAMESPACE: [&str; 2] = ["__planwright__", "assistants"];
/// Where every version of every created assistant lives (key `{assistant_id}:{version}`).
pub const VERSIONS: [&str; 2] = ["__planwright__", "assistant_versions"];

/// The most records one listing reads from the store.
const READ_CAP: usize = 100_000;
/// How many version numbers an update tries before giving up (each taken one means a concurrent
/// update got it first).
const VERSION_TRIES: u64 = 32;

/// One version of a created assistant, as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AssistantRecord {
    /// Its id.
    pub assistant_id: String,
    /// The registered graph it runs.
    pub graph_id: String,
    /// Its name.
    pub name: String,
    /// Its description.
    pub description: Option<String>,
    /// Its run config (a JSON object).
    pub config: Value,
    /// Its static context (a JSON object).
    pub context: Value,
    /// Its metadata (a JSON object).
    pub metadata: Value,
    /// This version's number (from 1).
    pub version: u64,
    /// When the assistant was created (ms since the Unix epoch).
    pub created_at: u64,
    /// When this version was made current.
    pub updated_at: u64,
    /// The user who created it (`None`: auth off or an admin's token).
    pub owner: Option<String>,
}

/// Why a stored assistant could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum RecordError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A stored record does not decode: corrupt data is an error, never a default.
    #[error("stored assistant `{key}` is corrupt: {reason}")]
    Corrupt {
        /// Its key.
        key: String,
        /// What is wrong.
        reason: String,
    },
    /// Every version number tried was taken by concurrent updates.
    #[error("assistant `{0}`: too many concurrent updates; try again")]
    Contended(String),
}

impl From<RecordError> for ApiError {
    fn from(e: RecordError) -> Self {
        match e {
            RecordError::Store(e) => ApiError::internal(e),
            e @ RecordError::Corrupt { .. } => ApiError::internal(e.to_string()),
            e @ RecordError::Contended(_) => ApiError::conflict(e.to_string()),
        }
    }
}

fn ns(labels: [&str; 2]) -> Vec<String> {
    labels.iter().map(|s| s.to_string()).collect()
}

fn version_key(id: &str, version: u64) -> String {
    format!("{id}:{version}")
}

fn encode(rec: &AssistantRecord) -> Map<String, Value> {
    match serde_json::to_value(rec) {
        Ok(Value::Object(m)) => m,
        _ => Map::new(),
    }
}

fn decode(key: &str, value: Map<String, Value>) -> Result<AssistantRecord, RecordError> {
    serde_json::from_value(Value::Object(value)).map_err(|e| RecordError::Corrupt {
        key: key.to_string(),
        reason: e.to_string(),
    })
}

/// A token only this write holds: a put with it as owner writes a free key and is refused one
/// that is taken.
fn claim_token() -> PutOptions {
    PutOptions {
        ttl: None,
        owner: Some(format!("claim-{}", super::ids::new_uuid())),
        ..PutOptions::default()
    }
}

/// The created assistants kept in a store.
pub struct AssistantRecords<'a> {
    store: &'a dyn Store,
}

impl<'a> AssistantRecords<'a> {
    /// The records in `store`.
    pub fn new(store: &'a dyn Store) -> Self {
        Self { store }
    }

    /// The current version of assistant `id`, if it exists.
    pub async fn get(&self, id: &str) -> Result<Option<AssistantRecord>, RecordError> {
        match self.store.get(&ns(NAMESPACE), id).await? {
            Some(item) => decode(id, item.value).map(Some),
            None => Ok(None),
        }
    }

    /// Stores `rec` (version 1) as a new assistant: `Ok(None)` when created, `Ok(Some(existing))`
    /// when its id is taken (the existing record; nothing is written).
    pub async fn create(
        &self,
        rec: &AssistantRecord,
    ) -> Result<Option<AssistantRecord>, RecordError> {
        let namespace = ns(NAMESPACE);
        match self
            .store
            .put(&namespace, &rec.assistant_id, encode(rec), claim_token())
            .await
        {
            Ok(_) => {}
            Err(StoreError::NotOwner { .. }) => {
                // Taken: by a record, or (for a moment) by a create whose record is on its way.
                return Ok(Some(
                    self.get(&rec.assistant_id)
                        .await?
                        .unwrap_or_else(|| rec.clone()),
                ));
            }
            Err(e) => return Err(e.into()),
        }
        self.store
            .put(
                &ns(VERSIONS),
                &version_key(&rec.assistant_id, rec.version),
                encode(rec),
                PutOptions::default(),
            )
            .await?;
        Ok(None)
    }

    /// Makes `next` (built from the current version `current`) a new version: numbered after
    /// every version stored, and current. Returns it as stored.
    pub async fn add_version(
        &self,
        current: &AssistantRecord,
        mut next: AssistantRecord,
    ) -> Result<AssistantRecord, RecordError> {
        let newest = self
            .versions(&current.assistant_id)
            .await?
            .first()
            .map_or(current.version, |v| v.version.max(current.version));
        let versions = ns(VERSIONS);
        for n in newest + 1..=newest + VERSION_TRIES {
            next.version = n;
            let key = version_key(&next.assistant_id, n);
            match self
                .store
                .put(&versions, &key, encode(&next), claim_token())
                .await
            {
                Ok(_) => {
                    self.store
                        .put(
                            &ns(NAMESPACE),
                            &next.assistant_id,
                            encode(&next),
                            PutOptions::default(),
                        )
                        .await?;
                    return Ok(next);
                }
                Err(StoreError::NotOwner { .. }) => continue,
                Err(e) => return Err(e.into()),
            }
        }
        Err(RecordError::Contended(next.assistant_id))
    }

    /// Makes stored version `version` of `id` current again (its fields, updated now); `None`
    /// when there is no such version.
    pub async fn set_latest(
        &self,
        id: &str,
        version: u64,
        now: u64,
    ) -> Result<Option<AssistantRecord>, RecordError> {
        let key = version_key(id, version);
        let Some(item) = self.store.get(&ns(VERSIONS), &key).await? else {
            return Ok(None);
        };
        let mut rec = decode(&key, item.value)?;
        rec.updated_at = now;
        self.store
            .put(&ns(NAMESPACE), id, encode(&rec), PutOptions::default())
            .await?;
        Ok(Some(rec))
    }

    /// Every stored version of `id`, newest first.
    pub async fn versions(&self, id: &str) -> Result<Vec<AssistantRecord>, RecordError> {
        let q = SearchQuery::under(VERSIONS)
            .with("assistant_id", json!(id))
            .page(READ_CAP, 0);
        let mut out = Vec::new();
        for item in self.store.search(&q).await? {
            out.push(decode(&item.key, item.value)?);
        }
        out.sort_by_key(|v| std::cmp::Reverse(v.version));
        Ok(out)
    }

    /// Every created assistant (its current version), in no particular order.
    pub async fn all(&self) -> Result<Vec<AssistantRecord>, RecordError> {
        let q = SearchQuery::under(NAMESPACE).page(READ_CAP, 0);
        let mut out = Vec::new();
        for item in self.store.search(&q).await? {
            out.push(decode(&item.key, item.value)?);
        }
        Ok(out)
    }

    /// Deletes assistant `id` and its versions; whether it was there.
    pub async fn delete(&self, id: &str) -> Result<bool, RecordError> {
        let versions = self.versions(id).await?;
        let was = self.store.delete(&ns(NAMESPACE), id).await?;
        let vs = ns(VERSIONS);
        for v in versions {
            self.store.delete(&vs, &version_key(id, v.version)).await?;
        }
        Ok(was)
    }
}

/// What a run naming an assistant id runs: the registered graph, and the created assistant's
/// config and context (`{}` for a registered graph named by its own id).
#[derive(Clone)]
pub struct Resolved {
    /// The registered graph that runs.
    pub graph: AssistantRef,
    /// The id the run named.
    pub assistant_id: String,
    /// The assistant's version the run takes (1 for a registered graph).
    pub version: u64,
    /// The assistant's run config (a JSON object).
    pub config: Value,
    /// The assistant's static context (a JSON object).
    pub context: Value,
}

/// The graph and settings assistant `id` runs with: a registered graph (its own id), else a
/// created assistant read from the store (its current version). 404 for an id that is neither,
/// naming the registered graphs; 404 for a created assistant whose graph this server no longer
/// serves, naming the graph. A created assistant another user made is unknown to the caller
/// (404), as their threads are; with no caller (the server's own work: a cron firing, a queued
/// run) every assistant is found.
///
/// Runs call it to map the `assistant_id` of a run request to the graph that runs it:
///
/// ```ignore
/// let r = super::assistant_records::resolve(&state, body.assistant()).await?;
/// // r.graph: the AssistantRef to start (and to bind the thread to: threads bind to graphs);
/// // r.config / r.context: the assistant's defaults, under the run's own.
/// ```
pub async fn resolve(state: &AppState, id: &str) -> Result<Resolved, ApiError> {
    if let Some(graph) = state.assistants.find(id) {
        return Ok(Resolved {
            graph: graph.clone(),
            assistant_id: id.to_string(),
            version: 1,
            config: json!({}),
            context: json!({}),
        });
    }
    let rec = visible(state, id).await?;
    let graph = state
        .assistants
        .find(&rec.graph_id)
        .cloned()
        .ok_or_else(|| {
            ApiError::not_found(format!(
                "assistant `{id}` runs graph `{}`, which this server does not serve",
                rec.graph_id
            ))
        })?;
    Ok(Resolved {
        graph,
        assistant_id: rec.assistant_id,
        version: rec.version,
        config: rec.config,
        context: rec.context,
    })
}

/// The created assistant `id` as the caller may see it (its creator's, or any for an admin and
/// the server's own work), else 404 naming the registered graphs.
pub async fn visible(state: &AppState, id: &str) -> Result<AssistantRecord, ApiError> {
    AssistantRecords::new(state.store.as_ref())
        .get(id)
        .await?
        .filter(|r| super::auth::caller_may_see(&json!({ "owner": r.owner })))
        .ok_or_else(|| match state.assistants.get(id) {
            Err(e) => e,
            Ok(_) => ApiError::not_found(format!("unknown assistant `{id}`")),
        })
}

#[cfg(test)]
mod tests {
    use super::*;
    use planwright::store::MemoryStore;

    fn rec(id: &str, graph: &str) -> AssistantRecord {
        AssistantRecord {
            assistant_id: id.into(),
            graph_id: graph.into(),
            name: "Untitled".into(),
            description: None,
            config: json!({}),
            context: json!({}),
            metadata: json!({}),
            version: 1,
            created_at: 1,
            updated_at: 1,
            owner: None,
        }
    }

    #[tokio::test]
    async fn an_id_is_created_once_and_versions_number_on_from_the_newest() {
        let store = MemoryStore::new();
        let records = AssistantRecords::new(&store);
        assert_eq!(records.create(&rec("a", "g")).await.unwrap(), None);
        let mut other = rec("a", "h");
        other.name = "second".into();
        let existing = records.create(&other).await.unwrap().unwrap();
        assert_eq!(existing.graph_id, "g", "the first create keeps the id");

        let v1 = records.get("a").await.unwrap().unwrap();
        let mut next = v1.clone();
        next.name = "renamed".into();
        let v2 = records.add_version(&v1, next.clone()).await.unwrap();
        assert_eq!(v2.version, 2);
        // An update that read version 1 (a concurrent one) still gets a version of its own.
        let v3 = records.add_version(&v1, next).await.unwrap();
        assert_eq!(v3.version, 3);
        let nums: Vec<u64> = records
            .versions("a")
            .await
            .unwrap()
            .iter()
            .map(|v| v.version)
            .collect();
        assert_eq!(nums, [3, 2, 1]);

        let back = records.set_latest("a", 1, 99).await.unwrap().unwrap();
        assert_eq!(
            (back.version, back.name.as_str(), back.updated_at),
            (1, "Untitled", 99)
        );
        assert_eq!(records.get("a").await.unwrap().unwrap().version, 1);
        assert_eq!(records.set_latest("a", 7, 99).await.unwrap(), None);

        assert!(records.delete("a").await.unwrap());
        assert_eq!(records.get("a").await.unwrap(), None);
        assert!(records.versions("a").await.unwrap().is_empty());
        assert!(!records.delete("a").await.unwrap());
        // The id is free again.
        assert_eq!(records.create(&rec("a", "g")).await.unwrap(), None);
    }

    #[tokio::test]
    async fn resolve_maps_an_assistant_id_to_its_graph_config_and_context() {
        let args = crate::serve::ServeArgs {
            checkpoint: "memory:".into(),
            model: "offline".into(),
            ..crate::serve::ServeArgs::default()
        };
        let st = crate::serve::state(&args).await.unwrap();
        // A registered graph is its own assistant, with nothing of its own.
        let r = resolve(&st, "acquire").await.unwrap();
        assert_eq!((r.graph.id(), r.version), ("acquire", 1));
        assert_eq!((r.config, r.context), (json!({}), json!({})));
        // A created assistant runs its graph with its current version's settings.
        let records = AssistantRecords::new(st.store.as_ref());
        let mut a = rec("nightly", "research");
        a.config = json!({"configurable": {"depth": 2}});
        a.context = json!({"user": "ann"});
        records.create(&a).await.unwrap();
        let mut next = a.clone();
        next.context = json!({"user": "bob"});
        records.add_version(&a, next).await.unwrap();
        let r = resolve(&st, "nightly").await.unwrap();
        assert_eq!(
            (r.graph.id(), r.assistant_id.as_str(), r.version),
            ("research", "nightly", 2)
        );
        assert_eq!(r.config, json!({"configurable": {"depth": 2}}));
        assert_eq!(r.context, json!({"user": "bob"}));
        // Unknown ids and graphs this server does not serve are 404s that say so.
        let e = resolve(&st, "nope").await.err().unwrap();
        assert_eq!(e.0, axum::http::StatusCode::NOT_FOUND);
        assert!(e.1.contains("research"), "{}", e.1);
        records.create(&rec("orphan", "gone")).await.unwrap();
        let e = resolve(&st, "orphan").await.err().unwrap();
        assert!(e.1.contains("`gone`"), "{}", e.1);
        // Another user's assistant is unknown to a caller; the server's own work finds it.
        let mut anns = rec("ann-only", "research");
        anns.owner = Some("ann".into());
        records.create(&anns).await.unwrap();
        let bob = crate::serve::auth::Principal {
            user: "bob".into(),
            admin: false,
        };
        let e = crate::serve::auth::as_caller(bob, resolve(&st, "ann-only"))
            .await
            .err()
            .unwrap();
        assert_eq!(e.0, axum::http::StatusCode::NOT_FOUND);
        assert!(resolve(&st, "ann-only").await.is_ok());
    }

    #[tokio::test]
    async fn a_corrupt_record_is_an_error_not_a_default() {
        let store = MemoryStore::new();
        let mut bad = Map::new();
        bad.insert("assistant_id".into(), json!("x"));
        store
            .put(&ns(NAMESPACE), "x", bad, PutOptions::default())
            .await
            .unwrap();
        let e = AssistantRecords::new(&store).get("x").await.unwrap_err();
        assert!(matches!(e, RecordError::Corrupt { .. }), "{e}");
    }
}
