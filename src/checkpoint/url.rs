//! Connection strings select the backend: `memory:`, `sqlite:PATH` (optionally
//! `sqlite:PATH?locking=exclusive`), `postgres://…` (or `postgresql://…`, or a libpq key-value
//! string starting with `host=`).

use super::memory::MemoryCheckpointer;
use super::postgres::PostgresCheckpointer;
use super::sqlite::SqliteCheckpointer;
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
        let path = path.strip_prefix("//").unwrap_or(path);
        if path.is_empty() {
            return Err(bad(
                "`sqlite:` needs a file path, e.g. `sqlite:planwright.sqlite`",
            ));
        }
        let (path, exclusive) = match path.split_once('?') {
            None => (path.to_string(), false),
            Some((p, "locking=exclusive")) => (p.to_string(), true),
            Some((p, "locking=normal")) => (p.to_string(), false),
            Some(_) => {
                return Err(bad(
                    "the only SQLite option is `?locking=exclusive` (or `?locking=normal`)",
                ))
            }
        };
        let cp =
            tokio::task::spawn_blocking(move || SqliteCheckpointer::open_with(path, exclusive))
                .await
                .map_err(|e| CheckpointError::Backend(format!("sqlite open task failed: {e}")))??;
        return Ok(Arc::new(cp));
    }
    if url.starts_with("postgres://")
        || url.starts_with("postgresql://")
        || url.starts_with("host=")
    {
        return Ok(Arc::new(PostgresCheckpointer::connect(url).await?));
    }
    Err(bad(
        "unknown backend; use `memory:`, `sqlite:PATH` or `postgres://USER@HOST:PORT/DB`",
    ))
}
