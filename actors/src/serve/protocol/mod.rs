//! The thread-centric protocol the current official SDKs speak (`client.threads.stream(…)`: the
//! JS SDK's `ThreadStream`, Python's `AsyncThreadStream`; typed by `@langchain/protocol` /
//! `langchain-protocol`), over HTTP:
//!
//! - `POST /threads/{thread_id}/commands` takes one command `{"id", "method", "params"}` and
//!   answers `{"type": "success", "id", "result", "meta": {"applied_through_seq"}}` or
//!   `{"type": "error", "id", "error", "message"}` ([`commands`]): `run.start` starts a run
//!   through the same path as `POST /threads/{thread_id}/runs` (creating the thread the SDK named
//!   when it does not exist yet), `input.respond` resumes the paused thread with the answers
//!   (`command.resume`, a map of interrupt ids), `input.inject` queues a run with a message as
//!   its input, `state.get` and `state.listCheckpoints` read the thread, `state.fork` runs from a
//!   past checkpoint, `agent.getTree` names the graph.
//! - `POST /threads/{thread_id}/stream/events` with `{"channels", "namespaces"?, "depth"?,
//!   "since"?}` follows the thread's runs as server-sent events ([`events`]): every protocol
//!   event (`lifecycle`, `values`, `updates`, `messages`, `input.requested`, `input.answered`,
//!   `tasks`, `checkpoints`, `custom`; `tools` stays empty, no graph here calls tools) carries
//!   a `seq` and an `event_id` (also the SSE `id`), and a client that sends the last `seq` it saw
//!   as `since` gets only what came after it. The events are read from the run
//!   event log, so a stream can be rejoined on any replica.
//! - `GET /threads/{thread_id}/stream/events` upgraded to a WebSocket carries both: commands in,
//!   their answers and the events of `subscription.subscribe`s out ([`socket`]), through the same
//!   code as the two HTTP routes.
//!
//! See docs/server.md, "Thread-centric protocol".

pub mod commands;
pub mod events;
pub mod socket;

use super::AppState;
use axum::routing::post;
use axum::Router;
use std::sync::Arc;

/// The protocol's routes: commands, and the event stream over SSE (`POST`) or a WebSocket
/// (`GET` with an upgrade).
pub fn routes() -> Router<Arc<AppState>> {
    Router::new()
        .route("/threads/{thread_id}/commands", post(commands::command))
        .route(
            "/threads/{thread_id}/stream/events",
            post(events::stream_events).get(socket::socket),
        )
}
