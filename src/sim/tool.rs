//! The simulated tool: an external service the workload's nodes call through
//! [`NodeContext::effect`](crate::NodeContext::effect), which counts the calls it gets by
//! idempotency key and applies each key's effect once (as a service honouring `Idempotency-Key`
//! does), and the bookkeeping that says whether a call made again under a key was one the effect
//! journal could not prevent.
//!
//! Every call is an *attempt* of its key, in one of these states:
//! - `Open`: the tool answered and the caller has not journaled the result yet;
//! - `LostReply`: the tool applied the effect and its reply was lost (the caller saw an error);
//! - `PutFailed`: the caller's journal write (`effect_put`) failed before it committed;
//! - `Stopped`: the task was stopped (its run failed or was cancelled, its future dropped) while
//!   the call or its journal write was in flight, in a process still alive;
//! - `Journaled`: the caller's journal write committed (whether or not its reply came back);
//! - `Returned`: `effect` gave the result to the node while the attempt was still `Open`, that
//!   is without a committed journal write.
//!
//! **The window rule** (checked at each call, [`Tool::call`]): a call of a key called before is a
//! *repeat*; a repeat is allowed only when every earlier attempt of the key ended inside the
//! window between the tool applying the effect and the journal write committing: its reply was
//! lost, its journal write failed, its task was stopped before the write committed, its process
//! died before the write committed (an `Open` attempt of a dead process), or it is still open
//! in another live process whose run of
//! the same task overlaps this one (the caller's journal lookup ran before that attempt's write:
//! a run taken over while its old owner's statement was still delayed). A repeat after an
//! attempt that was `Journaled` before the caller's lookup, or `Returned`, is a violation: the
//! journal held the result, or should have.

use super::link::{Chaos, Link};
use crate::node::NodeError;
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

/// How long a call takes at the tool (simulated): a process can die while it is in flight.
const CALL_MS: u64 = 5;

/// What the tool answers for work item `item` (the same in every world: the answer compares
/// with the fault-free reference's).
pub(crate) fn receipt(item: u64) -> u64 {
    item * 13 + 5
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    Open,
    LostReply,
    PutFailed,
    Stopped,
    Journaled { at: u64 },
    Returned,
}

struct Attempt {
    key: String,
    by: String,
    link: Option<Arc<Link>>,
    /// The logical clock when the call was made.
    at: u64,
    state: State,
}

#[derive(Default)]
struct Books {
    /// A logical clock: every call, lookup and journal write takes the next tick.
    tick: u64,
    attempts: Vec<Attempt>,
    /// Calls by key.
    calls: BTreeMap<String, u64>,
    /// Each key's effect as applied: the work item and how many times it was applied.
    applied: BTreeMap<String, (u64, u64)>,
    /// Each process's journal lookups: (process, key) → tick of the latest.
    lookups: BTreeMap<(String, String), u64>,
    violations: Vec<String>,
}

/// The tool of one world (the simulated one or the fault-free reference).
pub(crate) struct Tool {
    books: Mutex<Books>,
    rng: Mutex<StdRng>,
    /// Share of calls whose reply is lost after the effect was applied.
    lose_reply: f64,
    chaos: Option<Arc<Chaos>>,
}

impl Tool {
    /// A tool that never fails (the reference world's).
    pub(crate) fn reliable() -> Arc<Self> {
        Arc::new(Self {
            books: Mutex::default(),
            rng: Mutex::new(StdRng::seed_from_u64(0)),
            lose_reply: 0.0,
            chaos: None,
        })
    }

    /// The simulated world's tool: it loses a reply at `lose_reply` while `chaos` is not calm,
    /// decided by a generator of its own seeded from `seed`.
    pub(crate) fn new(seed: u64, lose_reply: f64, chaos: Arc<Chaos>) -> Arc<Self> {
        Arc::new(Self {
            books: Mutex::default(),
            rng: Mutex::new(StdRng::seed_from_u64(seed ^ 0x7001_7001_7001_7001)),
            lose_reply,
            chaos: Some(chaos),
        })
    }

    fn books(&self) -> MutexGuard<'_, Books> {
        self.books.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn note(&self, what: String) {
        if let Some(c) = &self.chaos {
            c.note(what);
        }
    }

    fn count(&self, what: &'static str) {
        if let Some(c) = &self.chaos {
            c.count(what);
        }
    }

    /// A call of `key` for work item `item` from the process behind `link`: applies the effect
    /// unless the key was applied, counts the call, checks the window rule, and answers after
    /// [`CALL_MS`] — unless the process died meanwhile (no reply) or the reply is lost.
    async fn call(&self, link: Option<&Arc<Link>>, key: &str, item: u64) -> Result<u64, String> {
        let by = link.map_or_else(|| "reference".to_string(), |l| l.name.clone());
        if link.is_some_and(|l| l.is_dead()) {
            std::future::pending::<()>().await;
        }
        let repeat = {
            let mut b = self.books();
            b.tick += 1;
            let now = b.tick;
            *b.calls.entry(key.to_string()).or_default() += 1;
            let applied = b.applied.entry(key.to_string()).or_insert((item, 0));
            if applied.1 == 0 {
                applied.1 = 1;
            }
            let verdict = Self::judge(&b, &by, key);
            if let Err(v) = &verdict {
                b.violations.push(v.clone());
            }
            b.attempts.push(Attempt {
                key: key.to_string(),
                by: by.clone(),
                link: link.cloned(),
                at: now,
                state: State::Open,
            });
            verdict
        };
        self.count("tool call");
        match repeat {
            Ok(None) => self.note(format!("{by} tool call {key} item {item}")),
            Ok(Some(why)) => {
                self.count("tool repeat");
                self.count(why);
                self.note(format!("{by} tool call {key} item {item} again ({why})"));
            }
            Err(v) => self.note(format!(
                "{by} tool call {key} item {item} again: VIOLATION {v}"
            )),
        }
        tokio::time::sleep(Duration::from_millis(CALL_MS)).await;
        if link.is_some_and(|l| l.is_dead()) {
            std::future::pending::<()>().await;
        }
        let calm = self.chaos.as_ref().is_none_or(|c| c.is_calm());
        let lost = !calm
            && self
                .rng
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .random_bool(self.lose_reply);
        if lost {
            self.set(&by, key, State::LostReply);
            self.count("tool lost reply");
            self.note(format!("{by} tool reply of {key} lost"));
            return Err(format!("{by}: the tool's reply for {key} was lost"));
        }
        Ok(receipt(item))
    }

    /// The window rule for a call of `key` by `by` (before it is recorded): `Ok(None)` a first
    /// call, `Ok(Some(why))` an allowed repeat, `Err` a repeat outside the window.
    fn judge(b: &Books, by: &str, key: &str) -> Result<Option<&'static str>, String> {
        let earlier: Vec<&Attempt> = b.attempts.iter().filter(|a| a.key == key).collect();
        if earlier.is_empty() {
            return Ok(None);
        }
        // The caller's own lookup for this attempt: after its own previous attempt of the key.
        let own_last = earlier.iter().filter(|a| a.by == by).map(|a| a.at).max();
        let lookup = b
            .lookups
            .get(&(by.to_string(), key.to_string()))
            .copied()
            .filter(|l| own_last.is_none_or(|o| *l > o));
        let mut why = "tool repeat: reply lost";
        for a in &earlier {
            let reason = match a.state {
                State::LostReply => "tool repeat: reply lost",
                State::PutFailed => "tool repeat: journal write failed",
                State::Stopped => "tool repeat: task stopped",
                State::Open if a.link.as_ref().is_some_and(|l| l.is_dead()) => {
                    "tool repeat: process died"
                }
                State::Open if a.by != by => "tool repeat: overlapping run",
                State::Journaled { at } if a.by != by && lookup.is_some_and(|l| l < at) => {
                    "tool repeat: overlapping run"
                }
                state => {
                    return Err(format!(
                        "each key's effect is called again only inside its journal window: \
                         {by} called {key} again after {}'s call ended {state:?} (its lookup: \
                         {lookup:?})",
                        a.by
                    ))
                }
            };
            // The most telling reason: the latest earlier attempt's.
            why = reason;
        }
        Ok(Some(why))
    }

    /// Moves `by`'s open attempt of `key` to `state`.
    fn set(&self, by: &str, key: &str, state: State) {
        let mut b = self.books();
        b.tick += 1;
        let now = b.tick;
        let state = match state {
            State::Journaled { .. } => State::Journaled { at: now },
            s => s,
        };
        if let Some(a) = b
            .attempts
            .iter_mut()
            .rev()
            .find(|a| a.key == key && a.by == by && a.state == State::Open)
        {
            a.state = state;
        }
    }

    /// `by` looked `key` up in the journal (the statement ran).
    pub(crate) fn looked_up(&self, by: &str, key: &str) {
        let mut b = self.books();
        b.tick += 1;
        let now = b.tick;
        b.lookups.insert((by.to_string(), key.to_string()), now);
    }

    /// `by`'s journal write of `key` committed.
    pub(crate) fn journaled(&self, by: &str, key: &str) {
        self.set(by, key, State::Journaled { at: 0 });
    }

    /// `by`'s journal write of `key` failed before it committed.
    pub(crate) fn put_failed(&self, by: &str, key: &str) {
        self.set(by, key, State::PutFailed);
    }

    /// The violations the calls made, and of the effects as applied: each key's effect applied
    /// once, and each work item's under one key only.
    pub(crate) fn violations(&self) -> Vec<String> {
        let b = self.books();
        let mut out = b.violations.clone();
        let mut keys_of: BTreeMap<u64, BTreeSet<&str>> = BTreeMap::new();
        for (key, (item, times)) in &b.applied {
            if *times != 1 {
                out.push(format!(
                    "each key's effect is applied once: {key} applied {times} times"
                ));
            }
            keys_of.entry(*item).or_default().insert(key);
        }
        for (item, keys) in keys_of {
            if keys.len() > 1 {
                out.push(format!(
                    "each key's effect is applied once: work item {item} applied under {} keys \
                     ({keys:?})",
                    keys.len()
                ));
            }
        }
        out
    }

    /// Calls made and distinct keys called.
    pub(crate) fn totals(&self) -> (u64, u64) {
        let b = self.books();
        (b.calls.values().sum(), b.calls.len() as u64)
    }
}

/// A process's way to the tool: what the workload's nodes call. A dead process calls nothing
/// (its calls never start, or never get their reply).
#[derive(Clone)]
pub(crate) struct ToolPort {
    pub tool: Arc<Tool>,
    pub link: Option<Arc<Link>>,
}

impl ToolPort {
    fn by(&self) -> String {
        self.link
            .as_ref()
            .map_or_else(|| "reference".to_string(), |l| l.name.clone())
    }

    /// Calls the tool for `item` under `key` (a lost reply is a retryable node error).
    pub(crate) async fn call(&self, key: &str, item: u64) -> Result<u64, NodeError> {
        self.tool
            .call(self.link.as_ref(), key, item)
            .await
            .map_err(NodeError::Retryable)
    }

    /// `effect` gave the result of `key` to the node: an attempt still open had no committed
    /// journal write.
    pub(crate) fn returned(&self, key: &str) {
        self.tool.set(&self.by(), key, State::Returned);
    }

    /// A guard for the node's call of `key`: dropped before [`ToolPort::returned`] in a live
    /// process, it marks an attempt still open as `Stopped`.
    pub(crate) fn guard(&self, key: String) -> CallGuard<'_> {
        CallGuard { port: self, key }
    }
}

/// See [`ToolPort::guard`].
pub(crate) struct CallGuard<'a> {
    port: &'a ToolPort,
    key: String,
}

impl Drop for CallGuard<'_> {
    fn drop(&mut self) {
        // A dead process's attempt stays open: it died in the window.
        if !self.port.link.as_ref().is_some_and(|l| l.is_dead()) {
            self.port
                .tool
                .set(&self.port.by(), &self.key, State::Stopped);
        }
    }
}
