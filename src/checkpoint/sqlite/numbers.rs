//! Thread numbers: the small integer a thread gets on its first write, which the key indexes hold
//! instead of the thread's id (see "Row order" in docs/checkpoints.md), and this process's memory
//! of them and of the heads the batch writer committed.
//!
//! Looking a thread's number up is one statement per stored item, ~2.5 % of a research load's
//! instructions (docs/performance-history.md). A number does not change while its thread exists, so
//! the batch writer remembers the numbers it has seen committed. Two things can make one stale:
//! this process deleting the thread (it forgets the thread itself, [`ThreadNumbers::forget`]), and
//! another connection — another process sharing the file — deleting it, after which a new first
//! write numbers the thread afresh. For the second, every batch transaction first reads `PRAGMA
//! data_version`, which changes exactly when another connection has committed since the last read,
//! and forgets everything when it has ([`ThreadNumbers::sync`]); it reads it holding the write
//! lock, so no other commit can land until this transaction ends.
//!
//! A number learned inside a transaction ([`Numbering`]) is remembered only once the transaction
//! commits, and not at all when the item (or the savepoint) that learned it failed: a first write
//! that rolled back must not leave a number the table does not hold.
//!
//! **Heads.** Every record the batch writer stores is checked against its thread's head (its newest
//! checkpoint) first: one indexed statement per record, ~1.3 % of a research load's samples (perf,
//! docs/performance-history.md). The writer remembers the head each record it committed made, and
//! asks the table only for threads it does not know. Besides another connection's commits (`PRAGMA
//! data_version`), this connection's own other writes can move a head — a single `put`, `rewind`,
//! `prune`, a deleted thread — and none of them goes through the memory, so [`ThreadNumbers::sync`]
//! also compares the connection's `total_changes()` (rows it inserted, updated or deleted since it
//! opened) with its value at the end of the last batch, and forgets every head when anything else
//! wrote in between. A head learned by a record that failed, or in a transaction that did not
//! commit, is never remembered.

use super::be;
use crate::checkpoint::CheckpointError;
use rusqlite::{Connection, OptionalExtension};
use std::collections::HashMap;

/// The memory's hasher: keys are this process's own thread ids and numbers, looked up for every
/// record a batch writes, so a fast hash rather than a DoS-resistant one (SipHash over the thread
/// id was visible in the writer's profile).
type Fast = foldhash::fast::RandomState;

/// Most thread numbers remembered; past it the memory starts again empty (a lookup costs one
/// indexed statement, so forgetting is cheap).
const MAX_REMEMBERED: usize = 65_536;

/// The thread numbers this process has seen committed, valid while no other connection commits,
/// and the heads its batches committed, valid while nothing else writes.
#[derive(Debug, Default)]
pub(super) struct ThreadNumbers {
    /// `PRAGMA data_version` when the memory was last checked.
    version: Option<i64>,
    known: HashMap<String, i64, Fast>,
    /// Each thread's head (by thread number), as the batches committed them.
    heads: HashMap<i64, i64, Fast>,
    /// The connection's `total_changes()` when the last batch committed.
    changes: Option<u64>,
}

impl ThreadNumbers {
    /// At the start of a write transaction (after `BEGIN IMMEDIATE`): forgets every number if
    /// another connection has committed since the last call.
    pub(super) fn sync(&mut self, tx: &Connection) -> Result<(), CheckpointError> {
        let version: i64 = tx
            .prepare_cached("PRAGMA data_version")
            .map_err(be)?
            .query_row([], |r| r.get(0))
            .map_err(be)?;
        if self.version != Some(version) {
            self.known.clear();
            self.heads.clear();
            self.version = Some(version);
        }
        if self.changes != Some(tx.total_changes()) {
            self.heads.clear();
        }
        Ok(())
    }

    /// A transaction's numbering that starts from what is remembered.
    pub(super) fn numbering(&self) -> Numbering<'_> {
        Numbering {
            memory: Some(self),
            learned: Vec::new(),
            heads_learned: Vec::new(),
        }
    }

    /// Keeps what a committed transaction learned; `changes` is the connection's
    /// `total_changes()` right after the commit.
    pub(super) fn remember(&mut self, learned: Learned, changes: u64) {
        if self.known.len() + learned.numbers.len() > MAX_REMEMBERED {
            self.known.clear();
        }
        if self.heads.len() + learned.heads.len() > MAX_REMEMBERED {
            self.heads.clear();
        }
        self.known.extend(learned.numbers);
        self.heads.extend(learned.heads);
        self.changes = Some(changes);
    }

    /// Forgets a thread this process deleted.
    pub(super) fn forget(&mut self, thread: &str) {
        self.known.remove(thread);
    }
}

/// The thread numbers of one write transaction: the remembered ones, and those it looked up; the
/// same for heads.
#[derive(Debug)]
pub(super) struct Numbering<'a> {
    /// What the batches committed before (`None`: every lookup asks the table, and nothing
    /// learned is kept).
    memory: Option<&'a ThreadNumbers>,
    learned: Vec<(String, i64)>,
    /// In the order learned: a later entry for a thread supersedes an earlier one.
    heads_learned: Vec<(i64, i64)>,
}

/// What a transaction learned ([`Numbering::learned`]).
#[derive(Debug)]
pub(super) struct Learned {
    numbers: Vec<(String, i64)>,
    heads: Vec<(i64, i64)>,
}

/// Where a transaction's learning stood ([`Numbering::mark`]).
#[derive(Debug, Clone, Copy)]
pub(super) struct Mark {
    numbers: usize,
    heads: usize,
}

impl Numbering<'_> {
    /// Numbering with nothing remembered (every lookup asks the table).
    pub(super) fn uncached() -> Self {
        Numbering {
            memory: None,
            learned: Vec::new(),
            heads_learned: Vec::new(),
        }
    }

    /// The thread's number, given now when it has none.
    pub(super) fn of(&mut self, tx: &Connection, thread: &str) -> Result<i64, CheckpointError> {
        if let Some(no) = self.memory.and_then(|m| m.known.get(thread)) {
            return Ok(*no);
        }
        if let Some((_, no)) = self.learned.iter().find(|(t, _)| t == thread) {
            return Ok(*no);
        }
        let no = thread_no(tx, thread)?;
        self.learned.push((thread.to_string(), no));
        Ok(no)
    }

    /// The head (newest checkpoint id) of the thread numbered `no`: what this transaction stored
    /// last for it, else what the batches remembered, else the table's.
    pub(super) fn head(&self, tx: &Connection, no: i64) -> Result<Option<i64>, CheckpointError> {
        if let Some((_, id)) = self.heads_learned.iter().rev().find(|(t, _)| *t == no) {
            return Ok(Some(*id));
        }
        if let Some(id) = self.memory.and_then(|m| m.heads.get(&no)) {
            return Ok(Some(*id));
        }
        tx.prepare_cached(HEAD_BY_NO_SQL)
            .map_err(be)?
            .query_row([no], |row| row.get(0))
            .map_err(be)
    }

    /// Notes that this transaction stored checkpoint `id` as the head of the thread numbered `no`.
    pub(super) fn stored_head(&mut self, no: i64, id: i64) {
        if self.memory.is_some() {
            self.heads_learned.push((no, id));
        }
    }

    /// Where what was learned so far ends (for [`Numbering::undo_to`]).
    pub(super) fn mark(&self) -> Mark {
        Mark {
            numbers: self.learned.len(),
            heads: self.heads_learned.len(),
        }
    }

    /// Drops what was learned after `mark`: the item that learned it failed, and its savepoint
    /// (or its own first write) may have rolled the number back.
    pub(super) fn undo_to(&mut self, mark: Mark) {
        self.learned.truncate(mark.numbers);
        self.heads_learned.truncate(mark.heads);
    }

    /// What this transaction learned, to remember once it committed.
    pub(super) fn learned(self) -> Learned {
        Learned {
            numbers: self.learned,
            heads: self.heads_learned,
        }
    }
}

/// A thread's head for a thread whose number is known (`?1`): the key index's last entry for it.
const HEAD_BY_NO_SQL: &str = "SELECT MAX(id) FROM checkpoints WHERE thread_no = ?1";

/// The thread's number, given on its first write: the key indexes hold it instead of the thread's
/// id, so an entry is ~10 bytes instead of ~45 and the entries of the threads written lately sit
/// together, whatever their ids look like — a commit of many running threads' checkpoints rewrote
/// a key-index page per thread (see "Row order" in docs/checkpoints.md).
pub(super) fn thread_no(tx: &Connection, thread: &str) -> Result<i64, CheckpointError> {
    let found: Option<i64> = tx
        .prepare_cached("SELECT no FROM thread_numbers WHERE thread_id = ?1")
        .map_err(be)?
        .query_row([thread], |r| r.get(0))
        .optional()
        .map_err(be)?;
    if let Some(no) = found {
        return Ok(no);
    }
    tx.prepare_cached("INSERT INTO thread_numbers (thread_id) VALUES (?1)")
        .map_err(be)?
        .execute([thread])
        .map_err(be)?;
    Ok(tx.last_insert_rowid())
}
