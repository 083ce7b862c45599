//! Counters of an engine's checkpoint traffic, read by load drivers and the server's metrics.

use std::sync::atomic::{AtomicU64, Ordering};

/// Counters of checkpoint traffic.
#[derive(Debug, Default)]
pub struct CheckpointCounters {
    /// Checkpoint records stored.
    pub records: AtomicU64,
    /// Bytes of those records.
    pub bytes: AtomicU64,
    /// Task-write batches stored.
    pub writes: AtomicU64,
}

impl CheckpointCounters {
    pub(crate) fn record(&self, bytes: usize) {
        self.records.fetch_add(1, Ordering::Relaxed);
        self.bytes.fetch_add(bytes as u64, Ordering::Relaxed);
    }
}
