//! Retention: deleting old threads and old checkpoints, by age and by count, in the background.
//!
//! Without it nothing is ever deleted (69 KB per conversation, for ever). A [`Retention`] says
//! what to keep; [`sweep`] applies it once through the [`Checkpointer`] trait, so every backend
//! gets it; [`spawn_sweeper`] runs it every `interval` on a tokio task.
//!
//! - **Threads** whose newest checkpoint is older than `thread_age` are deleted whole; beyond
//!   `max_threads`, the threads written longest ago are deleted.
//! - **Checkpoints** of a kept thread older than `checkpoint_age`, or beyond the newest
//!   `max_checkpoints`, are deleted with [`Checkpointer::trim`], which keeps everything from the
//!   nearest snapshot at or before the cut: a kept checkpoint can always be rebuilt, so a thread may
//!   keep a few more than the limit, never fewer. The head is always kept.
//!
//! Writes are never blocked for long: every deletion is its own short transaction (one thread, or
//! one thread's old checkpoints), and the sweeper yields after every `batch` of them, so
//! conversations writing meanwhile interleave with it. A thread deleted by retention is gone like
//! a `DELETE /threads/{id}`; pick ages longer than any conversation you may resume.

use super::{CheckpointError, Checkpointer};
use crate::ids::{CheckpointId, ThreadId};
use std::sync::Arc;
use std::time::Duration;

/// Parses a duration: `500ms`, `5s`, `2m`, `3h`, `7d`, or a bare number of seconds
/// ([`crate::duration::parse`]). Used by the database URLs' options and by [`Retention::parse`].
pub fn parse_duration(s: &str) -> Option<std::time::Duration> {
    crate::duration::parse(s, crate::duration::BareUnit::Seconds)
}

/// What to keep. `None` everywhere keeps everything.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retention {
    /// Delete threads whose newest checkpoint is older than this.
    pub thread_age: Option<Duration>,
    /// Keep at most this many threads (the most recently written).
    pub max_threads: Option<usize>,
    /// Delete checkpoints older than this (never a thread's head).
    pub checkpoint_age: Option<Duration>,
    /// Keep at most this many checkpoints per thread (a few more to reach a snapshot).
    pub max_checkpoints: Option<usize>,
    /// Delete ended run records last updated longer ago than this
    /// ([`crate::runs::sweep`]; pending and running ones are always kept).
    pub run_age: Option<Duration>,
    /// Keep at most this many ended run records (the newest).
    pub max_runs: Option<usize>,
    /// Time between sweeps of [`spawn_sweeper`].
    pub interval: Duration,
    /// Deletions between two yields of the sweeper.
    pub batch: usize,
    /// Only threads whose id starts with this (empty: every thread).
    pub prefix: String,
}

impl Default for Retention {
    fn default() -> Self {
        Self {
            thread_age: None,
            max_threads: None,
            checkpoint_age: None,
            max_checkpoints: None,
            run_age: None,
            max_runs: None,
            interval: Duration::from_secs(600),
            batch: 100,
            prefix: String::new(),
        }
    }
}

impl Retention {
    /// Whether this keeps everything (no sweep needed).
    pub fn keeps_everything(&self) -> bool {
        self.keeps_all_threads() && self.keeps_all_runs()
    }

    /// Whether this keeps every thread and checkpoint.
    pub fn keeps_all_threads(&self) -> bool {
        self.thread_age.is_none()
            && self.max_threads.is_none()
            && self.checkpoint_age.is_none()
            && self.max_checkpoints.is_none()
    }

    /// Whether this keeps every run record.
    pub fn keeps_all_runs(&self) -> bool {
        self.run_age.is_none() && self.max_runs.is_none()
    }

    /// Reads the CLI form: comma-separated `key=value` with keys `thread_age`, `max_threads`,
    /// `checkpoint_age`, `max_checkpoints`, `run_age`, `max_runs`, `interval`, `batch`, `prefix`;
    /// durations like `30d`, `12h`,
    /// `90m`. Example: `thread_age=30d,max_checkpoints=50`.
    pub fn parse(spec: &str) -> Result<Self, String> {
        let mut r = Self::default();
        for pair in spec.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            let (k, v) = pair
                .split_once('=')
                .ok_or_else(|| format!("retention `{pair}`: expected key=value"))?;
            let dur = || {
                parse_duration(v).filter(|d| !d.is_zero()).ok_or_else(|| {
                    format!("retention `{pair}`: `{v}` is not a duration like 30d, 12h, 90m")
                })
            };
            let count = || {
                v.parse::<usize>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| format!("retention `{pair}`: `{v}` is not a positive count"))
            };
            match k {
                "thread_age" => r.thread_age = Some(dur()?),
                "max_threads" => r.max_threads = Some(count()?),
                "checkpoint_age" => r.checkpoint_age = Some(dur()?),
                "max_checkpoints" => r.max_checkpoints = Some(count()?),
                "run_age" => r.run_age = Some(dur()?),
                "max_runs" => r.max_runs = Some(count()?),
                "interval" => r.interval = dur()?,
                "batch" => r.batch = count()?,
                "prefix" => r.prefix = v.to_string(),
                _ => {
                    return Err(format!(
                        "retention: unknown key `{k}` (thread_age, max_threads, checkpoint_age, max_checkpoints, run_age, max_runs, interval, batch, prefix)"
                    ))
                }
            }
        }
        Ok(r)
    }
}

/// What one sweep did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SweepReport {
    /// Threads looked at.
    pub threads_seen: usize,
    /// Threads deleted.
    pub threads_deleted: usize,
    /// Checkpoints deleted from kept threads.
    pub checkpoints_deleted: u64,
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Applies `retention` once, as of `now_ms` (milliseconds since the Unix epoch).
pub async fn sweep(
    cp: &dyn Checkpointer,
    retention: &Retention,
    now_ms: u64,
) -> Result<SweepReport, CheckpointError> {
    let mut report = SweepReport::default();
    if retention.keeps_all_threads() {
        return Ok(report);
    }
    let batch = retention.batch.max(1);
    // Every thread with its head's time, in pages. Threads created while paging shift the
    // offsets, so a thread may come twice (kept once) or be missed (swept next time).
    let mut threads: Vec<(ThreadId, u64)> = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut offset = 0;
    loop {
        let page = cp.list_threads(&retention.prefix, batch, offset).await?;
        let n = page.len();
        offset += n;
        for s in page {
            // A thread with metadata and no checkpoint has nothing to sweep.
            let Some(head) = s.head_metadata else {
                continue;
            };
            if seen.insert(s.thread_id.clone()) {
                threads.push((s.thread_id, head.created_at_ms));
            }
        }
        tokio::task::yield_now().await;
        if n < batch {
            break;
        }
    }
    report.threads_seen = threads.len();
    // Newest first: the ones past `max_threads` are at the end.
    threads.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
    let thread_cut = retention.thread_age.map(|a| now_ms.saturating_sub(ms(a)));
    let checkpoint_cut = retention
        .checkpoint_age
        .map(|a| now_ms.saturating_sub(ms(a)));
    let mut done = 0usize;
    for (i, (thread, head_ms)) in threads.iter().enumerate() {
        let too_old = thread_cut.is_some_and(|cut| *head_ms < cut);
        let too_many = retention.max_threads.is_some_and(|max| i >= max);
        if too_old || too_many {
            cp.delete_thread(thread).await?;
            report.threads_deleted += 1;
        } else if retention.checkpoint_age.is_some() || retention.max_checkpoints.is_some() {
            if let Some(keep_from) = keep_from(cp, thread, retention, checkpoint_cut).await? {
                report.checkpoints_deleted += cp.trim(thread, keep_from).await?;
            }
        } else {
            continue;
        }
        done += 1;
        if done % batch == 0 {
            tokio::task::yield_now().await;
        }
    }
    Ok(report)
}

/// The oldest checkpoint `thread` must keep, or `None` when it keeps them all.
async fn keep_from(
    cp: &dyn Checkpointer,
    thread: &ThreadId,
    retention: &Retention,
    cut_ms: Option<u64>,
) -> Result<Option<CheckpointId>, CheckpointError> {
    let listed = cp.list(thread, None, usize::MAX).await?; // newest first
    let Some(oldest) = listed.last().map(|(id, _, _)| *id) else {
        return Ok(None);
    };
    let mut keep = oldest;
    if let Some(max) = retention.max_checkpoints {
        if let Some((id, _, _)) = listed.get(max.saturating_sub(1)) {
            keep = keep.max(*id);
        }
    }
    if let Some(cut) = cut_ms {
        // The oldest checkpoint still young enough; the head when none is.
        let young = listed
            .iter()
            .take_while(|(_, _, m)| m.created_at_ms >= cut)
            .last()
            .map_or(listed[0].0, |(id, _, _)| *id);
        keep = keep.max(young);
    }
    Ok((keep > oldest).then_some(keep))
}

/// A running background sweeper; dropping it (or [`Sweeper::stop`]) stops it.
pub struct Sweeper {
    task: tokio::task::JoinHandle<()>,
    reports: tokio::sync::watch::Receiver<Option<SweepReport>>,
}

impl Sweeper {
    /// The last sweep's report (`None` before the first one ends).
    pub fn reports(&self) -> tokio::sync::watch::Receiver<Option<SweepReport>> {
        self.reports.clone()
    }

    /// Stops sweeping.
    pub fn stop(self) {}
}

impl Drop for Sweeper {
    fn drop(&mut self) {
        self.task.abort();
    }
}

/// Sweeps `cp` with `retention` now and then every `retention.interval`, logging each sweep.
/// A failed sweep is logged and tried again at the next interval.
pub fn spawn_sweeper(cp: Arc<dyn Checkpointer>, retention: Retention) -> Sweeper {
    let (tx, reports) = tokio::sync::watch::channel(None);
    let task = tokio::spawn(async move {
        let mut tick = tokio::time::interval(retention.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            let now_ms = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(ms)
                .unwrap_or(0);
            match sweep(&*cp, &retention, now_ms).await {
                Ok(r) => {
                    tracing::info!(
                        threads_seen = r.threads_seen,
                        threads_deleted = r.threads_deleted,
                        checkpoints_deleted = r.checkpoints_deleted,
                        "retention sweep"
                    );
                    let _ = tx.send(Some(r));
                }
                Err(e) => tracing::warn!(error = %e, "retention sweep failed"),
            }
        }
    });
    Sweeper { task, reports }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_take_units() {
        assert_eq!(parse_duration("5"), Some(Duration::from_secs(5)));
        assert_eq!(parse_duration("1.5s"), Some(Duration::from_millis(1500)));
        assert_eq!(parse_duration("20ms"), Some(Duration::from_millis(20)));
        assert_eq!(parse_duration("2d"), Some(Duration::from_secs(172_800)));
        assert_eq!(parse_duration("-1s"), None);
        assert_eq!(parse_duration("1y"), None);
    }

    #[test]
    fn the_cli_form_parses_and_names_what_is_wrong() {
        let r = Retention::parse("thread_age=30d, max_checkpoints=50,interval=1m").unwrap();
        assert_eq!(r.thread_age, Some(Duration::from_secs(30 * 86400)));
        assert_eq!(r.max_checkpoints, Some(50));
        assert_eq!(r.interval, Duration::from_secs(60));
        assert!(Retention::parse("").unwrap().keeps_everything());
        for (bad, says) in [
            ("thread_age=soon", "soon"),
            ("max_threads=0", "max_threads"),
            ("forever=1", "forever"),
            ("max_threads", "key=value"),
        ] {
            assert!(Retention::parse(bad).unwrap_err().contains(says), "{bad}");
        }
    }
}
