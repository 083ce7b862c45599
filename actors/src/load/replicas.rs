//! `load --target A --target B …`: the replicas of one service, and failing over between them as a
//! client behind a load balancer would.
//!
//! Conversation `i` starts on replica `i mod n` (round robin) and stays there. A request that
//! cannot reach its replica — the connection is refused or reset, the request times out at the
//! transport, or the replica answers 502/503/504 (stopping, or a proxy in front of a dead one) —
//! goes to the next replica, and the conversation stays on the one that answered: a **failover**.
//! Each replica's share (conversations started there, requests it answered) and the failovers away
//! from it are counted for the report.

use serde::Serialize;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

/// One replica's figures over a run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct ReplicaShare {
    /// Its base URL.
    pub url: String,
    /// Conversations that started on it.
    pub conversations: u64,
    /// Requests it answered (any status).
    pub requests: u64,
    /// Requests that could not reach it and went to another replica.
    pub failovers: u64,
}

#[derive(Debug, Default)]
struct Counters {
    conversations: AtomicU64,
    requests: AtomicU64,
    failovers: AtomicU64,
}

/// Why a request failed on every replica, or how one replica answered.
#[derive(Debug)]
pub enum Reply {
    /// A replica answered: its status and JSON body (`null` when the body was not JSON).
    Answered(u16, serde_json::Value),
    /// No replica could be reached; the last transport error.
    Unreachable(String),
    /// The replica was gone and the request was not resent (`send_once`): the conversation moved
    /// to the next replica; what the lost one did with the request is for the caller to find out.
    Gone(String),
}

/// The replicas of the service `load` drives.
#[derive(Debug)]
pub struct Replicas {
    bases: Vec<String>,
    counters: Vec<Counters>,
}

impl Replicas {
    /// The replicas at these base URLs (at least one; each `http://` or `https://`).
    pub fn new(urls: &[String]) -> Result<Self, String> {
        if urls.is_empty() {
            return Err("--target: give at least one URL".into());
        }
        let mut bases = Vec::with_capacity(urls.len());
        for u in urls {
            let u = u.trim().trim_end_matches('/');
            if !(u.starts_with("http://") || u.starts_with("https://")) {
                return Err(format!(
                    "--target `{u}`: expected an http:// or https:// URL"
                ));
            }
            if bases.iter().any(|b: &String| b == u) {
                return Err(format!("--target `{u}` is given twice"));
            }
            bases.push(u.to_string());
        }
        let counters = bases.iter().map(|_| Counters::default()).collect();
        Ok(Self { bases, counters })
    }

    /// How many replicas.
    pub fn len(&self) -> usize {
        self.bases.len()
    }

    /// Always false: there is at least one replica.
    pub fn is_empty(&self) -> bool {
        self.bases.is_empty()
    }

    /// The base URL of replica `at`.
    pub fn base(&self, at: usize) -> &str {
        &self.bases[at % self.bases.len()]
    }

    /// The replica conversation `i` starts on (counted as its share).
    pub fn home(&self, i: usize) -> usize {
        let at = i % self.bases.len();
        self.counters[at]
            .conversations
            .fetch_add(1, Ordering::Relaxed);
        at
    }

    /// Sends the request `build(base)` makes to replica `*at`, failing over to the next ones
    /// (each tried once) when it cannot be reached; `*at` becomes the replica that answered.
    pub async fn send(
        &self,
        at: &mut usize,
        build: impl Fn(&str) -> reqwest::RequestBuilder,
    ) -> Reply {
        let mut last = String::new();
        for _ in 0..self.bases.len() {
            let i = *at % self.bases.len();
            match build(&self.bases[i]).send().await {
                Ok(resp) if !is_gone(resp.status().as_u16()) => {
                    self.counters[i].requests.fetch_add(1, Ordering::Relaxed);
                    let status = resp.status().as_u16();
                    let body = resp.json().await.unwrap_or(serde_json::Value::Null);
                    return Reply::Answered(status, body);
                }
                Ok(resp) => last = format!("{} answered HTTP {}", self.bases[i], resp.status()),
                Err(e) => last = format!("{}: {e}", self.bases[i]),
            }
            self.counters[i].failovers.fetch_add(1, Ordering::Relaxed);
            *at = (i + 1) % self.bases.len();
        }
        Reply::Unreachable(last)
    }

    /// Sends `build(base)` to replica `*at` only. When that replica is gone the request is not
    /// resent — a request that starts work must not start it twice — and `*at` moves to the next
    /// replica ([`Reply::Gone`]).
    pub async fn send_once(
        &self,
        at: &mut usize,
        build: impl Fn(&str) -> reqwest::RequestBuilder,
    ) -> Reply {
        let i = *at % self.bases.len();
        let why = match build(&self.bases[i]).send().await {
            Ok(resp) if !is_gone(resp.status().as_u16()) => {
                self.counters[i].requests.fetch_add(1, Ordering::Relaxed);
                let status = resp.status().as_u16();
                let body = resp.json().await.unwrap_or(serde_json::Value::Null);
                return Reply::Answered(status, body);
            }
            Ok(resp) => format!("{} answered HTTP {}", self.bases[i], resp.status()),
            Err(e) => format!("{}: {e}", self.bases[i]),
        };
        self.counters[i].failovers.fetch_add(1, Ordering::Relaxed);
        *at = (i + 1) % self.bases.len();
        Reply::Gone(why)
    }

    /// Each replica's figures so far.
    pub fn shares(&self) -> Vec<ReplicaShare> {
        self.bases
            .iter()
            .zip(&self.counters)
            .map(|(url, c)| ReplicaShare {
                url: url.clone(),
                conversations: c.conversations.load(Ordering::Relaxed),
                requests: c.requests.load(Ordering::Relaxed),
                failovers: c.failovers.load(Ordering::Relaxed),
            })
            .collect()
    }
}

/// The statuses a load balancer would treat as "this replica is gone": try another.
fn is_gone(status: u16) -> bool {
    matches!(status, 502..=504)
}

/// How long a conversation waits to join a run that was in flight on a replica that went away.
pub const JOIN_WAIT: Duration = Duration::from_secs(120);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets_are_checked_and_conversations_go_round_robin() {
        assert!(Replicas::new(&[]).is_err());
        assert!(Replicas::new(&["localhost:1".into()])
            .unwrap_err()
            .contains("http://"));
        assert!(Replicas::new(&["http://a".into(), "http://a/".into()])
            .unwrap_err()
            .contains("twice"));
        let r = Replicas::new(&["http://a/".into(), "http://b".into()]).unwrap();
        assert_eq!(r.base(0), "http://a");
        assert_eq!(
            (0..5).map(|i| r.home(i)).collect::<Vec<_>>(),
            [0, 1, 0, 1, 0]
        );
        let shares = r.shares();
        assert_eq!((shares[0].conversations, shares[1].conversations), (3, 2));
        assert!(is_gone(503) && is_gone(502) && !is_gone(500) && !is_gone(409));
    }

    #[tokio::test]
    async fn a_request_to_a_replica_that_is_gone_goes_to_the_next() {
        // A port nothing listens on, then a real server.
        let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let dead_url = format!("http://{}", dead.local_addr().unwrap());
        drop(dead);
        let live = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let live_url = format!("http://{}", live.local_addr().unwrap());
        tokio::spawn(async move {
            let app = axum::Router::new().route(
                "/ok",
                axum::routing::get(|| async { axum::Json(serde_json::json!({"ok": true})) }),
            );
            let _ = axum::serve(live, app).await;
        });
        let r = Replicas::new(&[dead_url.clone(), live_url]).unwrap();
        let client = reqwest::Client::new();
        let mut at = r.home(0);
        match r.send(&mut at, |b| client.get(format!("{b}/ok"))).await {
            Reply::Answered(200, v) => assert_eq!(v["ok"], true),
            other => panic!("{other:?}"),
        }
        assert_eq!(at, 1, "the conversation stays where it was answered");
        let s = r.shares();
        assert_eq!((s[0].failovers, s[0].requests), (1, 0));
        assert_eq!((s[1].failovers, s[1].requests), (0, 1));
        let only_dead = Replicas::new(&[dead_url]).unwrap();
        let mut at = 0;
        assert!(matches!(
            only_dead
                .send(&mut at, |b| client.get(format!("{b}/ok")))
                .await,
            Reply::Unreachable(_)
        ));
    }
}
