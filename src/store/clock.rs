//! The store's clock: milliseconds since the Unix epoch. The default is anchored to tokio's clock
//! (wall time when the store was made, plus tokio time since), so a test under
//! `#[tokio::test(start_paused = true)]` moves a TTL forward with `tokio::time::advance`.

use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

/// A source of "now", in milliseconds since the Unix epoch.
pub type StoreClock = Arc<dyn Fn() -> u64 + Send + Sync>;

fn wall_ms() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_millis() as u64)
        .unwrap_or(0)
}

/// Wall time, following tokio's (possibly paused) clock from the moment it is made.
pub fn system_clock() -> StoreClock {
    let base_wall = wall_ms();
    let base = tokio::time::Instant::now();
    Arc::new(move || base_wall + base.elapsed().as_millis() as u64)
}
