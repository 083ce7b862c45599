//! Storage: how a run's position reaches the checkpointer and comes back.
//!
//! [`persist`] builds the records and task writes a run stores and loads a thread's position
//! ([`saved`]) back from them; [`run_storage`] sends each write where the run's `Durability`
//! says. The checkpoint [`writer`] gathers
//! concurrent conversations' writes into shared commits (its [`CommitWindow`]), leaving out
//! updates a queued checkpoint already holds ([`superseded`]). [`paused`] keeps paused threads'
//! states in memory for their resume. Storage sits above the step machine (it stores the
//! machine's tasks) and below the actors, which call it.

pub(crate) mod commit_window;
pub(crate) mod counters;
pub(crate) mod paused;
pub(crate) mod persist;
pub(crate) mod run_storage;
pub(crate) mod saved;
pub(crate) mod superseded;
pub(crate) mod writer;

pub(crate) use crate::runtime::run::Durability;
pub use commit_window::CommitWindow;
pub use counters::CheckpointCounters;
pub(crate) use paused::PausedThreads;
pub use paused::{ThreadLoads, DEFAULT_KEEP_PAUSED};
pub(crate) use run_storage::{FinishedTask, Place, RunEnd, RunStorage, Storage};
pub(crate) use saved::{SavedThread, SavedWrite};
pub(crate) use writer::AsyncWriter;
