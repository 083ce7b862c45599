//! Run event logs: the events a run streams, kept in order so that a client can follow a run from
//! any process that shares the log and, after losing its connection, rejoin where it left off.
//!
//! A server streams a run by appending its events here and serving clients from here — never
//! straight from the run — so what a client has seen is always a prefix of the log: an event's
//! `seq` (sent as the SSE `id`) says exactly where to rejoin (`Last-Event-ID`), on this process or
//! on another replica, and no event is sent twice or skipped. One writer appends to a run's log
//! at a time: the replica holding the run's lease, checked by the log itself where replicas share
//! it ([`RunEventLog::append`] with a `writer`), so a replica presumed dead cannot add to the
//! stream of a run another replica took over.
//!
//! The log also carries followers' requests for a stream nobody publishes yet
//! ([`RunEventLog::request_stream`], [`RunEventLog::watch_requests`]): a server publishes a run
//! that is not resumable only once someone follows it, and the follower may be on another
//! replica than the run. Requests wake only the run's request watchers, never its followers.
//!
//! Backends: [`MemoryRunEvents`] (one process, forgotten on restart: `memory:` servers),
//! `SqliteRunEvents` (feature `sqlite`: a table beside the run records, so a SQLite server's
//! streams outlive a restart), `PostgresRunEvents` (feature `postgres`: a table beside the run
//! records, `LISTEN/NOTIFY` to wake followers on every replica) and `NatsRunEvents` (feature
//! `nats`: JetStream). All are held to one conformance suite (`tests/run_event_log.rs`).

use super::RunStoreError;
use async_trait::async_trait;
use dashmap::DashMap;
use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;
use tokio::sync::watch;

/// One event of a run's stream, as stored.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StreamEvent {
    /// Its place in the run's log: 1, 2, 3, … with no gaps.
    pub seq: u64,
    /// The SSE event name (`metadata`, `values`, `updates`, …).
    pub event: String,
    /// The SSE data (JSON text).
    pub data: String,
}

/// Wakes the followers of one run's log when it may have grown.
pub type LogWatch = watch::Receiver<u64>;

/// An ordered, shared log of each run's stream events. See the module docs.
#[async_trait]
pub trait RunEventLog: Send + Sync + 'static {
    /// A short name for reports (`memory`, `postgres`).
    fn backend_name(&self) -> &'static str;

    /// Appends `events` (name, JSON data) to the run's log, numbered `after + 1`, `after + 2`, …,
    /// and returns the `seq` of the last one; every follower of the run is woken. `after` is the
    /// seq the writer last appended (0 for a new stream, [`RunEventLog::last_seq`] for a writer
    /// taking a run over). Refused ([`RunStoreError::AppendRefused`]) when the log does not end
    /// at `after` (another writer appended), or, with `writer`, unless `writer` holds the run's
    /// lease: a replica that lost its run cannot add to its stream. Appending a batch that is
    /// already stored right after `after` (a retry whose first attempt committed) succeeds.
    async fn append(
        &self,
        run_id: &str,
        writer: Option<&str>,
        after: u64,
        events: Vec<(String, String)>,
    ) -> Result<u64, RunStoreError>;

    /// The seq of the run's last event (0 when it has none).
    async fn last_seq(&self, run_id: &str) -> Result<u64, RunStoreError>;

    /// The run's events after `after`, oldest first, at most `limit`.
    async fn read(
        &self,
        run_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StreamEvent>, RunStoreError>;

    /// A receiver that changes whenever the run's log may have grown (subscribe before reading,
    /// so nothing appended in between is missed).
    fn watch(&self, run_id: &str) -> LogWatch;

    /// Tells the run's writer, on whichever process sharing the log it runs, that a client
    /// follows the run: changes the run's [`RunEventLog::watch_requests`] receivers everywhere,
    /// appending nothing. A run that publishes only once it is followed (one created without
    /// `stream_resumable`) starts publishing then. A request may reach nobody (the run has not
    /// started yet, or already ended); followers repeat it while they wait.
    async fn request_stream(&self, run_id: &str) -> Result<(), RunStoreError>;

    /// A receiver that changes whenever a follower asks for the run's stream
    /// ([`RunEventLog::request_stream`]) — only then: not on appends, nor when a lost
    /// notification channel comes back (which wakes every [`RunEventLog::watch`] receiver).
    fn watch_requests(&self, run_id: &str) -> LogWatch;
}

/// Why an append after event `after` is refused when the run's log ends at `ends_at` (another
/// writer appended): the same words from every backend.
pub(super) fn not_at_the_end(after: u64, ends_at: impl std::fmt::Display) -> String {
    format!("the writer appends after event {after} but the stream ends at {ends_at}")
}

/// Why an append to a run without a record is refused (the logs that live beside the records).
#[cfg(any(feature = "sqlite", feature = "postgres"))]
pub(super) const NO_RECORD: &str = "the run has no record";

/// The followers of each run: a counter per run, bumped when its log may have grown (or, for a
/// log's stream requests, when a follower asked for the run's stream).
#[derive(Default)]
pub struct Watchers {
    runs: DashMap<String, watch::Sender<u64>>,
    /// Past this many entries, those nobody watches any more are dropped (0: [`SWEEP_FROM`]).
    sweep_at: std::sync::atomic::AtomicUsize,
}

/// The fewest entries [`Watchers`] keeps before it drops those nobody watches.
const SWEEP_FROM: usize = 1024;

impl Watchers {
    /// A receiver for `run_id`'s wake-ups.
    pub fn watch(&self, run_id: &str) -> LogWatch {
        use std::sync::atomic::Ordering::Relaxed;
        let at = self.sweep_at.load(Relaxed).max(SWEEP_FROM);
        if self.runs.len() > at {
            // Every running run of a server watches for stream requests: with thousands at
            // once, sweeping on every call would scan them all per run. The next sweep waits
            // until the map has doubled past what is live.
            self.runs.retain(|_, tx| tx.receiver_count() > 0);
            self.sweep_at.store(2 * self.runs.len(), Relaxed);
        }
        self.runs
            .entry(run_id.to_string())
            .or_insert_with(|| watch::channel(0).0)
            .subscribe()
    }

    /// Wakes `run_id`'s followers.
    pub fn wake(&self, run_id: &str) {
        let gone = match self.runs.get(run_id) {
            Some(tx) => {
                tx.send_modify(|n| *n += 1);
                tx.receiver_count() == 0
            }
            None => false,
        };
        if gone {
            self.runs
                .remove_if(run_id, |_, tx| tx.receiver_count() == 0);
        }
    }

    /// Wakes every follower (after a lost notification channel came back: they read again).
    pub fn wake_all(&self) {
        for tx in self.runs.iter() {
            tx.send_modify(|n| *n += 1);
        }
    }
}

/// The logs of one process, in memory. Keeps the logs of the last `max_runs` runs that streamed
/// (oldest forgotten first): a client may rejoin a recent run; a server of one process keeps no
/// stream for ever.
pub struct MemoryRunEvents {
    logs: Mutex<Logs>,
    watchers: Watchers,
    requests: Watchers,
    max_runs: usize,
}

#[derive(Default)]
struct Logs {
    by_run: HashMap<String, Vec<StreamEvent>>,
    order: VecDeque<String>,
}

impl MemoryRunEvents {
    /// Logs of at most `max_runs` runs.
    pub fn new(max_runs: usize) -> Self {
        Self {
            logs: Mutex::new(Logs::default()),
            watchers: Watchers::default(),
            requests: Watchers::default(),
            max_runs: max_runs.max(1),
        }
    }
}

impl Default for MemoryRunEvents {
    fn default() -> Self {
        Self::new(4096)
    }
}

#[async_trait]
impl RunEventLog for MemoryRunEvents {
    fn backend_name(&self) -> &'static str {
        "memory"
    }

    async fn append(
        &self,
        run_id: &str,
        _writer: Option<&str>,
        after: u64,
        events: Vec<(String, String)>,
    ) -> Result<u64, RunStoreError> {
        let last = {
            let mut logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
            let log = logs.by_run.get(run_id).map_or(&[][..], |l| l.as_slice());
            let have = log.len() as u64;
            let retried = have == after + events.len() as u64
                && log[after as usize..]
                    .iter()
                    .zip(&events)
                    .all(|(e, (n, d))| e.event == *n && e.data == *d);
            // The simulator's bug switch: append at the end wherever the writer thinks it is.
            let anywhere = sim_bug!(AppendAnywhere);
            if retried && !anywhere {
                return Ok(have);
            }
            if have != after && !anywhere {
                return Err(RunStoreError::AppendRefused {
                    run_id: run_id.to_string(),
                    reason: not_at_the_end(after, have),
                });
            }
            if !logs.by_run.contains_key(run_id) {
                logs.order.push_back(run_id.to_string());
                while logs.order.len() > self.max_runs {
                    if let Some(old) = logs.order.pop_front() {
                        logs.by_run.remove(&old);
                    }
                }
            }
            let log = logs.by_run.entry(run_id.to_string()).or_default();
            for (event, data) in events {
                let seq = log.len() as u64 + 1;
                log.push(StreamEvent { seq, event, data });
            }
            log.len() as u64
        };
        self.watchers.wake(run_id);
        Ok(last)
    }

    async fn read(
        &self,
        run_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StreamEvent>, RunStoreError> {
        let logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        Ok(logs
            .by_run
            .get(run_id)
            .map(|log| {
                log.iter()
                    .skip(usize::try_from(after).unwrap_or(usize::MAX))
                    .take(limit)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default())
    }

    async fn last_seq(&self, run_id: &str) -> Result<u64, RunStoreError> {
        let logs = self.logs.lock().unwrap_or_else(|p| p.into_inner());
        Ok(logs.by_run.get(run_id).map_or(0, |l| l.len() as u64))
    }

    fn watch(&self, run_id: &str) -> LogWatch {
        self.watchers.watch(run_id)
    }

    async fn request_stream(&self, run_id: &str) -> Result<(), RunStoreError> {
        self.requests.wake(run_id);
        Ok(())
    }

    fn watch_requests(&self, run_id: &str) -> LogWatch {
        self.requests.watch(run_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn watchers_drop_runs_nobody_watches_and_sweep_rarely_while_many_are_watched() {
        let w = Watchers::default();
        // 1,500 runs watched at once: past 1,024 the first sweep finds all of them live, and
        // the next waits until the map has doubled.
        let live: Vec<_> = (0..1500).map(|i| w.watch(&format!("r{i}"))).collect();
        assert_eq!(w.runs.len(), 1500);
        assert_eq!(w.sweep_at.load(std::sync::atomic::Ordering::Relaxed), 2050);
        // Once nobody watches them, the next sweep drops them.
        drop(live);
        let rest: Vec<_> = (1500..3100).map(|i| w.watch(&format!("r{i}"))).collect();
        assert_eq!(w.runs.len(), 1600, "the 1,500 nobody watches are gone");
        let one = w.watch("r3000");
        w.wake("r3000");
        assert!(one.has_changed().unwrap());
        drop(rest);
    }
}
