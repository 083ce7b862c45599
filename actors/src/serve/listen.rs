//! Accepting connections with limits, so a client that never finishes a request cannot hold the
//! server: a cap on open connections (when every slot is taken, a new connection takes the place
//! of the oldest one that has not sent a whole request header yet, `half_open`; with
//! none such, the accept loop waits for a free slot, so extra clients queue in the kernel's
//! backlog instead of being refused), a header read timeout that also
//! bounds how long an idle keep-alive connection stays open (hyper starts it again after every
//! response), a body read timeout (tower-http), and a cap on the requests one client address has
//! in progress at once (429). Connections are served by hyper-util's HTTP/1 + HTTP/2 builder and
//! shut down gracefully.
//!
//! The health endpoints ([`UNCAPPED_PATHS`]: `/ok`, `/metrics`) are outside the per-client cap:
//! while the database is down, requests from one address pile up waiting for it, and a health
//! probe from that same address (a load balancer, a sidecar) must still hear the truth (503
//! "storage unreachable"), not 429.

use super::errors::ApiError;
use axum::extract::Request;
use axum::http::StatusCode;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use axum::Router;
use dashmap::DashMap;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto::Builder;
use hyper_util::service::TowerToHyperService;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;
use tokio::net::TcpListener;
use tokio::sync::Semaphore;
use tower::ServiceExt;

/// The server's connection and request limits (`serve` flags; see docs/server.md).
#[derive(Clone, Debug)]
pub struct Limits {
    /// Time a client has to send a request's headers, and the longest an idle keep-alive
    /// connection stays open between requests.
    pub header_timeout: Duration,
    /// Time a client has to send a request's body.
    pub body_timeout: Duration,
    /// Connections open at once; when all are taken, a new one takes the place of the oldest
    /// half-open one (`half_open`), or waits in the listen backlog.
    pub max_connections: usize,
    /// Requests one client address may have in progress at once; more get 429.
    pub max_requests_per_client: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            header_timeout: Duration::from_secs(10),
            body_timeout: Duration::from_secs(30),
            max_connections: 1024,
            max_requests_per_client: 64,
        }
    }
}

/// Parses a duration flag: `500ms`, `10s`, `2m`, or a bare number of seconds.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    let d = planwright::duration::parse(s, planwright::duration::BareUnit::Seconds)
        .ok_or_else(|| format!("`{s}` is not a duration (e.g. 500ms, 10s, 2m)"))?;
    if d.is_zero() || d >= Duration::from_secs(86_400) {
        return Err(format!("`{s}` must be more than 0 and less than a day"));
    }
    Ok(d)
}

/// The client address of a request, set per connection.
#[derive(Clone, Copy, Debug)]
pub struct ClientAddr(pub SocketAddr);

/// Requests in progress per client address.
#[derive(Default)]
pub struct InFlight {
    by_client: DashMap<IpAddr, usize>,
}

struct Slot {
    table: Arc<InFlight>,
    ip: IpAddr,
}

impl Drop for Slot {
    fn drop(&mut self) {
        let mut gone = false;
        if let Some(mut n) = self.table.by_client.get_mut(&self.ip) {
            *n = n.saturating_sub(1);
            gone = *n == 0;
        }
        if gone {
            self.table.by_client.remove_if(&self.ip, |_, n| *n == 0);
        }
    }
}

/// The paths the per-client cap does not count or refuse: the health endpoints, which answer
/// quickly on their own (`/ok` bounds its storage probe) and must answer while other requests
/// from the same address are stuck.
pub const UNCAPPED_PATHS: [&str; 2] = ["/ok", "/metrics"];

/// Middleware: at most `limit` requests of one client address in progress (until the response's
/// headers are sent), else 429 naming the limit. [`UNCAPPED_PATHS`] are neither counted nor
/// refused.
pub async fn per_client(table: Arc<InFlight>, limit: usize, req: Request, next: Next) -> Response {
    if UNCAPPED_PATHS.contains(&req.uri().path()) {
        return next.run(req).await;
    }
    let Some(ClientAddr(addr)) = req.extensions().get::<ClientAddr>().copied() else {
        return next.run(req).await;
    };
    let ip = addr.ip();
    {
        let mut n = table.by_client.entry(ip).or_insert(0);
        if *n >= limit {
            return ApiError(
                StatusCode::TOO_MANY_REQUESTS,
                format!("more than {limit} requests in progress from {ip}; retry when one ends"),
            )
            .into_response();
        }
        *n += 1;
    }
    let _slot = Slot { table, ip };
    next.run(req).await
}

/// Serves `app` on `listener` with `limits` until `shutdown` resolves, then stops accepting and
/// waits (at most `drain`) for open connections to finish.
pub async fn serve(
    listener: TcpListener,
    app: Router,
    limits: &Limits,
    shutdown: impl Future<Output = ()>,
    drain: Duration,
) -> std::io::Result<()> {
    let app = app.layer(tower_http::timeout::RequestBodyTimeoutLayer::new(
        limits.body_timeout,
    ));
    let slots = Arc::new(Semaphore::new(limits.max_connections.max(1)));
    let graceful = hyper_util::server::graceful::GracefulShutdown::new();
    let mut builder = Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(limits.header_timeout)
        .keep_alive(true);
    builder
        .http2()
        .timer(TokioTimer::new())
        .keep_alive_interval(Some(limits.header_timeout))
        .keep_alive_timeout(limits.header_timeout);
    let builder = Arc::new(builder);
    let open = Arc::new(super::half_open::Connections::default());
    tokio::pin!(shutdown);
    loop {
        let (stream, peer) = tokio::select! {
            _ = &mut shutdown => break,
            a = listener.accept() => match a {
                Ok(a) => a,
                Err(e) => {
                    // Out of file descriptors and the like: wait a moment, keep serving.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
        };
        let permit = match slots.clone().try_acquire_owned() {
            Ok(p) => p,
            Err(_) => {
                // Full: the oldest half-open connection gives its place up; with none, this
                // one waits for a connection to end.
                if open.close_oldest_half_open() {
                    tracing::debug!(peer = %peer, "closed the oldest half-open connection to make room");
                }
                tokio::select! {
                    _ = &mut shutdown => break,
                    p = slots.clone().acquire_owned() => match p {
                        Ok(p) => p,
                        Err(_) => break,
                    },
                }
            }
        };
        let _ = stream.set_nodelay(true);
        let registered = open.register();
        let conn_state = registered.conn.clone();
        let svc = app
            .clone()
            .map_request(move |mut req: hyper::Request<hyper::body::Incoming>| {
                conn_state.started();
                req.extensions_mut().insert(ClientAddr(peer));
                req
            });
        let conn = builder
            .serve_connection_with_upgrades(TokioIo::new(stream), TowerToHyperService::new(svc))
            .into_owned();
        let conn = graceful.watch(conn);
        tokio::spawn(async move {
            tokio::select! {
                ended = conn => if let Err(e) = ended {
                    tracing::debug!(peer = %peer, error = %e, "connection ended with an error");
                },
                () = registered.conn.closed() => {}
            }
            drop(registered);
            drop(permit);
        });
    }
    drop(listener);
    if tokio::time::timeout(drain, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("connections still open after {drain:?}; stopping anyway");
    }
    Ok(())
}
