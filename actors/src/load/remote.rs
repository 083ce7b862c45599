//! `load --target URL [--target URL …]`: research or acquire conversations against running
//! `serve` replicas, over HTTP: create a thread, run and wait, answer each interrupt with
//! `command: {"resume": …}` (after the simulated person's think time), cancel the thread's runs
//! when the person abandons it. Conversations are spread over the replicas and fail over between
//! them ([`super::replicas`]); a run request whose replica went away is not sent twice: if the
//! thread already has the run, the conversation joins it on the replica it moved to. Each second
//! every replica's `/metrics` gives node executions, mailbox depths and, when it exports them,
//! its resident memory and CPU time (summed over the replicas).

use super::record::{Ended, Outcome};
use super::replicas::{Replicas, Reply, JOIN_WAIT};
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

impl ServerMetrics {
    /// Adds another replica's figures to these (mailbox depths by node; memory and CPU only
    /// where some replica exports them).
    pub fn add(&mut self, other: ServerMetrics) {
        let sum = |a: Option<u64>, b: Option<u64>| match (a, b) {
            (None, None) => None,
            (a, b) => Some(a.unwrap_or(0) + b.unwrap_or(0)),
        };
        self.node_executions += other.node_executions;
        for (node, depth) in other.mailboxes {
            *self.mailboxes.entry(node).or_default() += depth;
        }
        self.rss_kb = sum(self.rss_kb, other.rss_kb);
        self.cpu_us = sum(self.cpu_us, other.cpu_us);
    }
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

/// Conversations against a server's replicas.
pub struct RemoteConversations {
    client: reqwest::Client,
    replicas: Replicas,
    token: Option<String>,
    c: Conversation,
    executions0: u64,
    /// Conversation `i` runs on thread `{threads}-{i}`.
    threads: String,
}

impl RemoteConversations {
    /// Conversations of `c` against the replicas at `bases` (reads their `/metrics` once for
    /// the starting counts).
    pub async fn new(
        bases: &[String],
        token: Option<String>,
        c: Conversation,
        threads: String,
    ) -> Result<Arc<Self>, LoadError> {
        let client = reqwest::Client::builder()
            .build()
            .map_err(|e| LoadError::Usage(format!("--target: {e}")))?;
        let mut r = RemoteConversations {
            client,
            replicas: Replicas::new(bases).map_err(LoadError::Usage)?,
            token,
            c,
            executions0: 0,
            threads,
        };
        r.executions0 = r.metrics().await.map_or(0, |m| m.node_executions);
        Ok(Arc::new(r))
    }

    /// Every replica's `/metrics`, summed (`None` when no replica answered).
    async fn metrics(&self) -> Option<ServerMetrics> {
        let mut sum: Option<ServerMetrics> = None;
        for at in 0..self.replicas.len() {
            let mut req = self
                .client
                .get(format!("{}/metrics", self.replicas.base(at)))
                .timeout(Duration::from_secs(2));
            if let Some(t) = &self.token {
                req = req.bearer_auth(t);
            }
            let Ok(resp) = req.send().await else { continue };
            let Ok(text) = resp.text().await else {
                continue;
            };
            sum.get_or_insert_with(ServerMetrics::default)
                .add(parse_metrics(&text));
        }
        sum
    }

    fn request(&self, base: &str, get: bool, path: &str, body: &Value) -> reqwest::RequestBuilder {
        let url = format!("{base}{path}");
        let mut req = if get {
            self.client.get(url)
        } else {
            self.client.post(url).json(body)
        };
        if let Some(t) = &self.token {
            req = req.bearer_auth(t);
        }
        req
    }

    /// A request that is safe to send again (a read, or creating a fresh thread) to the
    /// conversation's replica `*at`, failing over when it is gone.
    async fn call(
        &self,
        at: &mut usize,
        get: bool,
        path: &str,
        body: Value,
    ) -> Result<Value, String> {
        match self
            .replicas
            .send(at, |base| self.request(base, get, path, &body))
            .await
        {
            Reply::Answered(status, v) if status < 400 => Ok(v),
            Reply::Answered(status, v) => Err(format!("HTTP {status}: {}", v["detail"])),
            Reply::Unreachable(e) | Reply::Gone(e) => Err(format!("transport: {e}")),
        }
    }

    /// `runs/wait` on thread `id`, whose `runs_before` earlier runs this conversation made. It is
    /// never sent twice blindly: when the replica is gone, the next replica is asked whether the
    /// thread has the run already (the lost replica took it before it went away) and the
    /// conversation joins that run; only a run the thread does not have is sent again.
    async fn run_wait(
        &self,
        at: &mut usize,
        id: &str,
        runs_before: usize,
        body: Value,
    ) -> Result<Value, String> {
        let path = format!("/threads/{id}/runs/wait");
        let mut last = String::new();
        for _ in 0..self.replicas.len() {
            match self
                .replicas
                .send_once(at, |base| self.request(base, false, &path, &body))
                .await
            {
                Reply::Answered(status, v) if status < 400 => return Ok(v),
                Reply::Answered(status, v) => {
                    return Err(format!("HTTP {status}: {}", v["detail"]))
                }
                Reply::Unreachable(e) | Reply::Gone(e) => last = e,
            }
            let runs = self
                .call(at, true, &format!("/threads/{id}/runs"), Value::Null)
                .await?;
            let runs = runs.as_array().cloned().unwrap_or_default();
            if runs.len() > runs_before {
                return self.join(at, id, &runs[0]).await;
            }
        }
        Err(format!("transport: every replica is gone ({last})"))
    }

    /// Waits for `run` (the thread's newest) where the conversation now is, then reads the
    /// thread's values as `runs/wait` would have answered them.
    async fn join(&self, at: &mut usize, id: &str, run: &Value) -> Result<Value, String> {
        if matches!(run["status"].as_str(), Some("pending" | "running")) {
            let rid = run["run_id"].as_str().unwrap_or_default();
            let join = format!("/threads/{id}/runs/{rid}/join");
            let reply = self
                .replicas
                .send(at, |base| {
                    self.request(base, true, &join, &Value::Null)
                        .timeout(JOIN_WAIT)
                })
                .await;
            match reply {
                Reply::Answered(s, _) if s < 400 => {}
                Reply::Answered(s, v) => return Err(format!("join: HTTP {s}: {}", v["detail"])),
                Reply::Unreachable(e) | Reply::Gone(e) => {
                    return Err(format!("join of a run taken by a lost replica: {e}"))
                }
            }
        }
        let state = self
            .call(at, true, &format!("/threads/{id}/state"), Value::Null)
            .await?;
        let mut v = state["values"].clone();
        if state["interrupts"]
            .as_array()
            .is_some_and(|a| !a.is_empty())
        {
            v["__interrupt__"] = state["interrupts"].clone();
            v["status"] = Value::String("interrupted".into());
        }
        Ok(v)
    }

    async fn body(
        &self,
        c: &mut Conv,
        tid: &Mutex<Option<(String, usize)>>,
        resumes: &mut usize,
        people: &mut Duration,
    ) -> Outcome {
        let r: Result<(), String> = async {
            let mut at = self.replicas.home(c.i);
            // A thread of its own name, created at most once wherever the request lands.
            let thread = self
                .call(
                    &mut at,
                    false,
                    "/threads",
                    json!({"thread_id": format!("{}-{}", self.threads, c.i), "if_exists": "do_nothing"}),
                )
                .await?;
            let id = thread["thread_id"].as_str().unwrap_or_default().to_string();
            *tid.lock().unwrap_or_else(|p| p.into_inner()) = Some((id.clone(), at));
            let mut runs = 0;
            let mut v = self
                .run_wait(
                    &mut at,
                    &id,
                    runs,
                    json!({"assistant_id": self.c.assistant, "input": (self.c.input)(c.i)}),
                )
                .await?;
            runs += 1;
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
                *tid.lock().unwrap_or_else(|p| p.into_inner()) = Some((id.clone(), at));
                v = self
                    .run_wait(
                        &mut at,
                        &id,
                        runs,
                        json!({"assistant_id": self.c.assistant, "command": {"resume": answer}}),
                    )
                    .await?;
                runs += 1;
            }
            match v["status"].as_str() {
                Some("failed") | Some("error") => Err("run failed".into()),
                Some("aborted") => Err("run aborted".into()),
                None | Some("") => Err(format!("the run left no result: {v}")),
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
    async fn cancel(&self, tid: &Mutex<Option<(String, usize)>>) {
        let Some((id, mut at)) = tid.lock().unwrap_or_else(|p| p.into_inner()).clone() else {
            return;
        };
        let Ok(runs) = self
            .call(&mut at, true, &format!("/threads/{id}/runs"), Value::Null)
            .await
        else {
            return;
        };
        for run in runs.as_array().into_iter().flatten() {
            if matches!(run["status"].as_str(), Some("pending" | "running")) {
                if let Some(rid) = run["run_id"].as_str() {
                    let _ = self
                        .call(
                            &mut at,
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
        let bases: Vec<&str> = (0..self.replicas.len())
            .map(|i| self.replicas.base(i))
            .collect();
        format!("{} @ {}", self.c.assistant, bases.join(", "))
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
                replicas: self.replicas.shares(),
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
