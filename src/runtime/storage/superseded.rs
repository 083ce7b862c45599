//! Which task updates a batch of the checkpoint writer need not store: those whose superstep's
//! checkpoint is committed in the same transaction.
//!
//! A parallel superstep saves each task's update as the task finishes (a task write at the
//! checkpoint the superstep runs from), so that a crash before the superstep ends does not run
//! finished tasks again. Once the superstep's own checkpoint is stored, those writes are never
//! read: a resume reads the writes of a thread's head only, and the new checkpoint (a delta of
//! the superstep's updates, or a snapshot after them) holds every update they hold. When both
//! arrive in one batch of the writer, they would be committed in one transaction, so no reader
//! could ever see the writes without the checkpoint: storing them only costs their compression,
//! their rows and their pages of the log. Under the research load, three of a conversation's
//! fourteen rows would be such writes.
//!
//! Only items the writer was told are task updates qualify (the supervisor's `Updates`), never
//! interrupts, memos or answers, which a paused thread's resume reads at its head.

use crate::checkpoint::BatchItem;
use crate::ids::{CheckpointId, ThreadId};
use std::collections::HashMap;

/// For each item of `items` that `is_update` picks and a later record of the batch supersedes
/// (same thread, the record's parent being the checkpoint the writes are at), its index and the
/// index of that record, in order.
pub(crate) fn superseded(
    items: &[BatchItem],
    is_update: impl Fn(usize) -> bool,
) -> Vec<(usize, usize)> {
    // Each checkpoint's first child in the batch (a thread's records form a chain, so a second
    // one with the same parent would be refused as a conflict).
    // Per batch (at most `max_items` keys): a fast hash, not a DoS-resistant one.
    let mut child: HashMap<(&ThreadId, CheckpointId), usize, foldhash::fast::RandomState> =
        HashMap::default();
    for (k, item) in items.iter().enumerate() {
        if let BatchItem::Record(r) = item {
            if let Some(parent) = r.parent {
                child.entry((&r.thread_id, parent)).or_insert(k);
            }
        }
    }
    if child.is_empty() {
        return Vec::new();
    }
    items
        .iter()
        .enumerate()
        .filter(|(j, _)| is_update(*j))
        .filter_map(|(j, item)| match item {
            BatchItem::Writes(t, at, _) => {
                child.get(&(t, *at)).filter(|&&k| k > j).map(|&k| (j, k))
            }
            BatchItem::Record(_) => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::checkpoint::{test_record, BodyKind, TaskWrite, WriteKind};
    use crate::ids::TaskId;
    use proptest::prelude::*;

    fn record(t: &str, id: u64, parent: Option<u64>) -> BatchItem {
        BatchItem::Record(test_record(&ThreadId::new(t), id, parent, BodyKind::Delta))
    }

    fn writes(t: &str, at: u64) -> BatchItem {
        BatchItem::Writes(
            ThreadId::new(t),
            CheckpointId(at),
            vec![TaskWrite {
                task: TaskId { step: 1, index: 0 },
                node: "n".into(),
                kind: WriteKind::Update,
                key: String::new(),
                payload: b"{}".to_vec(),
            }],
        )
    }

    #[test]
    fn updates_followed_by_their_supersteps_checkpoint_are_superseded() {
        let items = vec![
            writes("a", 1),
            writes("b", 7),
            writes("a", 1),
            record("b", 8, Some(6)), // another checkpoint's child: b's writes at 7 stay
            record("a", 2, Some(1)),
            writes("a", 2), // after the record: the next superstep's
        ];
        assert_eq!(superseded(&items, |_| true), [(0, 4), (2, 4)]);
        // Only items the writer was told are task updates.
        assert_eq!(superseded(&items, |j| j == 2), [(2, 4)]);
    }

    #[test]
    fn a_record_before_the_writes_or_of_another_thread_supersedes_nothing() {
        let items = vec![
            record("a", 2, Some(1)),
            writes("a", 1),
            writes("b", 1),
            record("c", 2, Some(1)),
        ];
        assert!(superseded(&items, |_| true).is_empty());
    }

    proptest! {
        /// Whatever the batch, an item is superseded only if it is a pick, its record comes
        /// later, and that record is the first child of the checkpoint the writes are at.
        #[test]
        fn only_picked_writes_with_a_later_child_are_superseded(
            spec in proptest::collection::vec((any::<bool>(), 0u8..3, 1u64..4, any::<bool>()), 0..24)
        ) {
            let items: Vec<BatchItem> = spec
                .iter()
                .map(|&(is_record, t, at, _)| {
                    let t = format!("t{t}");
                    if is_record { record(&t, at + 1, Some(at)) } else { writes(&t, at) }
                })
                .collect();
            let picked = |j: usize| spec[j].3;
            let gone = superseded(&items, picked);
            for (j, item) in items.iter().enumerate() {
                let expected = match item {
                    BatchItem::Writes(t, at, _) if picked(j) => items.iter().enumerate().find_map(|(k, i)| match i {
                        BatchItem::Record(r) if &r.thread_id == t && r.parent == Some(*at) => Some(k),
                        _ => None,
                    }).filter(|&k| k > j),
                    _ => None,
                };
                prop_assert_eq!(gone.iter().find(|(g, _)| *g == j).map(|&(_, k)| k), expected);
            }
        }
    }
}
