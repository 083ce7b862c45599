//! A checkpointer from a URL, with the two ways opening it can fail told apart: a malformed URL is
//! the user's mistake (exit 2, HTTP 400), a backend that cannot be reached is a run error (exit 1).
//!
//! Where the commands keep threads when `--checkpoint` names no other place is decided here, once:
//! a SQLite file per command under [`DEFAULT_DIR`] in the working directory, which is created on
//! first use because it is the documented default. Any other SQLite path's directory must exist
//! (`?create_dirs=true` creates it): a typo never makes folders. A command that only answers,
//! shows or continues a thread ([`Access::Existing`]) never creates storage: a SQLite file that
//! does not exist holds no thread, so the command is refused as for any unknown thread and leaves
//! nothing behind.

use planwright::checkpoint::{Backend, CheckpointError, Checkpointer, MemoryCheckpointer};
use std::path::Path;
use std::process::ExitCode;
use std::sync::Arc;

/// The directory, under the working directory, where `research`, `acquire` and `serve` keep
/// their threads unless `--checkpoint` names another place; created on first use.
pub const DEFAULT_DIR: &str = ".planwright";

/// Where `research` keeps its threads by default (a file under [`DEFAULT_DIR`]).
pub const RESEARCH_CHECKPOINT: &str = "sqlite:.planwright/research.db";

/// Where `acquire` keeps its threads by default (a file under [`DEFAULT_DIR`]).
pub const ACQUIRE_CHECKPOINT: &str = "sqlite:.planwright/acquire.db";

/// Where `serve` keeps threads, runs and the store by default (a file under [`DEFAULT_DIR`]).
pub const SERVE_CHECKPOINT: &str = "sqlite:.planwright/serve.sqlite";

/// What a command does with the threads in its storage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// It may start a thread: the storage is created when missing.
    Create,
    /// It only answers, shows or continues a thread that exists: storage that does not exist
    /// holds none, and is not created.
    Existing,
}

/// Why a checkpointer could not be opened.
#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    /// The URL is malformed or names an unknown (or compiled-out) backend.
    #[error(transparent)]
    BadUrl(CheckpointError),
    /// The backend could not be opened.
    #[error("cannot open {url}: {source}")]
    Unreachable {
        /// The URL.
        url: String,
        /// Why.
        source: CheckpointError,
    },
}

impl OpenError {
    /// The exit code of a command that could not open its storage: 2 for a bad URL, 1 otherwise.
    pub fn exit_code(&self) -> ExitCode {
        match self {
            Self::BadUrl(_) => ExitCode::from(2),
            Self::Unreachable { .. } => ExitCode::from(1),
        }
    }
}

/// Opens the checkpointer `url` names (`memory:`, `sqlite:PATH`, `postgres://…`).
pub async fn checkpointer(url: &str) -> Result<Arc<dyn Checkpointer>, OpenError> {
    match planwright::checkpoint::connect(url).await {
        Ok(cp) => Ok(cp),
        Err(e @ CheckpointError::BadUrl { .. }) => Err(OpenError::BadUrl(e)),
        Err(source) => Err(OpenError::Unreachable {
            url: url.to_string(),
            source,
        }),
    }
}

/// Creates [`DEFAULT_DIR`] when `url` is `default`, the command's default storage (the one place
/// whose directory is made without `?create_dirs=true`); nothing otherwise.
pub fn prepare_default(url: &str, default: &str) -> Result<(), OpenError> {
    if url != default {
        return Ok(());
    }
    std::fs::create_dir_all(DEFAULT_DIR).map_err(|e| OpenError::Unreachable {
        url: url.to_string(),
        source: CheckpointError::backend(format!("cannot create `{DEFAULT_DIR}`"), e),
    })
}

/// Opens a planner command's storage: `url`, where `default` is the command's own default
/// ([`prepare_default`]). With [`Access::Existing`], a SQLite file that does not exist is not
/// created: an empty in-memory checkpointer stands in, on which every thread is unknown and
/// nothing is kept.
pub async fn open_checkpointer(
    url: &str,
    default: &str,
    access: Access,
) -> Result<Arc<dyn Checkpointer>, OpenError> {
    let backend = planwright::checkpoint::backend(url).map_err(|reason| {
        OpenError::BadUrl(CheckpointError::BadUrl {
            url: url.to_string(),
            reason,
        })
    })?;
    if let (Access::Existing, Backend::Sqlite { path, .. }) = (access, backend) {
        if !Path::new(path).exists() {
            return Ok(Arc::new(MemoryCheckpointer::new()));
        }
    }
    prepare_default(url, default)?;
    checkpointer(url).await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_default_is_a_file_under_the_default_dir() {
        for url in [RESEARCH_CHECKPOINT, ACQUIRE_CHECKPOINT, SERVE_CHECKPOINT] {
            let path = url.strip_prefix("sqlite:").expect("a SQLite URL");
            assert_eq!(
                Path::new(path).parent(),
                Some(Path::new(DEFAULT_DIR)),
                "{url}"
            );
        }
    }
}
