//! Node actors, tools, models and the two planners built on the Planwright runtime.

pub mod bench;
pub mod tools;
