//! A store from a connection string, like the checkpointer's: `memory:`, `sqlite:PATH`,
//! `postgres://…` ([`crate::checkpoint::backend`] reads them). A backend compiled out (cargo
//! features `sqlite`, `postgres`) is a [`StoreError::BadUrl`] naming the feature.

use super::{MemoryStore, Store, StoreError};
use crate::checkpoint::Backend;
use std::sync::Arc;

/// Opens the store `url` names, creating its table if needed.
pub async fn connect(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    let bad = |reason: String| StoreError::BadUrl {
        url: url.to_string(),
        reason,
    };
    match crate::checkpoint::backend(url).map_err(bad)? {
        Backend::Memory => Ok(Arc::new(MemoryStore::new())),
        #[cfg(feature = "sqlite")]
        Backend::Sqlite { path, .. } => {
            Ok(Arc::new(super::SqliteStore::open(path.to_string()).await?))
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres(url) => Ok(Arc::new(super::PostgresStore::connect(url).await?)),
        // `backend` already refuses a backend that is compiled out.
        #[allow(unreachable_patterns)]
        _ => Err(bad("this backend is not compiled in".into())),
    }
}
