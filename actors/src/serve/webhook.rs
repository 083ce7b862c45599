//! A run's `webhook`: when the run ends, its record and values are POSTed to the URL it named,
//! retried with backoff when the receiver fails or cannot be reached. Delivery runs in a task of
//! its own, so neither the run's end nor a client waiting on it waits for the receiver; every
//! failed attempt and a delivery given up go to the log with their cause.

use serde_json::Value;
use std::time::Duration;

/// Attempts per delivery.
pub const ATTEMPTS: u32 = 4;
/// The wait before the second attempt; it doubles after each failure.
pub const FIRST_BACKOFF: Duration = Duration::from_secs(1);
/// How long one attempt may take.
pub const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);

/// Delivers `payload` to `url` in the background ([`ATTEMPTS`] tries, backoff from
/// [`FIRST_BACKOFF`]).
pub fn spawn(url: String, payload: Value) {
    tokio::spawn(async move {
        deliver(&url, &payload, ATTEMPTS, FIRST_BACKOFF).await;
    });
}

/// Delivers `payload` to `url`: true once a receiver answered 2xx, false after `attempts` tries.
pub async fn deliver(url: &str, payload: &Value, attempts: u32, first_backoff: Duration) -> bool {
    let client = reqwest::Client::builder()
        .timeout(ATTEMPT_TIMEOUT)
        .build()
        .unwrap_or_default();
    let mut backoff = first_backoff;
    for attempt in 1..=attempts {
        let why = match client.post(url).json(payload).send().await {
            Ok(r) if r.status().is_success() => return true,
            Ok(r) => format!("the receiver answered {}", r.status()),
            Err(e) => planwright::ErrorChain(&e).to_string(),
        };
        tracing::warn!(url, attempt, attempts, why, "webhook delivery failed");
        if attempt < attempts {
            tokio::time::sleep(backoff).await;
            backoff *= 2;
        }
    }
    tracing::error!(url, attempts, "webhook delivery given up");
    false
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    /// A receiver over a real socket that fails its first `fail` requests with a 500.
    async fn receiver(fail: usize) -> (String, Arc<AtomicUsize>, Arc<Mutex<Vec<Value>>>) {
        let hits = Arc::new(AtomicUsize::new(0));
        let got = Arc::new(Mutex::new(Vec::new()));
        let (h, g) = (hits.clone(), got.clone());
        let app = axum::Router::new().route(
            "/hook",
            axum::routing::post(move |axum::Json(v): axum::Json<Value>| {
                let (h, g) = (h.clone(), g.clone());
                async move {
                    g.lock().unwrap().push(v);
                    if h.fetch_add(1, Ordering::SeqCst) < fail {
                        axum::http::StatusCode::INTERNAL_SERVER_ERROR
                    } else {
                        axum::http::StatusCode::OK
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await });
        (format!("http://{addr}/hook"), hits, got)
    }

    #[tokio::test]
    async fn a_failing_receiver_is_tried_again_until_it_takes_the_run() {
        let (url, hits, got) = receiver(2).await;
        let payload = json!({"run_id": "r1", "status": "success", "values": {"x": 1}});
        assert!(deliver(&url, &payload, 4, Duration::from_millis(1)).await);
        assert_eq!(hits.load(Ordering::SeqCst), 3, "two failures, then taken");
        assert!(got.lock().unwrap().iter().all(|v| v == &payload));
    }

    #[tokio::test]
    async fn a_receiver_that_never_takes_it_is_given_up_after_the_attempts() {
        let (url, hits, _) = receiver(usize::MAX).await;
        assert!(!deliver(&url, &json!({}), 3, Duration::from_millis(1)).await);
        assert_eq!(hits.load(Ordering::SeqCst), 3);
        // Nobody listening: also given up, not an error of the run.
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let gone = format!("http://127.0.0.1:{port}/hook");
        assert!(!deliver(&gone, &json!({}), 2, Duration::from_millis(1)).await);
    }
}
