//! SQLite file housekeeping: the write-ahead log stays bounded under load and is emptied on a
//! clean close (so the `.db` file alone holds the data), a file of another program is refused
//! unless adopted, and a call waiting for another process's lock never holds a tokio worker.

#[path = "support/backends.rs"]
mod backends;
#[path = "support/checkpoint_suite.rs"]
#[allow(dead_code)]
mod checkpoint_suite;

use checkpoint_suite::rec_at;
use planwright::checkpoint::{connect, BodyKind, CheckpointError, CheckpointRecord};
use planwright::{CheckpointId, ThreadId};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn wal(db: &Path) -> PathBuf {
    PathBuf::from(format!("{}-wal", db.display()))
}

fn wal_size(db: &Path) -> u64 {
    std::fs::metadata(wal(db)).map(|m| m.len()).unwrap_or(0)
}

/// Checkpoint `id` of `t`, with a body of `size` bytes.
fn big(t: &ThreadId, id: u64, size: usize) -> CheckpointRecord {
    let kind = if id == 1 {
        BodyKind::Snapshot
    } else {
        BodyKind::Delta
    };
    let mut r = rec_at(t, id, kind, id);
    r.body = vec![b'x'; size];
    r
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_clean_close_leaves_every_checkpoint_in_the_db_file_alone() {
    let path = backends::sqlite_path("close");
    let t = ThreadId::new("copied");
    {
        let cp = connect(&format!("sqlite:{}", path.display()))
            .await
            .unwrap();
        for id in 1..=50 {
            cp.put(big(&t, id, 4096)).await.unwrap();
        }
        assert!(wal_size(&path) > 0, "the writes went to the WAL first");
    }
    assert_eq!(wal_size(&path), 0, "a clean close empties the WAL");
    // Copy only the .db file, as a person would.
    let copy = backends::sqlite_path("close-copy");
    std::fs::copy(&path, &copy).unwrap();
    assert!(!wal(&copy).exists());
    let cp = connect(&format!("sqlite:{}", copy.display()))
        .await
        .unwrap();
    assert_eq!(cp.head(&t).await.unwrap(), Some(CheckpointId(50)));
    assert_eq!(cp.get(&t, CheckpointId(50)).await.unwrap().body.len(), 4096);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_wal_is_truncated_while_writes_go_on_once_it_passes_its_limit() {
    let path = backends::sqlite_path("wal");
    let limit: u64 = 256 << 10;
    let cp = connect(&format!("sqlite:{}?wal_limit=256k", path.display()))
        .await
        .unwrap();
    let t = ThreadId::new("load");
    // Write 64 KB records until the WAL has passed its limit and then been cut back below it
    // while writing continued (bounded: at most 4,000 records, 256 MB).
    let (mut passed, mut cut_under_load, mut largest) = (false, false, 0);
    for id in 1..=4_000u64 {
        cp.put(big(&t, id, 64 << 10)).await.unwrap();
        let size = wal_size(&path);
        largest = largest.max(size);
        if size > limit {
            passed = true;
        } else if passed && id > 1 {
            cut_under_load = true;
            if id > 200 {
                break;
            }
        }
        tokio::task::yield_now().await;
    }
    assert!(passed && cut_under_load, "largest WAL {largest} bytes");
    assert_eq!(cp.head(&t).await.unwrap().map(|h| h.0 > 200), Some(true));
}

#[tokio::test]
async fn a_file_of_another_program_is_refused_unless_adopted() {
    let path = backends::sqlite_path("foreign");
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch("CREATE TABLE customers (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO customers VALUES (1, 'ann');")
            .unwrap();
    }
    let err = connect(&format!("sqlite:{}", path.display()))
        .await
        .err()
        .expect("refused");
    assert!(matches!(err, CheckpointError::BadUrl { .. }), "{err}");
    let text = err.to_string();
    assert!(
        text.contains("customers") && text.contains("adopt=1"),
        "{text}"
    );
    // Nothing was added to it.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let tables: i64 = conn
        .query_row(
            "SELECT COUNT(*) FROM sqlite_master WHERE type = 'table'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(tables, 1);
    drop(conn);
    let cp = connect(&format!("sqlite:{}?adopt=1", path.display()))
        .await
        .unwrap();
    let t = ThreadId::new("t");
    cp.put(rec_at(&t, 1, BodyKind::Snapshot, 1)).await.unwrap();
    drop(cp);
    // Once adopted, the file is Planwright's: it opens without the flag, the other table intact.
    let cp = connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    assert_eq!(cp.head(&t).await.unwrap(), Some(CheckpointId(1)));
    let conn = rusqlite::Connection::open(&path).unwrap();
    let name: String = conn
        .query_row("SELECT name FROM customers", [], |r| r.get(0))
        .unwrap();
    assert_eq!(name, "ann");
}

/// Another process (here: a thread with its own connection) holds the write lock; it lets go only
/// after a task on the single tokio worker has ticked 20 times. If the waiting write held the
/// worker, the ticker could not tick, the lock would outlast the 10 s busy timeout, and the write
/// would fail with "database is locked".
#[tokio::test(flavor = "current_thread")]
async fn a_write_waiting_for_another_process_lock_leaves_the_worker_free() {
    let path = backends::sqlite_path("busy");
    let cp = connect(&format!("sqlite:{}", path.display()))
        .await
        .unwrap();
    let t = ThreadId::new("t");
    cp.put(rec_at(&t, 1, BodyKind::Snapshot, 1)).await.unwrap();

    let (locked_tx, locked_rx) = std::sync::mpsc::channel::<()>();
    let (release_tx, release_rx) = std::sync::mpsc::channel::<()>();
    let holder_path = path.clone();
    let holder = std::thread::spawn(move || {
        let conn = rusqlite::Connection::open(&holder_path).unwrap();
        conn.execute_batch("BEGIN IMMEDIATE").unwrap();
        locked_tx.send(()).unwrap();
        release_rx.recv().unwrap();
        conn.execute_batch("COMMIT").unwrap();
    });
    locked_rx.recv().unwrap();

    let ticker = tokio::spawn(async move {
        for _ in 0..20 {
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        release_tx.send(()).unwrap();
    });
    cp.put(rec_at(&t, 2, BodyKind::Delta, 2))
        .await
        .expect("the write waited for the lock without stopping the ticker");
    ticker.await.unwrap();
    holder.join().unwrap();
    assert_eq!(cp.head(&t).await.unwrap(), Some(CheckpointId(2)));
}

/// The child of `an_exiting_process_leaves_its_data_in_the_db_file`: writes, keeps a clone of the
/// checkpointer alive past `main` (as a background thread may), and exits normally.
#[test]
fn exiting_child_entry() {
    let Ok(path) = std::env::var("PW_EXIT_DB") else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().unwrap();
    let cp = rt.block_on(async {
        let cp = connect(&format!("sqlite:{path}")).await.unwrap();
        let t = ThreadId::new("exiting");
        for id in 1..=20 {
            cp.put(big(&t, id, 1024)).await.unwrap();
        }
        cp
    });
    std::mem::forget(cp); // never dropped: only the exit hook can fold the WAL in
    std::process::exit(0);
}

#[test]
fn an_exiting_process_leaves_its_data_in_the_db_file_even_with_the_checkpointer_still_held() {
    let path = backends::sqlite_path("exit");
    let status = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "exiting_child_entry", "--test-threads=1"])
        .env("PW_EXIT_DB", &path)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    // Copy only the .db file, as a person would.
    let copy = backends::sqlite_path("exit-copy");
    std::fs::copy(&path, &copy).unwrap();
    let conn = rusqlite::Connection::open(&copy).unwrap();
    let n: i64 = conn
        .query_row("SELECT COUNT(*) FROM checkpoints", [], |r| r.get(0))
        .unwrap();
    assert_eq!(n, 20);
}

/// Two hundred calls at once, all of them for the blocking pool (`inline=0`), start only a
/// handful of threads: the rest wait for the connection as tasks. (Each waiting call used to park
/// a blocking-pool thread of its own on the connection's mutex — ~300 threads under a
/// 500-conversation load.)
#[test]
fn calls_waiting_for_the_connection_do_not_each_hold_a_thread() {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let live = Arc::new(AtomicUsize::new(0));
    let peak = Arc::new(AtomicUsize::new(0));
    let (l1, p1, l2) = (live.clone(), peak.clone(), live.clone());
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .on_thread_start(move || {
            let now = l1.fetch_add(1, Ordering::SeqCst) + 1;
            p1.fetch_max(now, Ordering::SeqCst);
        })
        .on_thread_stop(move || {
            l2.fetch_sub(1, Ordering::SeqCst);
        })
        .build()
        .unwrap();
    let path = backends::sqlite_path("offload-threads");
    rt.block_on(async move {
        let cp = std::sync::Arc::new(
            connect(&format!("sqlite:{}?inline=0", path.display()))
                .await
                .unwrap(),
        );
        let calls = (0..200u64).map(|i| {
            let cp = cp.clone();
            tokio::spawn(async move {
                let t = ThreadId::new(format!("t{}", i % 20));
                if i % 2 == 0 {
                    cp.put(big(&ThreadId::new(format!("w{i}")), 1, 512))
                        .await
                        .map(|_| ())
                } else {
                    cp.head(&t).await.map(|_| ())
                }
            })
        });
        for c in futures::future::join_all(calls).await {
            c.unwrap().unwrap();
        }
    });
    let peak = peak.load(Ordering::SeqCst);
    // 2 workers, 2 offload slots, the one `connect` used to open the file, and a few more the
    // pool starts when a call is handed on before the previous thread is back in the pool (seen:
    // 6 to 8). Each call on a thread of its own started ~160.
    assert!(peak <= 16, "{peak} runtime threads for 200 waiting calls");
}
