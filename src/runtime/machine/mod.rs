//! The step machine: every decision of a run that needs no I/O, as pure functions and plain data.
//!
//! [`step`] is the superstep machine (which task may run, how a superstep ends), [`superstep`]
//! the graph's rules between supersteps (merge, what runs next), and `per_run` a run's own
//! settings resolved against the graph. Nothing here spawns, awaits or stores, so every rule is
//! tested without actors; the supervisor (`runtime::actors`) carries out what they say.

pub(crate) mod per_run;
pub mod step;
pub mod superstep;
