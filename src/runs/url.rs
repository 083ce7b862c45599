//! The run store named by a URL: the same URLs as the checkpointer and the store
//! ([`crate::checkpoint::backend`] reads them).

use super::{MemoryRunEvents, MemoryRuns, RunEventLog, RunStore, RunStoreError};
use crate::checkpoint::{Backend, PgPools};
use std::sync::Arc;

/// Opens the run store at `url`: `memory:`, `sqlite:PATH` (the run table beside the
/// checkpoints), or `postgres://…` (with the checkpointer's URL options, on a pool of its own;
/// [`connect_in`] shares one).
pub async fn connect(url: &str) -> Result<Arc<dyn RunStore>, RunStoreError> {
    connect_in(url, &PgPools::new()).await
}

/// [`connect`], on the pool `pools` holds for `url` when it is a PostgreSQL URL, shared with the
/// process's other parts opened through `pools` (one connection budget: `pool_size`).
pub async fn connect_in(url: &str, pools: &PgPools) -> Result<Arc<dyn RunStore>, RunStoreError> {
    #[cfg(not(feature = "postgres"))]
    let _ = pools;
    let bad = |reason: String| RunStoreError::BadUrl {
        url: url.to_string(),
        reason,
    };
    match crate::checkpoint::backend(url).map_err(bad)? {
        Backend::Memory => Ok(Arc::new(MemoryRuns::new())),
        #[cfg(feature = "sqlite")]
        Backend::Sqlite { path, options } => {
            crate::checkpoint::sqlite_prepare_dir(path, options).map_err(bad)?;
            Ok(Arc::new(super::SqliteRuns::open(path.to_string()).await?))
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres(url) => {
            let shared = pools.get(url).await.map_err(super::postgres::open_error)?;
            Ok(Arc::new(
                super::PostgresRuns::with_pool(shared.pool(), shared.config()).await?,
            ))
        }
        // `backend` already refuses a backend that is compiled out.
        #[allow(unreachable_patterns)]
        _ => Err(bad("this backend is not compiled in".into())),
    }
}

/// Opens the run event log at `url` for a server whose run records are `runs`: `nats://…`
/// (NATS JetStream; appends checked against the leases in `runs`), `postgres://…` (a table
/// beside the run records, so every replica follows every run; on a pool of its own,
/// [`connect_events_in`] shares one), `sqlite:PATH` (a table beside the run records: streams
/// outlive a restart), or in memory (`memory:`).
pub async fn connect_events(
    url: &str,
    runs: Arc<dyn RunStore>,
) -> Result<Arc<dyn RunEventLog>, RunStoreError> {
    connect_events_in(url, runs, &PgPools::new()).await
}

/// [`connect_events`], on the pool `pools` holds for a PostgreSQL `url` (its `LISTEN`
/// connection is the last of that pool's budget).
pub async fn connect_events_in(
    url: &str,
    runs: Arc<dyn RunStore>,
    pools: &PgPools,
) -> Result<Arc<dyn RunEventLog>, RunStoreError> {
    if url.starts_with("nats://") || url.starts_with("tls://") {
        #[cfg(feature = "nats")]
        return Ok(Arc::new(
            super::NatsRunEvents::connect(url, Some(runs)).await?,
        ));
        #[cfg(not(feature = "nats"))]
        return Err(RunStoreError::BadUrl {
            url: url.to_string(),
            reason: "NATS support is not compiled in (cargo feature `nats`)".into(),
        });
    }
    let _ = runs;
    #[cfg(not(feature = "postgres"))]
    let _ = pools;
    let bad = |reason: String| RunStoreError::BadUrl {
        url: url.to_string(),
        reason: format!("{reason}; or `nats://HOST:PORT` (NATS JetStream)"),
    };
    match crate::checkpoint::backend(url).map_err(bad)? {
        #[cfg(feature = "postgres")]
        Backend::Postgres(url) => {
            let shared = pools.get(url).await.map_err(super::postgres::open_error)?;
            Ok(Arc::new(
                super::PostgresRunEvents::with_pool(&shared).await?,
            ))
        }
        #[cfg(feature = "sqlite")]
        Backend::Sqlite { path, options } => {
            crate::checkpoint::sqlite_prepare_dir(path, options).map_err(|reason| {
                RunStoreError::BadUrl {
                    url: url.to_string(),
                    reason,
                }
            })?;
            Ok(Arc::new(
                super::SqliteRunEvents::open(path.to_string()).await?,
            ))
        }
        _ => Ok(Arc::new(MemoryRunEvents::default())),
    }
}
