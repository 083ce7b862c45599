//! The seed's fault decisions and each process's link to the database.
//!
//! Every storage call of a process passes [`Link::enter`] before it reaches the database and
//! [`Link::leave`] after: the seeded generator decides there whether the statement is delayed,
//! fails, commits and loses its reply, or crashes the process. A dead process's calls never
//! return (its in-flight statements hang, as they do when a process is gone), so nothing it had
//! in memory reaches the database after its crash.

use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;
use tokio::time::Instant;

/// How often each fault happens in one seed (per storage call).
#[derive(Clone, Debug)]
pub(crate) struct Rates {
    pub fail: f64,
    pub lose_reply: f64,
    pub crash: f64,
    pub delay: f64,
    pub max_delay_ms: u64,
    /// A delay past the lease's life (a renewal that comes too late).
    pub long_delay: f64,
}

impl Rates {
    pub(crate) fn none() -> Self {
        Self {
            fail: 0.0,
            lose_reply: 0.0,
            crash: 0.0,
            delay: 0.0,
            max_delay_ms: 0,
            long_delay: 0.0,
        }
    }
}

/// What happens to one storage call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Step {
    Go,
    Fail,
    LoseReply,
    CrashBefore,
    CrashAfter,
}

/// The seed's generator, rates and trace, shared by every process of the seed.
pub(crate) struct Chaos {
    rng: Mutex<StdRng>,
    rates: Rates,
    /// Off once the faults stop (the world settles before the invariants are checked).
    calm: AtomicBool,
    trace: Mutex<Vec<String>>,
    counts: Mutex<BTreeMap<&'static str, u64>>,
    start: Instant,
    pub lease_ttl_ms: u64,
    /// Storage calls made so far (by every process).
    calls: std::sync::atomic::AtomicU64,
    /// Crash the calling process at this call (0-based), before the statement or after it.
    crash_at: Option<(u64, bool)>,
}

impl Chaos {
    pub(crate) fn new(
        seed: u64,
        rates: Rates,
        lease_ttl_ms: u64,
        crash_at: Option<(u64, bool)>,
    ) -> Self {
        Self {
            calls: Default::default(),
            crash_at,
            rng: Mutex::new(StdRng::seed_from_u64(seed)),
            rates,
            calm: AtomicBool::new(false),
            trace: Mutex::new(Vec::new()),
            counts: Mutex::new(BTreeMap::new()),
            start: Instant::now(),
            lease_ttl_ms,
        }
    }

    /// The seed's fault rates.
    pub(crate) fn rates(&self) -> &Rates {
        &self.rates
    }

    pub(crate) fn rng(&self) -> MutexGuard<'_, StdRng> {
        self.rng.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Milliseconds of simulated time since the seed started.
    pub(crate) fn elapsed_ms(&self) -> u64 {
        Instant::now().duration_since(self.start).as_millis() as u64
    }

    /// Notes an event in the trace (what the determinism digest covers).
    pub(crate) fn note(&self, what: impl Into<String>) {
        let what = what.into();
        let at = self.elapsed_ms();
        if live_trace() {
            eprintln!("{at} {}", what_ref(&what));
        }
        self.trace
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(format!("{at} {what}"));
    }

    pub(crate) fn count(&self, what: &'static str) {
        *self
            .counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .entry(what)
            .or_default() += 1;
    }

    pub(crate) fn counts(&self) -> BTreeMap<&'static str, u64> {
        self.counts
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    pub(crate) fn trace(&self) -> Vec<String> {
        self.trace.lock().unwrap_or_else(|p| p.into_inner()).clone()
    }

    pub(crate) fn calm_down(&self) {
        self.calm.store(true, Ordering::SeqCst);
    }

    pub(crate) fn is_calm(&self) -> bool {
        self.calm.load(Ordering::SeqCst)
    }

    /// The delay and the fate of one call; `writes`: whether it changes the database (only
    /// those lose a reply that matters).
    /// Storage calls made so far.
    pub(crate) fn calls(&self) -> u64 {
        self.calls.load(Ordering::SeqCst)
    }

    fn decide(&self, writes: bool) -> (u64, Step) {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        if self.is_calm() {
            return (0, Step::Go);
        }
        match self.crash_at {
            Some((at, after)) if at == call => {
                return (
                    0,
                    if after {
                        Step::CrashAfter
                    } else {
                        Step::CrashBefore
                    },
                );
            }
            Some(_) => return (0, Step::Go),
            None => {}
        }
        let r = &self.rates;
        let mut rng = self.rng();
        let mut delay = 0;
        if rng.random_bool(r.delay) {
            delay = rng.random_range(1..=r.max_delay_ms.max(1));
        }
        if rng.random_bool(r.long_delay) {
            delay = self.lease_ttl_ms + rng.random_range(1..=self.lease_ttl_ms);
        }
        let x: f64 = rng.random();
        let step = if x < r.fail {
            Step::Fail
        } else if x < r.fail + r.lose_reply {
            if writes {
                Step::LoseReply
            } else {
                Step::Fail
            }
        } else if x < r.fail + r.lose_reply + r.crash {
            if writes && rng.random_bool(0.5) {
                Step::CrashAfter
            } else {
                Step::CrashBefore
            }
        } else {
            Step::Go
        };
        (delay, step)
    }
}

/// Whether the trace is printed as it happens (`PW_SIM_LIVE=1`: to see where a seed hangs).
fn live_trace() -> bool {
    static LIVE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *LIVE.get_or_init(|| std::env::var_os("PW_SIM_LIVE").is_some())
}

fn what_ref(s: &str) -> &str {
    s
}

/// One process's connection to the database: whether it is alive, cut off, how its clock is
/// skewed, and the fencing tokens it writes threads with.
pub(crate) struct Link {
    pub name: String,
    pub chaos: std::sync::Arc<Chaos>,
    dead: AtomicBool,
    died: tokio::sync::watch::Sender<bool>,
    cut_until: Mutex<Option<Instant>>,
    /// Added to the simulated wall clock this process reads (ms).
    pub skew_ms: i64,
    /// The fencing token this process writes each fenced thread with.
    pub fences: Mutex<BTreeMap<String, u64>>,
    /// The lease token of this process's latest claim of a run on each thread (what the
    /// one-writer invariant orders commits by).
    pub claims: Mutex<BTreeMap<String, u64>>,
}

/// Why a call of a process did not reach the database (or lost its reply).
pub(crate) type Refused = String;

impl Link {
    pub(crate) fn new(name: String, chaos: std::sync::Arc<Chaos>, skew_ms: i64) -> Self {
        Self {
            name,
            chaos,
            dead: AtomicBool::new(false),
            died: tokio::sync::watch::channel(false).0,
            cut_until: Mutex::new(None),
            skew_ms,
            fences: Mutex::new(BTreeMap::new()),
            claims: Mutex::new(BTreeMap::new()),
        }
    }

    /// This process's wall clock, ms since the Unix epoch (simulated, skewed).
    pub(crate) fn now_ms(&self) -> u64 {
        (1_800_000_000_000i64 + self.chaos.elapsed_ms() as i64 + self.skew_ms).max(0) as u64
    }

    pub(crate) fn is_dead(&self) -> bool {
        self.dead.load(Ordering::SeqCst)
    }

    /// Resolves once the process has died.
    pub(crate) fn died(&self) -> tokio::sync::watch::Receiver<bool> {
        self.died.subscribe()
    }

    /// Kills the process: from now on none of its calls returns.
    pub(crate) fn kill(&self, why: &str) {
        if !self.dead.swap(true, Ordering::SeqCst) {
            self.chaos.note(format!("{} dies {why}", self.name));
            self.chaos.count("crash");
            self.died.send_replace(true);
        }
    }

    /// Cuts the process off the database for `ms`.
    pub(crate) fn cut(&self, ms: u64) {
        *self.cut_until.lock().unwrap_or_else(|p| p.into_inner()) =
            Some(Instant::now() + Duration::from_millis(ms));
        self.chaos.note(format!("{} cut {ms}ms", self.name));
        self.chaos.count("partition");
    }

    fn is_cut(&self) -> bool {
        self.cut_until
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .is_some_and(|t| Instant::now() < t)
    }

    async fn hang() -> ! {
        std::future::pending::<()>().await;
        unreachable!("a pending future never resolves")
    }

    /// Before a call `op` reaches the database: delays it, refuses it, or crashes the process.
    pub(crate) async fn enter(&self, op: &'static str, writes: bool) -> Result<Step, Refused> {
        if self.is_dead() {
            Self::hang().await;
        }
        if self.is_cut() {
            return Err(format!("{}: cut off the database", self.name));
        }
        let (delay, step) = self.chaos.decide(writes);
        if delay > 0 {
            self.chaos.count("delay");
            tokio::time::sleep(Duration::from_millis(delay)).await;
            if self.is_dead() {
                Self::hang().await;
            }
            if self.is_cut() {
                return Err(format!("{}: cut off the database", self.name));
            }
        }
        match step {
            Step::Go => Ok(step),
            Step::Fail => {
                self.chaos.note(format!("{} {op} fails", self.name));
                self.chaos.count("fail");
                Err(format!("{}: injected failure of {op}", self.name))
            }
            Step::CrashBefore => {
                self.kill(&format!("before {op}"));
                Self::hang().await
            }
            Step::LoseReply | Step::CrashAfter => Ok(step),
        }
    }

    /// After the call reached the database: loses its reply, or crashes the process.
    pub(crate) async fn leave(&self, op: &'static str, step: Step) -> Result<(), Refused> {
        match step {
            Step::LoseReply => {
                self.chaos.note(format!("{} {op} reply lost", self.name));
                self.chaos.count("lost reply");
                Err(format!("{}: the reply of {op} was lost", self.name))
            }
            Step::CrashAfter => {
                self.kill(&format!("after {op}"));
                Self::hang().await
            }
            _ => {
                if self.is_dead() {
                    Self::hang().await;
                }
                Ok(())
            }
        }
    }
}
