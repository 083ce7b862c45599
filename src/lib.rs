#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

pub mod checkpoint;
pub mod ids;
pub mod reducer;
pub mod state;
