//! Effects that happen once: a task's external calls (a tool that sends an email, a model
//! completion that costs money) keyed so that running the task again does not call again.
//!
//! A task can run more than once: a retry after a failure, a resume after an interrupt (the
//! node runs again from its start), a continue after a crash, a takeover by another replica. A
//! [`NodeContext::memo`] result is saved with the task's writes, so it survives a pause or a
//! retry but not a crash between the call and the commit. [`NodeContext::effect`] closes that
//! gap: each call gets an idempotency key derived from where the task stands — its thread, the
//! checkpoint it started from, its id and node, the call's name and its index among the calls
//! of that name — the same in every run of the task; its result is journaled durably, in the
//! checkpoints' database ([`EffectJournal`](crate::checkpoint::EffectJournal)), before the call returns to the node; and a task
//! run again finds the journaled result and does not call. The key also goes to the outside
//! world (HTTP tools send it as `Idempotency-Key`), so a call cut off mid-flight and sent again
//! is recognised by a server that honours the header.
//!
//! A node whose calls are safe to repeat opts out with
//! [`NodeOptions::repeat_effects`](crate::NodeOptions::repeat_effects): its effects call every
//! time (still with their keys), journal nothing and cost no storage round trip.

use crate::checkpoint::Checkpointer;
use crate::ids::{CheckpointId, ThreadId};
use crate::node::{NodeContext, NodeError};
use std::future::Future;
use std::sync::Arc;

/// What every task of one run shares for its effects: the thread, and the checkpointer whose
/// journal keeps them (`None`: no durable journal, effects are kept like memos). Built once per
/// run; a task's context holds a pointer to it.
pub(crate) struct EffectScope {
    pub thread: ThreadId,
    pub checkpointer: Option<Arc<dyn Checkpointer>>,
}

impl EffectScope {
    /// The scope of a run on `thread` storing in `checkpointer` (journaling when it keeps a
    /// journal).
    pub fn new(thread: ThreadId, checkpointer: Option<&Arc<dyn Checkpointer>>) -> Arc<Self> {
        Arc::new(Self {
            thread,
            checkpointer: checkpointer
                .filter(|c| c.effect_journal().is_some())
                .cloned(),
        })
    }
}

/// A task's effect calls so far, by name (in call order of first use): the next call of a name
/// gets the count as its index.
#[derive(Debug, Default)]
pub(crate) struct EffectCalls(std::sync::Mutex<Vec<(Box<str>, u32)>>);

impl EffectCalls {
    /// Takes the next index of `name`.
    fn take(&self, name: &str) -> u32 {
        let mut calls = self.0.lock().unwrap_or_else(|p| p.into_inner());
        match calls.iter_mut().find(|(n, _)| &**n == name) {
            Some((_, count)) => {
                *count += 1;
                *count - 1
            }
            None => {
                calls.push((name.into(), 1));
                0
            }
        }
    }

    /// Gives index `index` of `name` back when it is the last one taken: a call that failed
    /// (and so journaled nothing) leaves its key to the next call of the name — the call tried
    /// again — as a retry of the task would.
    fn give_back(&self, name: &str, index: u32) {
        let mut calls = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some((_, count)) = calls.iter_mut().find(|(n, _)| &**n == name) {
            if *count == index + 1 {
                *count = index;
            }
        }
    }
}

/// The idempotency key of the `index`-th call named `name` of task `task` of node `node`, on
/// `thread`, started from checkpoint `head`: the FNV-1a 128-bit digest of those parts (each
/// length-prefixed), as 32 lowercase hex digits. Fixed by this definition: keys are stored, and
/// a task run by another version of Planwright must find its earlier calls.
pub fn effect_key(
    thread: &ThreadId,
    head: Option<CheckpointId>,
    task: crate::ids::TaskId,
    node: &str,
    name: &str,
    index: u32,
) -> String {
    let mut text = Vec::with_capacity(thread.as_str().len() + node.len() + name.len() + 64);
    for part in [thread.as_str().as_bytes(), node.as_bytes(), name.as_bytes()] {
        text.extend_from_slice(&(part.len() as u64).to_le_bytes());
        text.extend_from_slice(part);
    }
    for n in [
        head.map_or(0, |h| h.0),
        task.step,
        u64::from(task.index),
        u64::from(index),
    ] {
        text.extend_from_slice(&n.to_le_bytes());
    }
    format!("{:032x}", crate::ids::fnv1a_128(&text))
}

impl NodeContext {
    /// Runs the external call `work` once per task: `work` gets the call's idempotency key (pass
    /// it on: HTTP tools send it as `Idempotency-Key`) and its result is journaled durably in
    /// the checkpoints' database before this returns; a later run of the same task — a retry, a
    /// resume after an interrupt, a continue or a takeover after a crash — finds the journaled
    /// result and gets it without calling `work`. A call that fails journals nothing, and the
    /// next call of `name` (the call tried again) gets the same key.
    ///
    /// Calls are told apart by `name` and their order among the calls of that name, so a node
    /// must make them in the same order each time it runs (calls of different names may run
    /// concurrently). With no journal (an engine without a durable checkpointer) it behaves like
    /// [`NodeContext::memo`]; in a node that opted out
    /// ([`NodeOptions::repeat_effects`](crate::NodeOptions::repeat_effects)) it calls `work`
    /// every time. The result must round-trip through JSON. Storage failures are
    /// [`NodeError::Retryable`]; a journaled result that does not decode as `T` is
    /// [`NodeError::Fatal`].
    pub async fn effect<T, E, F, Fut>(&self, name: &str, work: F) -> Result<T, E>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        E: From<NodeError>,
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let index = self.memos.effect_calls.take(name);
        let key = self.effect_key(name, index);
        let undo = || self.memos.effect_calls.give_back(name, index);
        let journal = self.effects.as_ref().and_then(|s| {
            let j = s.checkpointer.as_deref()?.effect_journal()?;
            Some((&s.thread, j))
        });
        if self.memos.repeat_effects {
            return work(key).await.inspect_err(|_| undo());
        }
        let Some((thread, journal)) = journal else {
            return self.memo_effect(&key, work).await.inspect_err(|_| undo());
        };
        if let Some(bytes) = journal
            .effect_get(thread, &key)
            .await
            .map_err(|e| self.journal_failed(name, e))?
            .filter(|_| !sim_bug!(SkipEffectLookup))
        {
            return Ok(self.decode_effect(name, &bytes)?);
        }
        let value = work(key.clone()).await.inspect_err(|_| undo())?;
        let bytes = crate::json::to_vec(&value).map_err(|e| {
            NodeError::Fatal(format!(
                "effect `{name}` of `{}` does not encode: {e}",
                self.node
            ))
        })?;
        let head = self.memos.head.unwrap_or(CheckpointId(0));
        if sim_bug!(SkipEffectWrite) {
            return Ok(value);
        }
        let stored = journal
            .effect_put(thread, head, &key, bytes.clone())
            .await
            .map_err(|e| self.journal_failed(name, e))?;
        if stored == bytes {
            return Ok(value);
        }
        // Another run of this task journaled first: every reader gets that result.
        Ok(self.decode_effect(name, &stored)?)
    }

    /// The idempotency key of the `index`-th call (from 0) named `name` of this task: the key
    /// [`NodeContext::effect`] hands that call. The same in every run of the task.
    pub fn effect_key(&self, name: &str, index: u32) -> String {
        let thread = self.effects.as_ref().map(|s| &s.thread);
        let empty = ThreadId::new("");
        effect_key(
            thread.unwrap_or(&empty),
            self.memos.head,
            self.task,
            &self.node,
            name,
            index,
        )
    }

    /// True when this task's effects are journaled durably (an engine with a checkpointer that
    /// keeps a journal, and a node that did not opt out).
    pub fn journals_effects(&self) -> bool {
        !self.memos.repeat_effects
            && self
                .effects
                .as_ref()
                .and_then(|s| s.checkpointer.as_deref())
                .is_some_and(|c| c.effect_journal().is_some())
    }

    /// Without a journal: the result kept as a memo under the call's key.
    async fn memo_effect<T, E, F, Fut>(&self, key: &str, work: F) -> Result<T, E>
    where
        T: serde::Serialize + serde::de::DeserializeOwned,
        E: From<NodeError>,
        F: FnOnce(String) -> Fut,
        Fut: Future<Output = Result<T, E>>,
    {
        let memo_key = format!("effect:{key}");
        if let Some(v) = self.memo_lookup(&memo_key)? {
            return Ok(v);
        }
        let value = work(key.to_string()).await?;
        self.memo_record(&memo_key, &value)?;
        Ok(value)
    }

    fn decode_effect<T: serde::de::DeserializeOwned>(
        &self,
        name: &str,
        bytes: &[u8],
    ) -> Result<T, NodeError> {
        serde_json::from_slice(bytes).map_err(|e| {
            NodeError::Fatal(format!(
                "journaled effect `{name}` of `{}` does not decode: {e}",
                self.node
            ))
        })
    }

    fn journal_failed(&self, name: &str, e: crate::checkpoint::CheckpointError) -> NodeError {
        NodeError::Retryable(format!(
            "effect journal of `{}` ({name}): {}",
            self.node,
            crate::ErrorChain(&e)
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TaskId;

    /// Keys are 32 hex digits, and each part of the task's position changes them.
    #[test]
    fn keys_are_digests_of_every_part() {
        let t = ThreadId::new("t");
        let task = TaskId { step: 2, index: 1 };
        let k = effect_key(&t, Some(CheckpointId(2)), task, "n", "send", 0);
        assert_eq!(k.len(), 32);
        assert!(k
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase()));
        assert_eq!(
            k,
            effect_key(&t, Some(CheckpointId(2)), task, "n", "send", 0)
        );
        let others = [
            effect_key(
                &ThreadId::new("u"),
                Some(CheckpointId(2)),
                task,
                "n",
                "send",
                0,
            ),
            effect_key(&t, Some(CheckpointId(3)), task, "n", "send", 0),
            effect_key(
                &t,
                Some(CheckpointId(2)),
                TaskId { step: 2, index: 0 },
                "n",
                "send",
                0,
            ),
            effect_key(&t, Some(CheckpointId(2)), task, "m", "send", 0),
            effect_key(&t, Some(CheckpointId(2)), task, "n", "sent", 0),
            effect_key(&t, Some(CheckpointId(2)), task, "n", "send", 1),
            // Length prefixes: moving a byte from one part to the next is another key.
            effect_key(&t, Some(CheckpointId(2)), task, "ns", "end", 0),
        ];
        for o in others {
            assert_ne!(o, k);
        }
    }

    /// Effects add one pointer to a task's context (built for every task) and nothing to a
    /// detached one; what a task needs besides rides in its memo block, allocated anyway.
    #[test]
    fn a_context_grows_by_one_pointer() {
        let (ctx, memos) = (
            std::mem::size_of::<NodeContext>(),
            std::mem::size_of::<crate::node::Memos>(),
        );
        println!("NodeContext {ctx} bytes, Memos {memos} bytes");
        // 176 and 56 bytes before effects (x86-64).
        assert!(ctx <= 184, "NodeContext is {ctx} bytes");
        assert!(memos <= 112, "Memos is {memos} bytes");
    }

    /// A failed call gives its index back only while it is the last taken.
    #[test]
    fn a_failed_call_leaves_its_index_to_the_next() {
        let calls = EffectCalls::default();
        assert_eq!(calls.take("a"), 0);
        assert_eq!(calls.take("b"), 0);
        assert_eq!(calls.take("a"), 1);
        calls.give_back("a", 1);
        assert_eq!(calls.take("a"), 1);
        assert_eq!(calls.take("a"), 2);
        calls.give_back("a", 1);
        assert_eq!(calls.take("a"), 3);
    }
}
