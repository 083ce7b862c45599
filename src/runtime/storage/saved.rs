//! A thread as the supervisor resumes it: state, pending tasks, and what those tasks already did.
//!
//! Both the durable path (rebuilt from checkpoints and task writes) and the ephemeral path (kept
//! in memory when no checkpointer is configured) produce a [`SavedThread`], so the supervisor has
//! one way to start, continue and resume runs.

use crate::checkpoint::{BodyKind, CheckpointRecord};
use crate::events::Interrupt;
use crate::ids::CheckpointId;
use crate::runtime::machine::step::Step;
use crate::runtime::machine::superstep::{self, TaskSpec};
use crate::state::State;
use std::hash::{BuildHasher, Hasher};

/// What a pending task of the current superstep already produced.
#[derive(Clone, Debug)]
pub(crate) enum SavedWrite<S: State> {
    /// It finished: reuse its update (boxed, as the superstep holds it), do not run it again.
    Done(Box<S::Update>),
    /// It paused with this interrupt.
    Interrupted(Interrupt),
}

/// What identifies a stored checkpoint's contents: its id and a digest of everything it holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct HeadIdentity {
    pub id: CheckpointId,
    digest: u64,
}

impl HeadIdentity {
    /// The identity of `rec` as stored (the same for the record written and the record read back).
    pub fn of(rec: &CheckpointRecord) -> Self {
        let mut h = foldhash::fast::FixedState::with_seed(0x706c_616e_7772_6974).build_hasher();
        h.write_u64(rec.parent.map_or(u64::MAX, |p| p.0));
        h.write_u8(match rec.kind {
            BodyKind::Snapshot => 0,
            BodyKind::Delta => 1,
        });
        for part in [
            &rec.body[..],
            &rec.next_tasks[..],
            rec.graph_fingerprint.as_bytes(),
        ] {
            h.write_usize(part.len());
            h.write(part);
        }
        h.write_u64(rec.metadata.step);
        h.write_u64(rec.metadata.created_at_ms);
        Self {
            id: rec.id,
            digest: h.finish(),
        }
    }
}

/// What a task of a superstep produced: its update, or the interrupt it paused at.
pub(crate) type TaskResult<S> = (Option<Box<<S as State>::Update>>, Option<Interrupt>);

/// A thread's resumable position.
#[derive(Clone, Debug)]
pub(crate) struct SavedThread<S: State> {
    /// The state at the head checkpoint (shared with running tasks; copied on write).
    pub state: std::sync::Arc<S>,
    /// Supersteps run on the thread so far.
    pub step: u64,
    /// The head checkpoint (`None` for a thread with no checkpoint).
    pub head: Option<CheckpointId>,
    /// What the head checkpoint holds, as stored (set where the record was made or read): lets a
    /// paused thread's state kept in memory be used again only while storage has that very record
    /// ([`super::paused`]).
    pub head_identity: Option<HeadIdentity>,
    /// Tasks of the next superstep (empty: the thread is idle).
    pub tasks: Vec<TaskSpec>,
    /// Tasks of deferred nodes waiting for every other task of the run to finish
    /// (`StateGraph::defer`); stored after `tasks` in a checkpoint's `next_tasks`.
    pub deferred: Vec<TaskSpec>,
    /// Writes saved by those tasks, by task index.
    pub writes: Vec<Option<SavedWrite<S>>>,
    /// Answers given to those tasks' `interrupt` calls, in call order, by task index.
    pub answers: Vec<Vec<serde_json::Value>>,
    /// Where those tasks that are command nodes said to go next (`Command::goto`), by task
    /// index: kept with their finished writes until the superstep ends.
    pub gotos: Vec<Option<crate::graph::Route>>,
    /// Results memoised by those tasks (`NodeContext::memo`), by task index.
    pub memos: Vec<std::collections::BTreeMap<String, serde_json::Value>>,
    /// True when the run paused before `tasks` ran (an `interrupt_before`/`interrupt_after` node).
    pub paused_before: bool,
    /// The interrupts of such a pause.
    pub pauses: Vec<Interrupt>,
    /// Which rule made that pause.
    pub pause_at: crate::checkpoint::PauseAt,
    /// Checkpoints since the last snapshot, and their body bytes (for the snapshot policy).
    pub deltas_since_snapshot: u64,
    /// Bytes of deltas written since the last snapshot.
    pub delta_bytes_since_snapshot: u64,
    /// Bytes of the last snapshot.
    pub snapshot_bytes: u64,
    /// Command updates saved as writes at the head and already applied to `state` (LangGraph's
    /// writes of the null task: `command: {update, resume}` on a thread paused inside a node).
    /// While there are any, `state` is not the head checkpoint's: the next checkpoint is a
    /// snapshot, and the state is not kept in memory as the head's ([`super::paused`]).
    pub head_edits: u32,
}

impl<S: State> SavedThread<S> {
    /// The pending tasks as a checkpoint stores them: the runnable ones, then the waiting
    /// deferred ones.
    pub fn stored_tasks(&self) -> Vec<TaskSpec> {
        superstep::stored_next(&self.tasks, &self.deferred)
    }

    /// Hands the saved writes of the pending superstep to `step` (taking them): a task that
    /// finished is done and never runs again; one that paused stays paused while the call it
    /// paused on has no answer.
    pub fn restore_into(&mut self, step: &mut Step<Box<S::Update>>) {
        let n = self.tasks.len();
        for (i, w) in std::mem::take(&mut self.writes)
            .into_iter()
            .enumerate()
            .take(n)
        {
            match w {
                // The simulator's bug switch: forget the finished task, so it runs again.
                Some(SavedWrite::Done(_)) if sim_bug!(ForgetFinishedTasks) => {}
                Some(SavedWrite::Done(u)) => step.restore_done(i, u),
                Some(SavedWrite::Interrupted(int))
                    if self.answers.get(i).map_or(0, Vec::len) <= int.index as usize =>
                {
                    step.restore_interrupted(i, int)
                }
                _ => {}
            }
        }
    }

    /// Keeps what the pending superstep's tasks produced (`results`, by task: [`Step::take_results`])
    /// as its saved writes, for the thread's next run.
    pub fn keep_results(&mut self, results: Vec<TaskResult<S>>) {
        let mut results = results.into_iter();
        self.writes = (0..self.tasks.len())
            .map(|_| match results.next() {
                Some((Some(u), _)) => Some(SavedWrite::Done(u)),
                Some((None, Some(int))) => Some(SavedWrite::Interrupted(int)),
                _ => None,
            })
            .collect();
    }

    /// Forgets the pending superstep: its tasks, the waiting deferred ones and their writes.
    pub fn clear_tasks(&mut self) {
        self.tasks.clear();
        self.deferred.clear();
        self.writes.clear();
        self.gotos.clear();
    }

    /// A brand-new thread.
    pub fn new() -> Self {
        Self {
            state: std::sync::Arc::new(S::default()),
            step: 0,
            head: None,
            head_identity: None,
            tasks: Vec::new(),
            deferred: Vec::new(),
            writes: Vec::new(),
            gotos: Vec::new(),
            answers: Vec::new(),
            memos: Vec::new(),
            paused_before: false,
            pauses: Vec::new(),
            pause_at: crate::checkpoint::PauseAt::Before,
            deltas_since_snapshot: 0,
            delta_bytes_since_snapshot: 0,
            snapshot_bytes: 0,
            head_edits: 0,
        }
    }

    /// The pause to record with the next checkpoint, if the thread is paused before its tasks.
    pub fn pause(&self) -> Option<crate::checkpoint::Pause> {
        self.paused_before.then(|| crate::checkpoint::Pause {
            at: self.pause_at,
            interrupts: self.pauses.clone(),
        })
    }

    /// The interrupts pending on this thread.
    pub fn interrupts(&self) -> Vec<Interrupt> {
        if self.paused_before {
            return self.pauses.clone();
        }
        self.writes
            .iter()
            .filter_map(|w| match w {
                Some(SavedWrite::Interrupted(i)) => Some(i.clone()),
                _ => None,
            })
            .collect()
    }

    /// True when every interrupted task has an answer to its pending call (a resumed run that
    /// stopped before those tasks ran again).
    pub fn interrupts_answered(&self) -> bool {
        !self.paused_before
            && self.writes.iter().enumerate().all(|(i, w)| match w {
                Some(SavedWrite::Interrupted(int)) => {
                    self.answers.get(i).map_or(0, Vec::len) > int.index as usize
                }
                _ => true,
            })
    }

    /// True when a resume is expected.
    pub fn is_interrupted(&self) -> bool {
        self.paused_before
            || self
                .writes
                .iter()
                .any(|w| matches!(w, Some(SavedWrite::Interrupted(_))))
    }
}
