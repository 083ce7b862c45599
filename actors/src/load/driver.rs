//! The load driver for any graph: runs N conversations on an engine, at most C at a time, answers
//! their interrupts, and records what the report needs from each run's event stream (per-node
//! work and mailbox wait, per-conversation latency, time inside model-calling nodes).

use super::report::{distribution, LoadReport, NodeFigures};
use crate::bench::measure;
use planwright::runtime::Resume;
use planwright::{Engine, Interrupt, RunEvent, RunOptions, RunStatus, ThreadId};
use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex};
use std::time::Instant;
use tokio::sync::Semaphore;

/// How a workload answers an interrupt of conversation `i` (`None`: leave the thread paused).
pub type Answer = Arc<dyn Fn(usize, &[Interrupt]) -> Option<Resume> + Send + Sync>;

/// What a load run is told about the graph and its conversations.
pub struct Workload<S: planwright::State> {
    /// A name for the report.
    pub graph: String,
    /// Conversations to run.
    pub conversations: usize,
    /// At most this many at once.
    pub concurrency: usize,
    /// Thread id prefix (unique per load run when threads are stored).
    pub thread_prefix: String,
    /// The input of conversation `i`.
    pub input: Arc<dyn Fn(usize) -> S::Update + Send + Sync>,
    /// The answer to an interrupt of conversation `i` (`None`: leave the thread paused).
    pub answer: Answer,
    /// Nodes whose time is model time (excluded from the runtime's overhead).
    pub model_nodes: HashSet<String>,
    /// Called after each finished conversation (drives the progress bar).
    pub on_done: Arc<dyn Fn() + Send + Sync>,
}

#[derive(Default)]
struct Samples {
    /// Per node: (work µs, mailbox wait µs) per execution.
    nodes: BTreeMap<String, (Vec<f64>, Vec<f64>)>,
    /// Per conversation: wall ms.
    conversations: Vec<f64>,
    /// Per conversation: (wall − model-node time) / node executions, µs.
    overhead: Vec<f64>,
    /// Executions per second over time: (second since start, executions finished in it).
    timeline: BTreeMap<u64, u64>,
    completed: usize,
    failed: usize,
    interrupted: usize,
    resumes: usize,
    errors: BTreeMap<String, usize>,
    node_executions: u64,
}

/// Runs the workload and measures it.
pub async fn run<S: planwright::State>(engine: &Engine<S>, w: Workload<S>) -> LoadReport {
    measure::reset_peak_rss();
    let baseline = measure::rss_kb().map(|(now, _)| now).unwrap_or(0);
    let (cp_records0, cp_bytes0, _) = engine.checkpoint_counters();
    let cpu0 = measure::cpu_us().unwrap_or(0);
    let samples = Arc::new(Mutex::new(Samples::default()));
    let limit = Arc::new(Semaphore::new(w.concurrency.max(1)));
    let started = Instant::now();
    let w = Arc::new(w);
    let mut tasks = Vec::with_capacity(w.conversations);
    for i in 0..w.conversations {
        let permit = match limit.clone().acquire_owned().await {
            Ok(p) => p,
            Err(_) => break,
        };
        let (engine, w, samples) = (engine.clone(), w.clone(), samples.clone());
        tasks.push(tokio::spawn(async move {
            conversation(&engine, &w, i, &samples, started).await;
            (w.on_done)();
            drop(permit);
        }));
    }
    for t in tasks {
        if let Err(e) = t.await {
            let mut s = samples.lock().unwrap_or_else(|p| p.into_inner());
            s.failed += 1;
            *s.errors.entry(format!("driver task: {e}")).or_default() += 1;
        }
    }
    let wall = started.elapsed();
    let cpu = measure::cpu_us().unwrap_or(0).saturating_sub(cpu0);
    let (cp_records, cp_bytes, _) = engine.checkpoint_counters();
    let peak = measure::rss_kb().map(|(_, peak)| peak).unwrap_or(0);
    let mut s = std::mem::take(&mut *samples.lock().unwrap_or_else(|p| p.into_inner()));
    let nodes = std::mem::take(&mut s.nodes)
        .into_iter()
        .map(|(name, (mut work, mut queue))| {
            let work_ms: Vec<f64> = work.iter().map(|us| us / 1000.0).collect();
            let queue_ms: Vec<f64> = queue.iter().map(|us| us / 1000.0).collect();
            let fig = NodeFigures {
                executions: work.len() as u64,
                work: distribution(&mut work_ms.clone()),
                queue: distribution(&mut queue_ms.clone()),
                p50_ms: measure::percentile(&mut work_ms.clone(), 50.0),
                p99_ms: measure::percentile(&mut work_ms.clone(), 99.0),
                queue_p99_ms: measure::percentile(&mut queue_ms.clone(), 99.0),
                work_total_ms: work.iter().sum::<f64>() / 1000.0,
                queue_total_ms: queue.iter().sum::<f64>() / 1000.0,
            };
            work.clear();
            queue.clear();
            (name, fig)
        })
        .collect();
    let secs = wall.as_secs_f64().max(1e-9);
    LoadReport {
        graph: w.graph.clone(),
        conversations: w.conversations,
        concurrency: w.concurrency,
        completed: s.completed,
        failed: s.failed,
        interrupted_left: s.interrupted,
        resumes: s.resumes,
        wall_ms: secs * 1000.0,
        conversations_per_sec: (s.completed + s.failed) as f64 / secs,
        node_executions: s.node_executions,
        node_execs_per_sec: s.node_executions as f64 / secs,
        overhead_us_per_node: if s.node_executions > 0 {
            cpu as f64 / s.node_executions as f64
        } else {
            0.0
        },
        non_model_wall_us_per_node: measure::percentile(&mut s.overhead, 50.0),
        conversation_latency_ms: distribution(&mut s.conversations),
        nodes,
        errors: s.errors,
        checkpoint_records: cp_records - cp_records0,
        checkpoint_bytes: cp_bytes - cp_bytes0,
        peak_rss_kb: peak,
        baseline_rss_kb: baseline,
        throughput: s.timeline.into_iter().collect(),
        model: Vec::new(),
    }
}

async fn conversation<S: planwright::State>(
    engine: &Engine<S>,
    w: &Workload<S>,
    i: usize,
    samples: &Mutex<Samples>,
    started: Instant,
) {
    let thread = ThreadId::new(format!("{}-{i}", w.thread_prefix));
    let t0 = Instant::now();
    let mut model_us = 0.0;
    let mut executions = 0u64;
    let mut handle = engine
        .start(thread.clone(), (w.input)(i), RunOptions::streaming())
        .await;
    let outcome = loop {
        let mut h = match handle {
            Ok(h) => h,
            Err(e) => break Err(e.to_string()),
        };
        if let Some(mut rx) = h.events.take() {
            while let Some(ev) = rx.recv().await {
                if let RunEvent::NodeFinished {
                    node,
                    duration_us,
                    queued_us,
                    ..
                } = ev
                {
                    executions += 1;
                    if w.model_nodes.contains(&node) {
                        model_us += duration_us as f64;
                    }
                    let second = started.elapsed().as_secs();
                    let mut s = samples.lock().unwrap_or_else(|p| p.into_inner());
                    *s.timeline.entry(second).or_default() += 1;
                    let e = s.nodes.entry(node).or_default();
                    e.0.push(duration_us as f64);
                    e.1.push(queued_us as f64);
                }
            }
        }
        match h.wait().await {
            Ok(out) if out.status == RunStatus::Interrupted => {
                match (w.answer)(i, &out.interrupts) {
                    Some(resume) => {
                        samples.lock().unwrap_or_else(|p| p.into_inner()).resumes += 1;
                        handle = engine
                            .start_resume(thread.clone(), resume, RunOptions::streaming())
                            .await;
                    }
                    None => break Ok(RunStatus::Interrupted),
                }
            }
            Ok(out) => break Ok(out.status),
            Err(e) => break Err(e.to_string()),
        }
    };
    let wall_us = t0.elapsed().as_secs_f64() * 1e6;
    let mut s = samples.lock().unwrap_or_else(|p| p.into_inner());
    s.node_executions += executions;
    s.conversations.push(wall_us / 1000.0);
    if executions > 0 {
        s.overhead
            .push(((wall_us - model_us).max(0.0)) / executions as f64);
    }
    match outcome {
        Ok(RunStatus::Finished) => s.completed += 1,
        Ok(RunStatus::Interrupted) => s.interrupted += 1,
        Ok(other) => {
            s.failed += 1;
            *s.errors.entry(format!("{other:?}")).or_default() += 1;
        }
        Err(e) => {
            s.failed += 1;
            let kind: String = e.chars().take(80).collect();
            *s.errors.entry(kind).or_default() += 1;
        }
    }
}
