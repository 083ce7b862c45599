//! The in-process checkpointer: fast, for tests and for engines that want history and interrupts
//! without a file. Everything is lost with the process.
//!
//! One mutex guards the whole store; every operation is a short critical section with no await
//! inside, so it never blocks a tokio worker for long.

use super::{
    CheckpointError, CheckpointMetadata, CheckpointRecord, Checkpointer, EffectJournal, TaskWrite,
    ThreadSummary,
};
use crate::ids::{CheckpointId, ThreadId};
use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Mutex, MutexGuard};

#[derive(Default)]
struct ThreadData {
    checkpoints: BTreeMap<CheckpointId, CheckpointRecord>,
    /// Task writes by the checkpoint their superstep runs from.
    writes: HashMap<CheckpointId, Vec<TaskWrite>>,
    metadata: Option<serde_json::Value>,
}

impl ThreadData {
    fn head(&self) -> Option<CheckpointId> {
        self.checkpoints.keys().next_back().copied()
    }
}

/// Checkpoints kept in process memory (`memory:`).
#[derive(Default)]
pub struct MemoryCheckpointer {
    threads: Mutex<BTreeMap<ThreadId, ThreadData>>,
    /// The effect journal: by thread, each key's value and the checkpoint its task started
    /// from. Apart from `threads`, so that an entry never makes a thread known.
    effects: Mutex<HashMap<ThreadId, Effects>>,
}

/// A thread's journaled effects: key → (checkpoint the task started from, value).
type Effects = HashMap<String, (CheckpointId, Vec<u8>)>;

impl MemoryCheckpointer {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, BTreeMap<ThreadId, ThreadData>> {
        // A panic while holding the lock cannot leave a half-applied change: every mutation below
        // is a single insert or remove. So a poisoned lock is still consistent.
        self.threads.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps the journal entries of `thread` for which `keep` holds (the checkpoint their task
    /// started from).
    fn retain_effects(&self, thread: &ThreadId, keep: impl Fn(CheckpointId) -> bool) {
        let mut effects = self.effects.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(e) = effects.get_mut(thread) {
            e.retain(|_, (cp, _)| keep(*cp));
            if e.is_empty() {
                effects.remove(thread);
            }
        }
    }
}

#[async_trait]
impl EffectJournal for MemoryCheckpointer {
    async fn effect_get(
        &self,
        thread: &ThreadId,
        key: &str,
    ) -> Result<Option<Vec<u8>>, CheckpointError> {
        let effects = self.effects.lock().unwrap_or_else(|p| p.into_inner());
        Ok(effects
            .get(thread)
            .and_then(|e| e.get(key))
            .map(|(_, v)| v.clone()))
    }

    async fn effect_put(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        key: &str,
        value: Vec<u8>,
    ) -> Result<Vec<u8>, CheckpointError> {
        let mut effects = self.effects.lock().unwrap_or_else(|p| p.into_inner());
        let stored = effects
            .entry(thread.clone())
            .or_default()
            .entry(key.to_string())
            .or_insert((checkpoint, value));
        Ok(stored.1.clone())
    }
}

fn put_one(
    threads: &mut BTreeMap<ThreadId, ThreadData>,
    record: CheckpointRecord,
) -> Result<(), CheckpointError> {
    let data = threads.entry(record.thread_id.clone()).or_default();
    let head = data.head();
    if head != record.parent || record.parent.is_some_and(|p| p >= record.id) {
        return Err(CheckpointError::Conflict {
            thread: record.thread_id.clone(),
            expected: record.parent,
            found: head,
        });
    }
    data.checkpoints.insert(record.id, record);
    Ok(())
}

fn sort_writes(writes: &mut [TaskWrite]) {
    writes.sort_by(|a, b| (a.task, &a.key).cmp(&(b.task, &b.key)));
}

#[async_trait]
impl Checkpointer for MemoryCheckpointer {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    fn effect_journal(&self) -> Option<&dyn EffectJournal> {
        Some(self)
    }

    async fn put(&self, record: CheckpointRecord) -> Result<(), CheckpointError> {
        put_one(&mut self.lock(), record)
    }

    async fn put_many(&self, records: Vec<CheckpointRecord>) -> Vec<Result<(), CheckpointError>> {
        let mut threads = self.lock();
        records
            .into_iter()
            .map(|r| put_one(&mut threads, r))
            .collect()
    }

    async fn put_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        writes: Vec<TaskWrite>,
    ) -> Result<(), CheckpointError> {
        let mut threads = self.lock();
        let list = threads
            .entry(thread.clone())
            .or_default()
            .writes
            .entry(checkpoint)
            .or_default();
        for w in writes {
            match list
                .iter_mut()
                .find(|x| x.task == w.task && x.kind == w.kind && x.key == w.key)
            {
                Some(existing) => *existing = w,
                None => list.push(w),
            }
        }
        sort_writes(list);
        Ok(())
    }

    async fn get_writes(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
    ) -> Result<Vec<TaskWrite>, CheckpointError> {
        Ok(self
            .lock()
            .get(thread)
            .and_then(|d| d.writes.get(&checkpoint).cloned())
            .unwrap_or_default())
    }

    async fn head(&self, thread: &ThreadId) -> Result<Option<CheckpointId>, CheckpointError> {
        Ok(self.lock().get(thread).and_then(ThreadData::head))
    }

    async fn get(
        &self,
        thread: &ThreadId,
        id: CheckpointId,
    ) -> Result<CheckpointRecord, CheckpointError> {
        self.lock()
            .get(thread)
            .and_then(|d| d.checkpoints.get(&id).cloned())
            .ok_or_else(|| CheckpointError::NotFound {
                thread: thread.clone(),
                checkpoint: Some(id),
            })
    }

    async fn load_chain(
        &self,
        thread: &ThreadId,
        id: Option<CheckpointId>,
    ) -> Result<Vec<CheckpointRecord>, CheckpointError> {
        let threads = self.lock();
        let Some(data) = threads.get(thread) else {
            return Ok(Vec::new());
        };
        let Some(target) = id.or_else(|| data.head()) else {
            return Ok(Vec::new());
        };
        if !data.checkpoints.contains_key(&target) {
            return Err(CheckpointError::NotFound {
                thread: thread.clone(),
                checkpoint: Some(target),
            });
        }
        let mut chain: Vec<CheckpointRecord> = Vec::new();
        for (_, r) in data.checkpoints.range(..=target).rev() {
            chain.push(r.clone());
            if r.kind == super::BodyKind::Snapshot {
                break;
            }
        }
        chain.reverse();
        Ok(chain)
    }

    async fn list(
        &self,
        thread: &ThreadId,
        before: Option<CheckpointId>,
        limit: usize,
    ) -> Result<Vec<(CheckpointId, Option<CheckpointId>, CheckpointMetadata)>, CheckpointError>
    {
        let threads = self.lock();
        let Some(data) = threads.get(thread) else {
            return Ok(Vec::new());
        };
        Ok(data
            .checkpoints
            .values()
            .rev()
            .filter(|r| before.is_none_or(|b| r.id < b))
            .take(limit)
            .map(|r| (r.id, r.parent, r.metadata.clone()))
            .collect())
    }

    async fn list_threads(
        &self,
        prefix: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<ThreadSummary>, CheckpointError> {
        Ok(self
            .lock()
            .iter()
            .filter(|(t, _)| t.as_str().starts_with(prefix))
            .filter_map(|(t, d)| {
                let head = d.checkpoints.values().next_back();
                if head.is_none() && d.metadata.is_none() {
                    return None;
                }
                Some(ThreadSummary {
                    thread_id: t.clone(),
                    head: head.map(|h| h.id),
                    head_metadata: head.map(|h| h.metadata.clone()),
                    metadata: d.metadata.clone().unwrap_or(serde_json::Value::Null),
                })
            })
            .skip(offset)
            .take(limit)
            .collect())
    }

    async fn set_thread_metadata(
        &self,
        thread: &ThreadId,
        metadata: serde_json::Value,
    ) -> Result<(), CheckpointError> {
        self.lock().entry(thread.clone()).or_default().metadata = Some(metadata);
        Ok(())
    }

    async fn create_thread(
        &self,
        thread: &ThreadId,
        metadata: serde_json::Value,
    ) -> Result<bool, CheckpointError> {
        match self.lock().entry(thread.clone()) {
            std::collections::btree_map::Entry::Occupied(_) => Ok(false),
            std::collections::btree_map::Entry::Vacant(v) => {
                v.insert(ThreadData {
                    metadata: Some(metadata),
                    ..ThreadData::default()
                });
                Ok(true)
            }
        }
    }

    async fn replace_thread_metadata(
        &self,
        thread: &ThreadId,
        expected: &serde_json::Value,
        metadata: serde_json::Value,
    ) -> Result<bool, CheckpointError> {
        // Compared and written under the one lock.
        let mut threads = self.lock();
        match threads.get_mut(thread) {
            Some(ThreadData {
                metadata: Some(now),
                ..
            }) if now == expected => {
                *now = metadata;
                Ok(true)
            }
            _ => Ok(false),
        }
    }

    async fn thread_metadata(
        &self,
        thread: &ThreadId,
    ) -> Result<Option<serde_json::Value>, CheckpointError> {
        Ok(self
            .lock()
            .get(thread)
            .map(|d| d.metadata.clone().unwrap_or(serde_json::Value::Null)))
    }

    async fn delete_thread(&self, thread: &ThreadId) -> Result<(), CheckpointError> {
        self.lock().remove(thread);
        self.retain_effects(thread, |_| false);
        Ok(())
    }

    async fn prune(
        &self,
        thread: &ThreadId,
        keep_from: CheckpointId,
        snapshot: Vec<u8>,
    ) -> Result<(), CheckpointError> {
        let mut threads = self.lock();
        let data = threads
            .get_mut(thread)
            .filter(|d| d.checkpoints.contains_key(&keep_from))
            .ok_or_else(|| CheckpointError::NotFound {
                thread: thread.clone(),
                checkpoint: Some(keep_from),
            })?;
        if let Some(r) = data.checkpoints.get_mut(&keep_from) {
            r.kind = super::BodyKind::Snapshot;
            r.body = snapshot;
        }
        data.checkpoints = data.checkpoints.split_off(&keep_from);
        data.writes.retain(|id, _| *id >= keep_from);
        drop(threads);
        self.retain_effects(thread, |cp| cp >= keep_from);
        Ok(())
    }

    async fn trim(
        &self,
        thread: &ThreadId,
        keep_from: CheckpointId,
    ) -> Result<u64, CheckpointError> {
        let mut threads = self.lock();
        let Some(data) = threads.get_mut(thread) else {
            return Ok(0);
        };
        let snapshot = data
            .checkpoints
            .range(..=keep_from)
            .rev()
            .find(|(_, r)| r.kind == super::BodyKind::Snapshot)
            .map(|(id, _)| *id);
        let Some(snapshot) = snapshot else {
            return Ok(0);
        };
        let before = data.checkpoints.len();
        data.checkpoints = data.checkpoints.split_off(&snapshot);
        data.writes.retain(|id, _| *id >= snapshot);
        let deleted = (before - data.checkpoints.len()) as u64;
        drop(threads);
        self.retain_effects(thread, |cp| cp >= snapshot);
        Ok(deleted)
    }

    async fn rewind(
        &self,
        thread: &ThreadId,
        to: Option<CheckpointId>,
        writes: Vec<TaskWrite>,
    ) -> Result<u64, CheckpointError> {
        self.retain_effects(thread, |cp| to.is_some_and(|to| cp <= to));
        let mut threads = self.lock();
        let Some(data) = threads.get_mut(thread) else {
            return Ok(0);
        };
        let before = data.checkpoints.len();
        match to {
            Some(to) => {
                data.checkpoints.retain(|id, _| *id <= to);
                data.writes.retain(|id, _| *id < to);
                if !writes.is_empty() {
                    let mut list = writes;
                    sort_writes(&mut list);
                    data.writes.insert(to, list);
                }
            }
            None => {
                data.checkpoints.clear();
                data.writes.clear();
            }
        }
        Ok((before - data.checkpoints.len()) as u64)
    }
}
