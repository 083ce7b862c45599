//! A run's life in the server's log: a line when it starts executing here (new, queued, or
//! continued after a restart or a takeover), and a line when its execution here ends — with the
//! thread and run ids, the assistant, the status and how long it ran here — so an operator can
//! follow every run through the log, on whichever replica it ran.
//!
//! Levels: `info` for a start and for an end in `success`, `interrupted` or a stop for a
//! shutdown; `warn` for an end in `error` (with the error's cause chain) and for a run stopped
//! here because another replica took it over (its writes were fenced or its lease lost).

use super::assistant::Outcome;
use super::live_runs;
use super::AppState;
use planwright::runs::{RunRecord, RunRecordStatus as S};
use planwright::{ErrorChain, RunError};
use std::time::Instant;

/// Logs the start of `rec`'s execution here (`resumed`: continued after its process stopped),
/// and returns when it started, for [`finished`].
pub fn started(rec: &RunRecord, resumed: bool) -> Instant {
    tracing::info!(
        thread_id = rec.thread_id,
        run_id = rec.run_id,
        assistant = rec.assistant_id,
        resumed,
        "run started"
    );
    Instant::now()
}

/// Records how the run of `rec` ended ([`live_runs::finished`]) and logs it; its status.
pub async fn finished(
    state: &AppState,
    rec: &RunRecord,
    result: &Result<Outcome, RunError>,
    since: Instant,
) -> S {
    let status = live_runs::finished(state, rec, result).await;
    let duration_ms = u64::try_from(since.elapsed().as_millis()).unwrap_or(u64::MAX);
    let (thread_id, run_id, assistant) = (&rec.thread_id, &rec.run_id, &rec.assistant_id);
    let error = result.as_ref().err().map(|e| ErrorChain(e).to_string());
    // Left `running` although the run did not stop for a shutdown: another replica has it.
    let taken_over = status == S::Running && live_runs::status_of(result) != S::Running;
    if taken_over {
        let replica = state.replica.as_ref().map(|r| r.owner.as_str());
        tracing::warn!(
            thread_id,
            run_id,
            assistant,
            replica,
            duration_ms,
            error,
            "run stopped here: another replica took it over and continues it"
        );
    } else if status == S::Running {
        tracing::info!(
            thread_id,
            run_id,
            assistant,
            duration_ms,
            "run stopped for the shutdown; it continues at the next start"
        );
    } else if matches!(status, S::Error | S::Timeout) {
        tracing::warn!(
            thread_id,
            run_id,
            assistant,
            status = %status,
            duration_ms,
            error,
            "run ended"
        );
    } else {
        tracing::info!(
            thread_id,
            run_id,
            assistant,
            status = %status,
            duration_ms,
            "run ended"
        );
    }
    status
}
