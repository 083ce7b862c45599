//! SQLite files as older builds left them, for the migration tests (the planwright crate's tests
//! only: they write the old tables with rusqlite directly).

#![allow(dead_code)]

/// A fresh SQLite file as an older build left it, at schema `version` (1: checkpoints without
/// checksums; 2: with them), with its tables empty, and a connection to it for adding rows.
pub fn sqlite_file_at_schema(
    name: &str,
    version: u32,
) -> (std::path::PathBuf, rusqlite::Connection) {
    assert!(matches!(version, 1 | 2), "no schema {version} to write");
    let path = super::backends::sqlite_path(name);
    let conn = rusqlite::Connection::open(&path).unwrap();
    let versions = if version == 1 { "(1)" } else { "(1), (2)" };
    let checksum = if version == 1 { "" } else { "checksum TEXT," };
    conn.execute_batch(&format!(
        "CREATE TABLE planwright_schema (version INTEGER NOT NULL);
         INSERT INTO planwright_schema VALUES {versions};
         CREATE TABLE threads (thread_id TEXT PRIMARY KEY, metadata TEXT);
         CREATE TABLE checkpoints (thread_id TEXT NOT NULL, id INTEGER NOT NULL,
             parent INTEGER, fingerprint TEXT NOT NULL, kind TEXT NOT NULL,
             body BLOB NOT NULL, next_tasks BLOB NOT NULL, metadata TEXT NOT NULL,
             {checksum} PRIMARY KEY (thread_id, id)) WITHOUT ROWID;
         CREATE TABLE writes (thread_id TEXT NOT NULL, checkpoint INTEGER NOT NULL,
             task_step INTEGER NOT NULL, task_index INTEGER NOT NULL, node TEXT NOT NULL,
             kind TEXT NOT NULL, key TEXT NOT NULL, payload BLOB NOT NULL,
             PRIMARY KEY (thread_id, checkpoint, task_step, task_index, kind, key)) WITHOUT ROWID;"
    ))
    .unwrap();
    (path, conn)
}

/// The metadata JSON an older build stored with a checkpoint.
pub const OLD_METADATA: &str =
    r#"{"step":1,"source":"loop","nodes":[],"created_at_ms":1,"extra":null}"#;
