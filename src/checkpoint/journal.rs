//! The effect journal: results of a task's external calls (a tool, a model), kept durably in the
//! checkpoints' database so that a task run again — after a retry, a resume or a takeover — finds
//! what its earlier attempt got and does not call again.
//!
//! Why beside the checkpoints: a result journaled anywhere else could outlive the thread it
//! belongs to or vanish while the thread lives. Here it goes with the thread: deleted with it,
//! cut by retention ([`Checkpointer::trim`](super::Checkpointer::trim),
//! [`Checkpointer::prune`](super::Checkpointer::prune)) with the checkpoints whose tasks made it,
//! and by a rollback ([`Checkpointer::rewind`](super::Checkpointer::rewind)) with the writes of
//! the run rolled back. Entries are put-if-absent: the first result stored for a key is the one
//! every later reader gets, whichever process stored it (a replica that lost its lease and still
//! finished its call cannot replace what the new owner already used).
//!
//! Keys are opaque to storage (the runtime derives them: `NodeContext::effect`); values are
//! opaque bytes (JSON, as the runtime writes them).

use super::CheckpointError;
use crate::ids::{CheckpointId, ThreadId};
use async_trait::async_trait;

/// Durable, put-if-absent storage of effect results, by thread and key.
#[async_trait]
pub trait EffectJournal: Send + Sync {
    /// The value journaled under `key` for `thread`, if any.
    async fn effect_get(
        &self,
        thread: &ThreadId,
        key: &str,
    ) -> Result<Option<Vec<u8>>, CheckpointError>;

    /// Journals `value` under `key` for `thread` unless a value is there already, and returns the
    /// value stored: `value` when it was absent, the earlier one otherwise. `checkpoint` is the
    /// checkpoint the calling task started from: the entry is deleted with it (retention) and
    /// with the writes above it (a rollback). It is durable when this returns.
    async fn effect_put(
        &self,
        thread: &ThreadId,
        checkpoint: CheckpointId,
        key: &str,
        value: Vec<u8>,
    ) -> Result<Vec<u8>, CheckpointError>;
}
