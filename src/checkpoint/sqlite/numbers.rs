//! Thread numbers: the small integer a thread gets on its first write, which the key indexes hold
//! instead of the thread's id (see "Row order" in docs/checkpoints.md), and this process's memory
//! of them.
//!
//! Looking a thread's number up is one statement per stored item, ~2.5 % of a research load's
//! instructions (docs/PERFORMANCE.md). A number does not change while its thread exists, so the
//! batch writer remembers the numbers it has seen committed. Two things can make one stale: this
//! process deleting the thread (it forgets the thread itself, [`ThreadNumbers::forget`]), and
//! another connection — another process sharing the file — deleting it, after which a new first
//! write numbers the thread afresh. For the second, every batch transaction first reads
//! `PRAGMA data_version`, which changes exactly when another connection has committed since the
//! last read, and forgets everything when it has ([`ThreadNumbers::sync`]); it reads it holding
//! the write lock, so no other commit can land until this transaction ends.
//!
//! A number learned inside a transaction ([`Numbering`]) is remembered only once the transaction
//! commits, and not at all when the item (or the savepoint) that learned it failed: a first write
//! that rolled back must not leave a number the table does not hold.

use super::be;
use crate::checkpoint::CheckpointError;
use rusqlite::{Connection, OptionalExtension};
use std::collections::HashMap;

/// Most thread numbers remembered; past it the memory starts again empty (a lookup costs one
/// indexed statement, so forgetting is cheap).
const MAX_REMEMBERED: usize = 65_536;

/// The thread numbers this process has seen committed, valid while no other connection commits.
#[derive(Debug, Default)]
pub(super) struct ThreadNumbers {
    /// `PRAGMA data_version` when the memory was last checked.
    version: Option<i64>,
    known: HashMap<String, i64>,
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
            self.version = Some(version);
        }
        Ok(())
    }

    /// A transaction's numbering that starts from what is remembered.
    pub(super) fn numbering(&self) -> Numbering<'_> {
        Numbering {
            remembered: Some(&self.known),
            learned: Vec::new(),
        }
    }

    /// Keeps what a committed transaction learned.
    pub(super) fn remember(&mut self, learned: Vec<(String, i64)>) {
        if self.known.len() + learned.len() > MAX_REMEMBERED {
            self.known.clear();
        }
        self.known.extend(learned);
    }

    /// Forgets a thread this process deleted.
    pub(super) fn forget(&mut self, thread: &str) {
        self.known.remove(thread);
    }
}

/// The thread numbers of one write transaction: the remembered ones, and those it looked up.
#[derive(Debug)]
pub(super) struct Numbering<'a> {
    remembered: Option<&'a HashMap<String, i64>>,
    learned: Vec<(String, i64)>,
}

impl Numbering<'_> {
    /// Numbering with nothing remembered (every lookup asks the table).
    pub(super) fn uncached() -> Self {
        Numbering {
            remembered: None,
            learned: Vec::new(),
        }
    }

    /// The thread's number, given now when it has none.
    pub(super) fn of(&mut self, tx: &Connection, thread: &str) -> Result<i64, CheckpointError> {
        if let Some(no) = self.remembered.and_then(|m| m.get(thread)) {
            return Ok(*no);
        }
        if let Some((_, no)) = self.learned.iter().find(|(t, _)| t == thread) {
            return Ok(*no);
        }
        let no = thread_no(tx, thread)?;
        self.learned.push((thread.to_string(), no));
        Ok(no)
    }

    /// Where the numbers learned so far end (for [`Numbering::undo_to`]).
    pub(super) fn mark(&self) -> usize {
        self.learned.len()
    }

    /// Drops what was learned after `mark`: the item that learned it failed, and its savepoint
    /// (or its own first write) may have rolled the number back.
    pub(super) fn undo_to(&mut self, mark: usize) {
        self.learned.truncate(mark);
    }

    /// What this transaction learned, to remember once it committed.
    pub(super) fn learned(self) -> Vec<(String, i64)> {
        self.learned
    }
}

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
