//! The PostgreSQL pools of one process, so that a URL's `pool_size` is the process's whole budget
//! of connections to that database: everything a process opens on the same `postgres://` URL
//! through one [`PgPools`] — the checkpointer ([`connect_in`](super::connect_in)), the run
//! records and the run event log (`runs::connect_in`, `runs::connect_events_in`), the store
//! (`store::connect_in`) — shares one pool, checked against the server's free connections when
//! it is first opened (the `budget` module of `checkpoint::postgres` says how). Opening each part
//! on its own (`connect`) gives each its own pool and budget.
//!
//! Other backends share nothing here: `memory:` and `sqlite:` URLs pass through.

#[cfg(feature = "postgres")]
use super::postgres::SharedPool;
#[cfg(feature = "postgres")]
use super::CheckpointError;

/// The PostgreSQL pools one process has opened, one per URL. Clone-free: hold it while opening
/// the parts of a process, then drop it (the parts keep their pool).
#[derive(Default)]
pub struct PgPools {
    #[cfg(feature = "postgres")]
    open: tokio::sync::Mutex<std::collections::HashMap<String, SharedPool>>,
}

impl PgPools {
    /// No pools yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The pool for `url`: the one already opened here for the same URL, or a new one whose
    /// budget is checked against the server ([`SharedPool::open`]).
    #[cfg(feature = "postgres")]
    pub async fn get(&self, url: &str) -> Result<SharedPool, CheckpointError> {
        let mut open = self.open.lock().await;
        if let Some(p) = open.get(url) {
            return Ok(p.clone());
        }
        let p = SharedPool::open(url).await?;
        open.insert(url.to_string(), p.clone());
        Ok(p)
    }
}
