//! Node cache: a node may declare a [`CachePolicy`] (`StateGraph::cache_policy`) so that a call
//! with the same key — by default the node's whole input: the state it sees and its `Send`
//! input — is answered with the update an earlier call returned, across every conversation of
//! the compiled graph, until the entry's TTL runs out.
//!
//! What is cached is the node's update, never an error or an interrupt; a task re-run with a
//! resume value bypasses the cache (its answer depends on the resume). The cache lives in the
//! process's memory, shared by every engine built from the compiled graph, bounded by
//! `max_entries` (expired entries go first, then the oldest). Hits and misses show in
//! `Engine::node_stats`. Expiry uses tokio's clock, so tests move it with paused time.

use crate::node::{Node, NodeBody, NodeContext, NodeError, NodeFuture};
use crate::state::State;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

type KeyFn<S> = dyn Fn(&S, Option<&serde_json::Value>) -> Result<String, String> + Send + Sync;

/// How a node's answers are cached.
pub struct CachePolicy<S: State> {
    key: Arc<KeyFn<S>>,
    ttl: Option<Duration>,
    max_entries: usize,
}

impl<S: State> Clone for CachePolicy<S> {
    fn clone(&self) -> Self {
        Self {
            key: self.key.clone(),
            ttl: self.ttl,
            max_entries: self.max_entries,
        }
    }
}

impl<S: State> Default for CachePolicy<S> {
    fn default() -> Self {
        Self::new()
    }
}

impl<S: State> CachePolicy<S> {
    /// Keyed by the node's whole input (state and `Send` input, as JSON); no TTL; 10 000 entries.
    pub fn new() -> Self {
        Self {
            key: Arc::new(|s: &S, input: Option<&serde_json::Value>| {
                serde_json::to_string(&(s, input)).map_err(|e| e.to_string())
            }),
            ttl: None,
            max_entries: 10_000,
        }
    }

    /// Keyed by `key` of the state and the `Send` input: calls with equal keys share an answer,
    /// so the key must cover everything the node reads.
    pub fn keyed(
        key: impl Fn(&S, Option<&serde_json::Value>) -> String + Send + Sync + 'static,
    ) -> Self {
        Self {
            key: Arc::new(move |s: &S, i: Option<&serde_json::Value>| Ok(key(s, i))),
            ..Self::new()
        }
    }

    /// Entries expire this long after they are written.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = Some(ttl);
        self
    }

    /// At most this many entries (at least 1).
    pub fn max_entries(mut self, n: usize) -> Self {
        self.max_entries = n.max(1);
        self
    }
}

/// Hits and misses of one node's cache.
#[derive(Debug, Default)]
pub struct CacheStats {
    hits: AtomicU64,
    misses: AtomicU64,
}

impl CacheStats {
    /// Calls answered from the cache.
    pub fn hits(&self) -> u64 {
        self.hits.load(Ordering::Relaxed)
    }

    /// Calls that ran the node.
    pub fn misses(&self) -> u64 {
        self.misses.load(Ordering::Relaxed)
    }
}

struct Entries<U> {
    map: HashMap<String, (Option<Instant>, U)>,
    order: VecDeque<String>,
}

struct Cache<S: State> {
    policy: CachePolicy<S>,
    entries: Mutex<Entries<S::Update>>,
    stats: Arc<CacheStats>,
}

impl<S: State> Cache<S> {
    fn key(&self, state: &S, ctx: &NodeContext) -> Result<Option<String>, NodeError> {
        if ctx.resume_value().is_some() {
            return Ok(None);
        }
        (self.policy.key)(state, ctx.input())
            .map(Some)
            .map_err(|e| NodeError::Fatal(format!("cache key of `{}`: {e}", ctx.node())))
    }

    fn lookup(&self, key: &str) -> Option<S::Update> {
        let now = Instant::now();
        let e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        let hit = e
            .map
            .get(key)
            .filter(|(exp, _)| exp.is_none_or(|t| t > now))
            .map(|(_, u)| u.clone());
        match &hit {
            Some(_) => self.stats.hits.fetch_add(1, Ordering::Relaxed),
            None => self.stats.misses.fetch_add(1, Ordering::Relaxed),
        };
        hit
    }

    fn store(&self, key: String, update: &S::Update) {
        let now = Instant::now();
        let expires = self.policy.ttl.map(|t| now + t);
        let mut e = self.entries.lock().unwrap_or_else(|p| p.into_inner());
        if e.map.len() >= self.policy.max_entries && !e.map.contains_key(&key) {
            e.map.retain(|_, (exp, _)| exp.is_none_or(|t| t > now));
            let Entries { map, order } = &mut *e;
            order.retain(|k| map.contains_key(k));
            while map.len() >= self.policy.max_entries {
                match order.pop_front() {
                    Some(old) => {
                        map.remove(&old);
                    }
                    None => break,
                }
            }
        }
        if e.map
            .insert(key.clone(), (expires, update.clone()))
            .is_none()
        {
            e.order.push_back(key);
        }
    }
}

struct CachedNode<S: State> {
    inner: Arc<dyn Node<S>>,
    cache: Arc<Cache<S>>,
}

impl<S: State> Node<S> for CachedNode<S> {
    fn run(&self, state: Arc<S>, ctx: NodeContext) -> NodeFuture<S::Update> {
        let key = match self.cache.key(&state, &ctx) {
            Ok(k) => k,
            Err(e) => return Box::pin(async move { Err(e) }),
        };
        if let Some(hit) = key.as_deref().and_then(|k| self.cache.lookup(k)) {
            return Box::pin(async move { Ok(hit) });
        }
        let fut = self.inner.run(state, ctx);
        let cache = self.cache.clone();
        Box::pin(async move {
            let update = fut.await?;
            if let Some(k) = key {
                cache.store(k, &update);
            }
            Ok(update)
        })
    }
}

/// `body` answering from a cache under `policy`, and the cache's counters.
pub(crate) fn wrap<S: State>(
    body: NodeBody<S>,
    policy: CachePolicy<S>,
) -> (NodeBody<S>, Arc<CacheStats>) {
    let stats = Arc::new(CacheStats::default());
    let cache = Arc::new(Cache {
        policy,
        entries: Mutex::new(Entries {
            map: HashMap::new(),
            order: VecDeque::new(),
        }),
        stats: stats.clone(),
    });
    let body = match body {
        NodeBody::Sync(f) => NodeBody::Sync(Arc::new(move |s: &S, ctx: &NodeContext| {
            let key = cache.key(s, ctx)?;
            if let Some(hit) = key.as_deref().and_then(|k| cache.lookup(k)) {
                return Ok(hit);
            }
            let update = f(s, ctx)?;
            if let Some(k) = key {
                cache.store(k, &update);
            }
            Ok(update)
        })),
        NodeBody::Async(inner) => NodeBody::Async(Arc::new(CachedNode { inner, cache })),
    };
    (body, stats)
}
