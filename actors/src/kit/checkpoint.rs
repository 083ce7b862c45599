//! A checkpointer from a URL, with the two ways opening it can fail told apart: a malformed URL is
//! the user's mistake (exit 2, HTTP 400), a backend that cannot be reached is a run error (exit 1).

use planwright::checkpoint::{CheckpointError, Checkpointer};
use std::process::ExitCode;
use std::sync::Arc;

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

/// Creates the directory a `sqlite:PATH` URL's file lives in, so a default path under a fresh
/// working directory opens (other URLs: nothing to do; a directory that cannot be created shows
/// up as the open error that follows).
pub fn ensure_parent_dir(url: &str) {
    if let Some(path) = url.strip_prefix("sqlite:") {
        let path = path.split('?').next().unwrap_or(path);
        if let Some(dir) = std::path::Path::new(path).parent() {
            if !dir.as_os_str().is_empty() {
                let _ = std::fs::create_dir_all(dir);
            }
        }
    }
}
