//! The step machine: every decision of a run that needs no I/O, as pure functions and plain data.
//!
//! [`step`] is the superstep machine (which task may run, how a superstep ends), [`superstep`]
//! the graph's rules between supersteps (merge, what runs next), `boundary` the run's decisions
//! between supersteps and on a failed attempt (pause, step limit, drain, retry and its backoff),
//! and `per_run` a run's own settings resolved against the graph. Nothing here spawns, awaits or stores, so every rule is
//! tested without actors; the supervisor (`runtime::actors`) carries out what they say.

pub(crate) mod boundary;
pub(crate) mod per_run;
pub mod step;
pub mod superstep;
