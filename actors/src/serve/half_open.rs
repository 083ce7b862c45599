//! The open connections of a listener, oldest first, and which of them are still **half-open**:
//! connected, but without one whole request header yet. When every connection slot is taken, a
//! new connection takes the place of the oldest half-open one ([`Connections::close_oldest_half_open`]),
//! so clients that connect and stall cannot keep a real request waiting for their header
//! timeout: a real client sends its header at once and is never half-open for long. A connection
//! that has sent a request (answered, streaming, or idle between keep-alive requests) is never
//! closed to make room; it ends by its own timeouts.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use tokio::sync::Notify;

const HALF_OPEN: u8 = 0;
const STARTED: u8 = 1;
const CLOSING: u8 = 2;

/// One connection's standing.
#[derive(Default)]
pub struct Conn {
    state: AtomicU8,
    close: Notify,
}

impl Conn {
    /// Marks the connection as having sent a whole request header: it is no longer half-open.
    pub fn started(&self) {
        let _ =
            self.state
                .compare_exchange(HALF_OPEN, STARTED, Ordering::AcqRel, Ordering::Acquire);
    }

    /// Resolves when the listener closes this connection to make room for a new one.
    pub async fn closed(&self) {
        self.close.notified().await;
    }
}

/// The listener's open connections, by the order they were accepted.
#[derive(Default)]
pub struct Connections {
    next: AtomicU64,
    open: Mutex<BTreeMap<u64, Arc<Conn>>>,
}

/// A connection's place in [`Connections`], given up when dropped (the connection ended).
pub struct Registered {
    table: Arc<Connections>,
    id: u64,
    /// The connection's standing.
    pub conn: Arc<Conn>,
}

impl Drop for Registered {
    fn drop(&mut self) {
        self.table
            .open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.id);
    }
}

impl Connections {
    /// Registers a connection just accepted, half-open until [`Conn::started`].
    pub fn register(self: &Arc<Self>) -> Registered {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let conn = Arc::new(Conn::default());
        self.open
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(id, conn.clone());
        Registered {
            table: self.clone(),
            id,
            conn,
        }
    }

    /// Asks the oldest half-open connection to close; whether there was one.
    pub fn close_oldest_half_open(&self) -> bool {
        let open = self.open.lock().unwrap_or_else(|p| p.into_inner());
        for conn in open.values() {
            let won = conn
                .state
                .compare_exchange(HALF_OPEN, CLOSING, Ordering::AcqRel, Ordering::Acquire)
                .is_ok();
            if won {
                conn.close.notify_one();
                return true;
            }
        }
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn the_oldest_half_open_connection_makes_room_and_a_started_one_never_does() {
        let table = Arc::new(Connections::default());
        let first = table.register();
        let second = table.register();
        let third = table.register();
        first.conn.started();
        assert!(table.close_oldest_half_open());
        // The second (the oldest half-open) is told; the first, which sent a request, is not.
        tokio::time::timeout(std::time::Duration::from_secs(5), second.conn.closed())
            .await
            .expect("the oldest half-open connection is closed");
        assert!(table.close_oldest_half_open(), "then the third");
        third.conn.closed().await;
        assert!(!table.close_oldest_half_open(), "none half-open is left");
        // A connection asked to close cannot start afterwards.
        third.conn.started();
        assert_eq!(third.conn.state.load(Ordering::Acquire), CLOSING);
        let open = |t: &Connections| t.open.lock().unwrap().len();
        drop((second, third));
        assert_eq!(open(&table), 1, "an ended connection leaves the table");
        drop(first);
        assert_eq!(open(&table), 0);
    }
}
