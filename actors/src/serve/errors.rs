//! JSON errors (every 4xx says what is wrong, every 5xx is logged at level error with its
//! cause chain), request checks shared by the handlers, and reading the bearer token (who it
//! names is `auth`'s business).
//!
//! A 500's cause stays in the log: the chain of a storage error names databases, hosts, tables
//! and SQL, which are the operator's business, not a client's. The client reads a short
//! `{"detail": "internal server error (error id …)"}` whose id is on the log line, so the
//! operator finds the cause of the answer a client reports.

use axum::extract::Request;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;

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

    /// 422: well-formed JSON whose values the API does not take (an unknown mode, sort or
    /// filter).
    pub fn unprocessable(msg: impl Into<String>) -> Self {
        Self(StatusCode::UNPROCESSABLE_ENTITY, msg.into())
    }
    /// 500: a message, or an error followed by its causes (`source()` chain), which the log line
    /// carries; the client reads only [`INTERNAL_DETAIL`] and an error id.
    pub fn internal(cause: impl Cause) -> Self {
        Self(StatusCode::INTERNAL_SERVER_ERROR, cause.detail())
    }
}

impl ApiError {
    /// What a run record keeps as the error of a run this error stopped: the message of a 4xx
    /// (written for the client), and for a 5xx only that the server failed, since the record is
    /// the client's to read and a 500's cause (databases, hosts, SQL) is the log's.
    pub fn for_record(&self) -> String {
        if self.0.is_server_error() {
            format!("{INTERNAL_DETAIL}; the server's log has its cause")
        } else {
            self.1.clone()
        }
    }
}

/// What [`ApiError::internal`] takes: a message, or an error of a type listed in
/// `error_causes!` whose detail is its message and then each of its causes
/// ([`planwright::ErrorChain`]): "postgres error 3D000: …" says what failed, only its causes
/// say why. (A blanket impl for every error would conflict with the one for `String`.)
#[diagnostic::on_unimplemented(
    message = "`ApiError::internal` does not know `{Self}`",
    note = "add the error type to `error_causes!` in serve/errors.rs so its causes are logged"
)]
pub trait Cause {
    /// The 500's detail.
    fn detail(self) -> String;
}

impl Cause for String {
    fn detail(self) -> String {
        self
    }
}

impl Cause for &str {
    fn detail(self) -> String {
        self.to_string()
    }
}

/// [`Cause`] for error types (by value and by reference): the message and every cause.
macro_rules! error_causes {
    ($($t:ty),* $(,)?) => {$(
        impl Cause for $t {
            fn detail(self) -> String {
                planwright::ErrorChain(&self).to_string()
            }
        }
        impl Cause for &$t {
            fn detail(self) -> String {
                planwright::ErrorChain(self).to_string()
            }
        }
    )*};
}

error_causes!(
    planwright::checkpoint::CheckpointError,
    planwright::runs::RunStoreError,
    planwright::store::StoreError,
    planwright::RunError,
    planwright::Refusal,
    serde_json::Error,
);

/// What a client reads of a 500, before its error id: the cause is in the server's log only.
pub const INTERNAL_DETAIL: &str = "internal server error";

/// A short random id tying a 500's answer to its log line (8 hex digits).
fn error_id() -> String {
    format!("{:08x}", rand::random::<u32>())
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let detail = if self.0 == StatusCode::INTERNAL_SERVER_ERROR {
            // The cause (the whole chain `internal` built) goes to the log with an id; the
            // client gets the id alone.
            let id = error_id();
            tracing::error!(status = 500u16, error_id = %id, detail = %self.1, "request failed");
            format!("{INTERNAL_DETAIL} (error id {id}); the server's log has its cause")
        } else {
            if self.0.is_server_error() {
                // Other 5xx details are written for the client (`storage` keeps its cause to
                // the log); logged all the same.
                tracing::error!(status = self.0.as_u16(), detail = %self.1, "request failed");
            }
            self.1
        };
        (self.0, Json(serde_json::json!({"detail": detail}))).into_response()
    }
}

/// Runs the request inside a `request{method, path}` span, so that what is logged while it is
/// served — a 5xx with its cause above all — names the request it belongs to.
pub async fn request_span(req: Request, next: axum::middleware::Next) -> Response {
    use tracing::Instrument;
    let span = tracing::info_span!("request", method = %req.method(), path = req.uri().path());
    next.run(req).instrument(span).await
}

/// The longest thread id the server accepts.
pub const MAX_THREAD_ID: usize = 128;

/// A thread id the server can store and address in every URL: 1 to [`MAX_THREAD_ID`]
/// characters of `A-Z a-z 0-9 . _ : -`, and not `.` or `..`.
pub fn check_thread_id(id: &str) -> Result<(), ApiError> {
    let ok_chars = id
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | ':' | '-'));
    if id.is_empty() || id.len() > MAX_THREAD_ID || !ok_chars || id == "." || id == ".." {
        let shown: String = id.chars().take(40).collect();
        return Err(ApiError(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "thread_id `{shown}{}`: use 1 to {MAX_THREAD_ID} characters of A-Z a-z 0-9 . _ : - (not `.` or `..`)",
                if id.chars().count() > 40 { "…" } else { "" }
            ),
        ));
    }
    Ok(())
}

/// The answer for a path no route serves (404, JSON).
pub async fn no_route(uri: axum::http::Uri) -> ApiError {
    ApiError::not_found(format!("no endpoint at `{}`", uri.path()))
}

/// The answer for a method a route does not serve (405, JSON).
pub async fn no_method(method: axum::http::Method, uri: axum::http::Uri) -> ApiError {
    ApiError(
        StatusCode::METHOD_NOT_ALLOWED,
        format!("`{method}` is not served at `{}`", uri.path()),
    )
}

/// The token of an `Authorization: Bearer TOKEN` header (the scheme in any case).
pub fn bearer(req: &Request) -> Option<&str> {
    let value = req
        .headers()
        .get(axum::http::header::AUTHORIZATION)?
        .to_str()
        .ok()?;
    let (scheme, token) = value.trim().split_once(' ')?;
    scheme
        .eq_ignore_ascii_case("bearer")
        .then_some(token.trim())
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

#[cfg(test)]
mod tests {
    use super::*;
    use planwright::checkpoint::CheckpointError;

    #[test]
    fn a_500_carries_the_error_and_its_causes() {
        // A database error prints the server's message; only its source says why.
        let reset = std::io::Error::new(std::io::ErrorKind::ConnectionReset, "connection reset");
        let db = CheckpointError::Database {
            backend: "postgres",
            code: Some("08006".into()),
            message: "reading the thread's head".into(),
            source: Box::new(reset),
        };
        let e = ApiError::internal(db);
        assert_eq!(e.0, StatusCode::INTERNAL_SERVER_ERROR);
        assert_eq!(
            e.1,
            "postgres error 08006: reading the thread's head: connection reset"
        );
        assert_eq!(ApiError::internal("plain").1, "plain");
    }

    #[test]
    fn a_run_record_keeps_a_4xx_message_and_not_a_500_cause() {
        let db = CheckpointError::backend_msg("postgres error 3D000: database \"secret_db\"");
        let kept = ApiError::internal(db).for_record();
        assert!(!kept.contains("secret_db"), "{kept}");
        assert!(kept.starts_with(INTERNAL_DETAIL), "{kept}");
        let refused = ApiError::bad("thread `t` is not interrupted");
        assert_eq!(refused.for_record(), "thread `t` is not interrupted");
    }

    #[tokio::test]
    async fn a_500_tells_the_client_an_error_id_and_not_its_cause() {
        let db = CheckpointError::backend_msg(
            "postgres error 3D000: database \"secret_db\" on db.internal:5432 does not exist",
        );
        let resp = ApiError::internal(db).into_response();
        assert_eq!(resp.status(), StatusCode::INTERNAL_SERVER_ERROR);
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        let detail = v["detail"].as_str().unwrap();
        assert!(
            detail.starts_with("internal server error (error id "),
            "{detail}"
        );
        for secret in ["secret_db", "db.internal", "3D000", "postgres"] {
            assert!(!detail.contains(secret), "{detail}");
        }
        // Other statuses keep their words for the client.
        let resp = ApiError::conflict("thread `t` already exists").into_response();
        let body = axum::body::to_bytes(resp.into_body(), 1 << 16)
            .await
            .unwrap();
        assert!(String::from_utf8_lossy(&body).contains("already exists"));
    }
}
