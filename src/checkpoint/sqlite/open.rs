//! Opening a SQLite checkpoint file: options from the URL, refusing a file that belongs to another
//! program, schema migrations, and the background thread that keeps the write-ahead log bounded.
//!
//! **The WAL stays bounded.** SQLite appends every commit to `FILE-wal` and copies it back into the
//! database at a checkpoint. A *passive* checkpoint never waits for writers, so under a steady
//! write load it never catches up with the end of the log, the log is never restarted, and it
//! grows for ever (1.4 GB beside a 338 MB database after 5,000 conversations). So the background
//! thread runs a passive checkpoint every 250 ms; when the log has grown past `wal_limit` (default
//! 64 MiB), the next write, on the blocking pool after its commit and on the writing connection
//! itself (so it cannot starve behind other writes), runs a `RESTART` checkpoint, which copies
//! everything back and makes the next commit write the log from its start again; the thread
//! tries one too, for when no write comes. `journal_size_limit` (set to the same limit) makes
//! SQLite shrink the file to the limit whenever the log restarts, so the bound holds. The log is
//! restarted rather than emptied (`TRUNCATE`, until 2026-11-25): writing over the file's blocks
//! already there, still in the page cache, costs the kernel less than appending to an emptied
//! file, which allocates every block again — 7 % of the research load's CPU. The writing side
//! also looks at the log's size itself every 32 calls, so the bound holds on a busy machine
//! where the thread gets no CPU for a while. On a clean close (the
//! checkpointer dropped) a `TRUNCATE` checkpoint runs too, so the `.db` file alone holds every
//! committed checkpoint: copying it copies the data.
//!
//! **A missing directory is refused.** The file's directory must exist: a typo in a path
//! (`sqlite:/nonexistent/dir/x.db`) is an error naming the directory, never a new tree of
//! folders holding an empty database. `?create_dirs=true` creates it.
//!
//! **Foreign files are refused.** A file that already holds tables other than Planwright's own
//! (`planwright_*`) but no `planwright_schema` table belongs to another program; opening it is refused unless the URL says `?adopt=1`, so a
//! mistyped path never adds Planwright tables to someone else's database.

use super::super::migrate::{pending, Migration};
use super::super::CheckpointError;
use super::be;
use rusqlite::{Connection, TransactionBehavior};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::time::Duration;

pub(super) static MIGRATIONS: [Migration; 6] = [
    Migration {
        version: 1,
        name: "threads, checkpoints and task writes",
        sql: "
        CREATE TABLE threads (
            thread_id TEXT PRIMARY KEY,
            metadata TEXT
        );
        CREATE TABLE checkpoints (
            thread_id TEXT NOT NULL,
            id INTEGER NOT NULL,
            parent INTEGER,
            fingerprint TEXT NOT NULL,
            kind TEXT NOT NULL,
            body BLOB NOT NULL,
            next_tasks BLOB NOT NULL,
            metadata TEXT NOT NULL,
            PRIMARY KEY (thread_id, id)
        ) WITHOUT ROWID;
        CREATE TABLE writes (
            thread_id TEXT NOT NULL,
            checkpoint INTEGER NOT NULL,
            task_step INTEGER NOT NULL,
            task_index INTEGER NOT NULL,
            node TEXT NOT NULL,
            kind TEXT NOT NULL,
            key TEXT NOT NULL,
            payload BLOB NOT NULL,
            PRIMARY KEY (thread_id, checkpoint, task_step, task_index, kind, key)
        ) WITHOUT ROWID;
    ",
    },
    Migration {
        version: 2,
        name: "checkpoint checksums",
        // Rows of version 1 keep a NULL checksum: readable, links still verified.
        sql: "ALTER TABLE checkpoints ADD COLUMN checksum TEXT;",
    },
    Migration {
        version: 3,
        name: "checkpoints and task writes stored in the order they are written",
        // Rows were clustered by their key, so a commit of records of many running threads
        // wrote a page per thread; appended rows share pages, and the key lives in a unique
        // index of small entries (see "Row order" in docs/checkpoints.md).
        sql: "
        CREATE TABLE checkpoints_by_arrival (
            seq INTEGER PRIMARY KEY,
            thread_id TEXT NOT NULL,
            id INTEGER NOT NULL,
            parent INTEGER,
            fingerprint TEXT NOT NULL,
            kind TEXT NOT NULL,
            body BLOB NOT NULL,
            next_tasks BLOB NOT NULL,
            metadata TEXT NOT NULL,
            checksum TEXT
        );
        INSERT INTO checkpoints_by_arrival
            (thread_id, id, parent, fingerprint, kind, body, next_tasks, metadata, checksum)
            SELECT thread_id, id, parent, fingerprint, kind, body, next_tasks, metadata, checksum
            FROM checkpoints ORDER BY thread_id, id;
        DROP TABLE checkpoints;
        ALTER TABLE checkpoints_by_arrival RENAME TO checkpoints;
        CREATE UNIQUE INDEX checkpoints_key ON checkpoints (thread_id, id);
        CREATE TABLE writes_by_arrival (
            seq INTEGER PRIMARY KEY,
            thread_id TEXT NOT NULL,
            checkpoint INTEGER NOT NULL,
            task_step INTEGER NOT NULL,
            task_index INTEGER NOT NULL,
            node TEXT NOT NULL,
            kind TEXT NOT NULL,
            key TEXT NOT NULL,
            payload BLOB NOT NULL
        );
        INSERT INTO writes_by_arrival
            (thread_id, checkpoint, task_step, task_index, node, kind, key, payload)
            SELECT thread_id, checkpoint, task_step, task_index, node, kind, key, payload
            FROM writes ORDER BY thread_id, checkpoint, task_step, task_index, kind, key;
        DROP TABLE writes;
        ALTER TABLE writes_by_arrival RENAME TO writes;
        CREATE UNIQUE INDEX writes_key
            ON writes (thread_id, checkpoint, task_step, task_index, kind, key);
    ",
    },
    Migration {
        version: 4,
        name: "key indexes by thread number",
        // A thread's rows are found by a number it gets on its first write, not by its id: the
        // key indexes' entries shrink from ~45 bytes to ~10, and the entries of the threads
        // written lately sit together whatever their ids look like (see "Row order" in
        // docs/checkpoints.md).
        sql: "
        CREATE TABLE thread_numbers (
            no INTEGER PRIMARY KEY,
            thread_id TEXT NOT NULL UNIQUE
        );
        INSERT INTO thread_numbers (thread_id)
            SELECT thread_id FROM (
                SELECT thread_id, MIN(seq) AS first FROM checkpoints GROUP BY thread_id
                UNION ALL
                SELECT thread_id, MIN(seq) + (1 << 62) FROM writes GROUP BY thread_id)
            GROUP BY thread_id ORDER BY MIN(first);
        ALTER TABLE checkpoints ADD COLUMN thread_no INTEGER;
        UPDATE checkpoints SET thread_no =
            (SELECT no FROM thread_numbers n WHERE n.thread_id = checkpoints.thread_id);
        DROP INDEX checkpoints_key;
        CREATE UNIQUE INDEX checkpoints_key ON checkpoints (thread_no, id);
        ALTER TABLE writes ADD COLUMN thread_no INTEGER;
        UPDATE writes SET thread_no =
            (SELECT no FROM thread_numbers n WHERE n.thread_id = writes.thread_id);
        DROP INDEX writes_key;
        CREATE UNIQUE INDEX writes_key
            ON writes (thread_no, checkpoint, task_step, task_index, kind, key);
    ",
    },
    Migration {
        version: 5,
        name: "XXH3 checksums",
        // Nothing changes in the tables: rows written from now on carry XXH3-128 checksums
        // (32 hex digits) instead of SHA-256 (64), and older rows keep theirs and verify. The
        // version is what stops a build that knows only SHA-256 from opening the file and
        // reporting every new row as damaged: it refuses the newer schema instead.
        sql: "",
    },
    Migration {
        version: 6,
        name: "effect journal",
        // Results of tasks' external calls, put-if-absent by (thread, key); `checkpoint` is the
        // one the calling task started from, for retention and rollback (see
        // `checkpoint::EffectJournal`).
        sql: "
        CREATE TABLE effects (
            thread_id TEXT NOT NULL,
            key TEXT NOT NULL,
            checkpoint INTEGER NOT NULL,
            value BLOB NOT NULL,
            PRIMARY KEY (thread_id, key)
        ) WITHOUT ROWID;
    ",
    },
];

/// How often the background thread folds the WAL back into the database file.
const WAL_CHECKPOINT_EVERY: Duration = Duration::from_millis(250);

/// Options of a `sqlite:PATH?…` URL.
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// `locking=exclusive`: this process holds the file's lock while it is open.
    pub exclusive: bool,
    /// `adopt=1`: open a file that holds other programs' tables.
    pub adopt: bool,
    /// `wal_limit=BYTES` (suffixes `k`, `m`, `g`): past this size the WAL is truncated.
    pub wal_limit: u64,
    /// `inline=0` turns this off: in the shared mode, a call first runs inline when the lock is
    /// free at once, and goes to the blocking pool only when it would wait.
    pub inline_first: bool,
    /// `create_dirs=true`: create the file's directory (and its parents) when missing; without
    /// it a missing directory is refused.
    pub create_dirs: bool,
}

impl Default for SqliteOptions {
    fn default() -> Self {
        Self {
            exclusive: false,
            adopt: false,
            wal_limit: 64 << 20,
            inline_first: true,
            create_dirs: false,
        }
    }
}

fn parse_size(s: &str) -> Option<u64> {
    let lower = s.to_ascii_lowercase();
    let (num, mult) = match lower.chars().last()? {
        'k' => (&lower[..lower.len() - 1], 1u64 << 10),
        'm' => (&lower[..lower.len() - 1], 1 << 20),
        'g' => (&lower[..lower.len() - 1], 1 << 30),
        _ => (lower.as_str(), 1),
    };
    num.parse::<u64>()
        .ok()
        .and_then(|n| n.checked_mul(mult))
        .filter(|n| *n >= 1 << 16)
}

impl SqliteOptions {
    /// Reads `key=value&…` after the path. Unknown keys or values are an error naming them.
    pub fn parse(query: &str) -> Result<Self, String> {
        let mut o = Self::default();
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            match pair.split_once('=').unwrap_or((pair, "")) {
                ("locking", "exclusive") => o.exclusive = true,
                ("locking", "normal") => o.exclusive = false,
                ("adopt", "1" | "true") => o.adopt = true,
                ("adopt", "0" | "false") => o.adopt = false,
                ("inline", "1" | "true") => o.inline_first = true,
                ("inline", "0" | "false") => o.inline_first = false,
                ("create_dirs", "1" | "true") => o.create_dirs = true,
                ("create_dirs", "0" | "false") => o.create_dirs = false,
                ("wal_limit", v) => {
                    o.wal_limit = parse_size(v).ok_or_else(|| {
                        format!("`wal_limit={v}`: give a size of at least 64k, e.g. 64m")
                    })?
                }
                _ => {
                    return Err(format!(
                        "unknown SQLite option `{pair}`; the options are `locking=exclusive|normal`, `adopt=1`, `wal_limit=SIZE`, `inline=0|1`, `create_dirs=true`"
                    ))
                }
            }
        }
        Ok(o)
    }
}

/// Checks that the directory `path` lives in exists; with `create`, creates it (and its parents)
/// when it does not. Why not, as a sentence naming the directory.
fn parent_dir(path: &Path, create: bool) -> Result<(), String> {
    let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) else {
        return Ok(());
    };
    if dir.is_dir() {
        return Ok(());
    }
    if !create {
        return Err(format!(
            "the directory `{}` does not exist; create it, or add `?create_dirs=true` to the URL to have it created",
            dir.display()
        ));
    }
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create `{}`: {e}", dir.display()))
}

/// Gets the directory of `sqlite:PATH?OPTIONS` ready for a table kept beside the checkpoints
/// (the store's, the run records'): created when the options say `create_dirs=true`, otherwise
/// it must exist. Why not, as a sentence (a bad option, a missing or uncreatable directory).
pub(crate) fn prepare_dir(path: &str, options: &str) -> Result<(), String> {
    parent_dir(Path::new(path), SqliteOptions::parse(options)?.create_dirs)
}

/// Opens the file with the pragmas every connection of ours uses.
pub(super) fn open_connection(
    path: &Path,
    opts: &SqliteOptions,
) -> Result<Connection, CheckpointError> {
    parent_dir(path, opts.create_dirs).map_err(|reason| CheckpointError::BadUrl {
        url: format!("sqlite:{}", path.display()),
        reason,
    })?;
    let mut conn = Connection::open(path)
        .map_err(|e| CheckpointError::backend(format!("cannot open {}", path.display()), e))?;
    refuse_foreign(&conn, path, opts.adopt)?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(be)?;
    if opts.exclusive {
        conn.pragma_update(None, "locking_mode", "EXCLUSIVE")
            .map_err(be)?;
    }
    conn.pragma_update(None, "synchronous", "NORMAL")
        .map_err(be)?;
    conn.busy_timeout(Duration::from_secs(10)).map_err(be)?;
    conn.pragma_update(None, "journal_size_limit", opts.wal_limit as i64)
        .map_err(be)?;
    conn.pragma_update(None, "wal_autocheckpoint", 0)
        .map_err(be)?;
    migrate(&mut conn)?;
    if opts.exclusive {
        // With an exclusive lock no second connection can checkpoint: SQLite's own automatic
        // checkpoints run in the writing connection (every 1000 pages, about 4 MB).
        conn.pragma_update(None, "wal_autocheckpoint", 1000)
            .map_err(be)?;
    }
    Ok(conn)
}

/// Refuses a file holding tables of another program (no `planwright_schema`) unless `adopt`.
fn refuse_foreign(conn: &Connection, path: &Path, adopt: bool) -> Result<(), CheckpointError> {
    let tables: Vec<String> = conn
        .prepare("SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name")
        .and_then(|mut s| s.query_map([], |r| r.get(0))?.collect())
        .map_err(|e| CheckpointError::backend(format!("cannot read {}", path.display()), e))?;
    // Tables named `planwright_*` are Planwright's own (the store's, run records) even before
    // the checkpointer's schema is there.
    let foreign: Vec<&String> = tables
        .iter()
        .filter(|t| !t.starts_with("planwright_"))
        .collect();
    if adopt || foreign.is_empty() || tables.iter().any(|t| t == "planwright_schema") {
        return Ok(());
    }
    let tables = foreign;
    let shown: Vec<&str> = tables.iter().take(5).map(|t| t.as_str()).collect();
    Err(CheckpointError::BadUrl {
        url: format!("sqlite:{}", path.display()),
        reason: format!(
            "the file holds another program's tables ({}{}) and no Planwright schema; \
             add `?adopt=1` to store checkpoints in it anyway",
            shown.join(", "),
            if tables.len() > 5 { ", …" } else { "" }
        ),
    })
}

fn migrate(conn: &mut Connection) -> Result<(), CheckpointError> {
    conn.execute_batch("CREATE TABLE IF NOT EXISTS planwright_schema (version INTEGER NOT NULL)")
        .map_err(be)?;
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(be)?;
    let current: u32 = tx
        .query_row(
            "SELECT COALESCE(MAX(version), 0) FROM planwright_schema",
            [],
            |r| r.get(0),
        )
        .map_err(be)?;
    for m in pending(&MIGRATIONS, current)? {
        tx.execute_batch(m.sql).map_err(|e| {
            CheckpointError::backend(format!("migration {} ({}) failed", m.version, m.name), e)
        })?;
        tx.execute(
            "INSERT INTO planwright_schema (version) VALUES (?1)",
            [m.version],
        )
        .map_err(be)?;
    }
    tx.commit().map_err(be)
}

/// The WAL file beside `db`.
pub(super) fn wal_path(db: &Path) -> PathBuf {
    let mut s = db.as_os_str().to_owned();
    s.push("-wal");
    PathBuf::from(s)
}

/// Starts the thread that keeps the WAL bounded (see the module docs) on its own connection: the
/// fsyncs of WAL mode happen there, never in a caller's write. It ends when the returned sender
/// is dropped.
pub(super) fn spawn_wal_checkpointer(
    path: &Path,
    wal_limit: u64,
    over_limit: Arc<AtomicBool>,
) -> Result<mpsc::Sender<()>, CheckpointError> {
    let conn = Connection::open(path).map_err(be)?;
    conn.busy_timeout(Duration::from_secs(2)).map_err(be)?;
    let wal = wal_path(path);
    let (stop, rx) = mpsc::channel::<()>();
    std::thread::Builder::new()
        .name("planwright-sqlite-wal".into())
        .spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = rx.recv_timeout(WAL_CHECKPOINT_EVERY) {
                let size = std::fs::metadata(&wal).map(|m| m.len()).unwrap_or(0);
                // Past the limit, the next write truncates the log itself (a checkpoint here
                // could starve behind a tight loop of writes); this thread tries too, for when
                // no write comes.
                let over = size > wal_limit;
                over_limit.store(over, Ordering::Relaxed);
                let mode = if over { "RESTART" } else { "PASSIVE" };
                let sql = format!("PRAGMA wal_checkpoint({mode})");
                if let Err(e) = conn.query_row(&sql, [], |_| Ok(())) {
                    tracing::warn!(error = %e, mode, "sqlite WAL checkpoint failed");
                }
            }
        })
        .map_err(|e| CheckpointError::backend("cannot start the WAL checkpointer", e))?;
    Ok(stop)
}

/// A connection to the SQLite file at `path` for a table kept beside the checkpoints (the
/// store's, the run records'): its directory must exist ([`prepare_dir`] creates it when a URL
/// asks), WAL, a 10 s busy timeout, then `schema` applied. On failure, what was being done
/// (`open`, `create table`) and why.
pub(crate) fn side_connection(
    path: &str,
    schema: &str,
) -> Result<Connection, (&'static str, Box<dyn std::error::Error + Send + Sync>)> {
    parent_dir(Path::new(path), false).map_err(|e| ("open", e.into()))?;
    let conn = Connection::open(path).map_err(|e| ("open", e.into()))?;
    conn.pragma_update(None, "journal_mode", "WAL")
        .map_err(|e| ("open", e.into()))?;
    conn.busy_timeout(std::time::Duration::from_secs(10))
        .map_err(|e| ("open", e.into()))?;
    conn.execute_batch(schema)
        .map_err(|e| ("create table", e.into()))?;
    Ok(conn)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn options_parse_and_unknown_ones_are_named() {
        let o = SqliteOptions::parse("locking=exclusive&adopt=1&wal_limit=8m").unwrap();
        assert!(o.exclusive && o.adopt);
        assert_eq!(o.wal_limit, 8 << 20);
        assert!(SqliteOptions::parse("mode=ro")
            .unwrap_err()
            .contains("mode=ro"));
        assert!(SqliteOptions::parse("wal_limit=1")
            .unwrap_err()
            .contains("wal_limit"));
        assert!(
            SqliteOptions::parse("create_dirs=true")
                .unwrap()
                .create_dirs
        );
        assert!(!SqliteOptions::default().create_dirs);
    }

    #[test]
    fn a_missing_directory_is_refused_naming_it_unless_create_dirs() {
        let base = std::env::temp_dir().join(format!("pw-sqlite-dirs-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&base);
        let db = base.join("a/b/x.db");
        let refused = open_connection(&db, &SqliteOptions::default())
            .expect_err("refused")
            .to_string();
        assert!(
            refused.contains(&base.join("a/b").display().to_string()),
            "{refused}"
        );
        assert!(refused.contains("create_dirs=true"), "{refused}");
        assert!(!base.exists(), "nothing created");
        let side = side_connection(db.to_str().unwrap(), "").expect_err("refused");
        assert!(side.1.to_string().contains("does not exist"), "{}", side.1);
        assert!(!base.exists(), "nothing created");
        let opts = SqliteOptions {
            create_dirs: true,
            ..SqliteOptions::default()
        };
        assert!(open_connection(&db, &opts).is_ok());
        assert!(db.exists());
        std::fs::remove_dir_all(&base).unwrap();
    }
}
