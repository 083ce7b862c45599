//! Paused threads kept in memory, so that resuming one does not rebuild its state from storage.
//!
//! A run that pauses on an interrupt is usually resumed in the same process, often within
//! seconds (a person approves a plan). Rebuilding the thread reads its chain back to the newest
//! snapshot, decompresses and parses every record and replays the deltas: for the research load
//! that was ~4 % of the CPU. So the supervisor of a run that pauses leaves its state here
//! ([`PausedThreads::keep`]), and loading the thread uses it again — **only if storage still
//! has the very head checkpoint the state belongs to**: the thread's newest checkpoint id must be
//! the kept one, and that record, read back, must have the same [`HeadIdentity`] (parent, kind,
//! body, next tasks, step, creation time and graph fingerprint). Ids alone would not do: ids count
//! up per thread, and a rewind (another process's rollback) deletes checkpoints and reuses their
//! ids. Everything else of the position — pending tasks, the writes saved at the head, pause data —
//! is read from storage as a full load reads it ([`persist::position_at`](super::persist::position_at)), so another
//! process's resume answers or rewound writes are never missed.
//!
//! At most [`DEFAULT_KEEP_PAUSED`] threads are kept (`EngineBuilder::keep_paused`), the oldest
//! dropped first; a kept state is shared with the run's outcome (an `Arc`), so keeping it costs no
//! copy, but it holds the state until the thread is resumed, changed or deleted.

use super::saved::{HeadIdentity, SavedThread};
use crate::ids::ThreadId;
use crate::state::State;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

/// Paused threads an engine keeps by default (`EngineBuilder::keep_paused`).
pub const DEFAULT_KEEP_PAUSED: usize = 1024;

/// The state of a paused thread at its head, and what the snapshot policy had counted.
#[derive(Clone, Debug)]
pub(crate) struct Kept<S: State> {
    pub state: Arc<S>,
    pub head: HeadIdentity,
    pub deltas_since_snapshot: u64,
    pub delta_bytes_since_snapshot: u64,
    pub snapshot_bytes: u64,
}

impl<S: State> Kept<S> {
    /// What to keep of `saved`: `None` when its head is not the checkpoint its identity names
    /// (a run that stored no checkpoint of its own position), or when its state carries command
    /// updates saved at the head ([`SavedThread::head_edits`]).
    pub fn of(saved: &SavedThread<S>) -> Option<Self> {
        if saved.head_edits > 0 {
            // The state has command updates on top of the head's: a load applies them again.
            return None;
        }
        let head = saved.head_identity.filter(|i| Some(i.id) == saved.head)?;
        Some(Self {
            state: saved.state.clone(),
            head,
            deltas_since_snapshot: saved.deltas_since_snapshot,
            delta_bytes_since_snapshot: saved.delta_bytes_since_snapshot,
            snapshot_bytes: saved.snapshot_bytes,
        })
    }
}

/// How an engine loaded threads (`Engine::thread_loads`): with a paused thread's state kept in
/// memory, or from storage.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ThreadLoads {
    /// Loads that used a kept state (and read only the head checkpoint and its writes).
    pub from_memory: u64,
    /// Loads that read the thread's chain from storage.
    pub from_storage: u64,
    /// Paused threads kept now.
    pub kept: usize,
}

/// The paused threads of one engine.
pub(crate) struct PausedThreads<S: State> {
    inner: Mutex<Inner<S>>,
    most: usize,
    from_memory: AtomicU64,
    from_storage: AtomicU64,
}

struct Inner<S: State> {
    by_thread: HashMap<ThreadId, (u64, Kept<S>)>,
    /// Threads in the order they were kept, with the number they were kept under (a thread kept
    /// again has a newer number; its older entry here is skipped).
    order: VecDeque<(ThreadId, u64)>,
    next: u64,
}

impl<S: State> PausedThreads<S> {
    /// Keeps at most `most` threads (0: none).
    pub fn holding(most: usize) -> Self {
        Self {
            inner: Mutex::new(Inner {
                by_thread: HashMap::new(),
                order: VecDeque::new(),
                next: 0,
            }),
            most,
            from_memory: AtomicU64::new(0),
            from_storage: AtomicU64::new(0),
        }
    }

    /// Counts a load: from a kept state, or from storage.
    pub fn count_load(&self, from_memory: bool) {
        let counter = if from_memory {
            &self.from_memory
        } else {
            &self.from_storage
        };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    /// The loads counted so far, and how many threads are kept.
    pub fn loads(&self) -> ThreadLoads {
        ThreadLoads {
            from_memory: self.from_memory.load(Ordering::Relaxed),
            from_storage: self.from_storage.load(Ordering::Relaxed),
            kept: self.inner().by_thread.len(),
        }
    }

    fn inner(&self) -> std::sync::MutexGuard<'_, Inner<S>> {
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Keeps a paused thread's state (replacing what was kept for it).
    pub fn keep(&self, thread: &ThreadId, kept: Kept<S>) {
        if self.most == 0 {
            return;
        }
        let mut inner = self.inner();
        let n = inner.next;
        inner.next += 1;
        inner.by_thread.insert(thread.clone(), (n, kept));
        inner.order.push_back((thread.clone(), n));
        while inner.by_thread.len() > self.most {
            let Some((oldest, at)) = inner.order.pop_front() else {
                break;
            };
            if inner.by_thread.get(&oldest).is_some_and(|(k, _)| *k == at) {
                inner.by_thread.remove(&oldest);
            }
        }
        // Entries of threads kept again or forgotten: drop them once they outnumber the kept.
        if inner.order.len() > 2 * self.most {
            let Inner {
                by_thread, order, ..
            } = &mut *inner;
            order.retain(|(t, at)| by_thread.get(t).is_some_and(|(k, _)| k == at));
        }
    }

    /// What is kept for `thread`, if anything (still kept: a state read does not use it up).
    pub fn get(&self, thread: &ThreadId) -> Option<Kept<S>> {
        self.inner().by_thread.get(thread).map(|(_, k)| k.clone())
    }

    /// Forgets `thread` (its run went on, or it was changed or deleted here).
    pub fn forget(&self, thread: &ThreadId) {
        self.inner().by_thread.remove(thread);
    }

    /// A run of `thread` ended at `saved`: a paused thread's state stays in memory for its
    /// resume; any other end makes what was kept for the thread stale.
    pub fn run_ended(&self, thread: &ThreadId, saved: &SavedThread<S>, paused: bool) {
        match Kept::of(saved).filter(|_| paused) {
            Some(kept) => self.keep(thread, kept),
            None => self.forget(thread),
        }
    }
}
