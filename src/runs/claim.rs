//! What a lease claim found ([`RunStore::claim`](super::RunStore::claim)): a replica deciding
//! whether to run a run must know *why* it may not — another replica runs it, or it has ended —
//! because the two are answered differently from a missing run, and none of them is a cancel.

use super::RunRecordStatus;

/// The answer to a claim of a run's lease.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Claim {
    /// The lease is the caller's, with a fencing token greater than every one given before; the
    /// run was `status` (pending or running) when it was claimed.
    Granted {
        /// The fencing token.
        token: u64,
        /// The run's status (pending or running).
        status: RunRecordStatus,
    },
    /// Another owner's lease on the pending or running run is live.
    Held {
        /// The owner holding it.
        owner: String,
    },
    /// The run has ended with this status: there is nothing left to claim.
    Ended(RunRecordStatus),
    /// No run has this id.
    Missing,
}

impl Claim {
    /// The fencing token, when the claim was granted.
    pub fn token(&self) -> Option<u64> {
        match self {
            Self::Granted { token, .. } => Some(*token),
            _ => None,
        }
    }
}
