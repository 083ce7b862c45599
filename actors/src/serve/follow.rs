//! Following a run's stream from the run event log, as server-sent events: from the start
//! (`runs/stream`) or after the `Last-Event-ID` a client last received
//! (`GET /threads/{thread_id}/runs/{run_id}/stream`), on whichever replica the client reaches.
//! Each event's SSE `id` is its seq in the log, so a rejoin neither repeats nor skips an event.
//!
//! A follower reads what is stored, then waits to be woken by an append (`LISTEN/NOTIFY` across
//! replicas) or for a second to pass, until it reads the stream's end marker. A follower of a
//! run that is not resumable also asks the run's writer for the stream
//! (`RunEventLog::request_stream`, on every replica) at once, at each idle second until events
//! come and every fifth one after: such a run publishes only once it is followed
//! ([`super::publish::drive`]). A run that ended without an end marker (nobody followed it, or
//! it was cancelled before it started) ends its followers once its record says it ended.

use super::errors::ApiError;
use super::publish::END;
use super::AppState;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures::Stream;
use planwright::runs::StreamEvent;
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::mpsc;

/// How many events one read takes from the log.
const READ_BATCH: usize = 256;

/// A follower of a stream that already flowed asks for it again after this many quiet seconds
/// (the run may have been queued again, or continued on another replica).
const ASK_AGAIN_EVERY: u32 = 5;

/// The events of `run_id` after `after` as an SSE response; with `only`, just those event names
/// (a `messages` mode keeps its `messages/…` events).
pub fn sse(
    state: Arc<AppState>,
    run_id: String,
    after: u64,
    only: Option<Vec<String>>,
    cancel_on_disconnect: bool,
    ask: bool,
) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let (tx, rx) = mpsc::channel::<Event>(READ_BATCH);
    tokio::spawn(async move {
        let shape = |e: &StreamEvent| {
            wanted(only.as_deref(), &e.event).then(|| {
                Event::default()
                    .id(e.seq.to_string())
                    .event(&e.event)
                    .data(&e.data)
            })
        };
        match follow(&state, &run_id, after, ask, &tx, &shape).await {
            Ok(Followed::ClientGone) if cancel_on_disconnect => cancel_run(&state, &run_id).await,
            Ok(_) => {}
            Err(e) => {
                tracing::warn!(
                    run_id,
                    error = %e,
                    "stream follower dropped: the run's events cannot be read"
                );
                let data = serde_json::json!({"error": "StreamError", "message": e});
                let _ = tx
                    .send(Event::default().event("error").data(data.to_string()))
                    .await;
            }
        }
    });
    events_of(rx)
}

/// The SSE response of the events a follower sends to `rx`'s channel.
pub fn events_of(rx: mpsc::Receiver<Event>) -> Sse<impl Stream<Item = Result<Event, Infallible>>> {
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Sse::new(stream).keep_alive(KeepAlive::default())
}

/// Cancels `run_id` (interrupt) because its client hung up.
async fn cancel_run(state: &AppState, run_id: &str) {
    if let Ok(Some(rec)) = state.run_store.get(run_id).await {
        let action = super::cancel::CancelAction::Interrupt;
        match super::cancel::cancel(state, &rec, action, false).await {
            Ok(()) => tracing::info!(run_id, "client hung up: run cancelled (on_disconnect)"),
            Err(e) => {
                tracing::warn!(run_id, error = %e.1, "a run whose client hung up could not be cancelled")
            }
        }
    }
}

/// Cancels a run when dropped armed: held by a request handler (`runs/wait` with
/// `on_disconnect: "cancel"`) whose future is dropped when its client hangs up.
pub struct CancelOnDrop {
    state: Option<Arc<AppState>>,
    run_id: String,
}

impl CancelOnDrop {
    /// Armed for `rec`.
    pub fn new(state: &Arc<AppState>, rec: &planwright::runs::RunRecord) -> Self {
        Self {
            state: Some(state.clone()),
            run_id: rec.run_id.clone(),
        }
    }

    /// The request finished: nothing to cancel.
    pub fn disarm(mut self) {
        self.state = None;
    }
}

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if let Some(state) = self.state.take() {
            let run_id = std::mem::take(&mut self.run_id);
            tokio::spawn(async move { cancel_run(&state, &run_id).await });
        }
    }
}

/// The values of the query parameters named `keys`, each repeated or comma-separated, as the
/// SDKs send a list (`stream_mode=a&stream_mode=b`, `stream_mode=a,b`); blanks left out.
pub fn query_list<'a>(
    q: &'a [(String, String)],
    keys: &'a [&str],
) -> impl Iterator<Item = &'a str> + 'a {
    q.iter()
        .filter(|(k, _)| keys.contains(&k.as_str()))
        .flat_map(|(_, v)| v.split(','))
        .map(str::trim)
        .filter(|s| !s.is_empty())
}

/// Whether event `name` (`mode`, `messages/…`, or either with `|namespace`) is of one of `only`.
fn wanted(only: Option<&[String]>, name: &str) -> bool {
    let mode = name.split('|').next().unwrap_or(name);
    only.is_none_or(|modes| {
        modes
            .iter()
            .any(|m| mode == m || (m.starts_with("messages") && mode.starts_with("messages")))
    })
}

/// How a follower turns a stored event into what its client gets (`None`: left out).
pub type Shape<'a> = &'a (dyn Fn(&StreamEvent) -> Option<Event> + Send + Sync);

/// How following a stream stopped.
pub enum Followed {
    /// The stream is complete (or the run ended without one); `last` is the seq of the last
    /// event read, the stream's end marker included.
    Complete {
        /// The seq of the last event read.
        last: u64,
    },
    /// The client hung up first.
    ClientGone,
}

/// Sends the run's events after `after` to `tx`, as `shape` makes them, until the stream ends
/// or the client goes away.
/// With `ask` (a run that is not resumable publishes only once followed), asks the run's writer
/// for the stream at once and at each idle second until events come, then every
/// [`ASK_AGAIN_EVERY`] idle seconds until the stream ends: the run may not have started yet, or
/// may have been queued again, or continued on another replica.
pub async fn follow(
    state: &AppState,
    run_id: &str,
    mut after: u64,
    ask: bool,
    tx: &mpsc::Sender<Event>,
    shape: Shape<'_>,
) -> Result<Followed, String> {
    let mut woken = state.events.watch(run_id);
    let mut ended = false;
    let mut ask_now = ask;
    // Once the stream flows, a quiet second is mostly a long model call: ask every
    // [`ASK_AGAIN_EVERY`] quiet seconds then, not every one (a request is a statement on
    // PostgreSQL, and a server may have many followers).
    let mut seen = false;
    let mut quiet = 0u32;
    loop {
        if ask_now {
            // Bounded: a follower must keep noticing a client that left.
            match tokio::time::timeout(Duration::from_secs(1), state.events.request_stream(run_id))
                .await
            {
                Ok(Ok(())) => {}
                Ok(Err(e)) => {
                    tracing::warn!(run_id, error = %e, "could not ask for the run's stream; asking again in a second")
                }
                Err(_) => {
                    tracing::warn!(
                        run_id,
                        "asking for the run's stream took over a second; asking again"
                    )
                }
            }
        }
        woken.borrow_and_update();
        let batch = state
            .events
            .read(run_id, after, READ_BATCH)
            .await
            .map_err(|e| planwright::ErrorChain(&e).to_string())?;
        for e in &batch {
            after = e.seq;
            seen = true;
            quiet = 0;
            if e.event == END {
                return Ok(Followed::Complete { last: e.seq });
            }
            if let Some(ev) = shape(e) {
                if tx.send(ev).await.is_err() {
                    return Ok(Followed::ClientGone);
                }
            }
        }
        if !batch.is_empty() {
            continue;
        }
        if ended {
            // The record said the run ended, and the log holds nothing more: it never will.
            return Ok(Followed::Complete { last: after });
        }
        let idle = tokio::select! {
            _ = woken.changed() => false,
            _ = tokio::time::sleep(Duration::from_secs(1)) => true,
            _ = tx.closed() => return Ok(Followed::ClientGone),
        };
        // A second without news: ask again.
        quiet += u32::from(idle);
        ask_now = ask && idle && (!seen || quiet % ASK_AGAIN_EVERY == 0);
        if idle {
            ended = match state.run_store.get(run_id).await {
                Ok(Some(r)) => r.status.is_ended(),
                Ok(None) => true,
                Err(e) => return Err(planwright::ErrorChain(&e).to_string()),
            };
        }
    }
}

/// `GET /threads/{thread_id}/runs/{run_id}/stream`: joins a run's stream — from the start, or
/// after the `Last-Event-ID` header's event — on any replica. `stream_mode` (query, repeated or
/// comma-separated, as the SDKs send it; an unknown one is a 422) keeps only those events;
/// `cancel_on_disconnect=true` cancels the run if the client hangs up before the stream ends. A
/// run that is not resumable (neither `runs/stream` nor `stream_resumable`) streams from the
/// moment it is joined — a `metadata` event, the thread's values so far (with `values` in its
/// `stream_mode`), then the rest of the run; joined after it ended, it sends nothing.
pub async fn join_stream(
    State(state): State<Arc<AppState>>,
    Path((thread, run_id)): Path<(String, String)>,
    Query(q): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let rec = state
        .run_store
        .get(&run_id)
        .await
        .map_err(ApiError::internal)?
        .filter(|r| r.thread_id == thread)
        .ok_or_else(|| ApiError::not_found(format!("thread `{thread}` has no run `{run_id}`")))?;
    let after = match headers.get("last-event-id") {
        None => 0,
        Some(v) => v
            .to_str()
            .ok()
            .and_then(|s| s.trim().parse::<u64>().ok())
            .ok_or_else(|| {
                ApiError::bad(format!(
                    "Last-Event-ID {v:?} is not an event id of this server (a non-negative integer)"
                ))
            })?,
    };
    let modes: Vec<String> = query_list(&q, &["stream_mode"]).map(String::from).collect();
    super::stream_modes::check_names(&modes)?;
    let cancel = match q.iter().rev().find(|(k, _)| k == "cancel_on_disconnect") {
        None => false,
        Some((_, v)) => match v.to_ascii_lowercase().as_str() {
            "true" | "1" => true,
            "false" | "0" | "" => false,
            _ => {
                return Err(ApiError::bad(format!(
                    "cancel_on_disconnect `{v}` is not true or false"
                )))
            }
        },
    };
    let only = (!modes.is_empty()).then_some(modes);
    let ask = !super::live_runs::resumable(&rec);
    Ok(sse(state, rec.run_id, after, only, cancel, ask))
}
