//! One seed's world: processes over the simulated database, clients, the faults between them,
//! and the invariants checked when it has settled.

use super::db::{Commit, ProcCheckpointer, ProcEvents, ProcRuns, SimDb};
use super::link::{Chaos, Link, Rates};
use super::tool::{Tool, ToolPort};
use super::workload::{self, Conv, ConvUpdate};
use super::{bug, Bug, BugsOn};
use crate::checkpoint::{Checkpointer, WriteKind};
use crate::runs::{
    Claim, RunChange, RunEventLog, RunRecord, RunRecordStatus, RunStore, RunStoreError,
};
use crate::{CompiledGraph, Engine, ErrorChain, Resume, RunError, RunEvent, RunOptions, RunStatus};
use crate::{Refusal, ThreadId};
use rand::Rng;
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// What one seed simulates.
#[derive(Clone, Debug)]
pub struct SimConfig {
    /// Conversations run (each a thread, several runs long).
    pub conversations: usize,
    /// Processes sharing the database; `None`: the seed picks one or two.
    pub replicas: Option<usize>,
    /// Bug switches on for the seed.
    pub bugs: Vec<Bug>,
    /// Whether faults are injected at all (off: the fault-free reference world).
    pub faults: bool,
    /// Instead of random faults: crash the process making the storage call of this number
    /// (0-based, counted over the seed), before the statement (`false`) or after it commits
    /// (`true`) — to crash once at every storage boundary of a seed in turn
    /// ([`SeedReport::storage_calls`] says how many there are).
    pub crash_at: Option<(u64, bool)>,
}

impl Default for SimConfig {
    fn default() -> Self {
        Self {
            conversations: 4,
            replicas: None,
            bugs: Vec::new(),
            faults: true,
            crash_at: None,
        }
    }
}

/// How one seed went.
#[derive(Clone, Debug)]
pub struct SeedReport {
    /// The seed.
    pub seed: u64,
    /// The invariants it broke, each with what was seen (empty: it passed).
    pub violations: Vec<String>,
    /// A digest of everything that happened (faults, commits, transitions, what subscribers
    /// saw, final states): equal for two runs of one seed.
    pub digest: u64,
    /// Faults and events counted (`crash`, `fail`, `lost reply`, `takeover`, …).
    pub counts: BTreeMap<String, u64>,
    /// Processes sharing the database.
    pub replicas: usize,
    /// Runs submitted.
    pub runs: usize,
    /// Storage calls the processes made.
    pub storage_calls: u64,
    /// Calls the tool got (through `NodeContext::effect`), and the distinct keys among them.
    pub tool_calls: (u64, u64),
    /// The trace, in order (simulated ms, then what happened).
    pub trace: Vec<String>,
}

impl SeedReport {
    /// True when no invariant broke.
    pub fn ok(&self) -> bool {
        self.violations.is_empty()
    }

    /// The command that replays this seed exactly in the world `cfg` describes.
    pub fn replay_command(&self, cfg: &SimConfig) -> String {
        let mut cmd = format!(
            "cargo run -p planwright --example simulate -- --seed {}",
            self.seed
        );
        let default = SimConfig::default();
        if cfg.conversations != default.conversations {
            cmd.push_str(&format!(" --conversations {}", cfg.conversations));
        }
        if let Some(n) = cfg.replicas {
            cmd.push_str(&format!(" --replicas {n}"));
        }
        if !cfg.faults {
            cmd.push_str(" --no-faults");
        }
        if let Some((at, after)) = cfg.crash_at {
            let when = if after { "after" } else { "before" };
            cmd.push_str(&format!(" --crash-at {at} --crash-{when}"));
        }
        for b in &cfg.bugs {
            cmd.push_str(&format!(" --bug {}", b.name()));
        }
        cmd
    }
}

/// Lease life of the simulated processes (simulated ms).
const TTL_MS: u64 = 3_000;
/// Faults stop after this much simulated time, and the world settles.
const CHAOS_MS: u64 = 60_000;
/// A conversation gives up (a violation) after this many runs.
const MAX_RUNS: usize = 12;
/// A run that has not ended after this long (simulated) is a violation.
const RUN_LIMIT_MS: u64 = 20 * 60_000;

/// Runs seed `seed` to its end on a runtime of its own (current-thread, paused time) and checks
/// the invariants.
pub fn run_seed(seed: u64, cfg: &SimConfig) -> SeedReport {
    let _bugs = BugsOn::set(&cfg.bugs);
    let rt = match tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            return SeedReport {
                seed,
                violations: vec![format!("no runtime: {e}")],
                digest: 0,
                counts: BTreeMap::new(),
                replicas: 0,
                runs: 0,
                storage_calls: 0,
                tool_calls: (0, 0),
                trace: Vec::new(),
            }
        }
    };
    rt.block_on(simulate(seed, cfg.clone()))
}

/// A simulated process: an engine and the process's connections.
struct Proc {
    link: Arc<Link>,
    engine: Engine<Conv>,
    cp: Arc<ProcCheckpointer>,
    runs: Arc<ProcRuns>,
    events: Arc<ProcEvents>,
    inbox: mpsc::UnboundedSender<String>,
    tasks: Mutex<Vec<JoinHandle<()>>>,
    /// Runs executing here: run id → thread.
    local: Mutex<BTreeMap<String, String>>,
    /// Runs this process claimed (or may have: a claim whose reply was lost) and gave up
    /// before running them: the keeper releases their leases, or its renewals would hold them
    /// for ever and nobody would take them over.
    given_up: Mutex<BTreeSet<String>>,
}

impl Proc {
    fn owner(&self) -> &str {
        &self.link.name
    }

    fn spawn(&self, f: impl std::future::Future<Output = ()> + Send + 'static) {
        let h = tokio::spawn(f);
        self.tasks.lock().unwrap_or_else(|p| p.into_inner()).push(h);
    }

    fn give_up(&self, run_id: &str) {
        self.link
            .chaos
            .note(format!("{} gives up {run_id}", self.link.name));
        self.given_up
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(run_id.to_string());
    }

    fn local(&self) -> BTreeMap<String, String> {
        self.local.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

struct World {
    chaos: Arc<Chaos>,
    db: Arc<SimDb>,
    /// The graph observers read states with (its nodes never run); each process compiles its
    /// own, whose nodes reach the tool through the process's link.
    graph: CompiledGraph<Conv>,
    tool: Arc<Tool>,
    slots: Vec<Mutex<Option<Arc<Proc>>>>,
    violations: Mutex<Vec<String>>,
    stopping: std::sync::atomic::AtomicBool,
}

impl World {
    fn violation(&self, v: String) {
        self.chaos.note(format!("VIOLATION {v}"));
        self.violations
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(v);
    }

    fn roll(&self, p: f64) -> bool {
        self.chaos.rng().random_bool(p)
    }

    fn between(&self, lo: u64, hi: u64) -> u64 {
        self.chaos.rng().random_range(lo..=hi)
    }

    /// A live process, picked by the seed.
    fn pick(&self) -> Option<Arc<Proc>> {
        let live: Vec<Arc<Proc>> = self
            .slots
            .iter()
            .filter_map(|s| s.lock().unwrap_or_else(|p| p.into_inner()).clone())
            .filter(|p| !p.link.is_dead())
            .collect();
        if live.is_empty() {
            return None;
        }
        let i = self.chaos.rng().random_range(0..live.len());
        Some(live[i].clone())
    }
}

async fn sleep_ms(ms: u64) {
    tokio::time::sleep(Duration::from_millis(ms)).await;
}

async fn simulate(seed: u64, cfg: SimConfig) -> SeedReport {
    let graph = workload::graph(ToolPort {
        tool: Tool::reliable(),
        link: None,
    });
    let reference = reference_states(&graph, cfg.conversations).await;

    let chaos_rates = |rng: &mut rand::rngs::StdRng| {
        if !cfg.faults || cfg.crash_at.is_some() {
            return Rates::none();
        }
        let f: f64 = rng.random_range(0.2..1.0);
        Rates {
            fail: 0.02 * f,
            lose_reply: 0.02 * f,
            crash: 0.008 * f,
            delay: 0.1,
            max_delay_ms: 800,
            long_delay: 0.004 * f,
        }
    };
    let chaos = {
        use rand::SeedableRng;
        let mut pick = rand::rngs::StdRng::seed_from_u64(seed ^ 0x5eed_5eed_5eed_5eed);
        let rates = chaos_rates(&mut pick);
        Arc::new(Chaos::new(seed, rates, TTL_MS, cfg.crash_at))
    };
    let replicas = cfg
        .replicas
        .unwrap_or_else(|| 1 + chaos.rng().random_range(0..2usize));
    chaos.note(format!("seed {seed}: {replicas} replicas"));
    let lose_reply = chaos.rates().lose_reply;
    let world = Arc::new(World {
        chaos: chaos.clone(),
        db: Arc::new(SimDb::default()),
        graph,
        tool: Tool::new(seed, lose_reply, chaos.clone()),
        slots: (0..replicas).map(|_| Mutex::new(None)).collect(),
        violations: Mutex::new(Vec::new()),
        stopping: Default::default(),
    });

    let mut slots = Vec::new();
    for i in 0..replicas {
        slots.push(tokio::spawn(keep_slot(world.clone(), i)));
    }
    // Let the processes start before the clients come.
    sleep_ms(10).await;
    let chaos_task = cfg
        .faults
        .then(|| tokio::spawn(outside_faults(world.clone())));
    let calm = {
        let chaos = chaos.clone();
        tokio::spawn(async move {
            sleep_ms(CHAOS_MS).await;
            chaos.note("faults stop");
            chaos.calm_down();
        })
    };
    let mut clients = Vec::new();
    for c in 0..cfg.conversations {
        clients.push(tokio::spawn(converse(world.clone(), c)));
    }
    let mut outcomes = Vec::new();
    for c in clients {
        outcomes.push(c.await.unwrap_or(Conversation::Panicked));
    }
    chaos.calm_down();
    calm.abort();
    if let Some(t) = chaos_task {
        t.abort();
    }
    // Every run must end (a takeover finishes what a dead process left).
    let mut waited = 0;
    loop {
        let open = world
            .db
            .runs
            .unfinished(usize::MAX)
            .await
            .unwrap_or_default();
        if open.is_empty() {
            break;
        }
        if waited > RUN_LIMIT_MS {
            for r in open {
                world.violation(format!(
                    "every run ends in a stated status: run {} is still {}",
                    r.run_id, r.status
                ));
            }
            break;
        }
        sleep_ms(500).await;
        waited += 500;
    }
    world
        .stopping
        .store(true, std::sync::atomic::Ordering::SeqCst);
    for s in &world.slots {
        if let Some(p) = s.lock().unwrap_or_else(|p| p.into_inner()).take() {
            for h in p.tasks.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
                h.abort();
            }
        }
    }
    for s in slots {
        s.abort();
    }
    check(&world, &outcomes, &reference).await;

    let trace = chaos.trace();
    let mut digest = Fnv::default();
    for line in &trace {
        digest.add(line.as_bytes());
    }
    for c in world.db.journal() {
        digest.add(format!("{c:?}").as_bytes());
    }
    let violations = world
        .violations
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .clone();
    SeedReport {
        seed,
        violations,
        digest: digest.0,
        counts: chaos
            .counts()
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect(),
        replicas,
        runs: outcomes.iter().map(Conversation::runs).sum(),
        storage_calls: chaos.calls(),
        tool_calls: world.tool.totals(),
        trace,
    }
}

/// FNV-1a: a digest that is the same on every platform and run.
struct Fnv(u64);

impl Default for Fnv {
    fn default() -> Self {
        Self(0xcbf2_9ce4_8422_2325)
    }
}

impl Fnv {
    fn add(&mut self, bytes: &[u8]) {
        for b in bytes.iter().chain(b"\n") {
            self.0 ^= u64::from(*b);
            self.0 = self.0.wrapping_mul(0x0100_0000_01b3);
        }
    }
}

/// Each conversation's final state in a world without faults, as JSON.
async fn reference_states(graph: &CompiledGraph<Conv>, n: usize) -> Vec<serde_json::Value> {
    let engine = Engine::builder(graph.clone())
        .checkpointer(Arc::new(crate::checkpoint::MemoryCheckpointer::new()))
        .build()
        .await;
    let mut out = Vec::new();
    for c in 0..n {
        let t = ThreadId::new(format!("ref{c}"));
        let input = ConvUpdate::default().n(c as u64);
        let first = engine.run(t.clone(), input, RunOptions::default()).await;
        let second = engine
            .resume(
                t.clone(),
                Resume::Value(workload::answer(c as u64)),
                RunOptions::default(),
            )
            .await;
        let state = match (first, second) {
            (Ok(_), Ok(o)) => serde_json::to_value(&*o.state).unwrap_or_default(),
            (a, b) => serde_json::json!(format!("reference failed: {:?} {:?}", a.err(), b.err())),
        };
        out.push(state);
    }
    out
}

/// Keeps slot `i` occupied by a process: starts one, and after it dies, another (a restart:
/// a new owner id, nothing of the old process's memory).
async fn keep_slot(w: Arc<World>, i: usize) {
    let mut generation = 0;
    loop {
        let skew = if w.slots.len() > 1 && w.roll(0.3) {
            w.between(0, 2 * TTL_MS) as i64 - TTL_MS as i64
        } else {
            0
        };
        let p = start_proc(&w, i, generation, skew).await;
        *w.slots[i].lock().unwrap_or_else(|p| p.into_inner()) = Some(p.clone());
        let mut died = p.link.died();
        let _ = died.wait_for(|d| *d).await;
        *w.slots[i].lock().unwrap_or_else(|p| p.into_inner()) = None;
        for h in p.tasks.lock().unwrap_or_else(|p| p.into_inner()).drain(..) {
            h.abort();
        }
        drop(p);
        if w.stopping.load(std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        let pause = w.between(100, 2_000);
        sleep_ms(pause).await;
        generation += 1;
    }
}

async fn start_proc(w: &Arc<World>, slot: usize, generation: u32, skew: i64) -> Arc<Proc> {
    let link = Arc::new(Link::new(
        format!("p{slot}.{generation}"),
        w.chaos.clone(),
        skew,
    ));
    w.chaos
        .note(format!("{} starts, clock skew {skew}ms", link.name));
    let cp = Arc::new(ProcCheckpointer {
        db: w.db.clone(),
        link: link.clone(),
        tool: w.tool.clone(),
    });
    let graph = workload::graph(ToolPort {
        tool: w.tool.clone(),
        link: Some(link.clone()),
    });
    let engine = Engine::builder(graph)
        .checkpointer(cp.clone())
        .build()
        .await;
    let (tx, mut rx) = mpsc::unbounded_channel::<String>();
    let p = Arc::new(Proc {
        link: link.clone(),
        engine,
        cp,
        runs: Arc::new(ProcRuns {
            db: w.db.clone(),
            link: link.clone(),
        }),
        events: Arc::new(ProcEvents {
            db: w.db.clone(),
            link,
        }),
        inbox: tx,
        tasks: Mutex::new(Vec::new()),
        local: Mutex::new(BTreeMap::new()),
        given_up: Mutex::new(BTreeSet::new()),
    });
    // The runs accepted here.
    {
        let (w, weak) = (w.clone(), Arc::downgrade(&p));
        p.spawn(async move {
            while let Some(run_id) = rx.recv().await {
                let Some(p) = weak.upgrade() else { return };
                let (w2, p2) = (w.clone(), p.clone());
                p.spawn(async move { execute(w2, p2, run_id).await });
            }
        });
    }
    // Leases: renewal, lost runs, cancels from elsewhere, takeovers.
    {
        let (w, weak) = (w.clone(), Arc::downgrade(&p));
        p.spawn(async move {
            loop {
                sleep_ms(TTL_MS / 3).await;
                let Some(p) = weak.upgrade() else { return };
                keep_leases(&w, &p).await;
            }
        });
    }
    p
}

/// What `serve`'s lease keeper does each round: renews this process's leases, stops runs it
/// lost or that were cancelled elsewhere, and takes over runs nobody holds.
async fn keep_leases(w: &Arc<World>, p: &Arc<Proc>) {
    let given_up: Vec<String> = p
        .given_up
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .iter()
        .cloned()
        .collect();
    for run_id in given_up {
        if p.runs.release(&run_id, p.owner()).await.is_ok() {
            p.given_up
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .remove(&run_id);
        }
    }
    let local = p.local();
    let held = match p.runs.renew(p.owner(), p.link.now_ms(), TTL_MS).await {
        Ok(h) => h,
        Err(_) => return,
    };
    for (run_id, thread) in &local {
        let t = ThreadId::new(thread.as_str());
        if held.iter().any(|(id, cancel)| id == run_id && *cancel) {
            p.engine.cancel(&t);
            continue;
        }
        if !held.iter().any(|(id, _)| id == run_id) {
            if let Ok(Some(h)) = p.runs.lease_holder(run_id).await {
                if h != p.owner() {
                    w.chaos.note(format!("{} lost {run_id} to {h}", p.owner()));
                    p.engine.cancel(&t);
                }
            }
        }
    }
    let Ok(expired) = p.runs.expired(p.link.now_ms(), TTL_MS, 16).await else {
        return;
    };
    if std::env::var_os("PW_SIM_DEBUG").is_some() {
        w.chaos.note(format!(
            "DEBUG {} keeper: held {held:?} expired {:?} given up {:?} local {local:?}",
            p.owner(),
            expired.iter().map(|r| r.run_id.clone()).collect::<Vec<_>>(),
            p.given_up.lock().unwrap_or_else(|p| p.into_inner())
        ));
    }
    for rec in expired {
        if p.local().contains_key(&rec.run_id) {
            continue;
        }
        w.chaos.count("takeover");
        let (w2, p2) = (w.clone(), p.clone());
        p.spawn(async move { execute(w2, p2, rec.run_id).await });
    }
}

/// Removes a run from its process's local runs when the run task ends.
struct LocalRun<'a>(&'a Proc, String);

impl Drop for LocalRun<'_> {
    fn drop(&mut self) {
        self.0
            .local
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .remove(&self.1);
    }
}

/// Runs `run_id` on process `p` as `serve` does: claim, fence, mark running, run, publish,
/// record the end.
async fn execute(w: Arc<World>, p: Arc<Proc>, run_id: String) {
    let Ok(Some(rec)) = p.runs.get(&run_id).await else {
        return;
    };
    if rec.status.is_ended() {
        return;
    }
    {
        let mut local = p.local.lock().unwrap_or_else(|p| p.into_inner());
        if local.contains_key(&run_id) {
            return;
        }
        local.insert(run_id.clone(), rec.thread_id.clone());
    }
    let _local = LocalRun(&p, run_id.clone());
    // As serve's `lifecycle::launch`: a copy of an earlier run of the thread that this process
    // stopped (lost to another process) goes on until its next superstep boundary, and the
    // claim below fences the thread with a newer token, under which that copy's writes would
    // pass (seeds 574 and 1489 of the earlier worlds). It is waited for first.
    p.engine
        .wait_idle(&ThreadId::new(rec.thread_id.as_str()))
        .await;
    let claim = p
        .runs
        .claim(&run_id, p.owner(), p.link.now_ms(), TTL_MS)
        .await;
    let token = match claim {
        Ok(Claim::Granted { token, .. }) => token,
        Ok(_) => return,
        Err(_) => return p.give_up(&run_id),
    };
    w.chaos
        .note(format!("{} claims {run_id} token {token}", p.owner()));
    p.link
        .claims
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(rec.thread_id.clone(), token);
    let thread = ThreadId::new(rec.thread_id.as_str());
    if !bug(Bug::NoFence) && !matches!(p.cp.fence(&thread, token).await, Ok(true)) {
        return p.give_up(&run_id);
    }
    let started = p
        .runs
        .transition(
            &run_id,
            &[RunRecordStatus::Pending, RunRecordStatus::Running],
            RunRecordStatus::Running,
            RunChange::at(p.link.now_ms()),
        )
        .await;
    if !matches!(started, Ok(true)) {
        return p.give_up(&run_id);
    }
    let n = rec.kwargs.get("n").and_then(|v| v.as_u64()).unwrap_or(0);
    let outcome = drive(&p, &thread, n, &run_id).await;
    let (status, error) = match outcome {
        Ok(RunStatus::Finished) => (RunRecordStatus::Success, None),
        Ok(RunStatus::Interrupted) => (RunRecordStatus::Interrupted, None),
        // Stopped here because it was cancelled or lost: nothing to record from here.
        Ok(RunStatus::Cancelled) | Err(RunError::Cancelled) => return p.give_up(&run_id),
        Ok(other) => (RunRecordStatus::Error, Some(format!("{other:?}"))),
        Err(e) => (RunRecordStatus::Error, Some(ErrorChain(&e).to_string())),
    };
    // A process that lost the run records nothing: the holder runs it on.
    match p.runs.lease_holder(&run_id).await {
        Ok(Some(h)) if h == p.owner() => {}
        _ => return p.give_up(&run_id),
    }
    for _ in 0..3 {
        let mut change = RunChange::at(p.link.now_ms());
        if let Some(e) = &error {
            change = change.error(e.clone());
        }
        match p
            .runs
            .transition(&run_id, &[RunRecordStatus::Running], status, change)
            .await
        {
            Ok(_) => {
                let _ = p.runs.release(&run_id, p.owner()).await;
                return;
            }
            Err(_) => sleep_ms(200).await,
        }
    }
    p.give_up(&run_id);
}

/// Moves the thread one run forward: its first input, the answer to its question, or the rest
/// of an unfinished superstep — whichever the stored thread needs.
async fn drive(
    p: &Arc<Proc>,
    thread: &ThreadId,
    n: u64,
    run_id: &str,
) -> Result<RunStatus, RunError> {
    let opts = RunOptions::streaming;
    let st = p.engine.get_state(thread).await?;
    let handle = match st {
        None => {
            p.engine
                .start(thread.clone(), ConvUpdate::default().n(n), opts())
                .await?
        }
        Some(s) if !s.interrupts.is_empty() => {
            match p
                .engine
                .start_resume(thread.clone(), Resume::Value(workload::answer(n)), opts())
                .await
            {
                // Answered already (a resume whose run stopped after storing the answer).
                Err(RunError::Refused(Refusal::BadResume { .. } | Refusal::NotInterrupted(_))) => {
                    p.engine.start_continue(thread.clone(), opts()).await?
                }
                other => other?,
            }
        }
        Some(s) if !s.next.is_empty() => p.engine.start_continue(thread.clone(), opts()).await?,
        Some(_) => return Ok(RunStatus::Finished),
    };
    let mut handle = handle;
    let events = handle.events.take();
    let (outcome, ()) = tokio::join!(handle.wait(), publish(p, run_id, events));
    outcome.map(|o| o.status)
}

/// The stream name and data the simulation publishes for an event (deterministic fields only:
/// no run ids, no measured durations).
fn describe(ev: &RunEvent) -> Option<(String, String)> {
    match ev {
        RunEvent::RunStarted { step, .. } => Some(("start".into(), format!("{step}"))),
        RunEvent::NodeFinished { node, task, .. } => {
            Some(("node".into(), format!("{node} {task}")))
        }
        RunEvent::StateUpdated { step, nodes, .. } => {
            Some(("step".into(), format!("{step} {}", nodes.join(","))))
        }
        _ => None,
    }
}

/// Appends the run's events to its log as this process's lease allows; each carries the place
/// the publisher gives it (`i`), which a subscriber checks against the log's `seq`.
async fn publish(p: &Arc<Proc>, run_id: &str, events: Option<mpsc::UnboundedReceiver<RunEvent>>) {
    let Some(mut rx) = events else { return };
    let mut after = p.events.last_seq(run_id).await.ok();
    while let Some(ev) = rx.recv().await {
        let (Some(at), Some((name, data))) = (after, describe(&ev)) else {
            continue;
        };
        let batch = vec![(
            name,
            serde_json::json!({ "i": at + 1, "d": data }).to_string(),
        )];
        after = None;
        for _ in 0..5 {
            match p
                .events
                .append(run_id, Some(p.owner()), at, batch.clone())
                .await
            {
                Ok(last) => {
                    after = Some(last);
                    break;
                }
                Err(RunStoreError::AppendRefused { .. }) => break,
                Err(_) => sleep_ms(50).await,
            }
        }
    }
}

/// How a conversation ended.
#[derive(Clone, Debug)]
enum Conversation {
    /// Its thread reached the end, after `runs` runs.
    Done { runs: usize },
    /// A run of it was cancelled (the conversation stops there).
    Cancelled { runs: usize },
    /// It did not reach the end (a violation is recorded).
    Stuck { runs: usize },
    /// Its client task panicked.
    Panicked,
}

impl Conversation {
    fn runs(&self) -> usize {
        match self {
            Self::Done { runs } | Self::Cancelled { runs } | Self::Stuck { runs } => *runs,
            Self::Panicked => 0,
        }
    }
}

/// A client: submits conversation `c`'s runs one after another to live processes until its
/// thread ends, follows each run's stream, and sometimes cancels a run.
async fn converse(w: Arc<World>, c: usize) -> Conversation {
    let thread = format!("t{c}");
    let observer = Engine::builder(w.graph.clone())
        .checkpointer(w.db.checkpoints.clone() as Arc<dyn Checkpointer>)
        .keep_paused(0)
        .build()
        .await;
    for k in 0..MAX_RUNS {
        let run_id = format!("c{c}.{k}");
        // Submit through a live process (retrying a failed insert: it is idempotent).
        loop {
            let Some(p) = w.pick() else {
                sleep_ms(200).await;
                continue;
            };
            let mut rec = RunRecord::pending(&run_id, &thread, "sim", p.link.now_ms());
            rec.kwargs = serde_json::json!({ "n": c as u64 });
            // A request to a process that dies meanwhile gets no answer: the client times out.
            match tokio::time::timeout(Duration::from_secs(5), p.runs.insert(rec)).await {
                Ok(Ok(_)) => {
                    let _ = p.inbox.send(run_id.clone());
                    break;
                }
                _ => sleep_ms(100).await,
            }
        }
        let follower = tokio::spawn(follow(w.clone(), run_id.clone()));
        let cancelled = Arc::new(std::sync::atomic::AtomicBool::new(false));
        let canceller = w.roll(0.08).then(|| {
            let (w, run_id, cancelled) = (w.clone(), run_id.clone(), cancelled.clone());
            let after = w.between(0, 600);
            tokio::spawn(async move {
                sleep_ms(after).await;
                let at = 1_800_000_000_000 + w.chaos.elapsed_ms();
                if w.db.cancel(&run_id, at).await {
                    w.chaos.note(format!("client cancels {run_id}"));
                    cancelled.store(true, std::sync::atomic::Ordering::SeqCst);
                }
            })
        });
        let mut waited = 0;
        loop {
            sleep_ms(100).await;
            waited += 100;
            match w.db.runs.get(&run_id).await {
                Ok(Some(r)) if r.status.is_ended() => break,
                _ if waited > RUN_LIMIT_MS => {
                    w.violation(format!(
                        "every run ends in a stated status: run {run_id} did not end in {} s",
                        RUN_LIMIT_MS / 1000
                    ));
                    return Conversation::Stuck { runs: k + 1 };
                }
                _ => {}
            }
        }
        if let Some(h) = canceller {
            let _ = h.await;
        }
        let _ = follower.await;
        if cancelled.load(std::sync::atomic::Ordering::SeqCst) {
            return Conversation::Cancelled { runs: k + 1 };
        }
        if let Ok(Some(s)) = observer.get_state(&ThreadId::new(thread.as_str())).await {
            if s.next.is_empty() && s.interrupts.is_empty() {
                return Conversation::Done { runs: k + 1 };
            }
        }
    }
    w.violation(format!(
        "conversation {c} did not reach its end in {MAX_RUNS} runs"
    ));
    Conversation::Stuck { runs: MAX_RUNS }
}

/// A subscriber of one run's stream: reads the log as it grows, sometimes drops and rejoins
/// after the last event it saw (`Last-Event-ID`), sometimes comes late; checks that it sees
/// each event once, in order, and each where its publisher put it.
async fn follow(w: Arc<World>, run_id: String) {
    let late = if w.roll(0.3) { w.between(1, 2_000) } else { 0 };
    sleep_ms(late).await;
    let mut last = 0u64;
    loop {
        if w.roll(0.05) {
            // Dropped: rejoins later from the last event it saw.
            w.chaos.count("subscriber dropped");
            let away = w.between(1, 1_500);
            sleep_ms(away).await;
        }
        let mut watch = w.db.events.watch(&run_id);
        let batch =
            w.db.events
                .read(&run_id, last, 64)
                .await
                .unwrap_or_default();
        for e in &batch {
            let i = serde_json::from_str::<serde_json::Value>(&e.data)
                .ok()
                .and_then(|v| v.get("i").and_then(|i| i.as_u64()));
            if e.seq != last + 1 || i != Some(e.seq) {
                w.violation(format!(
                    "every subscriber sees each event once and in order: run {run_id}: after \
                     event {last} came seq {} published as {i:?} ({} {})",
                    e.seq, e.event, e.data
                ));
                return;
            }
            last = e.seq;
        }
        if batch.is_empty() {
            let ended = matches!(w.db.runs.get(&run_id).await, Ok(Some(r)) if r.status.is_ended());
            if ended {
                return;
            }
            let _ = tokio::time::timeout(Duration::from_millis(500), watch.changed()).await;
        }
    }
}

/// Faults from outside the database: a process killed, or cut off for a while.
async fn outside_faults(w: Arc<World>) {
    loop {
        let wait = w.between(500, 6_000);
        sleep_ms(wait).await;
        if w.chaos.is_calm() {
            return;
        }
        let Some(p) = w.pick() else { continue };
        let x = w.between(0, 99);
        if x < 25 {
            p.link.kill("killed");
        } else if x < 50 {
            let ms = w.between(100, 2 * TTL_MS);
            p.link.cut(ms);
        }
    }
}

/// The invariants, once the world has settled.
async fn check(w: &World, outcomes: &[Conversation], reference: &[serde_json::Value]) {
    let journal = w.db.journal();
    // Per thread: the chain as committed, the task writes, and the writers' claims in order.
    let mut chains: BTreeMap<String, Vec<(u64, Option<u64>)>> = BTreeMap::new();
    let mut writes: BTreeMap<(String, u64, crate::TaskId), (String, u64)> = BTreeMap::new();
    let mut newest_claim: BTreeMap<String, (u64, String)> = BTreeMap::new();
    for c in &journal {
        let (thread, by, claim) = match c {
            Commit::Checkpoint {
                thread, by, claim, ..
            }
            | Commit::Write {
                thread, by, claim, ..
            } => (thread, by, *claim),
        };
        match newest_claim.get(thread) {
            Some((newest, who)) if claim < *newest => w.violation(format!(
                "one writer per thread: {by} (claim {claim}) committed to {thread} after \
                 {who} (claim {newest}) had"
            )),
            _ => {
                newest_claim.insert(thread.clone(), (claim, by.clone()));
            }
        }
        match c {
            Commit::Checkpoint {
                thread, id, parent, ..
            } => {
                let chain = chains.entry(thread.clone()).or_default();
                if chain.iter().any(|(i, _)| i == id) {
                    w.violation(format!(
                        "no step committed twice: checkpoint {id} of {thread} committed again"
                    ));
                }
                if chain.last().map(|(i, _)| *i) != *parent {
                    w.violation(format!(
                        "one writer per thread (a linear chain): checkpoint {id} of {thread} \
                         follows {parent:?}, the head was {:?}",
                        chain.last().map(|(i, _)| *i)
                    ));
                }
                chain.push((*id, *parent));
            }
            Commit::Write {
                thread,
                checkpoint,
                task,
                kind: WriteKind::Update,
                ..
            } => {
                let first =
                    writes.insert((thread.clone(), *checkpoint, *task), (by.clone(), claim));
                if let Some((first_by, first_claim)) = first {
                    w.violation(format!(
                        "no step committed twice: task {task} of {thread} (from checkpoint \
                         {checkpoint}) committed its update again: first by {first_by} (claim \
                         {first_claim}), again by {by} (claim {claim})"
                    ));
                }
            }
            Commit::Write { .. } => {}
        }
    }
    // No committed step lost: every committed checkpoint is still stored.
    for (thread, chain) in &chains {
        let stored =
            w.db.checkpoints
                .list(&ThreadId::new(thread.as_str()), None, usize::MAX)
                .await
                .unwrap_or_default();
        let ids: BTreeSet<u64> = stored.iter().map(|(id, _, _)| id.0).collect();
        for (id, _) in chain {
            if !ids.contains(id) {
                w.violation(format!(
                    "no committed step lost: checkpoint {id} of {thread} is gone"
                ));
            }
        }
    }
    // Each key's effect applied once at the tool; calls made again only inside the window
    // the journal cannot close (`tool.rs`).
    for v in w.tool.violations() {
        w.violation(v);
    }
    // A cancelled run stays cancelled.
    for v in w.db.after_cancel() {
        w.violation(format!("a cancelled run stays cancelled: {v}"));
    }
    for run_id in w.db.cancelled() {
        match w.db.runs.get(&run_id).await {
            Ok(Some(r)) if r.status == RunRecordStatus::Interrupted => {}
            other => w.violation(format!(
                "a cancelled run stays cancelled: {run_id} is {:?}",
                other.ok().flatten().map(|r| r.status)
            )),
        }
    }
    // Each finished conversation ends as a fault-free run of its input does.
    let observer = Engine::builder(w.graph.clone())
        .checkpointer(w.db.checkpoints.clone() as Arc<dyn Checkpointer>)
        .keep_paused(0)
        .build()
        .await;
    for (c, outcome) in outcomes.iter().enumerate() {
        let thread = ThreadId::new(format!("t{c}"));
        let state = observer.get_state(&thread).await;
        let values = match &state {
            Ok(Some(s)) => serde_json::to_value(&*s.values).unwrap_or_default(),
            _ => serde_json::Value::Null,
        };
        w.chaos.note(format!("t{c} final {values} ({outcome:?})"));
        if let Conversation::Done { .. } = outcome {
            if values != reference[c] {
                w.violation(format!(
                    "a run's answer equals a fault-free run's: t{c} ended with {values}, \
                     fault-free {}",
                    reference[c]
                ));
            }
        }
    }
    // The records' final statuses are part of the outcome.
    let mut records = Vec::new();
    for c in 0..outcomes.len() {
        records.extend(
            w.db.runs
                .list_thread(&format!("t{c}"), usize::MAX, 0)
                .await
                .unwrap_or_default(),
        );
    }
    for r in records {
        let error = r.error.map(|e| format!(": {e}")).unwrap_or_default();
        w.chaos.note(format!("{} {}{error}", r.run_id, r.status));
    }
}
