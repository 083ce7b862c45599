//! The in-memory store: the reference model the SQL backends are tested against.

use super::{
    check_item, check_prefix, dotted, system_clock, Item, Namespace, NamespaceQuery, PutOptions,
    SearchQuery, Store, StoreClock, StoreError,
};
use async_trait::async_trait;
use serde_json::{Map, Value};
use std::collections::BTreeMap;
use std::sync::Mutex;

#[derive(Clone, Debug)]
struct Entry {
    item: Item,
    ttl_ms: Option<u64>,
}

/// A store in this process's memory, shared by every thread of the engines it is given to.
pub struct MemoryStore {
    /// Keyed by (dotted namespace, key): the order every backend returns.
    items: Mutex<BTreeMap<(String, String), Entry>>,
    clock: StoreClock,
}

impl Default for MemoryStore {
    fn default() -> Self {
        Self::new()
    }
}

impl MemoryStore {
    /// An empty store on the default clock.
    pub fn new() -> Self {
        Self::with_clock(system_clock())
    }

    /// An empty store on `clock`.
    pub fn with_clock(clock: StoreClock) -> Self {
        Self {
            items: Mutex::new(BTreeMap::new()),
            clock,
        }
    }

    /// The live item (if `user` is given: only theirs), its TTL refreshed.
    fn read(
        &self,
        namespace: &[String],
        key: &str,
        user: Option<&str>,
    ) -> Result<Option<Item>, StoreError> {
        check_item(namespace, key)?;
        let now = (self.clock)();
        let mut items = self.lock();
        let Some(e) = items.get_mut(&(dotted(namespace), key.to_string())) else {
            return Ok(None);
        };
        if !live(e, now) || user.is_some_and(|u| e.item.owner.as_deref() != Some(u)) {
            return Ok(None);
        }
        if let Some(t) = e.ttl_ms {
            e.item.expires_at = Some(now + t);
        }
        Ok(Some(e.item.clone()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), Entry>> {
        self.items.lock().unwrap_or_else(|p| p.into_inner())
    }
}

fn live(e: &Entry, now: u64) -> bool {
    e.item.expires_at.is_none_or(|t| t > now)
}

#[async_trait]
impl Store for MemoryStore {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    async fn put(
        &self,
        namespace: &[String],
        key: &str,
        value: Map<String, Value>,
        opts: PutOptions,
    ) -> Result<Item, StoreError> {
        check_item(namespace, key)?;
        let now = (self.clock)();
        let ttl_ms = opts.ttl.map(|t| t.as_millis() as u64);
        let mut items = self.lock();
        let k = (dotted(namespace), key.to_string());
        let was = items.get(&k).filter(|e| live(e, now)).map(|e| &e.item);
        // The check and the write happen under one lock: nobody writes in between.
        if let (Some(user), Some(was)) = (opts.owner.as_deref(), was) {
            if was.owner.as_deref() != Some(user) {
                return Err(StoreError::not_owner(namespace, key));
            }
        }
        let item = Item {
            namespace: namespace.to_vec(),
            key: key.to_string(),
            value,
            created_at: was.map_or(now, |w| w.created_at),
            updated_at: now,
            expires_at: ttl_ms.map(|t| now + t),
            owner: opts.owner.or_else(|| was.and_then(|w| w.owner.clone())),
            index: opts.index,
        };
        items.insert(
            k,
            Entry {
                item: item.clone(),
                ttl_ms,
            },
        );
        Ok(item)
    }

    async fn get(&self, namespace: &[String], key: &str) -> Result<Option<Item>, StoreError> {
        self.read(namespace, key, None)
    }

    async fn get_as(
        &self,
        namespace: &[String],
        key: &str,
        user: &str,
    ) -> Result<Option<Item>, StoreError> {
        self.read(namespace, key, Some(user))
    }

    async fn delete(&self, namespace: &[String], key: &str) -> Result<bool, StoreError> {
        check_item(namespace, key)?;
        let now = (self.clock)();
        let removed = self.lock().remove(&(dotted(namespace), key.to_string()));
        Ok(removed.is_some_and(|e| live(&e, now)))
    }

    async fn delete_as(
        &self,
        namespace: &[String],
        key: &str,
        user: &str,
    ) -> Result<bool, StoreError> {
        check_item(namespace, key)?;
        let now = (self.clock)();
        let mut items = self.lock();
        let k = (dotted(namespace), key.to_string());
        let Some(e) = items.get(&k) else {
            return Ok(false);
        };
        let (alive, mine) = (live(e, now), e.item.owner.as_deref() == Some(user));
        if alive && !mine {
            return Err(StoreError::not_owner(namespace, key));
        }
        items.remove(&k);
        Ok(alive)
    }

    async fn search(&self, query: &SearchQuery) -> Result<Vec<Item>, StoreError> {
        check_prefix(&query.namespace_prefix)?;
        let now = (self.clock)();
        Ok(self
            .lock()
            .values()
            .filter(|e| live(e, now) && query.matches(&e.item))
            .skip(query.offset)
            .take(query.limit)
            .map(|e| e.item.clone())
            .collect())
    }

    async fn list_namespaces(&self, query: &NamespaceQuery) -> Result<Vec<Namespace>, StoreError> {
        let now = (self.clock)();
        let all: Vec<Namespace> = self
            .lock()
            .values()
            .filter(|e| live(e, now) && (query.owner.is_none() || e.item.owner == query.owner))
            .map(|e| e.item.namespace.clone())
            .collect();
        Ok(query.answer(all))
    }

    async fn sweep(&self) -> Result<u64, StoreError> {
        let now = (self.clock)();
        let mut items = self.lock();
        let before = items.len();
        items.retain(|_, e| live(e, now));
        Ok((before - items.len()) as u64)
    }
}
