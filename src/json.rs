//! JSON text for the hot paths: checkpoint bodies, task updates, next tasks and model requests.
//!
//! serde_json escapes strings a byte at a time, and a research load writes tens of kilobytes of
//! JSON per conversation, most of it strings (state updates, then each model call's input): its
//! escaping would be 6.7 % of the load's instructions. sonic-rs writes the same text with SIMD
//! scans for the bytes that need escaping. The text is byte for byte what `serde_json::to_vec` writes —
//! a property test holds both to that over strings, numbers and nested values — so stored
//! records, trained dictionaries and digests do not depend on which of the two wrote them.
//! Reading stays with serde_json.

use serde::Serialize;
use std::cell::RefCell;

thread_local! {
    /// Where each thread writes its JSON before it is copied out at its final size.
    static SCRATCH: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
}

/// A per-thread scratch buffer grown past this is dropped after use rather than kept for the
/// thread's life (this one, and the buffer `body_codec` compresses into).
pub(crate) const SCRATCH_KEEP: usize = 1 << 20;

/// `value` as JSON text (what `serde_json::to_vec` writes). A value that cannot be written as
/// JSON (a map with non-string keys, a failing `Serialize` impl) is serde_json's error naming
/// the cause.
///
/// The text is written into a per-thread buffer and copied out once at its final size: written
/// straight into a new vector it would grow by doubling from 128 bytes, one allocation and one
/// copy per doubling (five for a research delta of a few kilobytes), and keep up to twice its
/// size. A
/// nested call (a `Serialize` impl that writes JSON itself) writes into a vector of its own.
pub fn to_vec<T: Serialize + ?Sized>(value: &T) -> Result<Vec<u8>, serde_json::Error> {
    let scratch = SCRATCH.try_with(|cell| {
        let Ok(mut buf) = cell.try_borrow_mut() else {
            return None;
        };
        buf.clear();
        let out = sonic_rs::to_writer(&mut *buf, value).map(|()| buf.to_vec());
        if buf.capacity() > SCRATCH_KEEP {
            *buf = Vec::new();
        }
        Some(out)
    });
    match scratch {
        Ok(Some(out)) => out,
        _ => sonic_rs::to_vec(value),
    }
    .map_err(encode_error)
}

/// `value` as a JSON string (what `serde_json::to_string` writes); see [`to_vec`].
pub fn to_string<T: Serialize + ?Sized>(value: &T) -> Result<String, serde_json::Error> {
    let bytes = to_vec(value)?;
    // sonic-rs writes only UTF-8 (it writes Rust strings, escaped or as they are).
    String::from_utf8(bytes).map_err(<serde_json::Error as serde::ser::Error>::custom)
}

fn encode_error(e: sonic_rs::Error) -> serde_json::Error {
    <serde_json::Error as serde::ser::Error>::custom(e)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use serde_json::Value;

    fn value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            any::<i64>().prop_map(Value::from),
            any::<u64>().prop_map(Value::from),
            any::<f64>().prop_map(Value::from),
            prop_oneof![
                Just(0.1 + 0.2),
                Just(1e21),
                Just(1e-7),
                Just(-0.0),
                Just(705669.1199999999),
                Just(f64::MAX),
                Just(f64::MIN_POSITIVE),
                Just(123456789.0),
            ]
            .prop_map(Value::from),
            any::<String>().prop_map(Value::String),
            "[\\x00-\\x7f\u{80}-\u{10ffff}\"\\\\/\\x7f]{0,40}".prop_map(Value::String),
        ];
        leaf.prop_recursive(4, 64, 8, |inner| {
            prop_oneof![
                prop::collection::vec(inner.clone(), 0..8).prop_map(Value::Array),
                prop::collection::vec((any::<String>(), inner), 0..8)
                    .prop_map(|kv| Value::Object(kv.into_iter().collect())),
            ]
        })
    }

    /// Writes JSON of its own while it is being written (a nested `to_vec`).
    struct Nested(Value);

    impl Serialize for Nested {
        fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
            let inner = to_string(&self.0).map_err(serde::ser::Error::custom)?;
            s.serialize_str(&inner)
        }
    }

    #[test]
    fn a_nested_call_and_a_large_value_write_the_same_text_as_serde_json() {
        let v = serde_json::json!({"a": [1, "two", {"three": null}]});
        let nested = vec![Nested(v.clone()), Nested(v.clone())];
        let expected = serde_json::to_vec(&vec![v.to_string(), v.to_string()]).unwrap();
        assert_eq!(to_vec(&nested).unwrap(), expected);
        // Past the size the scratch buffer is kept at, and after it, a small one again.
        let large = Value::String("x".repeat(3 * SCRATCH_KEEP));
        assert_eq!(to_vec(&large).unwrap(), serde_json::to_vec(&large).unwrap());
        assert_eq!(to_string(&v).unwrap(), v.to_string());
        // A value that cannot be JSON is an error, and leaves nothing behind for the next call.
        let bad: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into_iter().collect();
        assert!(to_vec(&bad).is_err());
        assert_eq!(to_vec(&v).unwrap(), serde_json::to_vec(&v).unwrap());
    }

    proptest! {
        #[test]
        fn writes_what_serde_json_writes(v in value()) {
            prop_assert_eq!(to_vec(&v).unwrap(), serde_json::to_vec(&v).unwrap());
            prop_assert_eq!(to_string(&v).unwrap(), serde_json::to_string(&v).unwrap());
        }

        #[test]
        fn floats_of_both_widths_are_written_the_same(x in any::<f32>(), y in any::<f64>()) {
            prop_assert_eq!(to_vec(&(x, y)).unwrap(), serde_json::to_vec(&(x, y)).unwrap());
        }
    }

    #[test]
    fn a_derived_struct_with_options_floats_and_escapes_is_written_the_same() {
        #[derive(Serialize)]
        struct Step<'a> {
            id: &'a str,
            #[serde(skip_serializing_if = "Option::is_none")]
            note: Option<&'a str>,
            amount: f64,
            not_finite: [f64; 3],
            small: [f32; 4],
            counts: std::collections::BTreeMap<&'a str, u32>,
            tags: Vec<&'a str>,
        }
        let s = Step {
            id: "step_1 \"quoted\"\n\ttab \u{1} ünï 😀",
            note: None,
            amount: 705669.1199999999,
            not_finite: [f64::NAN, f64::INFINITY, f64::NEG_INFINITY],
            small: [0.1, 1e-7, 3.4e38, f32::NAN],
            counts: [("a", 1), ("b\\", 2)].into_iter().collect(),
            tags: vec!["x", "</script>"],
        };
        assert_eq!(to_vec(&s).unwrap(), serde_json::to_vec(&s).unwrap());
    }

    #[test]
    fn a_map_with_non_string_keys_is_an_error_not_a_panic() {
        let m: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into_iter().collect();
        assert!(serde_json::to_vec(&m).is_err());
        let e = to_vec(&m).unwrap_err().to_string();
        assert!(!e.is_empty(), "{e}");
    }
}
