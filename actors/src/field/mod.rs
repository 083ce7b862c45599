//! The field-acquisition planner (issue 4). This build has its foundations only: the formula
//! language of the calculator ([`formula`]), the schema with its validation ([`schema`]), and
//! reading numbers with their quotes out of varied phrasing ([`numbers`]). The three
//! fixture scenarios are in `fixtures/field/`. The stages, the graph and the `acquire` command
//! are still to come.

pub mod formula;
pub mod numbers;
pub mod schema;
