//! `GET /threads/{thread_id}/stream`: a thread's join stream — the events of every run of the
//! thread, one run after another, for as long as the client stays — as LangGraph's
//! `threads.join_stream` reads it.
//!
//! It is built from the run event log ([`super::follow`]), so it is the same on every replica:
//! the runs of the thread that are pending or running when the client joins, then every run
//! accepted after, each from its start; a run's end is a `metadata` event
//! `{"status": "run_done", "run_id"}`. Every event's id is `{run seq}-{event seq}` (the run's
//! place in the run store, the event's place in its run's log), so a client that comes back with
//! `Last-Event-ID` gets the rest of that run and every later one, and no event twice.
//!
//! A run that is not resumable publishes its stream only when followed
//! ([`super::publish`]): while a client of this process follows the thread, the runs accepted
//! here publish theirs from the start ([`super::thread_followers`]); a run accepted on another replica is
//! asked for its stream by the follower as soon as it sees the run, and streams from then on.
//!
//! Modes (`stream_mode`, or LangGraph's own `stream_modes`, repeated or comma-separated):
//! `run_modes` (the default: the runs' events and their `run_done`), `lifecycle` (each run's
//! first `metadata` and its `run_done`) and `state_update` (`{"state", "thread_id"}` when the
//! thread's state is written through the API: `update_state`, or a command's update).

use super::errors::ApiError;
use super::follow::{self, Followed};
use super::thread_records::existing;
use super::AppState;
use axum::extract::{Path, Query, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event, Sse};
use futures::Stream;
use planwright::runs::{RunRecord, StreamEvent};
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::{broadcast, mpsc};

/// The thread stream modes, as LangGraph names them.
pub const MODES: [&str; 3] = ["run_modes", "lifecycle", "state_update"];

/// How many of a thread's run records one listing reads.
const PAGE: usize = 100;

/// A follower that sees nothing new looks at the thread's runs (and state) again after this.
const LOOK_AGAIN: Duration = Duration::from_secs(1);

/// What a client asked to see.
#[derive(Clone, Copy, Debug, Default)]
struct Modes {
    run_modes: bool,
    lifecycle: bool,
    state_update: bool,
}

impl Modes {
    /// From the query's `stream_mode` / `stream_modes` (default `run_modes`); an unknown mode is
    /// a 422 naming the allowed ones.
    fn parse(q: &[(String, String)]) -> Result<Self, ApiError> {
        let mut m = Modes::default();
        let mut any = false;
        for name in follow::query_list(q, &["stream_mode", "stream_modes"]) {
            any = true;
            match name {
                "run_modes" => m.run_modes = true,
                "lifecycle" => m.lifecycle = true,
                "state_update" => m.state_update = true,
                other => {
                    return Err(ApiError::unprocessable(format!(
                        "Invalid stream mode: `{other}`; a thread stream's modes are {}",
                        MODES.join(", ")
                    )))
                }
            }
        }
        m.run_modes |= !any;
        Ok(m)
    }

    /// Whether a stored run event goes to the client.
    fn keeps(&self, e: &StreamEvent) -> bool {
        self.run_modes || (self.lifecycle && e.event == "metadata")
    }
}

/// Where a thread stream starts: after event `event` of the run whose store seq is `run`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Cursor {
    run: u64,
    event: u64,
}

impl Cursor {
    /// A thread stream event id (`{run seq}-{event seq}`).
    fn parse(id: &str) -> Option<Self> {
        let (run, event) = id.trim().split_once('-')?;
        Some(Self {
            run: run.parse().ok()?,
            event: event.parse().ok()?,
        })
    }

    fn id(run: u64, event: u64) -> String {
        format!("{run}-{event}")
    }
}

/// `GET /threads/{thread_id}/stream`.
pub async fn join(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    Query(q): Query<Vec<(String, String)>>,
    headers: HeaderMap,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let modes = Modes::parse(&q)?;
    let cursor = match headers.get("last-event-id") {
        None => None,
        Some(v) => Some(v.to_str().ok().and_then(Cursor::parse).ok_or_else(|| {
            ApiError::bad(format!(
                "Last-Event-ID {v:?} is not an event id of a thread stream (`{{run}}-{{event}}`)"
            ))
        })?),
    };
    let (thread, _) = existing(&state, &id).await?;
    let (tx, rx) = mpsc::channel::<Event>(256);
    let following = state.live.thread_followers.follow(thread.as_str());
    let accepted = state.live.thread_followers.subscribe();
    tokio::spawn(async move {
        let _following = following;
        let thread = thread.as_str().to_string();
        let mut f = ThreadFollower {
            state: &state,
            thread: &thread,
            modes,
            tx: &tx,
        };
        if let Err(e) = f.run(cursor, accepted).await {
            tracing::warn!(thread, error = %e, "thread stream follower dropped");
            let data = json!({"error": "StreamError", "message": e});
            let _ = tx
                .send(Event::default().event("error").data(data.to_string()))
                .await;
        }
    });
    Ok(follow::events_of(rx))
}

/// One client's follower of one thread.
struct ThreadFollower<'a> {
    state: &'a AppState,
    thread: &'a str,
    modes: Modes,
    tx: &'a mpsc::Sender<Event>,
}

impl ThreadFollower<'_> {
    /// Follows the thread's runs until the client goes away (`Ok`) or the stores fail (`Err`).
    async fn run(
        &mut self,
        cursor: Option<Cursor>,
        mut accepted: broadcast::Receiver<String>,
    ) -> Result<(), String> {
        // Runs up to this store seq are followed (or were over before the client came).
        let mut done = 0u64;
        let mut first = true;
        let mut head = match self.modes.state_update {
            true => self.head().await?,
            false => None,
        };
        loop {
            for run in self.runs_after(done).await? {
                done = run.seq;
                let after = match cursor {
                    Some(c) if run.seq < c.run => continue,
                    Some(c) if run.seq == c.run => {
                        let last = self.last_event(&run).await?;
                        if run.status.is_ended() && c.event >= last {
                            continue;
                        }
                        c.event
                    }
                    // Without a cursor, what was over before the client came is not shown.
                    None if first && run.status.is_ended() => continue,
                    _ => 0,
                };
                if !self.follow_run(&run, after).await? {
                    return Ok(());
                }
            }
            first = false;
            // Nothing more for now: wait for a run accepted here, a second, or the client to go.
            loop {
                let woken = tokio::select! {
                    got = accepted.recv() => match got {
                        Ok(t) => t == self.thread,
                        // Missed some signals: look at the runs, they say it all.
                        Err(broadcast::error::RecvError::Lagged(_)) => true,
                        Err(broadcast::error::RecvError::Closed) => false,
                    },
                    _ = tokio::time::sleep(LOOK_AGAIN) => true,
                    _ = self.tx.closed() => return Ok(()),
                };
                if woken {
                    break;
                }
            }
            if self.modes.state_update {
                let now = self.head().await?;
                if now != head {
                    if now.as_ref().is_some_and(written_by_api) {
                        self.state_update(now.as_ref()).await?;
                    }
                    head = now;
                }
            }
        }
    }

    /// Sends one run's events after `after`, then its `run_done`; false once the client is gone.
    async fn follow_run(&self, run: &RunRecord, after: u64) -> Result<bool, String> {
        let modes = self.modes;
        let seq = run.seq;
        let shape = |e: &StreamEvent| {
            modes.keeps(e).then(|| {
                Event::default()
                    .id(Cursor::id(seq, e.seq))
                    .event(&e.event)
                    .data(&e.data)
            })
        };
        let ask = !super::live_runs::resumable(run);
        match follow::follow(self.state, &run.run_id, after, ask, self.tx, &shape).await? {
            Followed::ClientGone => Ok(false),
            Followed::Complete { .. } if !(modes.run_modes || modes.lifecycle) => Ok(true),
            Followed::Complete { last } => {
                // Its id is the stream's end marker's (the run's last event), so a client that
                // comes back with it starts at the next run.
                let done = json!({"status": "run_done", "run_id": run.run_id});
                let ev = Event::default()
                    .id(Cursor::id(seq, last))
                    .event("metadata")
                    .data(done.to_string());
                Ok(self.tx.send(ev).await.is_ok())
            }
        }
    }

    /// The thread's runs with a store seq above `done`, oldest first.
    async fn runs_after(&self, done: u64) -> Result<Vec<RunRecord>, String> {
        let mut out = Vec::new();
        let mut offset = 0;
        loop {
            let page = self
                .state
                .run_store
                .list_thread(self.thread, PAGE, offset)
                .await
                .map_err(|e| planwright::ErrorChain(&e).to_string())?;
            let full = page.len() == PAGE;
            let before = out.len();
            out.extend(page.into_iter().filter(|r| r.seq > done));
            // Newest first: a page that reached `done` is the last one needed.
            if !full || out.len() - before < PAGE {
                break;
            }
            offset += PAGE;
        }
        out.sort_by_key(|r| r.seq);
        Ok(out)
    }

    /// The seq of the run's last stored event.
    async fn last_event(&self, run: &RunRecord) -> Result<u64, String> {
        self.state
            .events
            .last_seq(&run.run_id)
            .await
            .map_err(|e| planwright::ErrorChain(&e).to_string())
    }

    /// The thread's state as `GET /threads/{id}/state` shows it (`None` before its first
    /// checkpoint).
    async fn head(&self) -> Result<Option<Value>, String> {
        let state = super::thread_state::current(self.state, self.thread)
            .await
            .map_err(|e| format!("{e:?}"))?;
        Ok(Some(state).filter(|s| !s["checkpoint"].is_null()))
    }

    /// Sends a `state_update` event for `state`.
    async fn state_update(&self, state: Option<&Value>) -> Result<(), String> {
        let data = json!({"state": state, "thread_id": self.thread});
        let ev = Event::default()
            .event("state_update")
            .data(data.to_string());
        // A client gone is noticed by the caller's wait.
        let _ = self.tx.send(ev).await;
        Ok(())
    }
}

/// Whether a state's checkpoint was written through the API (`update_state`, a command's
/// update), not by a run's superstep.
fn written_by_api(state: &Value) -> bool {
    state["metadata"]["source"] == json!("update")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[test]
    fn modes_default_to_run_modes_and_unknown_ones_are_refused() {
        let m = Modes::parse(&[]).unwrap();
        assert!(m.run_modes && !m.lifecycle && !m.state_update);
        let m = Modes::parse(&q(&[("stream_mode", "lifecycle,state_update")])).unwrap();
        assert!(!m.run_modes && m.lifecycle && m.state_update);
        let m = Modes::parse(&q(&[("stream_modes", "lifecycle")])).unwrap();
        assert!(!m.run_modes && m.lifecycle);
        let Err(e) = Modes::parse(&q(&[("stream_mode", "values")])) else {
            panic!("`values` is not a thread stream mode");
        };
        assert!(format!("{e:?}").contains("values"), "{e:?}");
    }

    #[test]
    fn lifecycle_keeps_only_metadata() {
        let m = Modes::parse(&q(&[("stream_mode", "lifecycle")])).unwrap();
        let ev = |name: &str| StreamEvent {
            seq: 1,
            event: name.into(),
            data: "{}".into(),
        };
        assert!(m.keeps(&ev("metadata")));
        assert!(!m.keeps(&ev("values")));
        assert!(Modes::parse(&[]).unwrap().keeps(&ev("values")));
    }

    #[test]
    fn cursors_round_trip_and_bad_ones_are_none() {
        let c = Cursor::parse(&Cursor::id(12, 7)).unwrap();
        assert_eq!(c, Cursor { run: 12, event: 7 });
        assert_eq!(Cursor::parse("7"), None);
        assert_eq!(Cursor::parse("a-1"), None);
        assert_eq!(Cursor::parse("1-"), None);
    }
}
