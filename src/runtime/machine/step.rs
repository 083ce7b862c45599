//! The superstep machine: every rule of one superstep, with no I/O and no actors.
//!
//! Given a superstep's tasks, [`Step`] says which may run now ([`Step::ready`]: the **dependency
//! rule** — a task runs once every task it is `after` is done — and the **batch rule** — at most
//! `batch_limit` tasks of a batch run at once), takes each result ([`Step::complete`]: an update,
//! an interrupt, or a failure to retry or not), drops results of superseded attempts, and says how
//! the superstep ends ([`Step::end`]): still running, **paused** (a task interrupted, or tasks wait
//! on one: the pause rule), or **complete** with every update in task order (the **join rule** —
//! nothing merges until every task is done — and **determinism**: the merge order is the task
//! order, whatever order results arrived in). The supervisor performs what it says: sending tasks
//! to node actors, saving writes, timers for retries, checkpoints.
//!
//! It is generic over the update type, so it is tested directly (`tests/step_machine.rs`, with
//! property tests over random graphs, completion orders, failures and retries).

use super::superstep::TaskSpec;
use crate::events::Interrupt;

/// Where a task of the superstep is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Slot {
    /// Not started: waiting for its dependencies or for room in its batch.
    Waiting,
    /// Sent to its node.
    Running,
    /// Failed; runs again when its backoff ends.
    RetryWait,
    /// Finished with an update.
    Done,
    /// Paused at an interrupt.
    Interrupted,
}

/// What an attempt of a task produced.
#[derive(Clone, Debug, PartialEq)]
pub enum Outcome<U> {
    /// An update.
    Updated(U),
    /// A pause.
    Interrupted(Interrupt),
    /// A failure; `retry` says whether the node's policy allows another attempt.
    Failed {
        /// Whether another attempt is allowed.
        retry: bool,
    },
}

/// What the supervisor must do after a result.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Effect {
    /// Nothing more than pumping: dispatch what became ready.
    Continue,
    /// Start the task's backoff, then [`Step::retry_due`].
    Retry,
    /// The task failed for good: the run fails.
    Fail,
    /// A late result of a superseded attempt: ignore it.
    Ignore,
}

/// How the superstep stands.
#[derive(Clone, Debug, PartialEq)]
pub enum End<U> {
    /// Tasks are running or waiting for a retry.
    Running,
    /// Nothing can run: the interrupts pending (and tasks waiting on them).
    Paused(Vec<Interrupt>),
    /// Every task is done: their updates, in task order.
    Complete(Vec<U>),
}

/// One superstep's bookkeeping. See the module docs for its rules.
#[derive(Clone, Debug)]
pub struct Step<U> {
    slots: Vec<Slot>,
    attempts: Vec<u32>,
    updates: Vec<Option<U>>,
    interrupts: Vec<Option<Interrupt>>,
    running: usize,
}

impl<U> Step<U> {
    /// A superstep of `n` tasks, none started.
    pub fn new(n: usize) -> Self {
        let mut step = Self {
            slots: Vec::with_capacity(n),
            attempts: Vec::with_capacity(n),
            updates: Vec::with_capacity(n),
            interrupts: Vec::with_capacity(n),
            running: 0,
        };
        step.reset(n);
        step
    }

    /// Makes this a superstep of `n` tasks, none started — [`Step::new`] keeping the buffers (a
    /// supervisor resets its superstep once per superstep).
    pub fn reset(&mut self, n: usize) {
        self.slots.clear();
        self.slots.resize(n, Slot::Waiting);
        self.attempts.clear();
        self.attempts.resize(n, 0);
        self.updates.clear();
        self.updates.resize_with(n, || None);
        self.interrupts.clear();
        self.interrupts.resize(n, None);
        self.running = 0;
    }

    /// Task `i` finished before (a saved write): it is done with `update` and never runs again.
    pub fn restore_done(&mut self, i: usize, update: U) {
        self.updates[i] = Some(update);
        self.slots[i] = Slot::Done;
    }

    /// Task `i` paused before, and its pause is not answered: it stays paused.
    pub fn restore_interrupted(&mut self, i: usize, int: Interrupt) {
        self.interrupts[i] = Some(int);
        self.slots[i] = Slot::Interrupted;
    }

    /// The tasks that may start now, in task order: waiting, every dependency done, and room in
    /// their batch (counting the ones this call returns).
    pub fn ready(&self, tasks: &[TaskSpec]) -> Vec<usize> {
        let mut out = Vec::new();
        self.ready_into(tasks, &mut out);
        out
    }

    /// [`Step::ready`] into `out` (cleared first), so a caller reuses one buffer.
    pub fn ready_into(&self, tasks: &[TaskSpec], out: &mut Vec<usize>) {
        out.clear();
        // Tasks running per limited batch, counted only when a batch asks for it (the common
        // superstep has none, and this runs after every result).
        let mut busy: Vec<(u32, usize)> = Vec::new();
        for (i, t) in tasks.iter().enumerate() {
            if self.slots[i] != Slot::Waiting {
                continue;
            }
            let deps_done = t
                .after
                .iter()
                .all(|&d| self.slots.get(d as usize) == Some(&Slot::Done));
            if !deps_done {
                continue;
            }
            if let (Some(b), Some(limit)) = (t.batch, t.batch_limit) {
                let at = match busy.iter().position(|(x, _)| *x == b) {
                    Some(at) => at,
                    None => {
                        let n = tasks
                            .iter()
                            .enumerate()
                            .filter(|(j, u)| {
                                u.batch == Some(b)
                                    && matches!(self.slots[*j], Slot::Running | Slot::RetryWait)
                            })
                            .count();
                        busy.push((b, n));
                        busy.len() - 1
                    }
                };
                if busy[at].1 >= limit as usize {
                    continue;
                }
                busy[at].1 += 1;
            }
            out.push(i);
        }
    }

    /// Task `i` was sent to its node; returns the attempt number (1 for the first).
    pub fn dispatch(&mut self, i: usize) -> u32 {
        self.attempts[i] += 1;
        self.slots[i] = Slot::Running;
        self.running += 1;
        self.attempts[i]
    }

    /// Task `i`'s dispatch failed before it reached the node: it waits again.
    pub fn undispatch(&mut self, i: usize) {
        if self.slots[i] == Slot::Running {
            self.slots[i] = Slot::Waiting;
            self.running -= 1;
        }
    }

    /// True when attempt `attempt` of task `i` is the one running (not a late result of a
    /// superseded or cancelled attempt).
    pub fn is_current(&self, i: usize, attempt: u32) -> bool {
        self.slots.get(i) == Some(&Slot::Running) && self.attempts[i] == attempt
    }

    /// Whether an update from running task `i` completes the superstep: every other task is
    /// done. (Its update then goes straight into the checkpoint that ends the superstep, so the
    /// supervisor saves no separate write of it.)
    pub fn completes_with(&self, i: usize) -> bool {
        self.slots.get(i) == Some(&Slot::Running)
            && self
                .slots
                .iter()
                .enumerate()
                .all(|(j, s)| j == i || *s == Slot::Done)
    }

    /// Takes the result of attempt `attempt` of task `i`.
    pub fn complete(&mut self, i: usize, attempt: u32, outcome: Outcome<U>) -> Effect {
        if i >= self.slots.len() || self.slots[i] != Slot::Running || self.attempts[i] != attempt {
            return Effect::Ignore;
        }
        self.running -= 1;
        match outcome {
            Outcome::Updated(u) => {
                self.updates[i] = Some(u);
                self.slots[i] = Slot::Done;
                Effect::Continue
            }
            Outcome::Interrupted(int) => {
                self.interrupts[i] = Some(int);
                self.slots[i] = Slot::Interrupted;
                Effect::Continue
            }
            Outcome::Failed { retry: true } => {
                self.slots[i] = Slot::RetryWait;
                Effect::Retry
            }
            Outcome::Failed { retry: false } => Effect::Fail,
        }
    }

    /// Task `i`'s backoff ended: it may start again. False if it was not waiting for a retry.
    pub fn retry_due(&mut self, i: usize) -> bool {
        if self.slots.get(i) != Some(&Slot::RetryWait) {
            return false;
        }
        self.slots[i] = Slot::Waiting;
        true
    }

    /// Nothing is running or waiting for a retry.
    pub fn quiescent(&self) -> bool {
        self.running == 0 && !self.slots.contains(&Slot::RetryWait)
    }

    /// How the superstep stands; on `Complete` the updates are taken out.
    pub fn end(&mut self) -> End<U>
    where
        U: Clone,
    {
        if !self.quiescent() {
            return End::Running;
        }
        if self.slots.contains(&Slot::Interrupted) || self.slots.contains(&Slot::Waiting) {
            return End::Paused(self.interrupts.iter().flatten().cloned().collect());
        }
        End::Complete(
            std::mem::take(&mut self.updates)
                .into_iter()
                .flatten()
                .collect(),
        )
    }

    /// Where task `i` is.
    pub fn slot(&self, i: usize) -> Option<Slot> {
        self.slots.get(i).copied()
    }

    /// The updates so far, by task (what dependency-driven tasks see of their dependencies).
    pub fn updates(&self) -> &[Option<U>] {
        &self.updates
    }

    /// The interrupts so far, by task.
    pub fn interrupts(&self) -> &[Option<Interrupt>] {
        &self.interrupts
    }

    /// Takes each task's update and interrupt out (the superstep is over: its run is ending), by
    /// task; the slots stay as they are, so a late report still finds its task.
    pub fn take_results(&mut self) -> Vec<(Option<U>, Option<Interrupt>)> {
        self.updates
            .iter_mut()
            .zip(&mut self.interrupts)
            .map(|(u, i)| (u.take(), i.take()))
            .collect()
    }

    /// The number of tasks.
    pub fn len(&self) -> usize {
        self.slots.len()
    }

    /// True for a superstep without tasks.
    pub fn is_empty(&self) -> bool {
        self.slots.is_empty()
    }
}
