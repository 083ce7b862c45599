//! Ids the server makes up for threads, runs, assistants and crons.

use rand::Rng;

/// A fresh id for a thread or a run (a random version-4 UUID).
pub fn new_uuid() -> String {
    let mut rng = rand::rng();
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        rng.random::<u32>(),
        rng.random::<u16>(),
        rng.random::<u16>() & 0xfff,
        rng.random::<u16>(),
        rng.random::<u64>() & 0xffff_ffff_ffff
    )
}
