//! Run event logs in PostgreSQL: `planwright_run_events`, one row per event, keyed by
//! (run, seq), deleted with the run's record (`ON DELETE CASCADE`, so the run sweeper cleans the
//! streams too). An append is one statement (one round trip, its own transaction; it was a
//! transaction of four statements, six round trips): it locks the run's record `FOR SHARE` (so a
//! takeover's claim waits for it, and an append from a replica that lost the lease is refused),
//! numbers the events after the run's last one, inserts them, and sends
//! `NOTIFY planwright_run_events` with the run id — delivered at commit, to every replica.
//!
//! Each process keeps one connection outside the pool that `LISTEN`s and wakes the run's local
//! followers: the last connection of the URL's budget (`pool_size`), which the pool leaves free
//! for it ([`SharedPool::take_listener_slot`]).
//! A follower asking for a stream that is not being published (`request_stream`) notifies
//! `planwright_run_follow`, which the same connection listens to: it wakes the run's writer
//! wherever it runs, and only it.
//! If that connection drops it is opened again (with backoff) and every follower is woken to
//! read again; followers also read on a timer, so a lost notification only delays an event.

use super::events::{not_at_the_end, LogWatch, RunEventLog, StreamEvent, Watchers, NO_RECORD};
use super::RunStoreError;
use crate::checkpoint::postgres::budget::ListenerSlot;
use crate::checkpoint::postgres::{PgConfig, SharedPool, SslMode};
use crate::checkpoint::CheckpointError;
use async_trait::async_trait;
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// The channel appends notify on.
const CHANNEL: &str = "planwright_run_events";
/// The channel followers ask for a run's stream on (`request_stream`).
const REQUESTS: &str = "planwright_run_follow";

/// An append as one statement (`$1` run, `$2` the seq the writer appends after, `$3`/`$4` event
/// names and data, `$5` the writer or NULL, `$6` [`CHANNEL`]): inserts and notifies only when the
/// run has a record, `$5` (if given) holds its lease and the log ends at `$2`; returns whether the
/// record exists, its lease holder, the log's last seq before the append and how many rows went in.
/// PostgreSQL runs a plain `SELECT` in `WITH` only when something reads it, so the last column
/// reads `notified` (adding nothing) to make the notification happen.
const APPEND_SQL: &str = "
WITH run AS (
    SELECT lease_owner FROM planwright_runs WHERE run_id = $1 FOR SHARE
), last AS (
    SELECT coalesce(max(seq), 0) AS seq FROM planwright_run_events WHERE run_id = $1
), ins AS (
    INSERT INTO planwright_run_events (run_id, seq, event, data)
    SELECT $1, $2 + u.ord, u.event, u.data
    FROM unnest($3::text[], $4::text[]) WITH ORDINALITY AS u(event, data, ord)
    WHERE EXISTS (SELECT 1 FROM run WHERE $5::text IS NULL OR lease_owner = $5::text)
      AND (SELECT seq FROM last) = $2
    RETURNING 1
), notified AS (
    SELECT pg_notify($6, $1) FROM (SELECT 1 FROM ins LIMIT 1) AS any_inserted
)
SELECT EXISTS (SELECT 1 FROM run),
       (SELECT lease_owner FROM run),
       (SELECT seq FROM last),
       (SELECT count(*) FROM ins) + 0 * (SELECT count(*) FROM notified)";

/// Run event logs in a PostgreSQL database, beside the run records (on the run store's pool,
/// with its retries).
pub struct PostgresRunEvents {
    runs: super::PostgresRuns,
    wakes: Arc<Wakes>,
    listener: tokio::task::JoinHandle<()>,
    /// The budget's connection the `LISTEN` connection uses.
    _slot: ListenerSlot,
}

/// What the `LISTEN` connection wakes: followers of a run's log (on [`CHANNEL`]), and runs'
/// writers asked for their stream (on [`REQUESTS`]; never all at once, so a reconnect does not
/// look like every run being followed).
#[derive(Default)]
struct Wakes {
    appended: Watchers,
    requested: Watchers,
}

impl Drop for PostgresRunEvents {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

fn be(op: &'static str) -> impl Fn(CheckpointError) -> RunStoreError {
    move |e| RunStoreError::backend(op, e)
}

impl PostgresRunEvents {
    /// Connects with the checkpointer's URL options, creates the tables if needed (the run
    /// records' too: events belong to runs), and starts listening for appends.
    pub async fn connect(url: &str) -> Result<Self, RunStoreError> {
        let shared = SharedPool::open(url)
            .await
            .map_err(super::postgres::open_error)?;
        Self::with_pool(&shared).await
    }

    /// [`connect`](Self::connect) on the process's shared pool (see
    /// [`PgPools`](crate::checkpoint::PgPools)): the `LISTEN` connection takes the budget's
    /// connection the pool leaves free, so `pool_size=1` is refused as a bad URL.
    pub async fn with_pool(shared: &SharedPool) -> Result<Self, RunStoreError> {
        let slot = shared
            .take_listener_slot()
            .map_err(super::postgres::open_error)?;
        // The run table and this one are one schema, created together.
        let runs = super::PostgresRuns::with_pool(shared.pool(), shared.config()).await?;
        let wakes = Arc::new(Wakes::default());
        let listener = tokio::spawn(listen(shared.config().clone(), wakes.clone()));
        Ok(Self {
            runs,
            wakes,
            listener,
            _slot: slot,
        })
    }
}

#[async_trait]
impl RunEventLog for PostgresRunEvents {
    fn backend_name(&self) -> &'static str {
        "postgres"
    }

    async fn append(
        &self,
        run_id: &str,
        writer: Option<&str>,
        after: u64,
        events: Vec<(String, String)>,
    ) -> Result<u64, RunStoreError> {
        let names: Vec<&str> = events.iter().map(|(n, _)| n.as_str()).collect();
        let data: Vec<&str> = events.iter().map(|(_, d)| d.as_str()).collect();
        let (pool, names, data) = (&self.runs.pool, &names, &data);
        let (after_i, last_i) = (after as i64, (after + events.len() as u64) as i64);
        let outcome = self
            .runs
            .retry("append run events", |_| async move {
                let client = pool.get().await?;
                // One statement, so one round trip and its own transaction: the run's
                // record locked `FOR SHARE` (a takeover's claim waits for it), the lease and
                // the log's end checked, the events inserted and the followers notified
                // (delivered at commit) only if both checks pass; what it found comes back.
                let found = client
                    .query_one(
                        APPEND_SQL,
                        &[&run_id, &after_i, names, data, &writer, &CHANNEL],
                    )
                    .await?;
                let (has_record, owner, last, inserted): (bool, Option<String>, i64, i64) =
                    (found.get(0), found.get(1), found.get(2), found.get(3));
                if !has_record {
                    return Ok(Err(NO_RECORD.to_string()));
                }
                if let Some(w) = writer {
                    if owner.as_deref() != Some(w) {
                        return Ok(Err(format!(
                            "its lease is held by {}, not by this writer",
                            owner.as_deref().unwrap_or("nobody")
                        )));
                    }
                }
                if inserted > 0 {
                    return Ok(Ok(last_i as u64));
                }
                // Not after the log's end. An earlier attempt whose commit was not
                // acknowledged may have stored exactly this batch: then it is done.
                let stored = client
                    .query(
                        "SELECT event, data FROM planwright_run_events
                             WHERE run_id = $1 AND seq > $2 ORDER BY seq",
                        &[&run_id, &after_i],
                    )
                    .await?;
                let same = last == last_i
                    && stored.len() == names.len()
                    && stored
                        .iter()
                        .zip(names.iter().zip(data.iter()))
                        .all(|(r, (n, d))| r.get::<_, &str>(0) == *n && r.get::<_, &str>(1) == *d);
                Ok(if same {
                    Ok(last as u64)
                } else {
                    Err(not_at_the_end(after, last))
                })
            })
            .await
            .map_err(be("append run events"))?;
        outcome.map_err(|reason| RunStoreError::AppendRefused {
            run_id: run_id.to_string(),
            reason,
        })
    }

    async fn read(
        &self,
        run_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StreamEvent>, RunStoreError> {
        let pool = &self.runs.pool;
        let (after, limit) = (after as i64, i64::try_from(limit).unwrap_or(i64::MAX));
        let rows = self
            .runs
            .retry("read run events", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .query(
                        "SELECT seq, event, data FROM planwright_run_events
                         WHERE run_id = $1 AND seq > $2 ORDER BY seq LIMIT $3",
                        &[&run_id, &after, &limit],
                    )
                    .await?)
            })
            .await
            .map_err(be("read run events"))?;
        Ok(rows
            .iter()
            .map(|r| StreamEvent {
                seq: r.get::<_, i64>(0) as u64,
                event: r.get(1),
                data: r.get(2),
            })
            .collect())
    }

    async fn last_seq(&self, run_id: &str) -> Result<u64, RunStoreError> {
        let pool = &self.runs.pool;
        let row = self
            .runs
            .retry("read run events", |_| async move {
                Ok(pool
                    .get()
                    .await?
                    .query_one(
                        "SELECT coalesce(max(seq), 0) FROM planwright_run_events WHERE run_id = $1",
                        &[&run_id],
                    )
                    .await?)
            })
            .await
            .map_err(be("read run events"))?;
        Ok(row.get::<_, i64>(0) as u64)
    }

    fn watch(&self, run_id: &str) -> LogWatch {
        self.wakes.appended.watch(run_id)
    }

    /// A notification on `planwright_run_follow`: every replica's `LISTEN` connection wakes the
    /// run's request watchers there, its writer's among them.
    async fn request_stream(&self, run_id: &str) -> Result<(), RunStoreError> {
        let pool = &self.runs.pool;
        self.runs
            .retry("ask for a run's stream", |_| async move {
                pool.get()
                    .await?
                    .execute("SELECT pg_notify($1, $2)", &[&REQUESTS, &run_id])
                    .await?;
                Ok(())
            })
            .await
            .map_err(be("ask for a run's stream"))
    }

    fn watch_requests(&self, run_id: &str) -> LogWatch {
        self.wakes.requested.watch(run_id)
    }
}

/// Keeps a `LISTEN` connection open for as long as the log lives, waking followers.
async fn listen(cfg: PgConfig, wakes: Arc<Wakes>) {
    let mut backoff = Duration::from_millis(50);
    loop {
        match listen_once(&cfg, &wakes).await {
            Ok(()) => backoff = Duration::from_millis(50),
            Err(e) => {
                tracing::warn!(error = %e, "run events: the LISTEN connection failed; reopening");
                backoff = (backoff * 2).min(Duration::from_secs(2));
            }
        }
        // Whatever was appended while no connection listened is read now. (A request lost
        // meanwhile is repeated by its follower.)
        wakes.appended.wake_all();
        tokio::time::sleep(backoff).await;
    }
}

/// One `LISTEN` connection, until it drops.
async fn listen_once(cfg: &PgConfig, wakes: &Wakes) -> Result<(), String> {
    let (tx, mut rx) = mpsc::unbounded_channel::<(String, String)>();
    let client = if cfg.sslmode == SslMode::Disable {
        let (client, conn) = cfg
            .pg
            .connect(tokio_postgres::NoTls)
            .await
            .map_err(|e| crate::ErrorChain(&e).to_string())?;
        tokio::spawn(forward(conn, tx));
        client
    } else {
        let tls = cfg.tls().map_err(|e| crate::ErrorChain(&e).to_string())?;
        let (client, conn) = cfg
            .pg
            .connect(tls)
            .await
            .map_err(|e| crate::ErrorChain(&e).to_string())?;
        tokio::spawn(forward(conn, tx));
        client
    };
    client
        .batch_execute(&format!("LISTEN {CHANNEL}; LISTEN {REQUESTS}"))
        .await
        .map_err(|e| crate::ErrorChain(&e).to_string())?;
    wakes.appended.wake_all();
    while let Some((channel, run_id)) = rx.recv().await {
        if channel == REQUESTS {
            wakes.requested.wake(&run_id);
        } else {
            wakes.appended.wake(&run_id);
        }
    }
    Err("the connection closed".into())
}

/// Drives a connection, sending each notification's channel and payload (a run id) to `tx`.
async fn forward<S, T>(
    mut conn: tokio_postgres::Connection<S, T>,
    tx: mpsc::UnboundedSender<(String, String)>,
) where
    S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
    T: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin,
{
    let mut messages = futures::stream::poll_fn(move |cx| conn.poll_message(cx));
    while let Some(m) = messages.next().await {
        match m {
            Ok(tokio_postgres::AsyncMessage::Notification(n)) => {
                if tx
                    .send((n.channel().to_string(), n.payload().to_string()))
                    .is_err()
                {
                    return;
                }
            }
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(
                    error = %crate::ErrorChain(&e),
                    "run events: the LISTEN connection broke"
                );
                return;
            }
        }
    }
}
