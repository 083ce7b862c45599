//! `POST /threads/{thread_id}/runs/stream`: a run as server-sent events, LangGraph-style. The
//! run publishes its events into the run event log ([`super::publish`]) and the response follows
//! the log ([`super::follow`]): every event carries its `id`, so a client that loses the
//! connection (or its replica) rejoins with `GET /threads/{thread_id}/runs/{run_id}/stream` and
//! `Last-Event-ID` on any replica and misses nothing. The run goes on when the client hangs up,
//! unless the request says `on_disconnect: "cancel"`.

use super::errors::ApiError;
use super::handlers::RunBody;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::response::sse::{Event, Sse};
use axum::Json;
use futures::Stream;
use std::convert::Infallible;
use std::sync::Arc;

/// The SSE endpoint.
pub async fn run_stream(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<RunBody>, JsonRejection>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let Json(mut body) = body?;
    body.stream_resumable = Some(true);
    let cancel_on_disconnect = body.cancel_on_disconnect()?;
    let run_id = match super::lifecycle::begin(&state, &id, body).await? {
        super::lifecycle::Begun::Here(rec, thread, assistant, handle) => {
            let run_id = rec.run_id.clone();
            let st = state.clone();
            tokio::spawn(async move {
                let _ = super::publish::drive(&st, &rec, assistant, &thread, handle, false).await;
            });
            run_id
        }
        // Another replica took the run over before it started here: it publishes the whole
        // stream (the run is resumable), which this client follows from the start.
        super::lifecycle::Begun::Elsewhere(rec) => rec.run_id,
    };
    Ok(super::follow::sse(
        state,
        run_id,
        0,
        None,
        cancel_on_disconnect,
        false,
    ))
}
