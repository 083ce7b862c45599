//! How checkpoint bodies (and task updates, and a checkpoint's next tasks) are stored: JSON,
//! compressed with zstd once they are large enough to gain from it.
//!
//! State snapshots are text — the same keys and phrases over and over — so a 10 KB snapshot
//! stores in about a third of that. Bodies under 256 bytes stay plain JSON: compressing them
//! costs more CPU than it saves bytes. A stored body is recognised by its first
//! bytes: zstd's frame magic never starts JSON, so rows written before compression, or below the
//! threshold, read as they always did. The snapshot policy (`persist`) and the checksums see the
//! stored bytes; the sizes the policy weighs are the uncompressed ones.

use std::borrow::Cow;

/// Bodies shorter than this are stored as plain JSON.
pub const COMPRESS_FROM: usize = 256;
/// zstd's level: fast, and most of the gain for JSON.
const LEVEL: i32 = 3;
/// The zstd frame magic number, little-endian.
const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// A decompressed body may be at most this large (a corrupt frame must not exhaust memory).
const MAX_BODY: usize = 1 << 30;

/// The bytes to store for `json`.
pub fn encode(json: Vec<u8>) -> Vec<u8> {
    if json.len() < COMPRESS_FROM {
        return json;
    }
    thread_local! {
        // A compression context costs more to create than a small body costs to compress.
        static COMPRESSOR: std::cell::RefCell<Option<zstd::bulk::Compressor<'static>>> =
            const { std::cell::RefCell::new(None) };
    }
    let packed = COMPRESSOR.with(|c| {
        let mut c = c.borrow_mut();
        if c.is_none() {
            *c = zstd::bulk::Compressor::new(LEVEL).ok();
        }
        c.as_mut().and_then(|c| c.compress(&json).ok())
    });
    match packed {
        Some(packed) if packed.len() < json.len() => packed,
        _ => json,
    }
}

/// The JSON of a stored body.
pub fn decode(stored: &[u8]) -> Result<Cow<'_, [u8]>, String> {
    if !stored.starts_with(&MAGIC) {
        return Ok(Cow::Borrowed(stored));
    }
    let size = zstd::zstd_safe::get_frame_content_size(stored)
        .ok()
        .flatten()
        .ok_or_else(|| "compressed body without its size".to_string())?;
    let size = usize::try_from(size)
        .ok()
        .filter(|s| *s <= MAX_BODY)
        .ok_or_else(|| format!("compressed body claims {size} bytes"))?;
    zstd::bulk::decompress(stored, size)
        .map(Cow::Owned)
        .map_err(|e| format!("cannot decompress body: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn large_bodies_shrink_and_come_back_small_ones_stay_json() {
        let big = serde_json::to_vec(&vec!["the same words again"; 200]).unwrap();
        let stored = encode(big.clone());
        assert!(
            stored.len() * 4 < big.len(),
            "{} of {}",
            stored.len(),
            big.len()
        );
        assert_eq!(decode(&stored).unwrap().as_ref(), big.as_slice());
        let small = br#"[{"a":1}]"#.to_vec();
        assert_eq!(encode(small.clone()), small);
        assert_eq!(decode(&small).unwrap().as_ref(), small.as_slice());
    }

    #[test]
    fn a_corrupt_frame_is_an_error() {
        let mut stored = encode(serde_json::to_vec(&vec!["x y z"; 500]).unwrap());
        let n = stored.len();
        stored.truncate(n / 2);
        assert!(decode(&stored).is_err());
        assert!(decode(&MAGIC).is_err());
    }
}
