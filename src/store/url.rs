//! A store from a connection string, like the checkpointer's: `memory:`, `sqlite:PATH`,
//! `postgres://…` ([`crate::checkpoint::backend`] reads them). A backend compiled out (cargo
//! features `sqlite`, `postgres`) is a [`StoreError::BadUrl`] naming the feature.

use super::{MemoryStore, Store, StoreError};
use crate::checkpoint::{Backend, PgPools};
use std::sync::Arc;

/// Opens the store `url` names, creating its table if needed. A PostgreSQL store gets a pool of
/// its own ([`connect_in`] shares one).
pub async fn connect(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    connect_in(url, &PgPools::new()).await
}

/// [`connect`], on the pool `pools` holds for `url` when it is a PostgreSQL URL, shared with the
/// process's other parts opened through `pools` (one connection budget: `pool_size`).
pub async fn connect_in(url: &str, pools: &PgPools) -> Result<Arc<dyn Store>, StoreError> {
    #[cfg(not(feature = "postgres"))]
    let _ = pools;
    let bad = |reason: String| StoreError::BadUrl {
        url: url.to_string(),
        reason,
    };
    match crate::checkpoint::backend(url).map_err(bad)? {
        Backend::Memory => Ok(Arc::new(MemoryStore::new())),
        #[cfg(feature = "sqlite")]
        Backend::Sqlite { path, options } => {
            crate::checkpoint::sqlite_prepare_dir(path, options).map_err(bad)?;
            Ok(Arc::new(super::SqliteStore::open(path.to_string()).await?))
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres(url) => {
            let shared = pools.get(url).await.map_err(super::postgres::open_error)?;
            Ok(Arc::new(
                super::PostgresStore::with_pool(shared.pool(), super::clock::system_clock())
                    .await?,
            ))
        }
        // `backend` already refuses a backend that is compiled out.
        #[allow(unreachable_patterns)]
        _ => Err(bad("this backend is not compiled in".into())),
    }
}
