//! The studio: a page served at `/studio` by `serve` itself, to watch and steer conversations.
//!
//! Everything it needs is compiled into the binary (`include_str!`): one HTML page, one script and
//! one stylesheet written for this project, no framework and no CDN, so it works with no network.
//! The page is a client of the same HTTP API as any other (threads, runs, history, the
//! `/assistants/{id}/graph` and `/assistants/{id}/nodes` endpoints), so it also works against a
//! replica set. The assets hold no data and load without a token; the page asks for the API token
//! when the API answers 401 and sends it as `Authorization: Bearer …`. See docs/studio.md.

use axum::http::header;
use axum::response::{IntoResponse, Redirect};
use axum::routing::get;
use axum::Router;

const INDEX: &str = include_str!("index.html");
const SCRIPT: &str = include_str!("app.js");
const STYLE: &str = include_str!("app.css");
/// The field planner's example schema, offered by the new-run form.
const DENTAL_SCHEMA: &str = include_str!("../../../../fixtures/field/dental.schema.json");

/// `GET /studio/examples.json`: inputs the new-run form starts from.
async fn examples() -> axum::Json<serde_json::Value> {
    axum::Json(serde_json::json!({
        "goal": "Should our support team adopt retrieval-augmented generation for customer support?",
        "constraints": {"max_steps": 4, "required_sections": ["cost", "risks"], "require_approval": true},
        "schema": serde_json::from_str::<serde_json::Value>(DENTAL_SCHEMA).unwrap_or_default(),
    }))
}

fn asset(kind: &'static str, body: &'static str) -> impl IntoResponse {
    (
        [
            (header::CONTENT_TYPE, kind),
            (header::CACHE_CONTROL, "no-cache"),
            (header::X_CONTENT_TYPE_OPTIONS, "nosniff"),
        ],
        body,
    )
}

/// The studio's routes (mounted outside the API's auth layer).
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route(
            "/studio",
            get(|| async { asset("text/html; charset=utf-8", INDEX) }),
        )
        .route("/studio/", get(|| async { Redirect::permanent("/studio") }))
        .route(
            "/studio/app.js",
            get(|| async { asset("text/javascript; charset=utf-8", SCRIPT) }),
        )
        .route("/studio/examples.json", get(examples))
        .route(
            "/studio/app.css",
            get(|| async { asset("text/css; charset=utf-8", STYLE) }),
        )
}
