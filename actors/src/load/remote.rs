//! `load --target URL`: the same research or acquire conversations against a running `serve`
//! instance, over HTTP: create a thread, run and wait, answer each interrupt with
//! `command: {"resume": …}`, and read node executions from the server's `/metrics` before and
//! after.

use super::report::{distribution, LoadReport};
use super::LoadError;
use crate::bench::measure;
use serde_json::{json, Value};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Semaphore;

async fn node_executions(client: &reqwest::Client, base: &str, token: Option<&str>) -> u64 {
    let mut req = client.get(format!("{base}/metrics"));
    if let Some(t) = token {
        req = req.bearer_auth(t);
    }
    let Ok(resp) = req.send().await else { return 0 };
    let text = resp.text().await.unwrap_or_default();
    text.lines()
        .filter(|l| l.starts_with("planwright_node_executions_total"))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

async fn post(
    client: &reqwest::Client,
    url: String,
    token: Option<&str>,
    body: Value,
) -> Result<Value, String> {
    let mut req = client.post(url).json(&body);
    if let Some(t) = token {
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

/// Runs `conversations` conversations of `c` against `base`.
pub async fn run(
    base: &str,
    token: Option<String>,
    conversations: usize,
    concurrency: usize,
    c: Conversation,
    on_done: Arc<dyn Fn() + Send + Sync>,
) -> Result<LoadReport, LoadError> {
    let c = Arc::new(c);
    let client = reqwest::Client::new();
    let base = base.trim_end_matches('/').to_string();
    let before = node_executions(&client, &base, token.as_deref()).await;
    let latencies = Arc::new(Mutex::new(Vec::new()));
    let outcome = Arc::new(Mutex::new((
        0usize,
        0usize,
        0usize,
        std::collections::BTreeMap::<String, usize>::new(),
    )));
    let limit = Arc::new(Semaphore::new(concurrency.max(1)));
    let started = Instant::now();
    let mut tasks = Vec::new();
    for i in 0..conversations {
        let Ok(permit) = limit.clone().acquire_owned().await else {
            break;
        };
        let (client, base, token, c, latencies, outcome, on_done) = (
            client.clone(),
            base.clone(),
            token.clone(),
            c.clone(),
            latencies.clone(),
            outcome.clone(),
            on_done.clone(),
        );
        tasks.push(tokio::spawn(async move {
            let t0 = Instant::now();
            let r: Result<usize, String> = async {
                let thread = post(
                    &client,
                    format!("{base}/threads"),
                    token.as_deref(),
                    json!({}),
                )
                .await?;
                let tid = thread["thread_id"].as_str().unwrap_or_default().to_string();
                let url = format!("{base}/threads/{tid}/runs/wait");
                let mut v = post(
                    &client,
                    url.clone(),
                    token.as_deref(),
                    json!({"assistant_id": c.assistant, "input": (c.input)(i)}),
                )
                .await?;
                let mut resumes = 0;
                while v["status"] == "interrupted" {
                    if resumes == c.max_resumes {
                        return Err(format!("still interrupted after {resumes} answers"));
                    }
                    resumes += 1;
                    let answer = (c.answer)(i, &v["__interrupt__"][0]["value"]);
                    v = post(
                        &client,
                        url.clone(),
                        token.as_deref(),
                        json!({"assistant_id": c.assistant, "command": {"resume": answer}}),
                    )
                    .await?;
                }
                match v["status"].as_str() {
                    Some("failed") => return Err("run failed".into()),
                    Some("aborted") => return Err("run aborted".into()),
                    _ => {}
                }
                Ok(resumes)
            }
            .await;
            latencies
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push(t0.elapsed().as_secs_f64() * 1000.0);
            let mut o = outcome.lock().unwrap_or_else(|p| p.into_inner());
            match r {
                Ok(resumes) => {
                    o.0 += 1;
                    o.2 += resumes;
                }
                Err(e) => {
                    o.1 += 1;
                    *o.3.entry(e.chars().take(80).collect()).or_default() += 1;
                }
            }
            on_done();
            drop(permit);
        }));
    }
    for t in tasks {
        let _ = t.await;
    }
    let secs = started.elapsed().as_secs_f64().max(1e-9);
    let after = node_executions(&client, &base, token.as_deref()).await;
    let (completed, failed, resumes, errors) =
        std::mem::take(&mut *outcome.lock().unwrap_or_else(|p| p.into_inner()));
    let mut lat = std::mem::take(&mut *latencies.lock().unwrap_or_else(|p| p.into_inner()));
    let execs = after.saturating_sub(before);
    Ok(LoadReport {
        graph: format!("{} @ {base}", c.assistant),
        conversations,
        concurrency,
        completed,
        failed,
        resumes,
        wall_ms: secs * 1000.0,
        conversations_per_sec: (completed + failed) as f64 / secs,
        node_executions: execs,
        node_execs_per_sec: execs as f64 / secs,
        conversation_latency_ms: distribution(&mut lat),
        errors,
        peak_rss_kb: measure::rss_kb().map(|(_, p)| p).unwrap_or(0),
        ..LoadReport::default()
    })
}
