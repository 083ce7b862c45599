//! Per-node counters shared by a node actor and the engine: mailbox depth, executions, time spent
//! queueing versus working. Lock-free, so reading them never slows a run.

use super::histogram::LatencyHistogram;
use std::sync::atomic::{AtomicU64, Ordering};

/// Live counters of one node actor.
#[derive(Debug, Default)]
pub struct NodeStats {
    queued: AtomicU64,
    max_queued: AtomicU64,
    executions: AtomicU64,
    failures: AtomicU64,
    panics: AtomicU64,
    queue_us: AtomicU64,
    work_us: AtomicU64,
    running: AtomicU64,
    queue_hist: LatencyHistogram,
    work_hist: LatencyHistogram,
}

/// A copy of a node's counters at one moment.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize)]
pub struct NodeStatsSnapshot {
    /// The node.
    pub node: String,
    /// Tasks in its mailbox now.
    pub mailbox_depth: u64,
    /// The deepest the mailbox has been.
    pub max_mailbox_depth: u64,
    /// Attempts run.
    pub executions: u64,
    /// Attempts that failed.
    pub failures: u64,
    /// Attempts that panicked (the actor was restarted).
    pub panics: u64,
    /// Total time tasks waited in the mailbox and for a concurrency slot, in microseconds.
    pub queue_us: u64,
    /// Total time tasks ran, in microseconds.
    pub work_us: u64,
    /// Tasks running now (out of the mailbox, holding a concurrency slot).
    pub running: u64,
    /// Median time a task waited before it ran, in microseconds.
    pub queue_p50_us: u64,
    /// 99th percentile of the wait, in microseconds.
    pub queue_p99_us: u64,
    /// Median time a task ran, in microseconds.
    pub work_p50_us: u64,
    /// 99th percentile of the run time, in microseconds.
    pub work_p99_us: u64,
    /// Calls answered from the node's cache (`StateGraph::cache_policy`).
    pub cache_hits: u64,
    /// Calls of a cached node that ran it.
    pub cache_misses: u64,
}

impl NodeStats {
    pub(crate) fn enqueued(&self) {
        let depth = self.queued.fetch_add(1, Ordering::Relaxed) + 1;
        self.max_queued.fetch_max(depth, Ordering::Relaxed);
    }

    pub(crate) fn dequeued(&self) {
        self.queued.fetch_sub(1, Ordering::Relaxed);
    }

    pub(crate) fn started(&self) {
        self.running.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn finished(&self, queue_us: u64, work_us: u64, failed: bool, panicked: bool) {
        self.running.fetch_sub(1, Ordering::Relaxed);
        self.queue_hist.record(queue_us);
        self.work_hist.record(work_us);
        self.executions.fetch_add(1, Ordering::Relaxed);
        self.queue_us.fetch_add(queue_us, Ordering::Relaxed);
        self.work_us.fetch_add(work_us, Ordering::Relaxed);
        if failed {
            self.failures.fetch_add(1, Ordering::Relaxed);
        }
        if panicked {
            self.panics.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// Reads the counters.
    pub fn snapshot(&self, node: &str) -> NodeStatsSnapshot {
        NodeStatsSnapshot {
            node: node.to_string(),
            mailbox_depth: self.queued.load(Ordering::Relaxed),
            max_mailbox_depth: self.max_queued.load(Ordering::Relaxed),
            executions: self.executions.load(Ordering::Relaxed),
            failures: self.failures.load(Ordering::Relaxed),
            panics: self.panics.load(Ordering::Relaxed),
            queue_us: self.queue_us.load(Ordering::Relaxed),
            work_us: self.work_us.load(Ordering::Relaxed),
            running: self.running.load(Ordering::Relaxed),
            queue_p50_us: self.queue_hist.quantile(0.5),
            queue_p99_us: self.queue_hist.quantile(0.99),
            work_p50_us: self.work_hist.quantile(0.5),
            work_p99_us: self.work_hist.quantile(0.99),
            cache_hits: 0,
            cache_misses: 0,
        }
    }
}
