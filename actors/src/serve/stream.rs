//! `POST /threads/{thread_id}/runs/stream`: a run as server-sent events, LangGraph-style. The
//! run publishes its events into the run event log ([`super::publish`]) and the response follows
//! the log ([`super::follow`]): every event carries its `id`, so a client that loses the
//! connection (or its replica) rejoins with `GET /threads/{thread_id}/runs/{run_id}/stream` and
//! `Last-Event-ID` on any replica and misses nothing. The run goes on when the client hangs up,
//! unless the request says `on_disconnect: "cancel"`. The stream modes, and how a run's events
//! become theirs, are [`super::stream_modes`].
//!
//! Every response that starts a run names it in `Content-Location: /threads/{thread_id}/runs/{run_id}`
//! ([`located`]), as LangGraph does: the JS SDK's `onRunCreated` reads it.

use super::errors::ApiError;
use super::run_body::RunBody;
use super::AppState;
use axum::extract::rejection::JsonRejection;
use axum::extract::{Path, State};
use axum::http::header::CONTENT_LOCATION;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;

/// The SSE endpoint.
pub async fn run_stream(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    body: Result<Json<RunBody>, JsonRejection>,
) -> Result<Response, ApiError> {
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
    let location = run_location(&id, &run_id);
    let sse = super::follow::sse(state, run_id, 0, None, cancel_on_disconnect, false);
    Ok(with_location(location, sse))
}

/// `/threads/{thread_id}/runs/{run_id}`: where a run is (`Content-Location`).
pub fn run_location(thread_id: &str, run_id: &str) -> String {
    format!("/threads/{thread_id}/runs/{run_id}")
}

/// `response` with `Content-Location` naming run `run_id` of thread `thread_id`.
pub fn located(thread_id: &str, run_id: &str, response: impl IntoResponse) -> Response {
    with_location(run_location(thread_id, run_id), response)
}

fn with_location(location: String, response: impl IntoResponse) -> Response {
    let mut r = response.into_response();
    // Thread and run ids are checked URL-safe text; one that is not a header value goes without.
    if let Ok(v) = HeaderValue::from_str(&location) {
        r.headers_mut().insert(CONTENT_LOCATION, v);
    }
    r
}
