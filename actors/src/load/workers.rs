//! Several load machines: `load --coordinator --workers …` splits one scenario across worker
//! processes (`load --worker ADDR`), because one client process runs out of CPU or sockets before
//! a large server does. Each worker takes its share — the arrival rate scaled by 1/N, or a closed
//! loop's conversations and concurrency divided — and streams back, once a second, its counters
//! and its latency and lateness histograms so far. The histograms travel as their recorded
//! buckets (`[value µs, count]` pairs in JSON), so the coordinator merges them exactly: the
//! merged percentiles are those of one histogram of every sample, not averages of percentiles.
//! Thresholds and `--abort-on-fail` act on the merged figures.
//!
//! Transport: plain HTTP/JSON. `POST /run` answers with newline-delimited JSON samples, one a
//! second, the last marked `done`; `POST /extra` adds arrivals to a running share; `POST /stop`
//! stops arrivals. A worker whose stream drops, or that sends nothing for `--worker-timeout`
//! seconds, is dead: the report names it, keeps what it sent last, and the arrivals it had yet
//! to start are re-spread over the live workers for the time left.

use super::config::{self, LoadArgs};
use super::hist::Hist;
use super::record::{Cumulative, Recorder};
use super::report::{LoadReport, ThresholdResult, WorkerShare};
use super::scenario::{Scenario, Stage};
use super::schedule::{self, Entry};
use super::LoadError;
use crate::model::ModelStats;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{mpsc, watch};
use tokio::time::Instant;

/// What a coordinator asks of a worker.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct RunRequest {
    /// The `load` flags, as given to the coordinator (less its own).
    pub argv: Vec<String>,
    /// Open scenarios: the factor on the rate.
    pub rate_factor: f64,
    /// Closed loops: conversations and concurrency of this share.
    pub closed: Option<(usize, usize)>,
}

/// More arrivals for a running share: `count` over `duration_ms` (open), or `count` more at
/// `concurrency` at once (closed).
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExtraRequest {
    /// Conversations to add.
    pub count: usize,
    /// Over this long (open scenarios).
    pub duration_ms: u64,
    /// At most this many at once (closed loops).
    pub concurrency: Option<usize>,
}

/// One second of a worker's run: everything so far (cumulative, so a lost line loses nothing).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct WorkerSample {
    /// Seconds since its share started.
    pub second: u64,
    /// The last sample: the share and every re-spread arrival ended.
    pub done: bool,
    /// The mix's name.
    pub graph: String,
    /// Started.
    pub started: usize,
    /// Finished.
    pub completed: usize,
    /// Failed.
    pub failed: usize,
    /// Abandoned.
    pub abandoned: usize,
    /// Left paused.
    pub left_paused: usize,
    /// Cut off.
    pub cut_off: usize,
    /// Interrupts answered.
    pub resumes: usize,
    /// Late arrivals.
    pub late: usize,
    /// Node executions.
    pub node_executions: u64,
    /// The process's CPU time since its share started, µs.
    #[serde(default)]
    pub cpu_us: u64,
    /// Failures by kind.
    pub errors: BTreeMap<String, usize>,
    /// Conversation latency, `[µs, count]` per bucket.
    pub latency: Vec<[u64; 2]>,
    /// Lateness, `[µs, count]` per bucket.
    pub lateness: Vec<[u64; 2]>,
}

impl WorkerSample {
    fn of(c: &Cumulative, second: u64, done: bool, graph: &str, cpu_us: u64) -> Self {
        WorkerSample {
            cpu_us,
            second,
            done,
            graph: graph.to_string(),
            started: c.started,
            completed: c.completed,
            failed: c.failed,
            abandoned: c.abandoned,
            left_paused: c.left_paused,
            cut_off: c.cut_off,
            resumes: c.resumes,
            late: c.late,
            node_executions: c.node_executions,
            errors: c.errors.clone(),
            latency: c.latency.counts(),
            lateness: c.lateness.counts(),
        }
    }
}

/// `scenario` scaled to one worker's share.
pub fn share_of(scenario: &Scenario, rate_factor: f64, closed: Option<(usize, usize)>) -> Scenario {
    match scenario {
        Scenario::Closed { .. } => {
            let (conversations, concurrency) = closed.unwrap_or((0, 0));
            Scenario::Closed {
                conversations,
                concurrency: concurrency.max(1),
            }
        }
        Scenario::Constant { rate, duration } => Scenario::Constant {
            rate: rate * rate_factor,
            duration: *duration,
        },
        Scenario::Soak { rate, duration } => Scenario::Soak {
            rate: rate * rate_factor,
            duration: *duration,
        },
        Scenario::Ramping { start_rate, stages } => Scenario::Ramping {
            start_rate: start_rate * rate_factor,
            stages: stages
                .iter()
                .map(|s| Stage {
                    target: s.target * rate_factor,
                    duration: s.duration,
                })
                .collect(),
        },
    }
}

/// The `load` flags of this process (after `load`), less the coordinator's own, for its workers.
pub fn worker_argv(all: impl IntoIterator<Item = String>) -> Vec<String> {
    let mut out = Vec::new();
    let mut it = all.into_iter().skip_while(|a| a != "load").skip(1);
    while let Some(a) = it.next() {
        match a.as_str() {
            "--coordinator" => {}
            "--workers" | "--worker-timeout" | "--report" | "--out" => {
                it.next();
            }
            s if s.starts_with("--workers=")
                || s.starts_with("--worker-timeout=")
                || s.starts_with("--report=")
                || s.starts_with("--out=") => {}
            _ => out.push(a),
        }
    }
    out
}

#[derive(clap::Parser)]
struct WorkerCli {
    #[command(flatten)]
    args: LoadArgs,
}

/// A worker's running share.
struct Running {
    recorder: Arc<Recorder>,
    entries: Vec<Entry>,
    options: schedule::Options,
    extras: tokio::task::JoinSet<()>,
    stop: watch::Sender<bool>,
    open: bool,
}

type Shared = Arc<Mutex<Option<Running>>>;

fn lock(s: &Shared) -> std::sync::MutexGuard<'_, Option<Running>> {
    s.lock().unwrap_or_else(|p| p.into_inner())
}

/// `load --worker ADDR`: listens, prints `load worker listening on http://…` on stdout, and
/// runs the shares coordinators send, one at a time, until killed.
pub async fn serve(addr: &str) -> Result<(), LoadError> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .map_err(|e| LoadError::Usage(format!("--worker {addr}: {e}")))?;
    let local = listener.local_addr().map_err(LoadError::Report)?;
    println!("load worker listening on http://{local}");
    let shared: Shared = Arc::new(Mutex::new(None));
    let app = axum::Router::new()
        .route("/run", axum::routing::post(run_share))
        .route("/extra", axum::routing::post(extra))
        .route("/stop", axum::routing::post(stop))
        .with_state(shared);
    axum::serve(listener, app).await.map_err(LoadError::Report)
}

type Reply = (axum::http::StatusCode, String);

fn refuse(status: axum::http::StatusCode, why: impl std::fmt::Display) -> Reply {
    (status, why.to_string())
}

async fn run_share(
    axum::extract::State(shared): axum::extract::State<Shared>,
    axum::Json(req): axum::Json<RunRequest>,
) -> Result<axum::response::Response, Reply> {
    use axum::http::StatusCode;
    let bad = |e: String| refuse(StatusCode::BAD_REQUEST, e);
    let cli = <WorkerCli as clap::Parser>::try_parse_from(
        std::iter::once("load".to_string()).chain(req.argv.iter().cloned()),
    )
    .map_err(|e| bad(e.to_string()))?;
    let mut r = config::resolve(&cli.args).map_err(|e| bad(e.to_string()))?;
    let stats = Arc::new(ModelStats::default());
    let entries = super::build_mix(&r, &stats)
        .await
        .map_err(|e| bad(e.to_string()))?;
    let recorder = Arc::new(Recorder::default());
    let (stop_tx, stop_rx) = watch::channel(false);
    let open = r.options.scenario.is_open();
    r.options.scenario = share_of(&r.options.scenario, req.rate_factor, req.closed);
    // The coordinator judges thresholds and writes the series; the worker only measures.
    r.options.thresholds.clear();
    r.options.abort_on_fail = false;
    r.options.out = None;
    r.options.live = false;
    r.options.recorder = Some(recorder.clone());
    r.options.interrupt = Some(stop_rx);
    {
        let mut g = lock(&shared);
        if g.is_some() {
            return Err(refuse(
                StatusCode::CONFLICT,
                "this worker is running a share",
            ));
        }
        *g = Some(Running {
            recorder: recorder.clone(),
            entries: entries.clone(),
            options: r.options.clone(),
            extras: tokio::task::JoinSet::new(),
            stop: stop_tx,
            open,
        });
    }
    let graph = entries
        .iter()
        .map(|e| e.conversations.name())
        .collect::<Vec<_>>()
        .join(" + ");
    let (tx, rx) = mpsc::channel::<String>(16);
    let options = r.options;
    tokio::spawn(async move {
        let start = Instant::now();
        let cpu0 = crate::bench::measure::cpu_us().unwrap_or(0);
        let mut main = tokio::spawn(schedule::run(options, entries));
        let mut tick =
            tokio::time::interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
        let line = |done: bool| {
            let s = WorkerSample::of(
                &recorder.cumulative(),
                start.elapsed().as_secs(),
                done,
                &graph,
                crate::bench::measure::cpu_us()
                    .unwrap_or(0)
                    .saturating_sub(cpu0),
            );
            serde_json::to_string(&s).unwrap_or_default() + "\n"
        };
        let mut main_done = false;
        // Re-spread arrivals running after the share's own ended (samples go on meanwhile).
        let mut extras = tokio::task::JoinSet::new();
        loop {
            tokio::select! {
                _ = tick.tick() => {
                    // A log line per sample (a closed stdout is no reason to stop).
                    let _ = writeln!(std::io::stdout(), "load worker: sample {}", start.elapsed().as_secs());
                    if tx.send(line(false)).await.is_err() {
                        // The coordinator is gone: stop arrivals.
                        if let Some(r) = lock(&shared).as_ref() { let _ = r.stop.send(true); }
                    }
                }
                _ = &mut main, if !main_done => main_done = true,
                Some(_) = extras.join_next(), if !extras.is_empty() => {}
            }
            if main_done && extras.is_empty() {
                // Taking the extras and ending the share under one lock: an `/extra` after this
                // finds no share running and is refused, never left out of the last sample.
                let mut g = lock(&shared);
                extras = g
                    .as_mut()
                    .map(|r| std::mem::take(&mut r.extras))
                    .unwrap_or_default();
                if extras.is_empty() {
                    *g = None;
                    break;
                }
            }
        }
        let _ = tx.send(line(true)).await;
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|l| (Ok::<_, std::io::Error>(l), rx))
    });
    Ok(axum::response::Response::new(
        axum::body::Body::from_stream(body),
    ))
}

async fn extra(
    axum::extract::State(shared): axum::extract::State<Shared>,
    axum::Json(req): axum::Json<ExtraRequest>,
) -> Result<&'static str, Reply> {
    let mut g = lock(&shared);
    let Some(run) = g.as_mut() else {
        return Err(refuse(axum::http::StatusCode::CONFLICT, "no share running"));
    };
    if req.count == 0 {
        return Ok("nothing to add");
    }
    let mut options = run.options.clone();
    options.scenario = if run.open {
        let d = Duration::from_millis(req.duration_ms.max(1000));
        Scenario::Constant {
            rate: req.count as f64 / d.as_secs_f64(),
            duration: d,
        }
    } else {
        Scenario::Closed {
            conversations: req.count,
            concurrency: req.concurrency.unwrap_or(1).max(1),
        }
    };
    options.recorder = Some(run.recorder.clone());
    let entries = run.entries.clone();
    run.extras.spawn(async move {
        let _ = schedule::run(options, entries).await;
    });
    Ok("added")
}

async fn stop(axum::extract::State(shared): axum::extract::State<Shared>) -> &'static str {
    if let Some(r) = lock(&shared).as_ref() {
        let _ = r.stop.send(true);
    }
    "stopping"
}

/// What a worker's reader tells the coordinator.
enum Event {
    Sample(usize, Box<WorkerSample>),
    Dead(usize, String),
}

/// Reads one worker's stream of samples until `done`, a drop, or silence past `timeout`.
async fn read_worker(
    client: reqwest::Client,
    k: usize,
    url: String,
    req: RunRequest,
    timeout: Duration,
    tx: mpsc::UnboundedSender<Event>,
) {
    let resp = match client.post(format!("{url}/run")).json(&req).send().await {
        Ok(r) if r.status().is_success() => r,
        Ok(r) => {
            let status = r.status();
            let text = r.text().await.unwrap_or_default();
            let _ = tx.send(Event::Dead(
                k,
                format!("refused the share: {status} {text}"),
            ));
            return;
        }
        Err(e) => {
            let _ = tx.send(Event::Dead(k, format!("unreachable: {e}")));
            return;
        }
    };
    let mut resp = resp;
    let mut buf = Vec::<u8>::new();
    loop {
        match tokio::time::timeout(timeout, resp.chunk()).await {
            Err(_) => {
                let _ = tx.send(Event::Dead(
                    k,
                    format!("no sample for {} s", timeout.as_secs()),
                ));
                return;
            }
            Ok(Err(e)) => {
                let _ = tx.send(Event::Dead(k, format!("connection dropped: {e}")));
                return;
            }
            Ok(Ok(None)) => {
                let _ = tx.send(Event::Dead(
                    k,
                    "connection closed before its last sample".into(),
                ));
                return;
            }
            Ok(Ok(Some(bytes))) => buf.extend_from_slice(&bytes),
        }
        while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = buf.drain(..=nl).collect();
            match serde_json::from_slice::<WorkerSample>(&line) {
                Ok(s) => {
                    let done = s.done;
                    let _ = tx.send(Event::Sample(k, Box::new(s)));
                    if done {
                        return;
                    }
                }
                Err(e) => {
                    let _ = tx.send(Event::Dead(k, format!("sent a malformed sample: {e}")));
                    return;
                }
            }
        }
    }
}

/// Starts `n` local worker processes of this binary and gives their URLs (the processes end
/// with the coordinator).
async fn spawn_local(n: usize) -> Result<(Vec<String>, Vec<tokio::process::Child>), LoadError> {
    use tokio::io::AsyncBufReadExt;
    let exe = std::env::current_exe().map_err(LoadError::Report)?;
    let (mut urls, mut children) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let mut child = tokio::process::Command::new(&exe)
            .args(["load", "--worker", "127.0.0.1:0"])
            .stdout(std::process::Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .map_err(LoadError::Report)?;
        let Some(out) = child.stdout.take() else {
            return Err(LoadError::Usage("a local worker has no stdout".into()));
        };
        let mut lines = tokio::io::BufReader::new(out).lines();
        let line = lines.next_line().await.map_err(LoadError::Report)?;
        let url = line
            .as_deref()
            .and_then(|l| l.strip_prefix("load worker listening on "))
            .ok_or_else(|| LoadError::Usage("a local worker did not start".into()))?;
        urls.push(url.to_string());
        children.push(child);
    }
    Ok((urls, children))
}

/// The merged report of the workers' latest samples.
fn merge(samples: &[Option<WorkerSample>], into: &mut LoadReport) {
    let (mut latency, mut lateness) = (Hist::default(), Hist::default());
    into.errors.clear();
    let (mut started, mut completed, mut failed, mut abandoned) = (0, 0, 0, 0);
    let (mut left, mut cut, mut resumes, mut late, mut execs) = (0, 0, 0, 0, 0);
    for s in samples.iter().flatten() {
        latency.add(&Hist::from_counts(&s.latency));
        lateness.add(&Hist::from_counts(&s.lateness));
        started += s.started;
        completed += s.completed;
        failed += s.failed;
        abandoned += s.abandoned;
        left += s.left_paused;
        cut += s.cut_off;
        resumes += s.resumes;
        late += s.late;
        execs += s.node_executions;
        for (k, v) in &s.errors {
            *into.errors.entry(k.clone()).or_default() += v;
        }
        if into.graph.is_empty() {
            into.graph = s.graph.clone();
        }
    }
    into.started = started;
    into.completed = completed;
    into.failed = failed;
    into.abandoned = abandoned;
    into.interrupted_left = left;
    into.cut_off = cut;
    into.resumes = resumes;
    into.node_executions = execs;
    into.conversation_latency_ms = latency.distribution();
    into.lateness.late = late;
    into.lateness.late_after_ms = super::record::LATE_AFTER.as_secs_f64() * 1000.0;
    into.lateness.lateness_ms = lateness.distribution();
    into.people.abandoned = abandoned;
}

/// `load --coordinator`: splits the scenario over the workers, merges what they send, re-spreads
/// a dead worker's arrivals, judges thresholds on the merged figures and returns the one report.
pub async fn coordinate(
    args: &LoadArgs,
    argv: Vec<String>,
    mut interrupt: Option<watch::Receiver<bool>>,
) -> Result<LoadReport, LoadError> {
    super::check_report_path(args.report.as_deref())?;
    let r = config::resolve(args)?;
    r.options.scenario.validate().map_err(LoadError::Usage)?;
    let spec = args
        .workers
        .as_deref()
        .ok_or_else(|| LoadError::Usage("--coordinator needs --workers".into()))?;
    let (urls, _children) = match spec.trim().parse::<usize>() {
        Ok(0) => return Err(LoadError::Usage("--workers 0: at least one worker".into())),
        Ok(n) => spawn_local(n).await?,
        Err(_) => (
            spec.split(',')
                .map(|u| u.trim().trim_end_matches('/').to_string())
                .filter(|u| !u.is_empty())
                .collect(),
            Vec::new(),
        ),
    };
    let n = urls.len();
    if n == 0 {
        return Err(LoadError::Usage("--workers: no worker URL".into()));
    }
    let scenario = r.options.scenario.clone();
    let open = scenario.is_open();
    let timeout = Duration::from_secs(args.worker_timeout.unwrap_or(5).max(1));
    let client = reqwest::Client::new();
    let (tx, mut rx) = mpsc::unbounded_channel();
    let mut shares = vec![WorkerShare::default(); n];
    let closed_concurrency = |k: usize| match &scenario {
        Scenario::Closed { concurrency, .. } => {
            (concurrency / n + usize::from(k < concurrency % n)).max(1)
        }
        _ => 0,
    };
    for (k, url) in urls.iter().enumerate() {
        let closed = match &scenario {
            Scenario::Closed { conversations, .. } => Some((
                conversations / n + usize::from(k < conversations % n),
                closed_concurrency(k),
            )),
            _ => None,
        };
        let req = RunRequest {
            argv: argv.clone(),
            rate_factor: 1.0 / n as f64,
            closed,
        };
        shares[k].url = url.clone();
        shares[k].share = share_of(&scenario, req.rate_factor, closed).conversations();
        tokio::spawn(read_worker(
            client.clone(),
            k,
            url.clone(),
            req,
            timeout,
            tx.clone(),
        ));
    }
    drop(tx);
    let start = Instant::now();
    let mut latest: Vec<Option<WorkerSample>> = vec![None; n];
    let mut finished = vec![false; n];
    let mut stopped_early = None;
    let mut interrupted = false;
    let mut tick = tokio::time::interval_at(start + Duration::from_secs(1), Duration::from_secs(1));
    let stop_all = |client: &reqwest::Client, urls: &[String]| {
        for u in urls {
            let (c, u) = (client.clone(), format!("{u}/stop"));
            tokio::spawn(async move {
                let _ = c.post(u).send().await;
            });
        }
    };
    loop {
        let ev = tokio::select! {
            ev = rx.recv() => match ev { Some(ev) => ev, None => break },
            _ = tick.tick() => {
                if r.options.abort_on_fail && !r.options.thresholds.is_empty() && stopped_early.is_none() {
                    let mut partial = LoadReport::default();
                    merge(&latest, &mut partial);
                    let ended = partial.completed + partial.failed + partial.abandoned
                        + partial.interrupted_left + partial.cut_off;
                    let secs = start.elapsed().as_secs_f64().max(1e-9);
                    partial.conversations_per_sec = ended as f64 / secs;
                    if ended as u64 >= schedule::MIN_ENDED_TO_ABORT {
                        if let Some(c) = r.options.thresholds.iter().filter(|t| t.judged_live())
                            .map(|t| t.judge(&partial)).find(|t| !t.passed)
                        {
                            stopped_early = Some(format!(
                                "threshold `{}` crossed on the merged figures after {secs:.0} s", c.threshold));
                            stop_all(&client, &urls);
                        }
                    }
                }
                continue;
            }
            _ = async { match interrupt.as_mut() { Some(i) => schedule::stopped(i).await, None => std::future::pending().await } }, if !interrupted => {
                interrupted = true;
                stop_all(&client, &urls);
                continue;
            }
        };
        match ev {
            Event::Sample(k, s) => {
                shares[k].samples += 1;
                finished[k] = s.done;
                latest[k] = Some(*s);
            }
            Event::Dead(k, why) => {
                shares[k].died = Some(why);
                finished[k] = true;
                let started = latest[k].as_ref().map_or(0, |s| s.started);
                let left = shares[k].share.saturating_sub(started);
                let live: Vec<usize> = (0..n).filter(|j| !finished[*j]).collect();
                if left == 0 || live.is_empty() || stopped_early.is_some() || interrupted {
                    continue;
                }
                let remaining = scenario
                    .duration()
                    .saturating_sub(start.elapsed())
                    .max(Duration::from_secs(1));
                for (i, j) in live.iter().enumerate() {
                    let count = left / live.len() + usize::from(i < left % live.len());
                    shares[*j].respread_to_it += count;
                    let body = ExtraRequest {
                        count,
                        duration_ms: remaining.as_millis() as u64,
                        concurrency: (!open).then(|| closed_concurrency(k)),
                    };
                    let (c, u) = (client.clone(), format!("{}/extra", urls[*j]));
                    tokio::spawn(async move {
                        let _ = c.post(u).json(&body).send().await;
                    });
                }
            }
        }
        if finished.iter().all(|f| *f) {
            break;
        }
    }
    let wall = start.elapsed();
    let mut report = LoadReport {
        scenario: Some(scenario.clone()),
        conversations: scenario.conversations(),
        concurrency: match &scenario {
            Scenario::Closed { concurrency, .. } => *concurrency,
            _ => r.options.max_in_flight * n,
        },
        ..LoadReport::default()
    };
    merge(&latest, &mut report);
    for (k, s) in latest.iter().enumerate() {
        if let Some(s) = s {
            shares[k].started = s.started;
            shares[k].completed = s.completed;
            shares[k].failed = s.failed;
            shares[k].latency_ms = Hist::from_counts(&s.latency).distribution();
            shares[k].cpu_ms = s.cpu_us as f64 / 1000.0;
            let ended = s.completed + s.failed + s.abandoned + s.left_paused + s.cut_off;
            shares[k].cpu_us_per_conversation = if ended > 0 {
                s.cpu_us as f64 / ended as f64
            } else {
                0.0
            };
        }
    }
    let secs = wall.as_secs_f64().max(1e-9);
    report.wall_ms = secs * 1000.0;
    let ended = report.completed
        + report.failed
        + report.abandoned
        + report.interrupted_left
        + report.cut_off;
    report.conversations_per_sec = ended as f64 / secs;
    report.node_execs_per_sec = report.node_executions as f64 / secs;
    report.workers = shares;
    report.interrupted = interrupted;
    report.stopped_early = stopped_early.or_else(|| {
        interrupted.then(|| "interrupted (Ctrl-C): the workers stopped their arrivals".into())
    });
    report.thresholds = r
        .options
        .thresholds
        .iter()
        .map(|t| t.judge(&report))
        .collect::<Vec<ThresholdResult>>();
    Ok(report)
}
