//! JSON errors (every 4xx says what is wrong) and bearer-token auth.

use super::AppState;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Json;
use std::sync::Arc;

/// An API error: a status and a message.
#[derive(Debug)]
pub struct ApiError(pub StatusCode, pub String);

impl ApiError {
    /// 400.
    pub fn bad(msg: impl Into<String>) -> Self {
        Self(StatusCode::BAD_REQUEST, msg.into())
    }
    /// 404.
    pub fn not_found(msg: impl Into<String>) -> Self {
        Self(StatusCode::NOT_FOUND, msg.into())
    }
    /// 409.
    pub fn conflict(msg: impl Into<String>) -> Self {
        Self(StatusCode::CONFLICT, msg.into())
    }
    /// 500.
    pub fn internal(msg: impl std::fmt::Display) -> Self {
        Self(StatusCode::INTERNAL_SERVER_ERROR, msg.to_string())
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(serde_json::json!({"detail": self.1}))).into_response()
    }
}

impl From<axum::extract::rejection::JsonRejection> for ApiError {
    fn from(r: axum::extract::rejection::JsonRejection) -> Self {
        let status = r.status();
        let msg = if status == StatusCode::PAYLOAD_TOO_LARGE {
            "request body too large (limit 2 MiB)".to_string()
        } else {
            format!("malformed JSON body: {}", r.body_text())
        };
        Self(status, msg)
    }
}

/// Rejects requests without the configured bearer token (401), when one is configured.
pub async fn auth(State(state): State<Arc<AppState>>, req: Request, next: Next) -> Response {
    if let Some(token) = &state.token {
        let given = req
            .headers()
            .get(axum::http::header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        if given != Some(token.as_str()) {
            return ApiError(
                StatusCode::UNAUTHORIZED,
                "missing or wrong `Authorization: Bearer TOKEN`".into(),
            )
            .into_response();
        }
    }
    next.run(req).await
}
