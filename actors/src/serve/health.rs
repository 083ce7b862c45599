//! `GET /ok`: readiness, with one storage probe at a time however many callers ask.

use super::AppState;
use axum::extract::State;
use axum::http::StatusCode;
use axum::Json;
use serde_json::{json, Value};
use std::sync::Arc;

/// How long `/ok` waits for its storage probe: a database that does not answer within this is
/// reported unreachable, so a health check hears back quickly even while the database stalls
/// (or every pooled connection is held by requests waiting for it).
pub const OK_PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(2);

/// `GET /ok`: readiness. 200 `{"ok": true}` once the threads a stopped server left mid-run have
/// been picked up and the storage answers; 503 with `status` `recovering` or `storage
/// unreachable` (and why) before that, so a load balancer sends nothing here yet. The storage
/// probe is one round trip (`Checkpointer::ping`), bounded by [`OK_PROBE_TIMEOUT`]; the per-client
/// request cap does not apply here ([`super::listen::UNCAPPED_PATHS`]), so probes go through
/// [`ProbeGate`]: however many callers ask at once, storage sees one probe at a time. Why the storage is
/// unreachable (`detail`) goes only to an admin (the `--token` holder, an admin of the token file
/// or a JWT; anyone, with auth off): another user or a caller without a token hears the status
/// alone.
pub async fn ok(
    State(state): State<Arc<AppState>>,
    caller: Option<axum::Extension<super::auth::Principal>>,
) -> (StatusCode, Json<Value>) {
    if !state.recovered.load(std::sync::atomic::Ordering::Acquire) {
        return (
            StatusCode::SERVICE_UNAVAILABLE,
            Json(json!({"ok": false, "status": "recovering"})),
        );
    }
    let probe = state
        .ok_probe
        .probe(|| async {
            match tokio::time::timeout(OK_PROBE_TIMEOUT, state.checkpointer.ping()).await {
                Ok(answer) => answer.map_err(|e| planwright::ErrorChain(&e).to_string()),
                Err(_) => Err(format!(
                    "no answer to the storage probe within {OK_PROBE_TIMEOUT:?}"
                )),
            }
        })
        .await;
    match probe {
        Ok(()) => (StatusCode::OK, Json(json!({"ok": true}))),
        Err(e) => {
            tracing::warn!(error = %e, "readiness: storage unreachable");
            let mut body = json!({"ok": false, "status": "storage unreachable"});
            // The error's causes name the database, its host and port: an operator's business.
            if caller.is_some_and(|c| c.admin) {
                body["detail"] = e.into();
            }
            (StatusCode::SERVICE_UNAVAILABLE, Json(body))
        }
    }
}

/// `/ok`'s storage probes, one at a time. `/ok` is outside the per-client cap, so without this
/// a caller could send thousands at once and each would take a pooled connection (for up to
/// [`OK_PROBE_TIMEOUT`] while the database is down) from the requests that need one. A caller
/// takes the answer of a probe that ended after it arrived (as fresh as its own would be), and
/// otherwise probes itself while the others wait.
#[derive(Default)]
pub struct ProbeGate {
    /// When the last probe ended, and its answer.
    last: tokio::sync::Mutex<Option<(tokio::time::Instant, Result<(), String>)>>,
}

impl ProbeGate {
    /// The answer of `probe`, or of one that ended since this call began.
    pub async fn probe<F, Fut>(&self, probe: F) -> Result<(), String>
    where
        F: FnOnce() -> Fut,
        Fut: std::future::Future<Output = Result<(), String>>,
    {
        let arrived = tokio::time::Instant::now();
        let mut last = self.last.lock().await;
        if let Some((ended, answer)) = &*last {
            if *ended >= arrived {
                return answer.clone();
            }
        }
        let answer = probe().await;
        *last = Some((tokio::time::Instant::now(), answer.clone()));
        answer
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};

    #[tokio::test(start_paused = true)]
    async fn callers_of_ok_at_once_share_one_storage_probe() {
        let gate = Arc::new(ProbeGate::default());
        let probes = Arc::new(AtomicUsize::new(0));
        // A stalled database: each probe takes the whole timeout and fails.
        let ask = |gate: Arc<ProbeGate>, probes: Arc<AtomicUsize>| async move {
            gate.probe(|| async {
                probes.fetch_add(1, Ordering::SeqCst);
                tokio::time::sleep(OK_PROBE_TIMEOUT).await;
                Err("no answer".to_string())
            })
            .await
        };
        let callers: Vec<_> = (0..200)
            .map(|_| tokio::spawn(ask(gate.clone(), probes.clone())))
            .collect();
        for c in callers {
            assert_eq!(c.await.unwrap(), Err("no answer".to_string()));
        }
        // The first probes; the others arrived before it ended and share its answer (a caller
        // whose task ran after it started probes once more at most).
        assert!(probes.load(Ordering::SeqCst) <= 2, "{probes:?}");
        // A caller after that probe ended probes anew: an answer is never older than its call.
        let n = probes.load(Ordering::SeqCst);
        tokio::time::advance(std::time::Duration::from_secs(1)).await;
        let fresh = gate.probe(|| async { Ok(()) }).await;
        assert_eq!(fresh, Ok(()));
        assert_eq!(probes.load(Ordering::SeqCst), n);
    }
}
