//! The scheduler: starts conversations as the scenario says (closed loop: when a slot frees; open:
//! at each due time, waiting for a slot only when `max_in_flight` are running, which makes the
//! arrival late), samples the run every second (series, `--out` lines, the live view, thresholds
//! that may stop it early), and gathers the report. What a conversation *is* — an engine's run
//! in this process, or HTTP calls to a server — is a [`Conversations`] in the mix.

use super::people::{People, Person};
use super::record::{Ended, Outcome, Recorder};
use super::report::LoadReport;
use super::scenario::Scenario;
use super::series::{self, Sample};
use super::thresholds::Threshold;
use super::LoadError;
use crate::bench::measure;
use std::collections::BTreeMap;
use std::future::Future;
use std::io::Write;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{watch, Semaphore};
use tokio::time::Instant;

/// A boxed future.
pub type BoxFut<T> = Pin<Box<dyn Future<Output = T> + Send + 'static>>;

/// What a conversation is given.
pub struct Conv {
    /// Its number.
    pub i: usize,
    /// When it was due to start.
    pub due: Instant,
    /// The simulated person behind it.
    pub person: Person,
    /// Becomes true when the run stops: cancel and end as [`Outcome::CutOff`].
    pub stop: watch::Receiver<bool>,
    /// Where node executions and answers are tallied.
    pub recorder: Arc<Recorder>,
}

/// What a kind of conversation reports about the system each second.
#[derive(Clone, Debug, Default)]
pub struct Probe {
    /// Mailbox depth by node.
    pub mailboxes: BTreeMap<String, u64>,
    /// Node executions so far, when counted outside this process (a server's `/metrics`).
    pub remote_node_executions: Option<u64>,
    /// The server's resident memory, KiB (from its `/metrics`).
    pub server_rss_kb: Option<u64>,
    /// The server's CPU time, µs (from its `/metrics`).
    pub server_cpu_us: Option<u64>,
}

/// A kind of conversation a run can start.
pub trait Conversations: Send + Sync + 'static {
    /// Its name in the report.
    fn name(&self) -> String;
    /// Runs one conversation to its end.
    fn run(self: Arc<Self>, c: Conv) -> BoxFut<Ended>;
    /// The system's state now (mailbox depths; a server's counters).
    fn probe(self: Arc<Self>) -> BoxFut<Probe>;
    /// What only it knows, once the run is over (checkpoint writes, a server's node executions).
    fn finish(self: Arc<Self>) -> BoxFut<Totals>;
}

/// What a kind of conversation adds to the report at the end.
#[derive(Clone, Debug, Default)]
pub struct Totals {
    /// Checkpoint records written during the run.
    pub checkpoint_records: u64,
    /// Checkpoint bytes written during the run.
    pub checkpoint_bytes: u64,
    /// How the engine loaded threads during the run (in-process runs).
    pub thread_loads: Option<super::report::ThreadLoadCounts>,
    /// Node executions counted by a server during the run.
    pub remote_node_executions: Option<u64>,
    /// Each replica's share, with `--target` (one or more).
    pub replicas: Vec<super::replicas::ReplicaShare>,
}

/// One entry of the mix.
#[derive(Clone)]
pub struct Entry {
    /// Its weight.
    pub weight: u32,
    /// Its conversations.
    pub conversations: Arc<dyn Conversations>,
}

/// How a run goes (everything but the mix).
#[derive(Clone, Debug)]
pub struct Options {
    /// How conversations arrive.
    pub scenario: Scenario,
    /// Open scenarios: at most this many conversations at once (an arrival beyond waits, late).
    pub max_in_flight: usize,
    /// Open scenarios: how long to wait for conversations still running when arrivals end before
    /// cutting them off.
    pub grace: Duration,
    /// The simulated people.
    pub people: People,
    /// Pass/fail thresholds.
    pub thresholds: Vec<Threshold>,
    /// Stop as soon as a threshold is crossed (judged each second once enough conversations
    /// ended).
    pub abort_on_fail: bool,
    /// Memory slope limit, KiB per minute.
    pub memory_slope_limit: f64,
    /// The memory slope leaves out samples before this (default: the first fifth of the run).
    pub slope_warmup: Option<Duration>,
    /// Stream samples as JSON lines here.
    pub out: Option<PathBuf>,
    /// Show the live terminal view.
    pub live: bool,
    /// Sample this process as the server's memory and CPU.
    pub server_pid: Option<u32>,
    /// Becomes true when the person interrupts the run (Ctrl-C): arrivals stop, conversations in
    /// flight get `grace` to end and are then cut off, and the report is marked interrupted.
    pub interrupt: Option<watch::Receiver<bool>>,
    /// Open scenarios: an arrival that finds `max_in_flight` conversations running is dropped
    /// (counted in the report's `dropped`, as k6's `dropped_iterations`) instead of waiting late.
    pub drop_when_full: bool,
    /// Tally into this recorder instead of a new one (a worker reads it every second, and runs
    /// re-spread arrivals into the same tally).
    pub recorder: Option<Arc<Recorder>>,
}

impl Options {
    /// Defaults around `scenario`: 1000 in flight, 30 s grace, no people, no thresholds,
    /// 1 MiB/min memory slope limit, no output.
    pub fn new(scenario: Scenario) -> Self {
        Options {
            scenario,
            max_in_flight: 1000,
            grace: Duration::from_secs(30),
            people: People::default(),
            thresholds: Vec::new(),
            abort_on_fail: false,
            memory_slope_limit: 1024.0,
            slope_warmup: None,
            out: None,
            live: false,
            server_pid: None,
            interrupt: None,
            drop_when_full: false,
            recorder: None,
        }
    }
}

/// Thresholds are judged live only once this many conversations ended.
pub const MIN_ENDED_TO_ABORT: u64 = 20;

/// The mix's entry of each conversation in one cycle of `Σ weights` (smooth weighted
/// round-robin: 70/30 gives exactly 7 of every 10, spread out).
pub fn rotation(weights: &[u32]) -> Vec<usize> {
    let total: i64 = weights.iter().map(|w| i64::from(*w)).sum();
    let mut current = vec![0i64; weights.len()];
    let mut out = Vec::with_capacity(total.max(0) as usize);
    for _ in 0..total {
        for (c, w) in current.iter_mut().zip(weights) {
            *c += i64::from(*w);
        }
        let Some((best, _)) = current
            .iter()
            .enumerate()
            .max_by_key(|(i, c)| (**c, -(*i as i64)))
        else {
            break;
        };
        current[best] -= total;
        out.push(best);
    }
    out
}

/// Resolves once the run stops (never, if the run's sender is gone without stopping it).
pub async fn stopped(rx: &mut watch::Receiver<bool>) {
    while !*rx.borrow() {
        if rx.changed().await.is_err() {
            std::future::pending::<()>().await;
        }
    }
}

/// Resolves once the run is interrupted (never without an interrupt channel).
async fn interrupted(rx: &mut Option<watch::Receiver<bool>>) {
    match rx {
        Some(rx) => stopped(rx).await,
        None => std::future::pending().await,
    }
}

/// Resolves at `at`, or never.
pub async fn sleep_until(at: Option<Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Runs the scenario over the mix.
pub async fn run(opts: Options, mix: Vec<Entry>) -> Result<LoadReport, LoadError> {
    opts.scenario.validate().map_err(LoadError::Usage)?;
    opts.people.validate().map_err(LoadError::Usage)?;
    let weights: Vec<u32> = mix.iter().map(|e| e.weight).collect();
    let names: Vec<Arc<str>> = mix
        .iter()
        .map(|e| Arc::from(e.conversations.name()))
        .collect();
    let order = rotation(&weights);
    if order.is_empty() {
        return Err(LoadError::Usage(
            "the mix is empty (every weight is 0)".into(),
        ));
    }
    let mut out = match &opts.out {
        Some(p) => Some(std::io::BufWriter::new(
            std::fs::File::create(p).map_err(LoadError::Report)?,
        )),
        None => None,
    };
    measure::reset_peak_rss();
    let baseline = measure::rss_kb().map(|(now, _)| now).unwrap_or(0);
    let cpu0 = measure::cpu_us().unwrap_or(0);
    let recorder = opts.recorder.clone().unwrap_or_default();
    let (stop_tx, stop_rx) = watch::channel(false);
    let total = opts.scenario.conversations();
    let bar = live_view(total, opts.live);
    let start = Instant::now();
    let series = Arc::new(Mutex::new(Vec::<Sample>::new()));
    let stopped_early = Arc::new(Mutex::new(None::<String>));
    let (done_tx, done_rx) = watch::channel(false);

    let sampler = {
        let (recorder, series, stopped_early, bar) = (
            recorder.clone(),
            series.clone(),
            stopped_early.clone(),
            bar.clone(),
        );
        let mix = mix.clone();
        let opts = opts.clone();
        let stop_tx = stop_tx.clone();
        let mut done_rx = done_rx;
        tokio::spawn(async move {
            let mut tick =
                tokio::time::interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut prev = Prev {
                at: Some(start),
                cpu_us: measure::cpu_us().unwrap_or(0),
                ..Prev::default()
            };
            let mut ended_total = 0u64;
            loop {
                let last = tokio::select! {
                    _ = tick.tick() => false,
                    _ = stopped(&mut done_rx) => true,
                };
                let s = sample(&recorder, &mix, &opts, start, &mut prev).await;
                ended_total += s.ended;
                if last
                    && s.t_s - prev.last_t < 0.05
                    && !series.lock().unwrap_or_else(|p| p.into_inner()).is_empty()
                {
                    break;
                }
                prev.last_t = s.t_s;
                if let Some(w) = out.as_mut() {
                    if let Ok(line) = serde_json::to_string(&s) {
                        let _ = writeln!(w, "{line}");
                        let _ = w.flush();
                    }
                }
                bar.set_position(ended_total);
                bar.set_message(format!(
                    "{:.1}/s  in flight {}  p50 {:.0} ms  p99 {:.0} ms  errors {}",
                    s.conversations_per_sec, s.in_flight, s.p50_ms, s.p99_ms, s.failed
                ));
                series.lock().unwrap_or_else(|p| p.into_inner()).push(s);
                if opts.abort_on_fail
                    && !opts.thresholds.is_empty()
                    && ended_total >= MIN_ENDED_TO_ABORT
                    && stopped_early
                        .lock()
                        .unwrap_or_else(|p| p.into_inner())
                        .is_none()
                {
                    let mut partial = LoadReport::default();
                    recorder.fill(&mut partial);
                    let secs = start.elapsed().as_secs_f64().max(1e-9);
                    partial.conversations_per_sec = ended_total as f64 / secs;
                    partial.node_execs_per_sec = partial.node_executions as f64 / secs;
                    if let Some(crossed) = opts
                        .thresholds
                        .iter()
                        .filter(|t| t.judged_live())
                        .map(|t| t.judge(&partial))
                        .find(|r| !r.passed)
                    {
                        *stopped_early.lock().unwrap_or_else(|p| p.into_inner()) = Some(format!(
                            "threshold `{}` crossed after {:.0} s (value {})",
                            crossed.threshold,
                            secs,
                            crossed
                                .value
                                .map_or("not measured".into(), |v| format!("{v:.3}"))
                        ));
                        let _ = stop_tx.send(true);
                    }
                }
                if last {
                    break;
                }
            }
        })
    };

    let open = opts.scenario.is_open();
    let slots = Arc::new(Semaphore::new(match &opts.scenario {
        Scenario::Closed { concurrency, .. } => *concurrency,
        _ => opts.max_in_flight.max(1),
    }));
    let mut tasks = tokio::task::JoinSet::new();
    let dues: Vec<Option<Duration>> = if open {
        opts.scenario.due_times().into_iter().map(Some).collect()
    } else {
        vec![None; total]
    };
    let mut stop_rx_loop = stop_rx.clone();
    let mut interrupt = opts.interrupt.clone();
    let mut was_interrupted = false;
    let mut dropped = 0usize;
    for (i, due) in dues.into_iter().enumerate() {
        if let Some(d) = due {
            tokio::select! {
                _ = tokio::time::sleep_until(start + d) => {}
                _ = stopped(&mut stop_rx_loop) => break,
                _ = interrupted(&mut interrupt) => { was_interrupted = true; break }
            }
        }
        let permit = if open && opts.drop_when_full {
            match slots.clone().try_acquire_owned() {
                Ok(p) => p,
                Err(tokio::sync::TryAcquireError::NoPermits) => {
                    dropped += 1;
                    continue;
                }
                Err(tokio::sync::TryAcquireError::Closed) => break,
            }
        } else {
            tokio::select! {
                p = slots.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
                _ = stopped(&mut stop_rx_loop) => break,
                _ = interrupted(&mut interrupt) => { was_interrupted = true; break }
            }
        };
        let now = Instant::now();
        let due_at = due.map_or(now, |d| start + d);
        let which = order[i % order.len()];
        let entry = mix[which].conversations.clone();
        let name = names[which].clone();
        let task_recorder = recorder.clone();
        let conv = Conv {
            i,
            due: due_at,
            person: opts.people.person(i),
            stop: stop_rx.clone(),
            recorder: recorder.clone(),
        };
        tasks.spawn(async move {
            let recorder = task_recorder;
            let flight = recorder.started(&name, now.saturating_duration_since(due_at));
            let ended = entry.run(conv).await;
            recorder.ended(
                &name,
                Instant::now().saturating_duration_since(due_at),
                ended,
            );
            drop(flight);
            drop(permit);
        });
        // Reap the conversations that ended, so a long soak does not keep every finished task.
        while let Some(r) = tasks.try_join_next() {
            if let Err(e) = r {
                driver_failed(&recorder, e);
            }
        }
    }
    // Arrivals are over: wait for the conversations still running (open scenarios: at most the
    // grace period after the scenario's end; after an interrupt: at most the grace period from
    // then).
    let mut deadline =
        open.then(|| (start + opts.scenario.duration()).max(Instant::now()) + opts.grace);
    let mut interrupted_at = was_interrupted.then(Instant::now);
    if was_interrupted {
        deadline = Some(Instant::now() + opts.grace);
    }
    let mut cut = false;
    loop {
        let next = tokio::select! {
            r = tasks.join_next() => r,
            _ = sleep_until(deadline.filter(|_| !cut)) => {
                cut = true;
                let mut why = stopped_early.lock().unwrap_or_else(|p| p.into_inner());
                if why.is_none() && !tasks.is_empty() {
                    *why = Some(if interrupted_at.is_some() {
                        format!(
                            "interrupted (Ctrl-C): {} conversations still running {:.0} s later (--grace) were cut off",
                            tasks.len(), opts.grace.as_secs_f64()
                        )
                    } else {
                        format!(
                            "{} conversations still running {:.0} s after the last arrival (--grace) were cut off",
                            tasks.len(), opts.grace.as_secs_f64()
                        )
                    });
                }
                let _ = stop_tx.send(true);
                continue;
            }
            _ = interrupted(&mut interrupt), if interrupted_at.is_none() => {
                let now = Instant::now();
                interrupted_at = Some(now);
                deadline = Some(deadline.map_or(now + opts.grace, |d| d.min(now + opts.grace)));
                continue;
            }
        };
        match next {
            None => break,
            Some(Ok(())) => {}
            Some(Err(e)) => driver_failed(&recorder, e),
        }
    }
    let wall = start.elapsed();
    let _ = done_tx.send(true);
    let _ = sampler.await;
    bar.finish_and_clear();

    let mut r = LoadReport {
        graph: describe(&mix, &weights),
        scenario: Some(opts.scenario.clone()),
        conversations: total,
        concurrency: match &opts.scenario {
            Scenario::Closed { concurrency, .. } => *concurrency,
            _ => opts.max_in_flight,
        },
        baseline_rss_kb: baseline,
        dropped,
        ..LoadReport::default()
    };
    recorder.fill(&mut r);
    for e in &mix {
        let t = e.conversations.clone().finish().await;
        r.checkpoint_records += t.checkpoint_records;
        r.checkpoint_bytes += t.checkpoint_bytes;
        if let Some(l) = t.thread_loads {
            let sum = r.thread_loads.get_or_insert_with(Default::default);
            sum.from_memory += l.from_memory;
            sum.from_storage += l.from_storage;
        }
        if let Some(n) = t.remote_node_executions {
            r.node_executions += n;
        }
        for share in t.replicas {
            match r.replicas.iter_mut().find(|x| x.url == share.url) {
                Some(x) => {
                    x.conversations += share.conversations;
                    x.requests += share.requests;
                    x.failovers += share.failovers;
                }
                None => r.replicas.push(share),
            }
        }
    }
    r.failovers = r.replicas.iter().map(|x| x.failovers).sum();
    let secs = wall.as_secs_f64().max(1e-9);
    r.wall_ms = secs * 1000.0;
    let ended = r.completed + r.failed + r.abandoned + r.interrupted_left + r.cut_off;
    r.conversations_per_sec = ended as f64 / secs;
    r.node_execs_per_sec = r.node_executions as f64 / secs;
    let cpu = measure::cpu_us().unwrap_or(0).saturating_sub(cpu0);
    let local_execs = recorder.node_executions();
    r.overhead_us_per_node = if local_execs > 0 {
        cpu as f64 / local_execs as f64
    } else {
        0.0
    };
    r.peak_rss_kb = measure::rss_kb().map(|(_, peak)| peak).unwrap_or(0);
    r.series = std::mem::take(&mut *series.lock().unwrap_or_else(|p| p.into_inner()));
    r.memory = Some(series::memory(
        &r.series,
        opts.memory_slope_limit,
        opts.slope_warmup.map(|d| d.as_secs_f64()),
    ));
    r.stopped_early = stopped_early
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .take();
    if let Some(at) = interrupted_at {
        r.interrupted = true;
        if r.stopped_early.is_none() {
            r.stopped_early = Some(format!(
                "interrupted (Ctrl-C) after {:.1} s: arrivals stopped, the conversations in flight ended",
                at.saturating_duration_since(start).as_secs_f64()
            ));
        }
    }
    r.thresholds = opts.thresholds.iter().map(|t| t.judge(&r)).collect();
    Ok(r)
}

/// A conversation's task panicked or was aborted: it counts as failed.
fn driver_failed(recorder: &Recorder, e: tokio::task::JoinError) {
    recorder.ended(
        "driver",
        Duration::ZERO,
        Ended::new(Outcome::Failed(format!("driver task: {e}"))),
    );
}

fn describe(mix: &[Entry], weights: &[u32]) -> String {
    if mix.len() == 1 {
        return mix[0].conversations.name();
    }
    let total: u32 = weights.iter().sum::<u32>().max(1);
    mix.iter()
        .map(|e| {
            format!(
                "{} {:.0}%",
                e.conversations.name(),
                f64::from(e.weight) * 100.0 / f64::from(total)
            )
        })
        .collect::<Vec<_>>()
        .join(" + ")
}

#[derive(Default)]
struct Prev {
    at: Option<Instant>,
    cpu_us: u64,
    server_cpu_us: Option<u64>,
    remote_execs: Option<u64>,
    last_t: f64,
}

async fn sample(
    recorder: &Recorder,
    mix: &[Entry],
    opts: &Options,
    start: Instant,
    prev: &mut Prev,
) -> Sample {
    let now = Instant::now();
    let dt = now
        .saturating_duration_since(prev.at.unwrap_or(start))
        .as_secs_f64()
        .max(1e-9);
    prev.at = Some(now);
    let second = recorder.take_second();
    let mut mailboxes = BTreeMap::new();
    let mut remote_execs = None;
    let mut server_rss = None;
    let mut server_cpu = None;
    for e in mix {
        let p = e.conversations.clone().probe().await;
        for (node, depth) in p.mailboxes {
            *mailboxes.entry(node).or_insert(0) += depth;
        }
        if let Some(n) = p.remote_node_executions {
            remote_execs = Some(remote_execs.unwrap_or(0) + n);
        }
        server_rss = server_rss.or(p.server_rss_kb);
        server_cpu = server_cpu.or(p.server_cpu_us);
    }
    if let Some((rss, cpu)) = opts.server_pid.and_then(series::proc_usage) {
        (server_rss, server_cpu) = (Some(rss), Some(cpu));
    }
    let node_execs = match (remote_execs, prev.remote_execs) {
        (Some(now), Some(before)) => now.saturating_sub(before),
        (Some(_), None) => 0,
        _ => second.node_executions,
    };
    prev.remote_execs = remote_execs.or(prev.remote_execs);
    let cpu = measure::cpu_us().unwrap_or(0);
    let cpu_pct = cpu.saturating_sub(prev.cpu_us) as f64 / (dt * 1e6) * 100.0;
    prev.cpu_us = cpu;
    let server_cpu_pct = match (server_cpu, prev.server_cpu_us) {
        (Some(now), Some(before)) => Some(now.saturating_sub(before) as f64 / (dt * 1e6) * 100.0),
        _ => None,
    };
    prev.server_cpu_us = server_cpu.or(prev.server_cpu_us);
    mailboxes.retain(|_, d| *d > 0);
    let lat = second.latency.clone();
    Sample {
        t_s: now.saturating_duration_since(start).as_secs_f64(),
        started: second.started,
        ended: second.ended,
        failed: second.failed,
        abandoned: second.abandoned,
        late: second.late,
        conversations_per_sec: second.ended as f64 / dt,
        node_execs_per_sec: node_execs as f64 / dt,
        p50_ms: lat.p50,
        p90_ms: lat.p90,
        p99_ms: lat.p99,
        in_flight: recorder.in_flight() as u64,
        mailbox_depth: mailboxes.values().sum(),
        mailboxes,
        rss_kb: measure::rss_kb().map(|(now, _)| now).unwrap_or(0),
        cpu_pct,
        server_rss_kb: server_rss,
        server_cpu_pct,
    }
}

fn live_view(total: usize, live: bool) -> indicatif::ProgressBar {
    if !live {
        return indicatif::ProgressBar::hidden();
    }
    let bar = indicatif::ProgressBar::new(total as u64);
    if let Ok(style) = indicatif::ProgressStyle::with_template(
        "{elapsed_precise} [{bar:30}] {pos}/{len} conversations  {msg}",
    ) {
        bar.set_style(style);
    }
    bar
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_rotation_follows_the_weights_evenly() {
        let r = rotation(&[70, 30]);
        assert_eq!(r.len(), 100);
        assert_eq!(r.iter().filter(|e| **e == 0).count(), 70);
        // Spread out: every ten conversations hold seven of the first entry.
        for chunk in r.chunks(10) {
            assert_eq!(chunk.iter().filter(|e| **e == 0).count(), 7, "{chunk:?}");
        }
        assert_eq!(rotation(&[1]), vec![0]);
        assert_eq!(rotation(&[0, 2]), vec![1, 1]);
        assert!(rotation(&[0]).is_empty());
    }
}
