//! A deterministic simulator of the runtime under faults (feature `sim`, off by default).
//!
//! The real engine, node actors, supervisor, checkpoint writer, memory checkpointer, run store
//! and event log run on a tokio current-thread runtime whose time is paused (it jumps to the next
//! timer when every task waits), and every fault is decided by one random generator seeded from
//! the seed. The same seed therefore makes the same faults at the same places and ends the same
//! way, and a failure found among thousands of seeds replays exactly from its number
//! (docs/reliability.md, "Simulation").
//!
//! The world of one seed ([`run_seed`]):
//! - **the database** (`db::SimDb`): the memory backends of checkpoints, run records and run
//!   event logs, with the leases, fencing tokens and writer checks a shared database keeps
//!   (modelled on the PostgreSQL backends' statements). It survives every crash;
//! - **processes** (replicas): each an [`Engine`](crate::Engine) over its own connection to the
//!   database, a fault layer implementing [`Checkpointer`](crate::checkpoint::Checkpointer),
//!   [`RunStore`](crate::runs::RunStore) and [`RunEventLog`](crate::runs::RunEventLog), which
//!   fails a statement, delays it, commits it and loses the reply, crashes the process at the
//!   statement (before or after it commits), or cuts the process off the database for a while.
//!   Each process runs the runs it accepted the way `serve` does (claim a lease, fence the thread,
//!   run, publish events, record the end), renews its leases and takes over runs whose process is
//!   gone, reading a clock that may be skewed;
//! - **clients**: conversations of a small graph (a conditional edge, a parallel fan-out, an
//!   interrupt the client answers), submitted run after run to live processes, followed by
//!   subscribers that drop and rejoin, and sometimes cancelled;
//! - **a tool** (`tool::Tool`): the external service the graph's `work` and `solo` nodes call
//!   through [`NodeContext::effect`](crate::NodeContext::effect), journaled in the database's
//!   effect journal through the process's link. It counts calls by idempotency key, applies each
//!   key's effect once, and sometimes loses a reply.
//!
//! After each seed the invariants are checked ([`SeedReport::violations`]): no committed step lost, none
//! committed twice, one writer per thread, every run ended with a stated status, every subscriber
//! saw each event once and in order, a cancelled run stayed cancelled, each conversation's
//! final state equals a fault-free run's, each key's effect was applied once at the tool (and
//! each work item under one key), and a key was called again only inside the window the journal
//! cannot close (`tool.rs` states the rule).
//!
//! [`Bug`] switches re-introduce known bugs in the runtime's own code paths (and one in the
//! replica protocol the processes follow), to show the invariants catch them.

mod db;
mod link;
mod tool;
mod workload;
mod world;

pub use workload::{Conv, ConvUpdate};
pub use world::{run_seed, SeedReport, SimConfig};

use std::cell::Cell;

/// A known bug the simulator can put back, to show it finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Bug {
    /// A thread loaded to continue forgets the writes its unfinished superstep's finished tasks
    /// saved, so those tasks run (and commit) again after a crash or a takeover
    /// (`runtime::storage::saved`).
    ForgetFinishedTasks,
    /// The run event log appends a batch at its end wherever the writer believes it is, so a
    /// retried append whose first attempt committed adds the events twice (`runs::events`).
    AppendAnywhere,
    /// A process that claims a run does not fence its thread with the new token, so a process
    /// that lost the run (cut off, paused) goes on committing to the thread (the replica
    /// protocol the simulated processes follow, as `serve` does).
    NoFence,
    /// `NodeContext::effect` does not look its key up in the effect journal before calling, so
    /// a task run again after its call was journaled calls the tool again (`effect.rs`).
    SkipEffectLookup,
    /// `NodeContext::effect` does not journal a call's result, so a task run again after a
    /// crash anywhere between its call and its commit calls the tool again (`effect.rs`).
    SkipEffectWrite,
}

impl Bug {
    /// Every switch.
    pub const ALL: [Bug; 5] = [
        Bug::ForgetFinishedTasks,
        Bug::AppendAnywhere,
        Bug::NoFence,
        Bug::SkipEffectLookup,
        Bug::SkipEffectWrite,
    ];

    /// The switch's name on the command line (`forget-finished-tasks`, …).
    pub fn name(self) -> &'static str {
        match self {
            Bug::ForgetFinishedTasks => "forget-finished-tasks",
            Bug::AppendAnywhere => "append-anywhere",
            Bug::NoFence => "no-fence",
            Bug::SkipEffectLookup => "skip-effect-lookup",
            Bug::SkipEffectWrite => "skip-effect-write",
        }
    }

    /// Parses [`Bug::name`]'s form.
    pub fn parse(s: &str) -> Option<Bug> {
        Self::ALL.into_iter().find(|b| b.name() == s)
    }

    fn bit(self) -> u8 {
        1 << (self as u8)
    }
}

thread_local! {
    /// The switches on for the seed this OS thread simulates (each seed runs on one thread).
    static BUGS: Cell<u8> = const { Cell::new(0) };
    /// Whether this OS thread runs a simulation.
    static SIMULATING: Cell<bool> = const { Cell::new(false) };
}

/// Whether this thread runs a simulated seed: the runtime then keeps every task on the
/// simulation's runtime (the checkpoint writer, which otherwise has a thread of its own).
pub fn simulating() -> bool {
    SIMULATING.with(Cell::get)
}

/// Whether switch `b` is on for the simulation running on this thread.
pub fn bug(b: Bug) -> bool {
    BUGS.with(|c| c.get() & b.bit() != 0)
}

/// Turns the given switches on for this thread until dropped.
pub(crate) struct BugsOn(u8);

impl BugsOn {
    /// Marks this thread as simulating, with `bugs` on.
    pub(crate) fn set(bugs: &[Bug]) -> Self {
        let before = BUGS.with(|c| c.replace(bugs.iter().fold(0, |m, b| m | b.bit())));
        SIMULATING.with(|c| c.set(true));
        BugsOn(before)
    }
}

impl Drop for BugsOn {
    fn drop(&mut self) {
        BUGS.with(|c| c.set(self.0));
        SIMULATING.with(|c| c.set(false));
    }
}
