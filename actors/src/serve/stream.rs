//! `POST /threads/{thread_id}/runs/stream`: a run as server-sent events, LangGraph-style: a
//! `metadata` event first, then per superstep `updates` (`{node: update}`) and `values` (the
//! thread's values), `custom` events that nodes emit, every run event under `events`, and an
//! `error` event if the run fails, and the chunks nodes stream with `NodeContext::stream_chunk`
//! as LangGraph's `messages` / `messages-tuple` modes send them ([`super::messages`]). Which kinds
//! are sent is the request's `stream_mode`.

use super::assistants;
use super::errors::ApiError;
use super::handlers::RunBody;
use super::messages::Messages;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::response::sse::{Event, Sse};
use axum::Json;
use futures::Stream;
use planwright::RunEvent;
use serde_json::{json, Value};
use std::convert::Infallible;
use std::sync::Arc;
use tokio::sync::mpsc;

fn modes(v: &Option<Value>) -> Vec<String> {
    match v {
        None => vec!["values".into()],
        Some(Value::String(s)) => vec![s.clone()],
        Some(Value::Array(a)) => a
            .iter()
            .filter_map(|m| m.as_str().map(String::from))
            .collect(),
        Some(_) => vec!["values".into()],
    }
}

fn event(name: &str, data: &Value) -> Event {
    Event::default().event(name).data(data.to_string())
}

/// The SSE endpoint.
pub async fn run_stream(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<RunBody>, JsonRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Json(body) = body?;
    let modes = modes(&body.stream_mode);
    let (rec, thread, assistant, mut handle) =
        super::lifecycle::begin(&state, &id, body, true).await?;
    let (tx, rx) = mpsc::unbounded_channel::<Event>();
    let _ = tx.send(event(
        "metadata",
        &json!({"run_id": rec.run_id, "thread_id": rec.thread_id, "attempt": 1}),
    ));
    let mut messages = Messages::new(&modes);
    let want = move |m: &str| modes.iter().any(|x| x == m);
    tokio::spawn(async move {
        if let Some(mut events) = handle.take_events() {
            while let Some(ev) = events.recv().await {
                if want("events") {
                    if let Ok(v) = serde_json::to_value(&ev) {
                        let _ = tx.send(event("events", &v));
                    }
                }
                match &ev {
                    RunEvent::StateUpdated { nodes, updates, .. } => {
                        if want("updates") {
                            for (n, u) in nodes.iter().zip(updates) {
                                let _ = tx.send(event("updates", &json!({ n.clone(): u })));
                            }
                        }
                        if want("values") {
                            if let Ok(Some(s)) = assistants::view(&state, assistant, &thread).await
                            {
                                let _ = tx.send(event("values", &s.values));
                            }
                        }
                    }
                    RunEvent::Custom { payload, .. } if want("custom") => {
                        let _ = tx.send(event("custom", payload));
                    }
                    RunEvent::Message { .. } | RunEvent::NodeFinished { .. } => {
                        for (name, data) in messages.on_event(&ev) {
                            let _ = tx.send(event(name, &data));
                        }
                    }
                    _ => {}
                }
            }
        }
        let result = handle.wait().await;
        super::lifecycle::finished(&state, &rec, &result).await;
        match result {
            Ok(out) => {
                if want("values") {
                    let _ = tx.send(event("values", &out.values));
                }
            }
            Err(e) => {
                let _ = tx.send(event(
                    "error",
                    &json!({"error": "RunError", "message": e.to_string()}),
                ));
            }
        }
    });
    let stream = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|e| (Ok::<_, Infallible>(e), rx))
    });
    Ok(Sse::new(stream))
}
