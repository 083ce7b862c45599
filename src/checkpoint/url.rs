//! Connection strings select the backend: `memory:`, `sqlite:PATH` (options after `?`:
//! `locking=exclusive`, `adopt=1`, `wal_limit=64m`, `inline=0`; see `SqliteOptions`),
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
use super::{CheckpointError, Checkpointer};
use std::sync::Arc;

/// Opens the checkpointer a connection string names, applying schema migrations.
pub async fn connect(url: &str) -> Result<Arc<dyn Checkpointer>, CheckpointError> {
    let bad = |reason: &str| CheckpointError::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    if url == "memory:" || url == "memory" {
        return Ok(Arc::new(MemoryCheckpointer::new()));
    }
    if let Some(path) = url.strip_prefix("sqlite:") {
        #[cfg(not(feature = "sqlite"))]
        {
            let _ = path;
            return Err(bad(
                "SQLite support is not compiled in; build `planwright` with the `sqlite` feature",
            ));
        }
        #[cfg(feature = "sqlite")]
        return open_sqlite(url, path).await;
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
        return Ok(Arc::new(PostgresCheckpointer::connect(url).await?));
    }
    Err(bad(
        "unknown backend; use `memory:`, `sqlite:PATH` or `postgres://USER@HOST:PORT/DB`",
    ))
}

#[cfg(feature = "sqlite")]
async fn open_sqlite(url: &str, path: &str) -> Result<Arc<dyn Checkpointer>, CheckpointError> {
    let bad = |reason: &str| CheckpointError::BadUrl {
        url: url.to_string(),
        reason: reason.to_string(),
    };
    let path = path.strip_prefix("//").unwrap_or(path);
    if path.is_empty() {
        return Err(bad(
            "`sqlite:` needs a file path, e.g. `sqlite:planwright.sqlite`",
        ));
    }
    let (path, opts) = match path.split_once('?') {
        None => (path.to_string(), SqliteOptions::default()),
        Some((p, query)) => (
            p.to_string(),
            SqliteOptions::parse(query).map_err(|r| bad(&r))?,
        ),
    };
    let cp = tokio::task::spawn_blocking(move || SqliteCheckpointer::open_with_options(path, opts))
        .await
        .map_err(|e| CheckpointError::Backend(format!("sqlite open task failed: {e}")))??;
    Ok(Arc::new(cp))
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
