//! Which threads this process's clients follow whole (`GET /threads/{id}/stream`,
//! [`super::thread_stream`]), so that a run accepted on such a thread publishes its stream from
//! its start ([`super::lifecycle`]) and its followers look at it at once, not at their next poll.

use dashmap::DashMap;
use std::sync::Arc;
use tokio::sync::broadcast;

/// The threads this process's clients follow, and a signal for each run accepted here.
pub struct Followers {
    /// Thread id → how many clients follow it.
    counts: DashMap<String, usize>,
    /// The thread of each run accepted here.
    accepted: broadcast::Sender<String>,
}

impl Default for Followers {
    fn default() -> Self {
        Self {
            counts: DashMap::new(),
            accepted: broadcast::channel(1024).0,
        }
    }
}

impl Followers {
    /// Whether a client of this process follows `thread`.
    pub fn follows(&self, thread: &str) -> bool {
        self.counts.contains_key(thread)
    }

    /// A run was accepted on `thread`: its followers look at its runs now.
    pub fn accepted(&self, thread: &str) {
        if self.follows(thread) {
            // Nobody subscribed is not an error: nobody follows any thread.
            let _ = self.accepted.send(thread.to_string());
        }
    }

    /// The threads of the runs accepted from now on.
    pub fn subscribe(&self) -> broadcast::Receiver<String> {
        self.accepted.subscribe()
    }

    /// Counts a client as following `thread` until the guard drops.
    pub fn follow(self: &Arc<Self>, thread: &str) -> Following {
        *self.counts.entry(thread.to_string()).or_insert(0) += 1;
        Following {
            followers: self.clone(),
            thread: thread.to_string(),
        }
    }
}

/// One client following a thread; dropping it stops counting the client.
pub struct Following {
    followers: Arc<Followers>,
    thread: String,
}

impl Drop for Following {
    fn drop(&mut self) {
        self.followers.counts.remove_if_mut(&self.thread, |_, n| {
            *n -= 1;
            *n == 0
        });
    }
}
