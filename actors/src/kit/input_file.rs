//! Reading a command's input file with a size cap, so a huge or endless file (`--notes
//! /dev/zero`) is refused with a clear message instead of filling memory: at most
//! [`MAX_INPUT_BYTES`] are read, and a file that holds more is an error naming it and the cap.

use std::io::Read;
use std::path::Path;

/// The largest input file a command reads (16 MiB).
pub const MAX_INPUT_BYTES: u64 = 16 * 1024 * 1024;

/// Why an input file was not read.
#[derive(Debug, thiserror::Error)]
pub enum InputFileError {
    /// It could not be opened or read.
    #[error("cannot read {what} {path}: {source}")]
    Io {
        /// What the file is for (e.g. "notes file").
        what: String,
        /// Its path.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// It holds more than the cap.
    #[error("{what} {path} is larger than {limit} bytes; give a smaller file")]
    TooLarge {
        /// What the file is for.
        what: String,
        /// Its path.
        path: String,
        /// The cap.
        limit: u64,
    },
    /// It is not UTF-8 text.
    #[error("{what} {path} is not UTF-8 text")]
    NotText {
        /// What the file is for.
        what: String,
        /// Its path.
        path: String,
    },
}

/// Reads `path` as text, refusing files over `limit` bytes without reading past it.
pub fn read_capped(path: &Path, what: &str, limit: u64) -> Result<String, InputFileError> {
    let name = || path.display().to_string();
    let file = std::fs::File::open(path).map_err(|source| InputFileError::Io {
        what: what.into(),
        path: name(),
        source,
    })?;
    let mut bytes = Vec::new();
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| InputFileError::Io {
            what: what.into(),
            path: name(),
            source,
        })?;
    if bytes.len() as u64 > limit {
        return Err(InputFileError::TooLarge {
            what: what.into(),
            path: name(),
            limit,
        });
    }
    String::from_utf8(bytes).map_err(|_| InputFileError::NotText {
        what: what.into(),
        path: name(),
    })
}

/// Reads `path` as text with the default cap, [`MAX_INPUT_BYTES`].
pub fn read_input(path: &Path, what: &str) -> Result<String, InputFileError> {
    read_capped(path, what, MAX_INPUT_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_endless_file_is_refused_at_the_cap() {
        let e = read_capped(Path::new("/dev/zero"), "notes file", 1024).unwrap_err();
        assert!(
            matches!(e, InputFileError::TooLarge { limit: 1024, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("/dev/zero"));
    }

    #[test]
    fn a_file_at_the_cap_is_read_and_other_failures_are_named() {
        let dir = std::env::temp_dir().join(format!("pw-input-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("exact.txt");
        std::fs::write(&p, "x".repeat(64)).unwrap();
        assert_eq!(read_capped(&p, "notes file", 64).unwrap().len(), 64);
        assert!(matches!(
            read_capped(&p, "notes file", 63),
            Err(InputFileError::TooLarge { .. })
        ));
        std::fs::write(&p, [0xff, 0xfe]).unwrap();
        assert!(matches!(
            read_capped(&p, "notes file", 64),
            Err(InputFileError::NotText { .. })
        ));
        let e = read_capped(&dir.join("missing"), "schema file", 64).unwrap_err();
        assert!(e.to_string().starts_with("cannot read schema file"), "{e}");
    }
}
