//! Run event logs in SQLite: `planwright_run_events` beside the run records (one row per event,
//! keyed by run and seq), so a server on a SQLite file keeps its streams across a restart: a run
//! it resumes goes on numbering after the last stored event, and a client rejoining with
//! `Last-Event-ID` gets what follows, exactly once. The events go with their run's record (a
//! trigger on `planwright_runs`), so the run sweeper's retention covers them.
//!
//! An append is one `IMMEDIATE` transaction: it checks the run has a record, numbers the events
//! after the run's last one (or finds the same batch already stored: a retry) and inserts them.
//! The log's connection commits with `synchronous=NORMAL`, as the checkpointer does: a commit is
//! not `fsync`ed until the WAL is folded back, so a power cut (not a crash of the process) can lose
//! the last events together with the last checkpoints. With `FULL` every append waited for an
//! `fsync` (0.91 ms an append on the development machine against 0.044 ms), and a server
//! streaming many runs queued behind them.
//!
//! Followers in this process are woken at once; a follower in another process on the same file
//! finds the events when it next reads (followers re-read every second). SQLite keeps no leases
//! (one server process owns the file), so a `writer` is not checked, as in the memory log.

use super::events::{not_at_the_end, LogWatch, RunEventLog, StreamEvent, Watchers, NO_RECORD};
use super::sqlite::{be, SqliteRuns};
use super::RunStoreError;
use async_trait::async_trait;
use rusqlite::{params, OptionalExtension, TransactionBehavior};

/// Run event logs in a SQLite file, beside the run records (on a connection of their own).
pub struct SqliteRunEvents {
    runs: SqliteRuns,
    watchers: Watchers,
    /// Followers asking for a run's stream (`request_stream`).
    requests: Watchers,
}

impl SqliteRunEvents {
    /// Opens (or creates) the run records' and events' tables in the SQLite file at `path`, on a
    /// connection of its own that commits with `synchronous=NORMAL` (see the module docs).
    pub async fn open(path: String) -> Result<Self, RunStoreError> {
        let runs = SqliteRuns::open(path).await?;
        runs.with("open", |c| {
            c.pragma_update(None, "synchronous", "NORMAL")
                .map_err(be("open"))
        })
        .await?;
        Ok(Self {
            runs,
            watchers: Watchers::default(),
            requests: Watchers::default(),
        })
    }
}

/// A run's last event's seq (`?1` the run's id; 0 for none): the log's end an append must
/// continue from, and what `last_seq` answers.
const LAST_SEQ_SQL: &str =
    "SELECT coalesce(max(seq), 0) FROM planwright_run_events WHERE run_id = ?1";

/// What an append found.
enum Appended {
    /// Stored (or found stored by an earlier attempt): the seq of the last event.
    Last(u64),
    /// Refused, and why.
    Refused(String),
}

#[async_trait]
impl RunEventLog for SqliteRunEvents {
    fn backend_name(&self) -> &'static str {
        "sqlite"
    }

    async fn append(
        &self,
        run_id: &str,
        _writer: Option<&str>,
        after: u64,
        events: Vec<(String, String)>,
    ) -> Result<u64, RunStoreError> {
        let run = run_id.to_string();
        let last = after + events.len() as u64;
        let (after_i, last_i) = (seq_to_sql(run_id, after)?, seq_to_sql(run_id, last)?);
        let outcome = self
            .runs
            .with("append run events", move |c| {
                let op = be("append run events");
                let tx = c
                    .transaction_with_behavior(TransactionBehavior::Immediate)
                    .map_err(&op)?;
                let has_record = tx
                    .query_row(
                        "SELECT 1 FROM planwright_runs WHERE run_id = ?1",
                        [&run],
                        |_| Ok(()),
                    )
                    .optional()
                    .map_err(&op)?
                    .is_some();
                if !has_record {
                    return Ok(Appended::Refused(NO_RECORD.into()));
                }
                let stored: i64 = tx
                    .query_row(LAST_SEQ_SQL, [&run], |r| r.get(0))
                    .map_err(&op)?;
                if stored != after_i {
                    // An earlier attempt whose answer was lost may have stored exactly this
                    // batch: then it is done.
                    let same = stored == last_i && {
                        let mut stmt = tx
                            .prepare(
                                "SELECT event, data FROM planwright_run_events
                                 WHERE run_id = ?1 AND seq > ?2 ORDER BY seq",
                            )
                            .map_err(&op)?;
                        let rows = stmt
                            .query_map(params![run, after_i], |r| {
                                Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?))
                            })
                            .map_err(&op)?
                            .collect::<Result<Vec<_>, _>>()
                            .map_err(&op)?;
                        rows == events
                    };
                    return Ok(if same {
                        Appended::Last(last)
                    } else {
                        Appended::Refused(not_at_the_end(after, stored))
                    });
                }
                {
                    let mut insert = tx
                        .prepare_cached(
                            "INSERT INTO planwright_run_events (run_id, seq, event, data)
                             VALUES (?1, ?2, ?3, ?4)",
                        )
                        .map_err(&op)?;
                    for (i, (event, data)) in events.iter().enumerate() {
                        insert
                            .execute(params![run, after_i + 1 + i as i64, event, data])
                            .map_err(&op)?;
                    }
                }
                tx.commit().map_err(&op)?;
                Ok(Appended::Last(last))
            })
            .await?;
        match outcome {
            Appended::Last(last) => {
                self.watchers.wake(run_id);
                Ok(last)
            }
            Appended::Refused(reason) => Err(RunStoreError::AppendRefused {
                run_id: run_id.to_string(),
                reason,
            }),
        }
    }

    async fn last_seq(&self, run_id: &str) -> Result<u64, RunStoreError> {
        let run = run_id.to_string();
        let last: i64 = self
            .runs
            .with("read run events", move |c| {
                c.query_row(LAST_SEQ_SQL, [run], |r| r.get(0))
                    .map_err(be("read run events"))
            })
            .await?;
        seq_from_sql(run_id, last)
    }

    async fn read(
        &self,
        run_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StreamEvent>, RunStoreError> {
        let run = run_id.to_string();
        let after = i64::try_from(after).unwrap_or(i64::MAX);
        let limit = i64::try_from(limit).unwrap_or(i64::MAX);
        let rows = self
            .runs
            .with("read run events", move |c| {
                let op = be("read run events");
                let mut stmt = c
                    .prepare_cached(
                        "SELECT seq, event, data FROM planwright_run_events
                         WHERE run_id = ?1 AND seq > ?2 ORDER BY seq LIMIT ?3",
                    )
                    .map_err(&op)?;
                let rows = stmt
                    .query_map(params![run, after, limit], |r| {
                        Ok((r.get::<_, i64>(0)?, r.get(1)?, r.get(2)?))
                    })
                    .map_err(&op)?
                    .collect::<Result<Vec<(i64, String, String)>, _>>()
                    .map_err(&op)?;
                Ok(rows)
            })
            .await?;
        rows.into_iter()
            .map(|(seq, event, data)| {
                Ok(StreamEvent {
                    seq: seq_from_sql(run_id, seq)?,
                    event,
                    data,
                })
            })
            .collect()
    }

    fn watch(&self, run_id: &str) -> LogWatch {
        self.watchers.watch(run_id)
    }

    /// One process uses a SQLite server's file (it keeps no leases): its own followers are the
    /// ones to wake.
    async fn request_stream(&self, run_id: &str) -> Result<(), RunStoreError> {
        self.requests.wake(run_id);
        Ok(())
    }

    fn watch_requests(&self, run_id: &str) -> LogWatch {
        self.requests.watch(run_id)
    }
}

fn seq_to_sql(run_id: &str, seq: u64) -> Result<i64, RunStoreError> {
    i64::try_from(seq).map_err(|_| RunStoreError::AppendRefused {
        run_id: run_id.to_string(),
        reason: format!("event number {seq} is out of range"),
    })
}

fn seq_from_sql(run_id: &str, seq: i64) -> Result<u64, RunStoreError> {
    u64::try_from(seq).map_err(|_| RunStoreError::Corrupt {
        run_id: run_id.to_string(),
        reason: format!("negative event number {seq}"),
    })
}
