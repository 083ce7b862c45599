//! A store from a connection string, like the checkpointer's: `memory:`, `sqlite:PATH`,
//! `postgres://…`. A backend compiled out (cargo features `sqlite`, `postgres`) is a
//! [`StoreError::BadUrl`] naming the feature.

use super::{MemoryStore, Store, StoreError};
use std::sync::Arc;

/// Opens the store `url` names, creating its table if needed.
pub async fn connect(url: &str) -> Result<Arc<dyn Store>, StoreError> {
    let bad = |reason: &str| StoreError::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    if url == "memory:" || url == "memory" {
        return Ok(Arc::new(MemoryStore::new()));
    }
    if let Some(path) = url.strip_prefix("sqlite:") {
        let path = path.strip_prefix("//").unwrap_or(path);
        let path = path.split('?').next().unwrap_or(path);
        if path.is_empty() {
            return Err(bad("`sqlite:` needs a file path"));
        }
        #[cfg(not(feature = "sqlite"))]
        return Err(bad(
            "SQLite support is not compiled in; build `planwright` with the `sqlite` feature",
        ));
        #[cfg(feature = "sqlite")]
        return Ok(Arc::new(super::SqliteStore::open(path.to_string()).await?));
    }
    if url.starts_with("postgres://")
        || url.starts_with("postgresql://")
        || url.starts_with("host=")
    {
        #[cfg(not(feature = "postgres"))]
        return Err(bad(
            "PostgreSQL support is not compiled in; build `planwright` with the `postgres` feature",
        ));
        #[cfg(feature = "postgres")]
        return Ok(Arc::new(super::PostgresStore::connect(url).await?));
    }
    Err(bad(
        "unknown backend; use `memory:`, `sqlite:PATH` or `postgres://USER@HOST:PORT/DB`",
    ))
}
