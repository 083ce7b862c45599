//! Caps on the client-supplied JSON the server stores with every request, beside the request's
//! own content. A run's `metadata` is stored twice (in its record and in the request kept whole
//! for a queued or recovered start), a thread's `metadata` in its record, and a run's `config`,
//! `checkpoint` and `stream_mode` in the kept request: without a cap, any client could make every request cost
//! megabytes of storage (600 runs with 1.9 MB of metadata each grew a SQLite file to 2.45 GB).
//! Each field is capped at [`MAX_STORED_FIELD_BYTES`] of JSON text; a request over the cap is
//! refused with 422 naming the field, its size and the cap, before anything is stored.
//!
//! A run's `input` and `command` are the conversation itself (a research goal with its notes, an
//! answer to a question): they are bounded by the request body limit (2 MiB), not here.

use super::errors::ApiError;
use axum::http::StatusCode;
use serde_json::Value;

/// The most JSON text, in bytes, one stored field may hold: a run's `metadata`, `config`,
/// `checkpoint` and `stream_mode`, and a thread's `metadata`. 64 KiB: room for any labels, tags or ids a client
/// keeps with a run, far below what would make storage grow with a client's whim.
pub const MAX_STORED_FIELD_BYTES: usize = 64 * 1024;

/// 422 when `value` (the request's `field`) is more than [`MAX_STORED_FIELD_BYTES`] of JSON text.
pub fn check_size(field: &str, value: Option<&Value>) -> Result<(), ApiError> {
    let Some(value) = value else { return Ok(()) };
    let size = json_len(value);
    if size > MAX_STORED_FIELD_BYTES {
        return Err(ApiError(
            StatusCode::UNPROCESSABLE_ENTITY,
            format!(
                "`{field}` is {size} bytes of JSON; the server stores at most \
                 {MAX_STORED_FIELD_BYTES} bytes for it"
            ),
        ));
    }
    Ok(())
}

/// The length of `value`'s compact JSON text, counted without building it.
fn json_len(value: &Value) -> usize {
    struct Count(usize);
    impl std::io::Write for Count {
        fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
            self.0 += buf.len();
            Ok(buf.len())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }
    let mut n = Count(0);
    // Writing a `Value` into a writer that never fails cannot fail.
    let _ = serde_json::to_writer(&mut n, value);
    n.0
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn the_cap_counts_json_text_and_the_refusal_names_field_size_and_cap() {
        let at_cap = json!({"k": "x".repeat(MAX_STORED_FIELD_BYTES - 8)});
        assert_eq!(json_len(&at_cap), MAX_STORED_FIELD_BYTES);
        assert!(check_size("metadata", Some(&at_cap)).is_ok());
        assert!(check_size("metadata", None).is_ok());
        let over = json!({"k": "x".repeat(MAX_STORED_FIELD_BYTES - 7)});
        let ApiError(status, detail) = check_size("config", Some(&over)).unwrap_err();
        assert_eq!(status, StatusCode::UNPROCESSABLE_ENTITY);
        assert!(detail.contains("`config`"), "{detail}");
        assert!(
            detail.contains(&format!("{}", MAX_STORED_FIELD_BYTES + 1)),
            "{detail}"
        );
        assert!(
            detail.contains(&format!("{MAX_STORED_FIELD_BYTES}")),
            "{detail}"
        );
    }
}
