//! Connection strings select the backend: `memory:`, `sqlite:PATH` (options after `?`:
//! `locking=exclusive`, `adopt=1`, `wal_limit=64m`, `inline=0`, `create_dirs=true`; see
//! `SqliteOptions`; the file's directory must exist unless `create_dirs=true`),
//! `postgres://…` (or `postgresql://…`, or a libpq key-value string starting with `host=`; pool,
//! retry and TLS options in `PgConfig`).
//!
//! The SQLite and PostgreSQL backends are cargo features of the `planwright` crate (`sqlite`,
//! `postgres`, both on by default); a URL whose backend was compiled out is a [`CheckpointError::BadUrl`]
//! naming the feature, not "unknown backend".

use super::memory::MemoryCheckpointer;
#[cfg(feature = "postgres")]
use super::postgres::PostgresCheckpointer;
#[cfg(feature = "sqlite")]
use super::sqlite::{SqliteCheckpointer, SqliteOptions};
use super::{CheckpointError, Checkpointer, PgPools};
use std::sync::Arc;

/// The backend a connection string names (the checkpointer, the store and the run store read
/// the same URLs, through this one parser).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Backend<'a> {
    /// `memory:`.
    Memory,
    /// `sqlite:PATH[?OPTIONS]`: the file path, and the options after `?` (empty when none).
    Sqlite {
        /// The file.
        path: &'a str,
        /// What follows `?`.
        options: &'a str,
    },
    /// `postgres://…`, `postgresql://…` or `host=…`: the whole URL.
    Postgres(&'a str),
}

/// Which backend `url` names; why not, for an unknown backend, one compiled out (naming the
/// cargo feature), or a SQLite URL without a path.
pub fn backend(url: &str) -> Result<Backend<'_>, String> {
    if url == "memory:" || url == "memory" {
        return Ok(Backend::Memory);
    }
    if let Some(rest) = url.strip_prefix("sqlite:") {
        if cfg!(not(feature = "sqlite")) {
            return Err(
                "SQLite support is not compiled in; build `planwright` with the `sqlite` feature"
                    .into(),
            );
        }
        let rest = rest.strip_prefix("//").unwrap_or(rest);
        let (path, options) = rest.split_once('?').unwrap_or((rest, ""));
        if path.is_empty() {
            return Err("`sqlite:` needs a file path, e.g. `sqlite:planwright.sqlite`".into());
        }
        return Ok(Backend::Sqlite { path, options });
    }
    if url.starts_with("postgres://")
        || url.starts_with("postgresql://")
        || url.starts_with("host=")
    {
        if cfg!(not(feature = "postgres")) {
            return Err(
                "PostgreSQL support is not compiled in; build `planwright` with the `postgres` feature"
                    .into(),
            );
        }
        return Ok(Backend::Postgres(url));
    }
    Err("unknown backend; use `memory:`, `sqlite:PATH` or `postgres://USER@HOST:PORT/DB`".into())
}

/// Opens the checkpointer a connection string names, applying schema migrations. A PostgreSQL
/// checkpointer gets a pool of its own ([`connect_in`] shares one).
pub async fn connect(url: &str) -> Result<Arc<dyn Checkpointer>, CheckpointError> {
    connect_in(url, &PgPools::new()).await
}

/// [`connect`], on the pool `pools` holds for `url` when it is a PostgreSQL URL: the process's
/// other parts opened through the same `pools` share its connection budget (`pool_size`).
pub async fn connect_in(
    url: &str,
    pools: &PgPools,
) -> Result<Arc<dyn Checkpointer>, CheckpointError> {
    #[cfg(not(feature = "postgres"))]
    let _ = pools;
    let bad = |reason: String| CheckpointError::BadUrl {
        url: url.to_string(),
        reason,
    };
    match backend(url).map_err(bad)? {
        Backend::Memory => Ok(Arc::new(MemoryCheckpointer::new())),
        #[cfg(feature = "sqlite")]
        Backend::Sqlite { path, options } => {
            let opts = SqliteOptions::parse(options).map_err(bad)?;
            let path = path.to_string();
            let cp = tokio::task::spawn_blocking(move || {
                SqliteCheckpointer::open_with_options(path, opts)
            })
            .await
            .map_err(|e| CheckpointError::backend("sqlite open task failed", e))??;
            Ok(Arc::new(cp))
        }
        #[cfg(feature = "postgres")]
        Backend::Postgres(url) => {
            let shared = pools.get(url).await?;
            Ok(Arc::new(
                PostgresCheckpointer::with_pool(shared.pool(), shared.config()).await?,
            ))
        }
        // `backend` already refuses a backend that is compiled out.
        #[allow(unreachable_patterns)]
        _ => Err(bad("this backend is not compiled in".into())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    async fn refusal(url: &str) -> String {
        match connect(url).await {
            Err(e @ CheckpointError::BadUrl { .. }) => e.to_string(),
            Err(e) => panic!("{url}: expected a bad URL, got {e}"),
            Ok(cp) => panic!("{url}: expected a bad URL, opened {}", cp.backend_name()),
        }
    }

    #[tokio::test]
    async fn a_url_whose_backend_is_compiled_out_names_the_missing_feature() {
        let sqlite = refusal("sqlite:").await;
        if cfg!(feature = "sqlite") {
            assert!(sqlite.contains("needs a file path"), "{sqlite}");
        } else {
            assert!(sqlite.contains("`sqlite` feature"), "{sqlite}");
        }
        if !cfg!(feature = "postgres") {
            let pg = refusal("postgres://postgres@127.0.0.1:1/none").await;
            assert!(pg.contains("`postgres` feature"), "{pg}");
        }
        let other = refusal("redis://x").await;
        assert!(other.contains("unknown backend"), "{other}");
    }
}
