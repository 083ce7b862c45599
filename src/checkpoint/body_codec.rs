//! How checkpoint bodies (and task updates, and a checkpoint's next tasks) are stored: JSON,
//! compressed with zstd once they are large enough to gain from it.
//!
//! State snapshots are text — the same keys and phrases over and over — so a 10 KB snapshot
//! stores in about a third of that. Bodies under 256 bytes stay plain JSON: compressing them
//! costs more CPU than it saves bytes. A stored body is recognised by its first
//! bytes: zstd's frame magic never starts JSON, so rows written before compression, or below the
//! threshold, read as they always did. The snapshot policy (`persist`) and the checksums see the
//! stored bytes, and the policy weighs stored sizes.
//!
//! **Dictionaries.** Most checkpoints of a planner are a few hundred bytes of JSON with the same
//! keys, event names and phrases as every other conversation's: too small for zstd to find
//! repeats within one body. A graph may name a zstd dictionary trained on its own checkpoints
//! (`StateGraph::compression_dictionary`); its bodies, next tasks and task updates are then
//! compressed against it from [`COMPRESS_WITH_DICTIONARY_FROM`] bytes. The frame records the
//! dictionary's id, and [`decode`] finds the dictionary by that id among those registered in the
//! process ([`dictionary`]), so a record names what it needs: a frame whose dictionary is not
//! registered is an error naming the id, never a wrong body. A retired dictionary must stay
//! registered for as long as records written with it are read (`StateGraph::retired_dictionary`).

use std::borrow::Cow;
use std::cell::RefCell;
use std::collections::HashMap;
use std::num::NonZeroU32;
use std::sync::{Mutex, OnceLock};

/// Bodies shorter than this are stored as plain JSON (without a dictionary).
pub const COMPRESS_FROM: usize = 256;
/// With a dictionary, bodies from this size are compressed (kept only when smaller). A frame
/// costs ~1.4 µs of CPU whatever its size, and below 64 bytes it saves at most a few dozen: the
/// research planner's next tasks (mostly 30–45 bytes) would be 7.5 of its 22 frames per
/// conversation and save 68 bytes of its 3,379.
pub const COMPRESS_WITH_DICTIONARY_FROM: usize = 64;
/// zstd's level: the fastest regular one, and most of the gain for JSON (against the research
/// dictionary 3.7 % more bytes than level 3, for ~30 % less compression time).
const LEVEL: i32 = 1;
/// The zstd frame magic number, little-endian.
const MAGIC: [u8; 4] = [0x28, 0xB5, 0x2F, 0xFD];
/// A decompressed body may be at most this large (a corrupt frame must not exhaust memory).
const MAX_BODY: usize = 1 << 30;

/// A zstd dictionary, prepared once for compressing and decompressing, registered for the life of
/// the process (see [`dictionary`]).
pub struct Dictionary {
    id: NonZeroU32,
    encoder: zstd::dict::EncoderDictionary<'static>,
    decoder: zstd::dict::DecoderDictionary<'static>,
    bytes: &'static [u8],
}

impl Dictionary {
    /// The id written in every frame compressed with it.
    pub fn id(&self) -> u32 {
        self.id.get()
    }
}

impl std::fmt::Debug for Dictionary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dictionary")
            .field("id", &self.id)
            .field("bytes", &self.bytes.len())
            .finish()
    }
}

/// Why a dictionary cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DictionaryError {
    /// Not a zstd dictionary with an id (raw content dictionaries have none, and a frame could not
    /// name them).
    #[error("not a zstd dictionary with an id ({0} bytes): train it with `zstd --train` or `zstd::dict::from_samples`")]
    NoId(usize),
    /// Another dictionary with the same id is registered.
    #[error("another dictionary with id {0} is already registered")]
    IdTaken(u32),
}

fn registry() -> &'static Mutex<HashMap<u32, &'static Dictionary>> {
    static REGISTRY: OnceLock<Mutex<HashMap<u32, &'static Dictionary>>> = OnceLock::new();
    REGISTRY.get_or_init(Default::default)
}

/// Registers `bytes` (a zstd dictionary with an id) for this process and returns it prepared.
/// Registering the same dictionary again returns the first registration; a different dictionary
/// with a taken id is refused. Registered dictionaries live as long as the process (graphs are
/// compiled a handful of times; each distinct dictionary is prepared once).
pub fn dictionary(bytes: &'static [u8]) -> Result<&'static Dictionary, DictionaryError> {
    let id =
        zstd::zstd_safe::get_dict_id_from_dict(bytes).ok_or(DictionaryError::NoId(bytes.len()))?;
    let mut reg = registry().lock().unwrap_or_else(|p| p.into_inner());
    if let Some(d) = reg.get(&id.get()) {
        return if d.bytes == bytes {
            Ok(d)
        } else {
            Err(DictionaryError::IdTaken(id.get()))
        };
    }
    let d: &'static Dictionary = Box::leak(Box::new(Dictionary {
        id,
        encoder: zstd::dict::EncoderDictionary::copy(bytes, LEVEL),
        decoder: zstd::dict::DecoderDictionary::copy(bytes),
        bytes,
    }));
    reg.insert(id.get(), d);
    Ok(d)
}

fn registered(id: u32) -> Option<&'static Dictionary> {
    registry()
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&id)
        .copied()
}

/// A thread's zstd contexts by dictionary id (0: none): keys are the few registered ids, so a
/// fast hash (SipHash was a visible part of every frame's cost).
type ByDictionary<T> = HashMap<u32, T, foldhash::fast::RandomState>;

thread_local! {
    // A compression context costs more to create than a small body costs to compress: one per
    // thread and dictionary (0: none), and the same for decompression.
    // With them, the buffer each thread compresses into.
    static COMPRESSORS: RefCell<Compressors> = RefCell::new(Compressors::default());
    static DECOMPRESSORS: RefCell<ByDictionary<zstd::bulk::Decompressor<'static>>> =
        RefCell::new(HashMap::default());
}

/// A thread's compression contexts, and the buffer it compresses into.
#[derive(Default)]
struct Compressors {
    /// Without a dictionary.
    plain: Option<zstd::bulk::Compressor<'static>>,
    /// With a dictionary: one context for all of them, each frame compressed with
    /// `ZSTD_compress_usingCDict`, which takes its parameters from the prepared dictionary. Setting
    /// the context up through the parameter API for every frame (`ZSTD_compress2` with the
    /// dictionary referenced) cost ~1,900 instructions a frame, a tenth of compressing a small
    /// body.
    with_dictionary: Option<zstd::zstd_safe::CCtx<'static>>,
    frame: Vec<u8>,
}

/// The bytes to store for `json`, without a dictionary.
pub fn encode(json: Vec<u8>) -> Vec<u8> {
    encode_with(json, None)
}

/// The bytes to store for `json`, compressed against `dict` when there is one.
pub fn encode_with(json: Vec<u8>, dict: Option<&'static Dictionary>) -> Vec<u8> {
    compress(&json, dict).unwrap_or(json)
}

/// [`encode_with`] for JSON the caller keeps (a task's update, joined into its superstep's delta
/// later): copied only when it is stored as it is.
pub fn encode_slice_with(json: &[u8], dict: Option<&'static Dictionary>) -> Vec<u8> {
    compress(json, dict).unwrap_or_else(|| json.to_vec())
}

/// `json` compressed, if it is large enough to try and comes out smaller. The frame is written
/// into a per-thread buffer of zstd's worst-case size and copied out at its own: a vector of the
/// worst case held each stored body at about its JSON's size until it was written.
fn compress(json: &[u8], dict: Option<&'static Dictionary>) -> Option<Vec<u8>> {
    let from = if dict.is_some() {
        COMPRESS_WITH_DICTIONARY_FROM
    } else {
        COMPRESS_FROM
    };
    if json.len() < from {
        return None;
    }
    COMPRESSORS.with(|c| {
        let Compressors {
            plain,
            with_dictionary,
            frame,
        } = &mut *c.borrow_mut();
        frame.clear();
        frame.reserve(zstd::zstd_safe::compress_bound(json.len()));
        let n = match dict {
            Some(d) => {
                let cctx = match with_dictionary {
                    Some(cctx) => cctx,
                    None => with_dictionary.insert(zstd::zstd_safe::CCtx::try_create()?),
                };
                cctx.compress_using_cdict(frame, json, d.encoder.as_cdict())
                    .ok()?
            }
            None => {
                let compressor = match plain {
                    Some(c) => c,
                    None => plain.insert(zstd::bulk::Compressor::new(LEVEL).ok()?),
                };
                compressor.compress_to_buffer(json, frame).ok()?
            }
        };
        let packed = (n < json.len()).then(|| frame[..n].to_vec());
        if frame.capacity() > crate::json::SCRATCH_KEEP {
            *frame = Vec::new();
        }
        packed
    })
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
    let dict = match zstd::zstd_safe::get_dict_id_from_frame(stored) {
        None => None,
        Some(id) => Some(registered(id.get()).ok_or_else(|| {
            format!(
                "compressed with zstd dictionary {id}, which is not registered in this process \
                 (the graph that wrote it names it with `compression_dictionary`)"
            )
        })?),
    };
    let key = dict.map_or(0, Dictionary::id);
    DECOMPRESSORS.with(|d| {
        let mut d = d.borrow_mut();
        let dec = match d.entry(key) {
            std::collections::hash_map::Entry::Occupied(e) => e.into_mut(),
            std::collections::hash_map::Entry::Vacant(e) => e.insert(
                match dict {
                    Some(x) => zstd::bulk::Decompressor::with_prepared_dictionary(&x.decoder),
                    None => zstd::bulk::Decompressor::new(),
                }
                .map_err(|e| format!("cannot start decompression: {e}"))?,
            ),
        };
        dec.decompress(stored, size)
            .map(Cow::Owned)
            .map_err(|e| format!("cannot decompress body: {e}"))
    })
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

    /// A dictionary trained on records like `{"event":"step_executed","step_id":"step_3",…}`.
    fn trained(salt: &str) -> &'static [u8] {
        let samples: Vec<Vec<u8>> = (0..400)
            .map(|i| {
                format!(
                    r#"[{{"execution_history":[{{"event":"step_executed","step_id":"step_{}","detail":"{salt} {i} note(s); criteria met"}}],"current_step_id":null}}]"#,
                    i % 7
                )
                .into_bytes()
            })
            .collect();
        Box::leak(
            zstd::dict::from_samples(&samples, 2048)
                .unwrap()
                .into_boxed_slice(),
        )
    }

    #[test]
    fn a_dictionary_shrinks_small_records_and_its_frames_name_it() {
        let dict = dictionary(trained("via search:")).unwrap();
        let small = br#"[{"execution_history":[{"event":"step_executed","step_id":"step_2","detail":"via search: 12 note(s); criteria met"}],"current_step_id":null}]"#.to_vec();
        assert!(small.len() < COMPRESS_FROM, "plain zstd would not touch it");
        assert_eq!(encode(small.clone()), small);
        let stored = encode_with(small.clone(), Some(dict));
        assert!(
            stored.len() * 3 < small.len(),
            "{} of {}",
            stored.len(),
            small.len()
        );
        assert_eq!(
            zstd::zstd_safe::get_dict_id_from_frame(&stored).map(|i| i.get()),
            Some(dict.id())
        );
        assert_eq!(decode(&stored).unwrap().as_ref(), small.as_slice());
        // Registering the same bytes again is the same dictionary.
        assert!(std::ptr::eq(dictionary(dict.bytes).unwrap(), dict));
    }

    #[test]
    fn a_frame_whose_dictionary_is_not_registered_is_an_error_naming_it() {
        let other = trained("elsewhere:");
        let id = zstd::zstd_safe::get_dict_id_from_dict(other).unwrap();
        let json = br#"[{"execution_history":[{"event":"step_executed","step_id":"step_1","detail":"elsewhere: 3 note(s); criteria met"}]}]"#;
        let frame = zstd::bulk::Compressor::with_dictionary(3, other)
            .unwrap()
            .compress(json)
            .unwrap();
        let err = decode(&frame).unwrap_err();
        assert!(err.contains(&format!("dictionary {id}")), "{err}");
        assert!(err.contains("not registered"), "{err}");
    }

    #[test]
    fn a_dictionary_without_an_id_or_with_a_taken_id_is_refused() {
        assert_eq!(
            dictionary(b"just some words").unwrap_err(),
            DictionaryError::NoId(15)
        );
        let dict = dictionary(trained("taken:")).unwrap();
        let mut twin = dict.bytes.to_vec();
        let last = twin.len() - 1;
        twin[last] ^= 0xff;
        let twin: &'static [u8] = Box::leak(twin.into_boxed_slice());
        assert_eq!(
            dictionary(twin).unwrap_err(),
            DictionaryError::IdTaken(dict.id())
        );
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
