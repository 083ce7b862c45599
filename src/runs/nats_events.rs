//! Run event logs on NATS JetStream (`serve --events nats://…`): for deployments that already
//! run NATS and would rather not put every stream event through PostgreSQL.
//!
//! One stream, `PLANWRIGHT_RUN_EVENTS`, on subjects `planwright.run_events.<run>`, file storage,
//! kept 24 hours (`max_age`; JetStream deletes old streams, the run records do not). One message
//! per append: a JSON array of `[event, data]`, with the seq of its last event in the header
//! `Planwright-Last-Seq`. The append's ordering guarantee is JetStream's: the message is published
//! with `Nats-Expected-Last-Subject-Sequence` (the stream sequence of the run's last message), so
//! a second writer that appended in between makes it fail instead of interleaving, and with
//! `Nats-Msg-Id` `<run>:<after>`, so a publish retried after a lost acknowledgement is stored once.
//! Followers are woken by a core-NATS subscription on `planwright.run_events.>` (JetStream's
//! messages are delivered to it too). A follower asking for a stream that is not being published
//! (`request_stream`) sends an empty core-NATS message on `planwright.run_follow.<run>`, outside
//! the stream's subjects (nothing is stored), which wakes the run's request watchers on every
//! replica.
//!
//! The writer check (only the lease holder appends) reads the lease from the run store before
//! publishing: unlike PostgreSQL's log, where the check and the append are one transaction, a
//! replica that loses its lease between the two can still add one batch, once — see
//! docs/deployment.md.

use super::events::{LogWatch, RunEventLog, StreamEvent, Watchers};
use super::{RunStore, RunStoreError};
use async_nats::jetstream::{self, context::PublishErrorKind, message::PublishMessage, stream};
use async_trait::async_trait;
use dashmap::DashMap;
use futures::StreamExt;
use std::sync::Arc;
use std::time::Duration;

/// The JetStream stream every replica shares.
pub const STREAM: &str = "PLANWRIGHT_RUN_EVENTS";
const PREFIX: &str = "planwright.run_events";
/// Core-NATS subjects (not stored) on which followers ask for a run's stream.
const FOLLOW_PREFIX: &str = "planwright.run_follow";
const LAST_SEQ: &str = "Planwright-Last-Seq";

/// Run event logs in NATS JetStream.
pub struct NatsRunEvents {
    client: async_nats::Client,
    js: jetstream::Context,
    stream: stream::Stream,
    watchers: Arc<Watchers>,
    /// Followers asking for a run's stream (messages on [`FOLLOW_PREFIX`]).
    requests: Arc<Watchers>,
    leases: Option<Arc<dyn RunStore>>,
    /// Per run, the batches read so far as (seq of its last event, stream sequence): a read
    /// after `n` starts at the batch holding `n + 1` instead of the run's first message.
    index: DashMap<String, Vec<(u64, u64)>>,
    listener: tokio::task::JoinHandle<()>,
}

impl Drop for NatsRunEvents {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

fn be(op: &'static str) -> impl Fn(Box<dyn std::error::Error + Send + Sync>) -> RunStoreError {
    move |e| RunStoreError::Backend { op, source: e }
}

/// The subject token for a run id: its characters that NATS subjects allow, the rest escaped.
fn token(run_id: &str) -> String {
    let mut t = String::with_capacity(run_id.len());
    for b in run_id.bytes() {
        if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
            t.push(b as char);
        } else {
            t.push_str(&format!("~{b:02x}"));
        }
    }
    if t.is_empty() {
        t.push('~');
    }
    t
}

/// The run id a subject token stands for.
fn run_of(token: &str) -> Option<String> {
    let mut out = Vec::with_capacity(token.len());
    let b = token.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'~' {
            if i + 1 == b.len() {
                i += 1;
                continue;
            }
            let hex = token.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

fn subject(run_id: &str) -> String {
    format!("{PREFIX}.{}", token(run_id))
}

impl NatsRunEvents {
    /// Connects to the NATS server at `url` (`nats://host:port`), creates the stream if needed
    /// and starts listening. With `leases`, appends by a writer are checked against the run's
    /// lease holder there.
    pub async fn connect(
        url: &str,
        leases: Option<Arc<dyn RunStore>>,
    ) -> Result<Self, RunStoreError> {
        let client = async_nats::connect(url)
            .await
            .map_err(|e| RunStoreError::BadUrl {
                url: url.to_string(),
                reason: format!("cannot connect to NATS: {e}"),
            })?;
        let js = jetstream::new(client.clone());
        let stream = js
            .get_or_create_stream(stream::Config {
                name: STREAM.to_string(),
                subjects: vec![format!("{PREFIX}.>")],
                max_age: Duration::from_secs(24 * 3600),
                storage: stream::StorageType::File,
                allow_direct: true,
                duplicate_window: Duration::from_secs(120),
                ..Default::default()
            })
            .await
            .map_err(|e| be("create the JetStream stream")(e.into()))?;
        let appended = client
            .subscribe(format!("{PREFIX}.>"))
            .await
            .map_err(|e| be("subscribe")(e.into()))?;
        let asked = client
            .subscribe(format!("{FOLLOW_PREFIX}.>"))
            .await
            .map_err(|e| be("subscribe")(e.into()))?;
        let watchers = Arc::new(Watchers::default());
        let requests = Arc::new(Watchers::default());
        let (w, r) = (watchers.clone(), requests.clone());
        let listener = tokio::spawn(async move {
            let mut both = futures::stream::select(appended, asked);
            while let Some(m) = both.next().await {
                let subject = m.subject.as_str();
                for (prefix, wake) in [(PREFIX, &w), (FOLLOW_PREFIX, &r)] {
                    if let Some(run) = subject
                        .strip_prefix(prefix)
                        .and_then(|t| t.strip_prefix('.'))
                        .and_then(run_of)
                    {
                        wake.wake(&run);
                    }
                }
            }
        });
        Ok(Self {
            client,
            js,
            stream,
            watchers,
            requests,
            leases,
            index: DashMap::new(),
            listener,
        })
    }

    /// The run's last message: its stream sequence, the seq of its last event, its payload;
    /// (0, 0, None) when the run has none.
    async fn last(&self, run_id: &str) -> Result<(u64, u64, Option<Vec<u8>>), RunStoreError> {
        match self
            .stream
            .get_last_raw_message_by_subject(&subject(run_id))
            .await
        {
            Ok(m) => {
                let last = m
                    .headers
                    .get(LAST_SEQ)
                    .and_then(|v| v.as_str().parse().ok())
                    .ok_or_else(|| RunStoreError::Corrupt {
                        run_id: run_id.to_string(),
                        reason: format!("stream message {} has no {LAST_SEQ} header", m.sequence),
                    })?;
                Ok((m.sequence, last, Some(m.payload.to_vec())))
            }
            Err(e) if e.kind() == stream::LastRawMessageErrorKind::NoMessageFound => {
                Ok((0, 0, None))
            }
            Err(e) => Err(be("read the run's last event")(e.into())),
        }
    }
}

fn encode(events: &[(String, String)]) -> Vec<u8> {
    serde_json::to_vec(&events.iter().map(|(n, d)| [n, d]).collect::<Vec<_>>()).unwrap_or_default()
}

#[async_trait]
impl RunEventLog for NatsRunEvents {
    fn backend_name(&self) -> &'static str {
        "nats"
    }

    async fn append(
        &self,
        run_id: &str,
        writer: Option<&str>,
        after: u64,
        events: Vec<(String, String)>,
    ) -> Result<u64, RunStoreError> {
        let refused = |reason: String| RunStoreError::AppendRefused {
            run_id: run_id.to_string(),
            reason,
        };
        if let (Some(w), Some(leases)) = (writer, &self.leases) {
            let holder = leases.lease_holder(run_id).await?;
            if holder.as_deref() != Some(w) {
                return Err(refused(format!(
                    "its lease is held by {}, not by this writer",
                    holder.as_deref().unwrap_or("nobody")
                )));
            }
        }
        let payload = encode(&events);
        let last = after + events.len() as u64;
        let (stream_seq, stored_last, stored) = self.last(run_id).await?;
        if stored_last != after {
            // A retry of a batch whose acknowledgement was lost finds it stored.
            if stored_last == last && stored.as_deref() == Some(payload.as_slice()) {
                return Ok(last);
            }
            return Err(refused(super::events::not_at_the_end(after, stored_last)));
        }
        let msg = PublishMessage::build()
            .payload(payload.into())
            .header(LAST_SEQ, last.to_string().as_str())
            .expected_last_subject_sequence(stream_seq)
            .message_id(format!("{run_id}:{after}"));
        let ack = self
            .js
            .send_publish(subject(run_id), msg)
            .await
            .map_err(|e| be("publish run events")(e.into()))?;
        match ack.await {
            Ok(_) => Ok(last),
            Err(e) if e.kind() == PublishErrorKind::WrongLastSequence => {
                Err(refused("another writer appended first".into()))
            }
            Err(e) => Err(be("publish run events")(e.into())),
        }
    }

    async fn read(
        &self,
        run_id: &str,
        after: u64,
        limit: usize,
    ) -> Result<Vec<StreamEvent>, RunStoreError> {
        let subj = subject(run_id);
        // Start at the first batch known to hold an event after `after`.
        let mut next = self.index.get(run_id).map_or(0, |batches| {
            batches
                .iter()
                .find(|(last, _)| *last > after)
                .or(batches.last())
                .map_or(0, |(_, seq)| *seq)
        });
        let mut out = Vec::new();
        while out.len() < limit {
            let m = match self
                .stream
                .direct_get_next_for_subject(subj.clone(), Some(next.max(1)))
                .await
            {
                Ok(m) => m,
                Err(e) if e.kind() == stream::DirectGetErrorKind::NotFound => break,
                Err(e) => return Err(be("read run events")(e.into())),
            };
            let bad = |reason: String| RunStoreError::Corrupt {
                run_id: run_id.to_string(),
                reason: format!("stream message {}: {reason}", m.sequence),
            };
            let last: u64 = m
                .headers
                .get(LAST_SEQ)
                .and_then(|v| v.as_str().parse().ok())
                .ok_or_else(|| bad(format!("no {LAST_SEQ} header")))?;
            let batch: Vec<(String, String)> =
                serde_json::from_slice(&m.payload).map_err(|e| bad(e.to_string()))?;
            let first = last + 1 - batch.len() as u64;
            {
                if self.index.len() > 10_000 {
                    self.index.clear();
                }
                let mut idx = self.index.entry(run_id.to_string()).or_default();
                if idx.last().is_none_or(|(l, _)| *l < last) {
                    idx.push((last, m.sequence));
                }
            }
            for (i, (event, data)) in batch.into_iter().enumerate() {
                let seq = first + i as u64;
                if seq > after && out.len() < limit {
                    out.push(StreamEvent { seq, event, data });
                }
            }
            next = m.sequence + 1;
        }
        Ok(out)
    }

    async fn last_seq(&self, run_id: &str) -> Result<u64, RunStoreError> {
        Ok(self.last(run_id).await?.1)
    }

    fn watch(&self, run_id: &str) -> LogWatch {
        self.watchers.watch(run_id)
    }

    async fn request_stream(&self, run_id: &str) -> Result<(), RunStoreError> {
        self.client
            .publish(
                format!("{FOLLOW_PREFIX}.{}", token(run_id)),
                Default::default(),
            )
            .await
            .map_err(|e| be("ask for a run's stream")(e.into()))?;
        self.client
            .flush()
            .await
            .map_err(|e| be("ask for a run's stream")(e.into()))
    }

    fn watch_requests(&self, run_id: &str) -> LogWatch {
        self.requests.watch(run_id)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_become_subject_tokens_and_back() {
        for id in ["0b5c-9f", "a.b*c>d e", "", "é~x"] {
            let t = token(id);
            assert!(t
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"-_~".contains(&b)));
            assert_eq!(run_of(&t).as_deref(), Some(id), "{id:?} → {t}");
        }
    }
}
