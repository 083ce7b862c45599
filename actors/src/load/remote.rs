//! `load --target URL`: research or acquire conversations against a running `serve` instance,
//! over HTTP: create a thread, run and wait, answer each interrupt with `command: {"resume": …}`
//! (after the simulated person's think time), cancel the thread's runs when the person abandons
//! it. Each second the server's `/metrics` gives node executions, mailbox depths and, when it
//! exports them, its resident memory and CPU time.

use super::record::{Ended, Outcome};
use super::schedule::{sleep_until, stopped, BoxFut, Conv, Conversations, Probe, Totals};
use super::LoadError;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

/// The resume value for an interrupt of conversation `i`, given the interrupt's value.
pub type Answer = Arc<dyn Fn(usize, &Value) -> Value + Send + Sync>;

/// What a conversation over HTTP is.
pub struct Conversation {
    /// The `assistant_id`.
    pub assistant: &'static str,
    /// The run input of conversation `i`.
    pub input: Arc<dyn Fn(usize) -> Value + Send + Sync>,
    /// The resume value for an interrupt of conversation `i` (given the interrupt's value).
    pub answer: Answer,
    /// More interrupts than this fail the conversation.
    pub max_resumes: usize,
}

/// A server's figures from its `/metrics` page.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ServerMetrics {
    /// `planwright_node_executions_total`, summed.
    pub node_executions: u64,
    /// `planwright_node_mailbox_depth` by node (summed over graphs).
    pub mailboxes: BTreeMap<String, u64>,
    /// `process_resident_memory_bytes`, in KiB.
    pub rss_kb: Option<u64>,
    /// `process_cpu_seconds_total`, in µs.
    pub cpu_us: Option<u64>,
}

/// Parses a Prometheus text page.
pub fn parse_metrics(text: &str) -> ServerMetrics {
    let mut m = ServerMetrics::default();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let Some((name_labels, value)) = line.rsplit_once(' ') else {
            continue;
        };
        let Ok(v) = value.trim().parse::<f64>() else {
            continue;
        };
        let (name, labels) = match name_labels.split_once('{') {
            Some((n, l)) => (n, l.trim_end_matches('}')),
            None => (name_labels, ""),
        };
        match name {
            "planwright_node_executions_total" => m.node_executions += v as u64,
            "planwright_node_mailbox_depth" => {
                let node = labels
                    .split(',')
                    .find_map(|kv| kv.trim().strip_prefix("node="))
                    .map(|n| n.trim_matches('"').to_string())
                    .unwrap_or_default();
                *m.mailboxes.entry(node).or_default() += v as u64;
            }
            "process_resident_memory_bytes" => m.rss_kb = Some((v / 1024.0) as u64),
            "process_cpu_seconds_total" => m.cpu_us = Some((v * 1e6) as u64),
            _ => {}
        }
    }
    m
}

/// Conversations against a server.
pub struct RemoteConversations {
    client: reqwest::Client,
    base: String,
    token: Option<String>,
    c: Conversation,
    executions0: u64,
}

impl RemoteConversations {
    /// Conversations of `c` against `base` (reads its `/metrics` once for the starting counts).
    pub async fn new(
        base: &str,
        token: Option<String>,
        c: Conversation,
    ) -> Result<Arc<Self>, LoadError> {
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| LoadError::Usage(format!("--target: {e}")))?;
        let mut r = RemoteConversations {
            client,
            base: base.trim_end_matches('/').to_string(),
            token,
            c,
            executions0: 0,
        };
        r.executions0 = r.metrics().await.map_or(0, |m| m.node_executions);
        Ok(Arc::new(r))
    }

    async fn metrics(&self) -> Option<ServerMetrics> {
        let mut req = self
            .client
            .get(format!("{}/metrics", self.base))
            .timeout(Duration::from_secs(2));
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let text = req.send().await.ok()?.text().await.ok()?;
        Some(parse_metrics(&text))
    }

    async fn call(&self, get: bool, path: &str, body: Value) -> Result<Value, String> {
        let url = format!("{}{path}", self.base);
        let mut req = if get {
            self.client.get(url)
        } else {
            self.client.post(url).json(&body)
        };
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        let resp = req.send().await.map_err(|e| format!("transport: {e}"))?;
        let status = resp.status().as_u16();
        let v: Value = resp
            .json()
            .await
            .map_err(|e| format!("bad response: {e}"))?;
        if status >= 400 {
            return Err(format!("HTTP {status}: {}", v["detail"]));
        }
        Ok(v)
    }

    async fn body(
        &self,
        c: &mut Conv,
        tid: &Mutex<Option<String>>,
        resumes: &mut usize,
        people: &mut Duration,
    ) -> Outcome {
        let r: Result<(), String> = async {
            let thread = self.call(false, "/threads", json!({})).await?;
            let id = thread["thread_id"].as_str().unwrap_or_default().to_string();
            *tid.lock().unwrap_or_else(|p| p.into_inner()) = Some(id.clone());
            let path = format!("/threads/{id}/runs/wait");
            let mut v = self
                .call(
                    false,
                    &path,
                    json!({"assistant_id": self.c.assistant, "input": (self.c.input)(c.i)}),
                )
                .await?;
            while v["status"] == "interrupted" {
                if *resumes == self.c.max_resumes {
                    return Err(format!("still interrupted after {resumes} answers"));
                }
                let paused = c.person.pauses_for.is_some() && *resumes == 0;
                let wait = c.person.before_answer();
                c.recorder.answered_after(wait, paused);
                if !wait.is_zero() {
                    *people += wait;
                    tokio::time::sleep(wait).await;
                }
                *resumes += 1;
                let answer = (self.c.answer)(c.i, &v["__interrupt__"][0]["value"]);
                v = self
                    .call(
                        false,
                        &path,
                        json!({"assistant_id": self.c.assistant, "command": {"resume": answer}}),
                    )
                    .await?;
            }
            match v["status"].as_str() {
                Some("failed") | Some("error") => Err("run failed".into()),
                Some("aborted") => Err("run aborted".into()),
                _ => Ok(()),
            }
        }
        .await;
        match r {
            Ok(()) => Outcome::Completed,
            Err(e) => Outcome::Failed(e),
        }
    }

    /// Cancels the thread's pending and running runs.
    async fn cancel(&self, tid: &Mutex<Option<String>>) {
        let Some(id) = tid.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return;
        };
        let Ok(runs) = self
            .call(true, &format!("/threads/{id}/runs"), Value::Null)
            .await
        else {
            return;
        };
        for run in runs.as_array().into_iter().flatten() {
            if matches!(run["status"].as_str(), Some("pending" | "running")) {
                if let Some(rid) = run["run_id"].as_str() {
                    let _ = self
                        .call(
                            false,
                            &format!("/threads/{id}/runs/{rid}/cancel"),
                            json!({}),
                        )
                        .await;
                }
            }
        }
    }
}

impl Conversations for RemoteConversations {
    fn name(&self) -> String {
        format!("{} @ {}", self.c.assistant, self.base)
    }

    fn run(self: Arc<Self>, mut c: Conv) -> BoxFut<Ended> {
        Box::pin(async move {
            let tid = Mutex::new(None);
            let (mut resumes, mut people) = (0, Duration::ZERO);
            let leaves = c.person.leaves_after.map(|d| Instant::now() + d);
            let mut stop = c.stop.clone();
            let outcome = tokio::select! {
                o = self.body(&mut c, &tid, &mut resumes, &mut people) => o,
                _ = sleep_until(leaves) => Outcome::Abandoned,
                _ = stopped(&mut stop) => Outcome::CutOff,
            };
            if matches!(outcome, Outcome::Abandoned | Outcome::CutOff) {
                self.cancel(&tid).await;
            }
            Ended {
                outcome,
                resumes,
                people_time: people,
                steps: None,
                non_model_us_per_node: None,
            }
        })
    }

    fn probe(self: Arc<Self>) -> BoxFut<Probe> {
        Box::pin(async move {
            let m = self.metrics().await.unwrap_or_default();
            Probe {
                mailboxes: m.mailboxes,
                remote_node_executions: Some(m.node_executions),
                server_rss_kb: m.rss_kb,
                server_cpu_us: m.cpu_us,
            }
        })
    }

    fn finish(self: Arc<Self>) -> BoxFut<Totals> {
        Box::pin(async move {
            let after = self.metrics().await.map_or(0, |m| m.node_executions);
            Totals {
                remote_node_executions: Some(after.saturating_sub(self.executions0)),
                ..Totals::default()
            }
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metrics_pages_are_read() {
        let page = "# TYPE planwright_node_executions_total counter\n\
            planwright_node_executions_total{graph=\"research\",node=\"create_plan\"} 10\n\
            planwright_node_executions_total{graph=\"acquire\",node=\"prepare\"} 5\n\
            planwright_node_mailbox_depth{graph=\"research\",node=\"execute_step\"} 3\n\
            planwright_node_mailbox_depth{graph=\"acquire\",node=\"execute_step\"} 1\n\
            process_resident_memory_bytes 10485760\n\
            process_cpu_seconds_total 1.5\n\
            garbage line\n";
        let m = parse_metrics(page);
        assert_eq!(m.node_executions, 15);
        assert_eq!(m.mailboxes["execute_step"], 4);
        assert_eq!(m.rss_kb, Some(10_240));
        assert_eq!(m.cpu_us, Some(1_500_000));
        assert_eq!(parse_metrics(""), ServerMetrics::default());
    }
}
