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
/// The function a backend computes its new checksums with. A stored checksum names its own by its
/// length, so a reader verifies rows of either kind, whichever the backend writes now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ChecksumScheme {
    /// SHA-256, 64 hex digits: PostgreSQL's rows, and SQLite's before its schema version 5.
    Sha256,
    /// XXH3-128, 32 hex digits: SQLite's rows from schema version 5. Where the processor has no
    /// SHA instructions, SHA-256 was 3.4 % of the research load's CPU samples and XXH3 is 0.1 %
    /// (docs/performance-history.md); it is as good at its job here:
    /// finding damage and hand edits that did not recompute the checksum (whoever can write the
    /// table can recompute either; neither is a signature).
    Xxh3,
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl ChecksumScheme {
    /// The scheme a stored checksum was computed with (`None`: no scheme makes that many digits).
    pub fn of_stored(stored: &str) -> Option<Self> {
        match stored.len() {
            64 => Some(Self::Sha256),
            32 => Some(Self::Xxh3),
            _ => None,
        }
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
/// What a checksum covers: a checkpoint's fields as stored (the metadata as its stored JSON).
#[derive(Clone, Copy, Debug)]
pub struct ChecksumInput<'a> {
    /// The checkpoint's id.
    pub id: CheckpointId,
    /// Its parent.
    pub parent: Option<CheckpointId>,
    /// The graph fingerprint stored with it.
    pub fingerprint: &'a str,
    /// Snapshot or delta.
    pub kind: BodyKind,
    /// The stored body.
    pub body: &'a [u8],
    /// The stored next tasks.
    pub next_tasks: &'a [u8],
    /// The stored metadata JSON.
    pub metadata_json: &'a [u8],
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
impl<'a> ChecksumInput<'a> {
    /// The input of a record whose metadata is stored as `metadata_json` (a backend that stores
    /// that text serialises it once).
    pub fn of(r: &'a CheckpointRecord, metadata_json: &'a str) -> Self {
        ChecksumInput {
            id: r.id,
            parent: r.parent,
            fingerprint: &r.graph_fingerprint,
            kind: r.kind,
            body: &r.body,
            next_tasks: &r.next_tasks,
            metadata_json: metadata_json.as_bytes(),
        }
    }

    /// The hex checksum under `scheme`: the id, the parent (`u64::MAX` for none), then every
    /// other field length-prefixed, all little-endian.
    pub fn sum(&self, scheme: ChecksumScheme) -> String {
        match scheme {
            ChecksumScheme::Sha256 => {
                let mut h = Sha256::new();
                self.feed(|b| h.update(b));
                hex(&h.finalize())
            }
            ChecksumScheme::Xxh3 => {
                let mut h = xxhash_rust::xxh3::Xxh3::new();
                self.feed(|b| h.update(b));
                hex(&h.digest128().to_be_bytes())
            }
        }
    }

    fn feed(&self, mut update: impl FnMut(&[u8])) {
        update(&self.id.0.to_le_bytes());
        update(&self.parent.map_or(u64::MAX, |p| p.0).to_le_bytes());
        for part in [
            self.fingerprint.as_bytes(),
            codec::kind_str(self.kind).as_bytes(),
            self.body,
            self.next_tasks,
            self.metadata_json,
        ] {
            update(&(part.len() as u64).to_le_bytes());
            update(part);
        }
    }
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
fn hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 15)] as char);
    }
    out
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
/// The checksum of a record as stored, under `scheme`.
pub fn checksum(r: &CheckpointRecord, scheme: ChecksumScheme) -> Result<String, CheckpointError> {
    let metadata = codec::metadata_json(&r.metadata)?;
    Ok(ChecksumInput::of(r, &metadata).sum(scheme))
}

#[cfg(any(feature = "sqlite", feature = "postgres"))]
/// Checks a stored checksum against `input`, under the scheme the stored one names (`None`: a row
/// from before checksums, accepted). A stored value of no scheme's length is a mismatch.
pub fn verify_checksum(
    thread: &ThreadId,
    id: CheckpointId,
    stored: Option<&str>,
    input: &ChecksumInput<'_>,
) -> Result<(), CheckpointError> {
    let Some(stored) = stored else {
        return Ok(());
    };
    let computed = input.sum(ChecksumScheme::of_stored(stored).unwrap_or(ChecksumScheme::Sha256));
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
        for scheme in [ChecksumScheme::Sha256, ChecksumScheme::Xxh3] {
            let sum = checksum(&base, scheme).unwrap();
            let mut other = base.clone();
            other.body.push(b'x');
            assert_ne!(checksum(&other, scheme).unwrap(), sum);
            let mut other = base.clone();
            other.metadata.step = 9;
            assert_ne!(checksum(&other, scheme).unwrap(), sum);
            let mut other = base.clone();
            other.parent = None;
            assert_ne!(checksum(&other, scheme).unwrap(), sum);
            assert_eq!(checksum(&base, scheme).unwrap(), sum, "deterministic");
            assert_eq!(ChecksumScheme::of_stored(&sum), Some(scheme));
        }
    }

    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    #[test]
    fn a_stored_checksum_is_verified_under_the_scheme_it_was_written_with() {
        let t = ThreadId::new("t");
        let r = rec(2, Some(1), BodyKind::Delta);
        let meta = codec::metadata_json(&r.metadata).unwrap();
        let input = ChecksumInput::of(&r, &meta);
        for scheme in [ChecksumScheme::Sha256, ChecksumScheme::Xxh3] {
            let stored = input.sum(scheme);
            verify_checksum(&t, r.id, Some(&stored), &input).unwrap();
            let mut damaged = r.clone();
            damaged.body[0] ^= 1;
            let err = verify_checksum(&t, r.id, Some(&stored), &ChecksumInput::of(&damaged, &meta));
            assert!(
                matches!(
                    err,
                    Err(CheckpointError::Integrity {
                        problem: IntegrityProblem::ChecksumMismatch { .. },
                        ..
                    })
                ),
                "{scheme:?}: {err:?}"
            );
        }
        // SHA-256 of these fields as the code before XXH3 computed it (pinned, and checked with
        // Python's hashlib over the same framing): old rows must keep verifying.
        assert_eq!(input.sum(ChecksumScheme::Sha256), SHA256_OF_TEST_RECORD,);
        let odd = verify_checksum(&t, r.id, Some("abc"), &input);
        assert!(
            matches!(odd, Err(CheckpointError::Integrity { .. })),
            "{odd:?}"
        );
        verify_checksum(&t, r.id, None, &input).unwrap();
    }

    #[cfg(any(feature = "sqlite", feature = "postgres"))]
    const SHA256_OF_TEST_RECORD: &str =
        "071c13cc8cda3886ca3a3c8df5343b059a131e00db1a10c3087e1fc196870023";

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
