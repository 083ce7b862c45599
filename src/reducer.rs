//! Per-field reducers: how a written value combines with the current one.
//!
//! - `replace`: the write becomes the value. Two writes to one replace-field in the same superstep
//!   are a [`MergeError::WriteConflict`] naming the field and both nodes: merging in task order
//!   would hide that one node's write was lost.
//! - `append`: the written items are appended (lists grow; parallel appends land in task order).
//! - `merge`: map entries are inserted key by key; later writes win per key.
//! - `custom(f)`: any `fn(&mut T, T)`; it must be deterministic, since checkpoints replay updates.

use crate::state::State;
use std::collections::{BTreeMap, HashMap};
use std::hash::Hash;

/// What went wrong merging updates.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// Two tasks of one superstep wrote the same replace-field.
    #[error("field `{field}` was written by both `{first}` and `{second}` in one superstep; use an append or merge reducer, or write it from one node")]
    WriteConflict {
        /// The field written twice.
        field: &'static str,
        /// The node whose write came first in task order.
        first: String,
        /// The node whose write came second.
        second: String,
    },
}

/// Tracks which replace-fields were written in the current superstep, and by whom.
///
/// A writer's name is copied once, on its first replace-field write, not once per field it writes:
/// only a conflict reads it back.
#[derive(Debug, Default)]
pub struct MergeCtx {
    /// The node whose update is being applied.
    writer: String,
    /// Whether `writer` is already the last of `writers`.
    writer_kept: bool,
    /// The writers that wrote a replace-field, in order.
    writers: Vec<String>,
    /// Each replace-field written, with its writer's position in `writers`.
    written: Vec<(&'static str, usize)>,
}

impl MergeCtx {
    /// A fresh context for one superstep.
    pub fn new() -> Self {
        Self::default()
    }

    /// Names the node whose update is applied next.
    pub fn set_writer(&mut self, node: &str) {
        self.writer.clear();
        self.writer.push_str(node);
        self.writer_kept = false;
    }

    /// Records a write to a replace-field, failing if another task already wrote it.
    fn record_replace(&mut self, field: &'static str) -> Result<(), MergeError> {
        if let Some((_, first)) = self.written.iter().find(|(f, _)| *f == field) {
            return Err(MergeError::WriteConflict {
                field,
                first: self.writers[*first].clone(),
                second: self.writer.clone(),
            });
        }
        if !self.writer_kept {
            self.writers.push(self.writer.clone());
            self.writer_kept = true;
        }
        self.written.push((field, self.writers.len() - 1));
        Ok(())
    }
}

/// The `replace` reducer.
pub fn replace<T>(
    slot: &mut T,
    value: T,
    field: &'static str,
    ctx: &mut MergeCtx,
) -> Result<(), MergeError> {
    ctx.record_replace(field)?;
    *slot = value;
    Ok(())
}

/// The `append` reducer: for any collection that can be extended by itself.
pub fn append<C: Extend<<C as IntoIterator>::Item> + IntoIterator>(slot: &mut C, value: C) {
    slot.extend(value);
}

/// The `merge` reducer, for maps.
pub fn merge<M: MapLike>(slot: &mut M, value: M) {
    slot.merge_from(value);
}

/// A custom reducer that keeps the larger value.
pub fn max<T: Ord>(slot: &mut T, value: T) {
    if value > *slot {
        *slot = value;
    }
}

/// A custom reducer that adds the written value (counters written by parallel tasks).
pub fn sum<T: std::ops::AddAssign>(slot: &mut T, value: T) {
    *slot += value;
}

/// Maps the `merge` reducer works on.
pub trait MapLike {
    /// Inserts every entry of `other`, replacing existing keys.
    fn merge_from(&mut self, other: Self);
}

impl<K: Ord, V> MapLike for BTreeMap<K, V> {
    fn merge_from(&mut self, other: Self) {
        self.extend(other);
    }
}

impl<K: Eq + Hash, V, S: std::hash::BuildHasher> MapLike for HashMap<K, V, S> {
    fn merge_from(&mut self, other: Self) {
        self.extend(other);
    }
}

/// Combines two optional writes of a field with its reducer `f`: both present, `f(first, second)`;
/// one present, that one. Used by the updates' `then`.
pub fn combine_writes<T>(first: &mut Option<T>, second: Option<T>, f: impl FnOnce(&mut T, T)) {
    match (first.as_mut(), second) {
        (Some(a), Some(b)) => f(a, b),
        (None, Some(b)) => *first = Some(b),
        (_, None) => {}
    }
}

/// Applies a single update outside any superstep (tests, `update_state`).
pub fn apply_one<S: State>(state: &mut S, update: S::Update) -> Result<(), MergeError> {
    let mut ctx = MergeCtx::new();
    ctx.set_writer("update");
    state.apply(update, &mut ctx)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_second_writer_of_a_replace_field_is_a_conflict_naming_both_nodes() {
        let (mut a, mut b, mut c) = (0u32, 0u32, 0u32);
        let mut ctx = MergeCtx::new();
        ctx.set_writer("plan");
        replace(&mut a, 1, "a", &mut ctx).unwrap();
        replace(&mut b, 1, "b", &mut ctx).unwrap();
        ctx.set_writer("search");
        replace(&mut c, 2, "c", &mut ctx).unwrap();
        ctx.set_writer("compare");
        let err = replace(&mut b, 3, "b", &mut ctx).unwrap_err();
        assert_eq!(
            err,
            MergeError::WriteConflict {
                field: "b",
                first: "plan".into(),
                second: "compare".into(),
            }
        );
        ctx.set_writer("summarize");
        let err = replace(&mut c, 4, "c", &mut ctx).unwrap_err();
        assert!(
            matches!(&err, MergeError::WriteConflict { first, second, .. } if first == "search" && second == "summarize"),
            "{err:?}"
        );
        assert_eq!((a, b, c), (1, 1, 2), "a refused write changes nothing");
    }
}
