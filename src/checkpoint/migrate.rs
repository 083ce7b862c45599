//! Versioned schema migrations, shared by the SQL backends.
//!
//! Each backend lists its migrations as `(version, SQL)` in order. On open, the backend reads the
//! highest applied version from `planwright_schema` and applies every later migration, each in the
//! same transaction as the version row that records it, so a crash mid-migration leaves the schema
//! at the previous version, never half-way. A database written by a newer build (a version this
//! build does not know) is refused with a clear error instead of being misread.

/// One schema step.
#[derive(Clone, Copy, Debug)]
pub struct Migration {
    /// Monotonic version, starting at 1.
    pub version: u32,
    /// What it does, for the error message when it fails.
    pub name: &'static str,
    /// The statements (several, separated by `;`).
    pub sql: &'static str,
}

/// The migrations after `current`, or an error if the database is newer than this build.
pub fn pending(
    all: &'static [Migration],
    current: u32,
) -> Result<&'static [Migration], super::CheckpointError> {
    let known = all.last().map(|m| m.version).unwrap_or(0);
    if current > known {
        return Err(super::CheckpointError::backend_msg(format!(
            "database schema version {current} is newer than this build knows ({known}); upgrade Planwright"
        )));
    }
    let first = all
        .iter()
        .position(|m| m.version > current)
        .unwrap_or(all.len());
    Ok(&all[first..])
}

#[cfg(test)]
mod tests {
    use super::*;

    static ALL: [Migration; 2] = [
        Migration {
            version: 1,
            name: "one",
            sql: "",
        },
        Migration {
            version: 2,
            name: "two",
            sql: "",
        },
    ];

    #[test]
    fn pending_migrations_follow_the_current_version() {
        assert_eq!(pending(&ALL, 0).unwrap().len(), 2);
        assert_eq!(pending(&ALL, 1).unwrap()[0].name, "two");
        assert!(pending(&ALL, 2).unwrap().is_empty());
        assert!(pending(&ALL, 3).unwrap_err().to_string().contains("newer"));
    }
}
