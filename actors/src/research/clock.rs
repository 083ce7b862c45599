//! Clocks for `execution_history` timestamps: wall-clock milliseconds for real runs, tokio time for
//! tests (so paused-time tests see exact, deterministic start and end times).

/// A source of millisecond timestamps.
pub trait Clock: Send + Sync {
    /// Now, in milliseconds.
    fn now_ms(&self) -> u64;
}

/// Milliseconds since the Unix epoch.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now_ms(&self) -> u64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64)
    }
}

/// Milliseconds of tokio time since the clock was made (follows paused time in tests).
#[derive(Clone, Copy, Debug)]
pub struct TokioClock {
    origin: tokio::time::Instant,
}

impl TokioClock {
    /// A clock starting at 0 now.
    pub fn new() -> Self {
        Self {
            origin: tokio::time::Instant::now(),
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn now_ms(&self) -> u64 {
        self.origin.elapsed().as_millis() as u64
    }
}
