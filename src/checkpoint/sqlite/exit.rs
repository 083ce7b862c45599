//! Folding the WAL back into the database file when the process exits.
//!
//! Dropping a [`SqliteCheckpointer`](super::SqliteCheckpointer) truncates its WAL, but a program
//! may exit while a clone of the checkpointer is still held somewhere (a background writer thread,
//! an actor not yet dropped): then no destructor runs, and every committed checkpoint stays in the
//! `-wal` file beside a `.db` file that holds nothing (a person who copies the `.db` copies
//! nothing). So every open checkpointer registers its connection here, and a hook run by `exit()`
//! (after `main` returns, or on `std::process::exit`) runs `wal_checkpoint(TRUNCATE)` on each one
//! still open. A process killed by a signal skips it; its data is safe in the WAL and folded in
//! by the next open.

use rusqlite::Connection;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, Once, Weak};
use std::time::Duration;

/// An open checkpointer: its connection, its file, and whether it holds the file's lock.
struct Open {
    conn: Weak<Mutex<Connection>>,
    path: PathBuf,
    exclusive: bool,
}

type Registry = Mutex<Vec<Open>>;

static OPEN: Registry = Mutex::new(Vec::new());
static HOOK: Once = Once::new();

/// Registers `conn` (the file `path`) for the exit hook (installing the hook once per process).
pub(super) fn register(conn: &Arc<Mutex<Connection>>, path: &Path, exclusive: bool) {
    let mut open = OPEN.lock().unwrap_or_else(|p| p.into_inner());
    open.retain(|o| o.conn.strong_count() > 0);
    open.push(Open {
        conn: Arc::downgrade(conn),
        path: path.to_path_buf(),
        exclusive,
    });
    drop(open);
    #[cfg(unix)]
    HOOK.call_once(|| {
        // SAFETY: `atexit` only records the function pointer; `at_exit` is a plain `extern "C"`
        // function that never unwinds (every error is ignored).
        unsafe {
            libc::atexit(at_exit);
        }
    });
}

/// Truncates the WAL of `conn` (waiting up to `wait` for another connection's lock).
pub(super) fn truncate_wal(conn: &Connection, wait: Duration) -> rusqlite::Result<()> {
    conn.busy_timeout(wait)?;
    conn.query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |_| Ok(()))
}

#[cfg(unix)]
extern "C" fn at_exit() {
    let _ = std::panic::catch_unwind(|| {
        let open: Vec<(Arc<Mutex<Connection>>, PathBuf, bool)> = OPEN
            .lock()
            .map(|o| {
                o.iter()
                    .filter_map(|o| Some((o.conn.upgrade()?, o.path.clone(), o.exclusive)))
                    .collect()
            })
            .unwrap_or_default();
        for (conn, path, exclusive) in open {
            // The checkpointer's own connection, if no thread is using it at exit (a task
            // dropped mid-call may have left it locked).
            if let Ok(c) = conn.try_lock() {
                if truncate_wal(&c, Duration::from_millis(500)).is_ok() {
                    continue;
                }
            }
            // Otherwise a connection of its own: possible unless this process holds the file's
            // exclusive lock on the other one.
            if !exclusive {
                if let Ok(c) = Connection::open(&path) {
                    let _ = truncate_wal(&c, Duration::from_millis(500));
                }
            }
        }
    });
}
