//! Integrity of stored chains: a checksum per checkpoint, and the parent links of a loaded chain.
//!
//! A thread's state is rebuilt by replaying deltas onto a snapshot, so a single missing or altered
//! checkpoint silently changes the state (a resumed thread with an empty plan, say). The SQL
//! backends therefore store, with every checkpoint, a SHA-256 over everything that defines it
//! (id, parent, fingerprint, kind, body, next tasks and metadata, as stored), computed at write;
//! and every load walks the chain from the asked-for checkpoint back to its snapshot through the
//! parent links. A checksum that does not match, or a parent that is not there, is a
//! [`CheckpointError::Integrity`] naming the thread and the checkpoint: never an empty state.
//!
//! Rows written before checksums existed (schema version 1) have none; they stay readable, their
//! parent links are still verified, and the next write that rewrites them (`prune`) adds one.

#[cfg(any(feature = "sqlite", feature = "postgres"))]
use super::codec;
use super::{BodyKind, CheckpointError, CheckpointRecord};
use crate::ids::{CheckpointId, ThreadId};
#[cfg(any(feature = "sqlite", feature = "postgres"))]
use sha2::{Digest, Sha256};
use std::collections::HashMap;

/// What is wrong with a stored checkpoint.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum IntegrityProblem {
    /// The stored checksum does not match the stored contents.
    #[error("checksum mismatch (stored {stored}, computed {computed})")]
    ChecksumMismatch {
        /// The checksum written with the checkpoint.
        stored: String,
        /// The checksum of what is stored now.
        computed: String,
    },
    /// The checkpoint's parent is missing: the chain has a gap.
    #[error("its parent checkpoint {parent} is missing (a gap in the chain)")]
    MissingParent {
        /// The parent it names.
        parent: CheckpointId,
    },
    /// The chain reached a checkpoint with no parent that is not a snapshot.
    #[error("the chain starts with a delta, not a snapshot")]
    NoSnapshot,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
/// The checksum of a record as stored: hex SHA-256 over its fields, each length-prefixed.
pub fn checksum(r: &CheckpointRecord) -> Result<String, CheckpointError> {
    Ok(checksum_with(r, &codec::metadata_json(&r.metadata)?))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
/// [`checksum`] with the metadata's stored JSON already made (a backend that stores that text
/// serialises it once).
pub fn checksum_with(r: &CheckpointRecord, metadata_json: &str) -> String {
    checksum_parts(
        r.id,
        r.parent,
        &r.graph_fingerprint,
        r.kind,
        &r.body,
        &r.next_tasks,
        metadata_json.as_bytes(),
    )
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
/// [`checksum`] from the stored columns (the metadata as its stored JSON text).
pub fn checksum_parts(
    id: CheckpointId,
    parent: Option<CheckpointId>,
    fingerprint: &str,
    kind: BodyKind,
    body: &[u8],
    next_tasks: &[u8],
    metadata_json: &[u8],
) -> String {
    let mut h = Sha256::new();
    h.update(id.0.to_le_bytes());
    h.update(parent.map_or(u64::MAX, |p| p.0).to_le_bytes());
    for part in [
        fingerprint.as_bytes(),
        codec::kind_str(kind).as_bytes(),
        body,
        next_tasks,
        metadata_json,
    ] {
        h.update((part.len() as u64).to_le_bytes());
        h.update(part);
    }
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(64);
    for b in h.finalize() {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 15)] as char);
    }
    out
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
/// Checks a stored checksum (`None`: a row from before checksums, accepted).
pub fn verify_checksum(
    thread: &ThreadId,
    id: CheckpointId,
    stored: Option<&str>,
    computed: impl FnOnce() -> String,
) -> Result<(), CheckpointError> {
    let Some(stored) = stored else {
        return Ok(());
    };
    let computed = computed();
    if stored == computed {
        return Ok(());
    }
    Err(CheckpointError::Integrity {
        thread: thread.clone(),
        checkpoint: id,
        problem: IntegrityProblem::ChecksumMismatch {
            stored: stored.to_string(),
            computed,
        },
    })
}

/// Keeps, from `records` (checkpoints of `thread` with ids up to `target`, any order), the chain
/// that rebuilds `target`: from `target` back through parent links to the nearest snapshot,
/// returned oldest first. A parent missing on the way is [`IntegrityProblem::MissingParent`].
pub fn link_chain(
    thread: &ThreadId,
    target: CheckpointId,
    records: Vec<CheckpointRecord>,
) -> Result<Vec<CheckpointRecord>, CheckpointError> {
    let mut by_id: HashMap<CheckpointId, CheckpointRecord> =
        records.into_iter().map(|r| (r.id, r)).collect();
    let fail = |checkpoint, problem| CheckpointError::Integrity {
        thread: thread.clone(),
        checkpoint,
        problem,
    };
    let mut chain = Vec::new();
    let mut at = target;
    loop {
        let Some(r) = by_id.remove(&at) else {
            // Only reachable for a parent: the caller found `target` itself.
            let child = chain.last().map_or(target, |c: &CheckpointRecord| c.id);
            return Err(fail(child, IntegrityProblem::MissingParent { parent: at }));
        };
        let (kind, parent, id) = (r.kind, r.parent, r.id);
        chain.push(r);
        if kind == BodyKind::Snapshot {
            break;
        }
        match parent {
            Some(p) => at = p,
            None => return Err(fail(id, IntegrityProblem::NoSnapshot)),
        }
    }
    chain.reverse();
    Ok(chain)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn rec(id: u64, parent: Option<u64>, kind: BodyKind) -> CheckpointRecord {
        crate::checkpoint::test_record(&ThreadId::new("t"), id, parent, kind)
    }

    fn chain(n: u64, snapshots: &[u64]) -> Vec<CheckpointRecord> {
        (1..=n)
            .map(|i| {
                let kind = if i == 1 || snapshots.contains(&i) {
                    BodyKind::Snapshot
                } else {
                    BodyKind::Delta
                };
                rec(i, (i > 1).then(|| i - 1), kind)
            })
            .collect()
    }

    #[test]
    fn a_whole_chain_links_back_to_its_nearest_snapshot() {
        let got = link_chain(&ThreadId::new("t"), CheckpointId(6), chain(6, &[3])).unwrap();
        assert_eq!(got.iter().map(|r| r.id.0).collect::<Vec<_>>(), [3, 4, 5, 6]);
    }

    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    #[test]
    fn a_checksum_covers_every_field() {
        let base = rec(2, Some(1), BodyKind::Delta);
        let sum = checksum(&base).unwrap();
        let mut other = base.clone();
        other.body.push(b'x');
        assert_ne!(checksum(&other).unwrap(), sum);
        let mut other = base.clone();
        other.metadata.step = 9;
        assert_ne!(checksum(&other).unwrap(), sum);
        let mut other = base.clone();
        other.parent = None;
        assert_ne!(checksum(&other).unwrap(), sum);
        assert_eq!(checksum(&base).unwrap(), sum, "deterministic");
    }

    proptest! {
        /// Removing any checkpoint between the snapshot and the target is reported as a gap that
        /// names the checkpoint whose parent is missing.
        #[test]
        fn any_missing_link_is_a_gap_naming_the_child(n in 2u64..20, hole_seed in 0u64..100) {
            let hole = 1 + hole_seed % (n - 1); // 1..n-1: never the target itself
            let records: Vec<_> = chain(n, &[]).into_iter().filter(|r| r.id.0 != hole).collect();
            let err = link_chain(&ThreadId::new("t"), CheckpointId(n), records).unwrap_err();
            match err {
                CheckpointError::Integrity { checkpoint, problem: IntegrityProblem::MissingParent { parent }, .. } => {
                    prop_assert_eq!(parent, CheckpointId(hole));
                    prop_assert_eq!(checkpoint, CheckpointId(hole + 1));
                }
                other => prop_assert!(false, "{other}"),
            }
        }
    }
}
