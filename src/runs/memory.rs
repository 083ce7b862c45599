//! Run records in memory: the backend for a server on `memory:` storage and the model the
//! durable backends are held to.

use super::{RunChange, RunRecord, RunRecordStatus, RunStore, RunStoreError};
use async_trait::async_trait;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

#[derive(Default)]
struct Inner {
    next_seq: u64,
    /// Records by seq (the order every listing uses).
    by_seq: BTreeMap<u64, RunRecord>,
    /// Seq by run id.
    ids: HashMap<String, u64>,
}

/// Run records in a map; gone with the process.
#[derive(Default)]
pub struct MemoryRuns {
    inner: Mutex<Inner>,
}

impl MemoryRuns {
    /// An empty store.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[async_trait]
impl RunStore for MemoryRuns {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    async fn insert(&self, mut record: RunRecord) -> Result<RunRecord, RunStoreError> {
        let mut g = self.lock();
        if let Some(seq) = g.ids.get(&record.run_id) {
            let stored = &g.by_seq[seq];
            if stored.thread_id != record.thread_id {
                return Err(RunStoreError::Exists {
                    run_id: record.run_id,
                    thread_id: stored.thread_id.clone(),
                });
            }
            return Ok(stored.clone());
        }
        g.next_seq += 1;
        record.seq = g.next_seq;
        g.ids.insert(record.run_id.clone(), record.seq);
        g.by_seq.insert(record.seq, record.clone());
        Ok(record)
    }

    async fn get(&self, run_id: &str) -> Result<Option<RunRecord>, RunStoreError> {
        let g = self.lock();
        Ok(g.ids.get(run_id).map(|s| g.by_seq[s].clone()))
    }

    async fn list_thread(
        &self,
        thread_id: &str,
        limit: usize,
        offset: usize,
    ) -> Result<Vec<RunRecord>, RunStoreError> {
        let g = self.lock();
        Ok(g.by_seq
            .values()
            .rev()
            .filter(|r| r.thread_id == thread_id)
            .skip(offset)
            .take(limit)
            .cloned()
            .collect())
    }

    async fn unfinished(&self, limit: usize) -> Result<Vec<RunRecord>, RunStoreError> {
        let g = self.lock();
        Ok(g.by_seq
            .values()
            .filter(|r| !r.status.is_ended())
            .take(limit)
            .cloned()
            .collect())
    }

    async fn transition(
        &self,
        run_id: &str,
        from: &[RunRecordStatus],
        to: RunRecordStatus,
        change: RunChange,
    ) -> Result<bool, RunStoreError> {
        let mut g = self.lock();
        let Some(seq) = g.ids.get(run_id).copied() else {
            return Ok(false);
        };
        let Some(r) = g.by_seq.get_mut(&seq) else {
            return Ok(false);
        };
        if !from.contains(&r.status) {
            return Ok(false);
        }
        r.status = to;
        r.updated_at = change.at;
        if change.error.is_some() {
            r.error = change.error;
        }
        if change.start_checkpoint.is_some() {
            r.start_checkpoint = change.start_checkpoint;
        }
        if let Some(w) = change.start_writes {
            r.start_writes = w;
        }
        Ok(true)
    }

    async fn delete(&self, run_id: &str) -> Result<bool, RunStoreError> {
        let mut g = self.lock();
        match g.ids.remove(run_id) {
            Some(seq) => Ok(g.by_seq.remove(&seq).is_some()),
            None => Ok(false),
        }
    }

    async fn delete_thread(&self, thread_id: &str) -> Result<u64, RunStoreError> {
        let mut g = self.lock();
        let gone: Vec<(u64, String)> = g
            .by_seq
            .values()
            .filter(|r| r.thread_id == thread_id)
            .map(|r| (r.seq, r.run_id.clone()))
            .collect();
        for (seq, id) in &gone {
            g.by_seq.remove(seq);
            g.ids.remove(id);
        }
        Ok(gone.len() as u64)
    }

    async fn sweep(
        &self,
        prefix: &str,
        ended_before: Option<u64>,
        keep: Option<usize>,
        batch: usize,
    ) -> Result<u64, RunStoreError> {
        let mut g = self.lock();
        // Ended records, newest first: beyond `keep`, or older than `ended_before`, go.
        let ended: Vec<(u64, u64, String)> = g
            .by_seq
            .values()
            .rev()
            .filter(|r| r.status.is_ended() && r.thread_id.starts_with(prefix))
            .map(|r| (r.seq, r.updated_at, r.run_id.clone()))
            .collect();
        let mut doomed: Vec<(u64, String)> = ended
            .into_iter()
            .enumerate()
            .filter(|(i, (_, updated, _))| {
                keep.is_some_and(|k| *i >= k) || ended_before.is_some_and(|t| *updated < t)
            })
            .map(|(_, (seq, _, id))| (seq, id))
            .collect();
        // Oldest first, a batch at a time.
        doomed.sort_unstable();
        doomed.truncate(batch);
        for (seq, id) in &doomed {
            g.by_seq.remove(seq);
            g.ids.remove(id);
        }
        let gone = doomed.len() as u64;
        Ok(gone)
    }
}
