//! Timestamps as the API writes them: RFC 3339 in UTC with milliseconds
//! (`2026-11-24T14:05:00.123Z`), the ISO-8601 form LangGraph's API uses, for threads, runs,
//! store items and copies alike, so a client parses one format and sorts them as text.

/// Milliseconds since the epoch as RFC 3339 UTC, e.g. `2026-11-24T14:05:00.123Z`.
pub fn rfc3339(ms: u64) -> String {
    let secs = ms / 1000;
    let days = (secs / 86_400) as i64;
    let rem = secs % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{:03}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60,
        ms % 1000
    )
}

/// When this process started serving, as RFC 3339: the creation time of assistants registered
/// in code (they are made with the server).
pub static STARTED_AT: std::sync::LazyLock<String> = std::sync::LazyLock::new(now);

/// Now, as [`rfc3339`].
pub fn now() -> String {
    let ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    rfc3339(ms)
}

/// A time kept in a thread's record, as [`rfc3339`]: records written before the API used RFC 3339
/// hold an HTTP date (`Tue, 24 Nov 2026 14:00:00 GMT`), which is converted; anything else is
/// returned as it is (`null` when absent).
pub fn stored(v: Option<&serde_json::Value>) -> serde_json::Value {
    let Some(v) = v else {
        return serde_json::Value::Null;
    };
    match v.as_str().map(httpdate::parse_http_date) {
        Some(Ok(t)) => {
            let ms = t
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_millis() as u64);
            serde_json::Value::String(rfc3339(ms))
        }
        _ => v.clone(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn milliseconds_read_as_rfc3339_utc() {
        assert_eq!(rfc3339(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(rfc3339(951_782_400_123), "2000-02-29T00:00:00.123Z");
        assert_eq!(rfc3339(1_795_528_800_000), "2026-11-24T14:00:00.000Z");
        let n = now();
        assert_eq!(n.len(), 24, "{n}");
        assert!(n.ends_with('Z') && n.as_bytes()[10] == b'T', "{n}");
    }

    #[test]
    fn an_http_date_kept_in_an_older_record_reads_as_rfc3339() {
        use serde_json::json;
        let old = json!("Tue, 24 Nov 2026 14:00:00 GMT");
        assert_eq!(stored(Some(&old)), json!("2026-11-24T14:00:00.000Z"));
        let new = json!("2026-11-24T14:00:00.123Z");
        assert_eq!(stored(Some(&new)), new);
        assert_eq!(stored(None), serde_json::Value::Null);
    }
}
