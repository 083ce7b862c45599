//! Retention of run records: the `run_age` and `max_runs` keys of
//! [`Retention`](crate::checkpoint::Retention), applied in batches so writers interleave.

use super::{RunStore, RunStoreError};
use crate::checkpoint::Retention;
use std::sync::Arc;

/// Deletes the ended run records `retention` does not keep (of threads under its `prefix`), a
/// batch per statement until none is left; how many it deleted. `now_ms` anchors `run_age`.
pub async fn sweep(
    store: &dyn RunStore,
    retention: &Retention,
    now_ms: u64,
) -> Result<u64, RunStoreError> {
    if retention.keeps_all_runs() {
        return Ok(0);
    }
    let before = retention
        .run_age
        .map(|age| now_ms.saturating_sub(age.as_millis() as u64));
    let batch = retention.batch.max(1);
    let mut total = 0;
    loop {
        let n = store
            .sweep(&retention.prefix, before, retention.max_runs, batch)
            .await?;
        total += n;
        if (n as usize) < batch {
            return Ok(total);
        }
        tokio::task::yield_now().await;
    }
}

/// Runs [`sweep`] every `retention.interval` until the handle is dropped (aborted).
pub fn spawn_sweeper(store: Arc<dyn RunStore>, retention: Retention) -> SweeperHandle {
    SweeperHandle(tokio::spawn(async move {
        let mut tick = tokio::time::interval(retention.interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tick.tick().await;
            match sweep(&*store, &retention, super::now_ms()).await {
                Ok(0) => {}
                Ok(n) => tracing::info!(runs_deleted = n, "run record retention sweep"),
                Err(e) => tracing::warn!(error = %e, "run record retention sweep failed"),
            }
        }
    }))
}

/// The sweeper task; dropping it stops the sweeper.
pub struct SweeperHandle(tokio::task::JoinHandle<()>);

impl Drop for SweeperHandle {
    fn drop(&mut self) {
        self.0.abort();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runs::{MemoryRuns, RunChange, RunRecord, RunRecordStatus};
    use std::time::Duration;

    #[tokio::test]
    async fn ended_records_go_by_age_and_count_in_batches_and_unfinished_ones_stay() {
        let s = MemoryRuns::new();
        for i in 0..10u64 {
            let id = format!("r{i}");
            s.insert(RunRecord::pending(id.as_str(), "t", "research", 0))
                .await
                .unwrap();
            if i < 8 {
                let at = 1_000 * i;
                s.transition(
                    &id,
                    &[RunRecordStatus::Pending],
                    RunRecordStatus::Success,
                    RunChange::at(at),
                )
                .await
                .unwrap();
            }
        }
        let keep_all = Retention::default();
        assert_eq!(sweep(&s, &keep_all, 10_000).await.unwrap(), 0);
        // Older than 4.5 s at t=8 s: ended at 0..3 s (r0..r3), in batches of 3.
        let r = Retention {
            run_age: Some(Duration::from_millis(4_500)),
            batch: 3,
            ..Retention::default()
        };
        assert_eq!(sweep(&s, &r, 8_000).await.unwrap(), 4);
        let r = Retention {
            max_runs: Some(2),
            ..Retention::default()
        };
        assert_eq!(sweep(&s, &r, 8_000).await.unwrap(), 2);
        let left: Vec<String> = s
            .list_thread("t", 100, 0)
            .await
            .unwrap()
            .into_iter()
            .map(|r| r.run_id)
            .collect();
        assert_eq!(
            left,
            ["r9", "r8", "r7", "r6"],
            "two newest ended, both pending"
        );
        assert_eq!(
            Retention::parse("run_age=7d,max_runs=1000")
                .unwrap()
                .max_runs,
            Some(1000)
        );
    }
}
