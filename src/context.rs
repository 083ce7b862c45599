//! Runtime context: what a run carries besides its state — a tenant, user or trace id, a model
//! client, a database handle — set per run with [`RunOptions::context`](crate::RunOptions::context)
//! and read by nodes with [`NodeContext::context`](crate::NodeContext::context).
//!
//! It is never checkpointed: a resumed or continued run sees the context of the run that resumes
//! it, not of the run that paused. That is the point — a handle or a client is not state — and the
//! reason a node must not copy anything from it into the state it would need after a resume
//! without saying so.

use std::any::Any;
use std::sync::Arc;

/// A run's context, type-erased so that one engine (and one compiled graph) serves runs whatever
/// context type they carry; a node asks for the type it expects.
#[derive(Clone)]
pub struct RunContext(Arc<dyn Any + Send + Sync>);

impl RunContext {
    /// Wraps `value`.
    pub fn new<C: Send + Sync + 'static>(value: C) -> Self {
        Self(Arc::new(value))
    }

    /// Wraps a value already shared.
    pub fn from_arc<C: Send + Sync + 'static>(value: Arc<C>) -> Self {
        Self(value)
    }

    /// The value, if it is a `C`.
    pub fn get<C: Send + Sync + 'static>(&self) -> Option<&C> {
        self.0.downcast_ref::<C>()
    }
}

impl std::fmt::Debug for RunContext {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("RunContext(..)")
    }
}
