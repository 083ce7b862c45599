//! Planwright actors.
