//! Node actors, tools, models and the two planners built on the Planwright runtime.

pub mod bench;
pub mod field;
pub mod kit;
pub mod load;
pub mod model;
pub mod research;
pub mod serve;
pub mod tools;
