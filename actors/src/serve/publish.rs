//! A run's events, into the run event log ([`planwright::runs::RunEventLog`]) while it runs.
//!
//! Streaming clients are served from the log, never straight from the run ([`super::follow`]),
//! so a run can be followed from any replica and rejoined with `Last-Event-ID`. What a run
//! publishes is the request's `stream_mode` as LangGraph sends it: a `metadata` event first, then
//! the events of each mode as the run goes ([`super::stream_modes`]: `values` are the thread's
//! values as each superstep left them, carried by the engine's event), and at the end the final
//! `values` or an `error`; then a marker ([`END`]) that tells followers the stream is complete.
//! Events of one superstep go in one append.
//!
//! Every run's events come here through a switch ([`planwright::EventSwitch`]): a resumable run
//! (`runs/stream`, or created with `stream_resumable: true`) publishes them all; any other has
//! its stream switched off (the engine builds nothing) until a client follows it
//! (`GET …/runs/{run_id}/stream`, on any replica): from then on, after a `metadata` event and the
//! thread's values so far (with `values` in its `stream_mode`). A run accepted on a thread that a
//! client of this process follows whole ([`super::thread_stream`]) publishes from its start, as a
//! resumable run does. A run nobody follows stores no stream.
//!
//! Only the replica holding the run's lease appends (the log checks it): a run taken over is
//! continued by its new replica after the last stored event — it first publishes the thread's
//! values as it finds them, so a follower misses no state even if the old replica died between
//! a checkpoint and its events.

use super::assistant::{AssistantRun, Outcome};
use super::assistants::AssistantRef;
use super::live_runs;
use super::stream_modes::{self, Translator};
use super::AppState;
use planwright::runs::{RunRecord, RunRecordStatus};
use planwright::{RunError, RunEvent, ThreadId};
use serde_json::{json, Value};

/// The log's last event of a complete stream (never sent to clients).
pub const END: &str = "__end__";

/// The stream modes a request asks for (`values` when it names none).
pub fn modes(v: &Value) -> Vec<String> {
    stream_modes::parse(v)
}

/// Whether a run with this `stream_mode` needs the state after each superstep (for `values`,
/// `checkpoints` and `debug`): its engine events then carry it
/// ([`planwright::RunOptions::with_values`]).
pub fn wants_values(stream_mode: &Value) -> bool {
    stream_modes::needs_values(&modes(stream_mode))
}

/// Batches a run's events and appends them after the last one stored.
struct Appender<'a> {
    state: &'a AppState,
    run_id: &'a str,
    after: u64,
    batch: Vec<(String, String)>,
    /// Set when the log refused an append: another replica writes this stream now.
    closed: bool,
}

impl<'a> Appender<'a> {
    async fn open(state: &'a AppState, run_id: &'a str) -> Appender<'a> {
        let after = match state.events.last_seq(run_id).await {
            Ok(n) => n,
            Err(e) => {
                tracing::error!(run_id, error = %e, "the run's stream could not be read; it starts afresh");
                0
            }
        };
        Self {
            state,
            run_id,
            after,
            batch: Vec::new(),
            closed: false,
        }
    }

    fn push(&mut self, name: &str, data: &Value) {
        self.batch.push((name.to_string(), data.to_string()));
    }

    async fn flush(&mut self) {
        if self.batch.is_empty() || self.closed {
            return;
        }
        let writer = self.state.replica.as_ref().map(|r| r.owner.as_str());
        let batch = std::mem::take(&mut self.batch);
        let n = batch.len();
        match self
            .state
            .events
            .append(self.run_id, writer, self.after, batch)
            .await
        {
            Ok(last) => self.after = last,
            Err(e @ planwright::runs::RunStoreError::AppendRefused { .. }) => {
                tracing::warn!(run_id = self.run_id, error = %e, "the run's stream is another replica's now");
                self.closed = true;
            }
            Err(e) => {
                tracing::error!(run_id = self.run_id, error = %e, events = n, "stream events could not be stored; followers miss them");
            }
        }
    }
}

/// Waits for the run of `rec` to end and records its end ([`live_runs::finished`], logged by
/// [`super::run_log`]), publishing its events meanwhile: all of them when the run is resumable
/// (`runs/stream`, or `stream_resumable`), otherwise from the moment a client follows it
/// ([`until_followed`]). `resumed` says the run was continued here after its replica (or this
/// process) stopped.
pub async fn drive(
    state: &AppState,
    rec: &RunRecord,
    assistant: AssistantRef,
    thread: &ThreadId,
    mut handle: Box<dyn AssistantRun>,
    resumed: bool,
) -> Result<Outcome, RunError> {
    let since = super::run_log::started(rec, resumed);
    let control = state.live.take_stream(&rec.run_id);
    let Some(mut events) = handle.take_events() else {
        let result = handle.wait().await;
        super::run_log::finished(state, rec, &result, since).await;
        return result;
    };
    let resumable = control
        .as_ref()
        .map_or_else(|| live_runs::resumable(rec), |c| c.from_start);
    // A run continued here whose stream was being published (it was followed) goes on with it;
    // when the log cannot tell, it publishes rather than risk a follower waiting in vain.
    let stored = !resumable
        && resumed
        && state
            .events
            .last_seq(&rec.run_id)
            .await
            .map_or(true, |n| n > 0);
    let joined_late = !resumable && !stored;
    let followed = if joined_late {
        until_followed(state, &rec.run_id, &mut events, control.as_ref()).await
    } else {
        true
    };
    if !followed {
        // It ended with nobody following: nothing was published, nothing is kept.
        let result = handle.wait().await;
        super::run_log::finished(state, rec, &result, since).await;
        return result;
    }
    if let Some(c) = &control {
        c.switch.turn_on();
    }
    let modes = modes(&rec.kwargs["stream_mode"]);
    let want = |m: &str| modes.iter().any(|x| x == m);
    let mut out = Appender::open(state, &rec.run_id).await;
    let had_events = out.after > 0;
    if !had_events {
        out.push(
            "metadata",
            &json!({"run_id": rec.run_id, "thread_id": rec.thread_id, "attempt": 1}),
        );
    }
    // A follower that came in mid-run, or a stream continued here, first gets the state so far.
    if (joined_late || (resumed && had_events)) && want("values") {
        if let Ok(Some(s)) = assistant.view(thread).await {
            out.push("values", &s.values);
        }
    }
    out.flush().await;
    let subgraphs = rec.kwargs["stream_subgraphs"].as_bool().unwrap_or(false);
    let mut modes_of = Translator::new(&modes, subgraphs, thread.as_str());
    let stored = stream_modes::StoredCheckpoints {
        checkpointer: state.checkpointer.clone(),
        thread: thread.clone(),
    };
    while let Some(first) = events.recv().await {
        let mut next = Some(first);
        while let Some(ev) = next {
            // The state as this superstep left it, carried by the event: the thread's state read
            // now may already be a later superstep's, or the run's end.
            let values = match &ev {
                RunEvent::StateUpdated {
                    values: Some(v), ..
                } if modes_of.wants_values() => match assistant.values_of(thread, v.clone()) {
                    Ok(v) => Some(v),
                    Err(e) => {
                        tracing::error!(run_id = rec.run_id, error = %e, "a superstep's state could not be read; its values event is left out");
                        None
                    }
                },
                _ => None,
            };
            for (name, data) in modes_of.on_event(&ev, values, &stored).await {
                out.push(&name, &data);
            }
            next = events.try_recv().ok();
        }
        out.flush().await;
    }
    let result = handle.wait().await;
    let fenced = live_runs::taken_over(state, &rec.run_id, &result);
    // A run stopped by a shutdown (it continues elsewhere) or taken over has more to stream.
    if !fenced && live_runs::status_of(&result) != RunRecordStatus::Running {
        for (name, data) in modes_of.finish(&stored).await {
            out.push(&name, &data);
        }
        match &result {
            Ok(o) if want("values") => out.push("values", &o.values),
            Ok(_) => {}
            Err(e) => out.push(
                "error",
                &json!({"error": "RunError", "message": e.to_string()}),
            ),
        }
        out.push(END, &Value::Null);
        out.flush().await;
    }
    super::run_log::finished(state, rec, &result, since).await;
    result
}

/// For a run that is not resumable: waits, its event stream switched off (nothing is built),
/// until a client follows it — a follower on any replica asks for the stream
/// ([`planwright::runs::RunEventLog::request_stream`]), which wakes the run's watcher here —
/// and says whether a client came before the run ended ([`drive`] then switches the stream
/// on). So a
/// background run nobody joins stores no stream, and one that is joined streams live from then
/// on, as LangGraph's `join_stream` does for a run without `stream_resumable`.
async fn until_followed(
    state: &AppState,
    run_id: &str,
    events: &mut tokio::sync::mpsc::UnboundedReceiver<RunEvent>,
    control: Option<&live_runs::StreamControl>,
) -> bool {
    // Subscribed before the run started (a request made since is seen); without one, now.
    let mut asked = match control {
        Some(c) => c.asked.clone(),
        None => state.events.watch_requests(run_id),
    };
    loop {
        tokio::select! {
            biased;
            woke = asked.changed() => return woke.is_ok(),
            // Closed when the run ends (its events are not even built while the switch is off).
            ev = events.recv() => {
                if ev.is_none() {
                    return false;
                }
            }
        }
    }
}
