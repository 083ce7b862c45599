//! `GET /threads/{thread_id}/stream/events` upgraded to a WebSocket: the protocol's full-duplex
//! transport, which both official SDKs offer (`client.threads.stream(…, transport: "websocket")`
//! in Python, where commands still go over HTTP and the socket carries a
//! `subscription.subscribe` then events; `ProtocolWebSocketTransportAdapter` in JS, which sends
//! every command on the socket).
//!
//! Every text frame in is one command `{"id", "method", "params"}`, answered on the socket with
//! the same `success` / `error` frame `POST /threads/{thread_id}/commands` answers
//! ([`commands::answer`] makes both), in the order the commands came. Events go out as the SSE
//! path's `data` (`{"type": "event", "seq", "event_id", "method", "params"}`), made by the same
//! follower ([`events::follow`]). Besides the HTTP commands, the socket answers:
//!
//! - `subscription.subscribe` `{channels, namespaces?, depth?, since?}` — the SSE body's filter:
//!   the events it matches follow from the thread's first run (after `since`), then live, as the
//!   SSE stream sends them. Result `{subscription_id, replayed_events: 0}` (the replay is
//!   streamed after the answer, so it is not counted);
//! - `subscription.reconnect` — the same with `since` required and the client's own
//!   `subscription_id` kept;
//! - `subscription.unsubscribe` `{subscription_id}` — `{}`, or `no_such_subscription`.
//!
//! An event several subscriptions match goes out once per socket (the socket remembers the `seq`s
//! it sent), as LangGraph's server does; the SDKs deduplicate by `event_id` too. A frame that is
//! not JSON is answered with an `invalid_argument` error (`id` null) and the socket stays open.
//! Closing the socket ends its subscriptions. The request is authenticated (and another user's
//! thread refused) by the middleware before the upgrade, as every thread URL; the socket's
//! commands then run as that caller.

use super::super::auth;
use super::super::AppState;
use super::commands::{self, envelope, error_frame, success_frame, Envelope};
use super::events::{self, Filter, ProtocolEvent};
use axum::extract::ws::{Message, WebSocket, WebSocketUpgrade};
use axum::extract::{Path, State};
use axum::response::Response;
use futures::{SinkExt, StreamExt};
use serde_json::Value;
use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// Frames queued for the socket before a follower waits.
const QUEUE: usize = 256;

/// What the socket's writer sends.
enum Out {
    /// A command's answer (or an error frame).
    Frame(Value),
    /// An event one of the subscriptions matched.
    Event(ProtocolEvent),
}

/// The endpoint: upgrades and serves the socket as the request's caller.
pub async fn socket(
    ws: WebSocketUpgrade,
    State(state): State<Arc<AppState>>,
    Path(thread_id): Path<String>,
) -> Response {
    let caller = auth::caller();
    ws.on_upgrade(move |socket| async move {
        match caller {
            Some(me) => auth::as_caller(me, serve(state, thread_id, socket)).await,
            None => serve(state, thread_id, socket).await,
        }
    })
}

/// Reads commands until the client closes; a writer task sends answers and events.
async fn serve(state: Arc<AppState>, thread_id: String, socket: WebSocket) {
    let (mut sink, mut stream) = socket.split();
    let (tx, mut rx) = mpsc::channel::<Out>(QUEUE);
    let writer = tokio::spawn(async move {
        let mut sent: HashSet<u64> = HashSet::new();
        while let Some(out) = rx.recv().await {
            let frame = match out {
                Out::Frame(v) => v,
                Out::Event(ev) if sent.insert(ev.seq) => ev.to_json(),
                Out::Event(_) => continue,
            };
            if sink
                .send(Message::Text(frame.to_string().into()))
                .await
                .is_err()
            {
                break;
            }
        }
    });
    let mut subs: HashMap<String, JoinHandle<()>> = HashMap::new();
    while let Some(Ok(msg)) = stream.next().await {
        let text = match msg {
            Message::Text(t) => t.to_string(),
            Message::Binary(b) => String::from_utf8_lossy(&b).into_owned(),
            Message::Close(_) => break,
            Message::Ping(_) | Message::Pong(_) => continue,
        };
        let reply = match serde_json::from_str::<Value>(&text) {
            Err(e) => error_frame(
                None,
                "invalid_argument",
                format!("a protocol command must be JSON: {e}"),
            ),
            Ok(cmd) => command(&state, &thread_id, &cmd, &tx, &mut subs).await,
        };
        if tx.send(Out::Frame(reply)).await.is_err() {
            break;
        }
    }
    for (_, task) in subs {
        task.abort();
    }
    drop(tx);
    let _ = writer.await;
}

/// The answer to one command: the socket's own `subscription.*`, else what HTTP answers.
async fn command(
    state: &Arc<AppState>,
    thread_id: &str,
    cmd: &Value,
    tx: &mpsc::Sender<Out>,
    subs: &mut HashMap<String, JoinHandle<()>>,
) -> Value {
    let Envelope { id, method, params } = match envelope(cmd) {
        Ok(e) => e,
        Err((_, frame)) => return frame,
    };
    match method {
        "subscription.subscribe" | "subscription.reconnect" => {
            let reconnect = method == "subscription.reconnect";
            let mut params = params;
            let kept = params
                .as_object_mut()
                .and_then(|p| p.remove("subscription_id"))
                .and_then(|v| v.as_str().map(str::to_string))
                .filter(|s| reconnect && !s.is_empty());
            let filter: Filter = match serde_json::from_value(params) {
                Ok(f) => f,
                Err(e) => return error_frame(Some(id), "invalid_argument", e.to_string()),
            };
            if reconnect && filter.since().is_none() {
                return error_frame(
                    Some(id),
                    "invalid_argument",
                    "subscription.reconnect needs `since`: the last `seq` the client saw",
                );
            }
            let sub_id = kept.unwrap_or_else(super::super::ids::new_uuid);
            if let Some(old) = subs.remove(&sub_id) {
                old.abort();
            }
            let follow = subscription(state.clone(), thread_id.to_string(), filter, tx.clone());
            // The subscription goes on as the socket's caller (it may see only that caller's runs).
            let task = match auth::caller() {
                Some(me) => tokio::spawn(auth::as_caller(me, follow)),
                None => tokio::spawn(follow),
            };
            subs.insert(sub_id.clone(), task);
            success_frame(
                id,
                thread_id,
                serde_json::json!({"subscription_id": sub_id, "replayed_events": 0}),
            )
        }
        "subscription.unsubscribe" => {
            let Some(sub_id) = params["subscription_id"].as_str() else {
                return error_frame(
                    Some(id),
                    "invalid_argument",
                    "subscription.unsubscribe needs a `subscription_id`",
                );
            };
            match subs.remove(sub_id) {
                Some(task) => {
                    task.abort();
                    success_frame(id, thread_id, serde_json::json!({}))
                }
                None => error_frame(
                    Some(id),
                    "no_such_subscription",
                    format!("no subscription `{sub_id}` on this socket"),
                ),
            }
        }
        _ => match commands::answer(state, thread_id, cmd).await {
            Ok(frame) | Err(frame) => frame,
        },
    }
}

/// One subscription: the SSE path's follower, its events queued for the socket.
async fn subscription(
    state: Arc<AppState>,
    thread_id: String,
    filter: Filter,
    tx: mpsc::Sender<Out>,
) {
    let as_out = |ev: &ProtocolEvent| Out::Event(ev.clone());
    if let Err(frame) = events::follow(&state, &thread_id, &filter, &tx, &as_out).await {
        let _ = tx.send(Out::Frame(frame)).await;
    }
}
