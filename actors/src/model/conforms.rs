//! Whether a model's answer matches its schema, read straight from the text.
//!
//! [`super::schema::validate`] checks a parsed `serde_json::Value` and names every problem; the
//! answer is then converted to its Rust type. Building that value tree (a string per string, a map
//! per object) and dropping it was most of what decoding an answer cost. A valid answer needs no
//! messages, so [`conforms`] walks the text once with serde's visitor machinery, allocating
//! nothing but escaped keys, and stops at the first problem; the caller then parses the answer
//! into its type directly. The schema is compiled first, once per thread (`Node`: each keyword
//! looked up once, properties in a sorted list), since an answer's arrays visit the same schema nodes
//! many times and each lookup in the schema's map was a B-tree search by string. Anything it
//! cannot decide cheaply (an `enum` of objects or arrays, a schema with more than 64 required
//! properties) and any answer it rejects goes the slow way,
//! which decides and explains exactly as before. So `conforms` answering `true` always means
//! `validate` accepts the same text (a property test checks it against random schemas and values).

use serde::de::{self, DeserializeSeed, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};
use serde_json::{Number, Value};
use std::borrow::Cow;
use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;
use std::sync::Arc;

/// `true` when `text` is one JSON value that `schema` accepts (the subset
/// [`super::schema::validate`] supports); `false` when it is not, or when this quick walk cannot
/// tell (the caller then validates the parsed value).
///
/// The schema is compiled once per thread: a policy's schemas are shared (`shared_schema!`),
/// and compiling one for every answer was a third of what checking the answer cost (perf, the
/// research load). The cache holds the schema's `Arc`, so an entry's pointer is never a new
/// schema's; past [`COMPILED_PER_THREAD`] schemas the oldest is forgotten.
pub fn conforms(text: &str, schema: &Arc<Value>) -> bool {
    thread_local! {
        static COMPILED: RefCell<Vec<(Arc<Value>, Rc<Node>)>> = const { RefCell::new(Vec::new()) };
    }
    let node = COMPILED.with_borrow_mut(|cache| {
        if let Some((_, node)) = cache.iter().find(|(s, _)| Arc::ptr_eq(s, schema)) {
            return node.clone();
        }
        let node = Rc::new(Node::compile(schema));
        if cache.len() == COMPILED_PER_THREAD {
            cache.remove(0);
        }
        cache.push((schema.clone(), node.clone()));
        node
    });
    walk(text, &node)
}

/// How many shared schemas each thread keeps compiled.
const COMPILED_PER_THREAD: usize = 16;

fn walk(text: &str, node: &Node) -> bool {
    let mut de = serde_json::Deserializer::from_str(text);
    Check { node }.deserialize(&mut de).is_ok() && de.end().is_ok()
}

/// A schema node with its keywords looked up once per answer: the walk met each keyword in the
/// schema's map (a string comparison per step of a B-tree search) once per value of the answer,
/// and an answer's arrays repeat the same nodes many times.
struct Node {
    /// `true`, `{}` or not an object: anything goes.
    any: bool,
    /// The kinds `type` allows (`None`: no `type`, or one that allows every kind).
    kinds: Option<u8>,
    /// The `enum` list, if it is an array.
    listed: Option<Box<[Value]>>,
    minimum: Option<f64>,
    maximum: Option<f64>,
    /// The `items` schema.
    items: Option<Box<Node>>,
    min_items: Option<u64>,
    max_items: Option<u64>,
    /// The `properties`, sorted by name.
    properties: Vec<(Box<str>, Node)>,
    /// `additionalProperties: false`.
    closed: bool,
    /// The `required` names, each once, in the order the schema first lists them.
    required: Vec<Box<str>>,
    /// More than 64 `required` entries: left to the slow path.
    too_many_required: bool,
}

impl Node {
    fn compile(schema: &Value) -> Self {
        let Some(o) = schema.as_object().filter(|o| !o.is_empty()) else {
            return Node::any();
        };
        let kinds = match o.get("type") {
            Some(Value::String(t)) => Some(kinds_of(t)),
            Some(Value::Array(ts)) => {
                let mut names = ts.iter().filter_map(Value::as_str).peekable();
                names
                    .peek()
                    .is_some()
                    .then(|| names.fold(0, |m, t| m | kinds_of(t)))
            }
            _ => None,
        };
        let mut properties: Vec<(Box<str>, Node)> = o
            .get("properties")
            .and_then(Value::as_object)
            .map(|p| {
                p.iter()
                    .map(|(k, v)| (k.as_str().into(), Node::compile(v)))
                    .collect()
            })
            .unwrap_or_default();
        properties.sort_by(|a, b| a.0.cmp(&b.0));
        let required_list: &[Value] = match o.get("required") {
            Some(Value::Array(r)) => r,
            _ => &[],
        };
        let mut required: Vec<Box<str>> = Vec::new();
        for name in required_list.iter().filter_map(Value::as_str) {
            if !required.iter().any(|r| &**r == name) {
                required.push(name.into());
            }
        }
        Node {
            any: false,
            kinds,
            listed: match o.get("enum") {
                Some(Value::Array(allowed)) => Some(allowed.clone().into_boxed_slice()),
                _ => None,
            },
            minimum: o.get("minimum").and_then(Value::as_f64),
            maximum: o.get("maximum").and_then(Value::as_f64),
            items: o.get("items").map(|i| Box::new(Node::compile(i))),
            min_items: o.get("minItems").and_then(Value::as_u64),
            max_items: o.get("maxItems").and_then(Value::as_u64),
            properties,
            closed: o.get("additionalProperties") == Some(&Value::Bool(false)),
            required,
            too_many_required: required_list.len() > 64,
        }
    }

    fn any() -> Self {
        Node {
            any: true,
            kinds: None,
            listed: None,
            minimum: None,
            maximum: None,
            items: None,
            min_items: None,
            max_items: None,
            properties: Vec::new(),
            closed: false,
            required: Vec::new(),
            too_many_required: false,
        }
    }

    fn property(&self, name: &str) -> Option<&Node> {
        self.properties
            .binary_search_by(|(k, _)| (**k).cmp(name))
            .ok()
            .map(|i| &self.properties[i].1)
    }
}

/// The kinds a `type` name allows, as a mask of [`Kind`] bits (an unknown name: none).
fn kinds_of(name: &str) -> u8 {
    match name {
        "object" => Kind::Object.bit(),
        "array" => Kind::Array.bit(),
        "string" => Kind::String.bit(),
        "number" => Kind::Integer.bit() | Kind::Float.bit(),
        "integer" => Kind::Integer.bit(),
        "boolean" => Kind::Boolean.bit(),
        "null" => Kind::Null.bit(),
        _ => 0,
    }
}

/// Checks one value against one compiled schema node; any mismatch is an error that ends the
/// walk.
#[derive(Clone, Copy)]
struct Check<'n> {
    node: &'n Node,
}

/// The JSON kinds `type` names, as the visitor meets them.
#[derive(Clone, Copy)]
enum Kind {
    Null,
    Boolean,
    Integer,
    Float,
    String,
    Array,
    Object,
}

impl Kind {
    fn bit(self) -> u8 {
        1 << self as u8
    }
}

impl Check<'_> {
    /// `Err` unless a value of this kind may stand here.
    fn kind<E: de::Error>(&self, kind: Kind) -> Result<(), E> {
        match self.node.kinds {
            Some(mask) if mask & kind.bit() == 0 => Err(E::custom("type")),
            _ => Ok(()),
        }
    }

    /// `Err` unless the schema's `enum`, if any, lists `value` (built without allocating: a
    /// scalar).
    fn listed<E: de::Error>(&self, value: Value) -> Result<(), E> {
        match &self.node.listed {
            Some(allowed) if !allowed.contains(&value) => Err(E::custom("enum")),
            _ => Ok(()),
        }
    }

    fn string_listed<E: de::Error>(&self, s: &str) -> Result<(), E> {
        match &self.node.listed {
            Some(allowed) if !allowed.iter().any(|a| a.as_str() == Some(s)) => {
                Err(E::custom("enum"))
            }
            _ => Ok(()),
        }
    }

    /// A container under an `enum` is compared as a whole value: left to the slow path.
    fn no_enum<E: de::Error>(&self) -> Result<(), E> {
        match &self.node.listed {
            Some(_) => Err(E::custom("enum of containers")),
            None => Ok(()),
        }
    }

    fn number<E: de::Error>(&self, kind: Kind, n: Number) -> Result<(), E> {
        self.kind(kind)?;
        let x = n.as_f64();
        self.listed(Value::Number(n))?;
        if let Some(x) = x {
            if self.node.minimum.is_some_and(|min| x < min)
                || self.node.maximum.is_some_and(|max| x > max)
            {
                return Err(E::custom("range"));
            }
        }
        Ok(())
    }
}

impl<'de> DeserializeSeed<'de> for Check<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<(), D::Error> {
        if self.node.any {
            return d.deserialize_ignored_any(IgnoredAny).map(|_| ());
        }
        d.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Check<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a JSON value matching the schema")
    }

    fn visit_unit<E: de::Error>(self) -> Result<(), E> {
        self.kind(Kind::Null)?;
        self.listed(Value::Null)
    }

    fn visit_bool<E: de::Error>(self, b: bool) -> Result<(), E> {
        self.kind(Kind::Boolean)?;
        self.listed(Value::Bool(b))
    }

    fn visit_u64<E: de::Error>(self, n: u64) -> Result<(), E> {
        self.number(Kind::Integer, n.into())
    }

    fn visit_i64<E: de::Error>(self, n: i64) -> Result<(), E> {
        self.number(Kind::Integer, n.into())
    }

    fn visit_f64<E: de::Error>(self, n: f64) -> Result<(), E> {
        // serde_json reads only finite floats; one that is not could not be listed anyway.
        let n = Number::from_f64(n).ok_or_else(|| E::custom("not a finite number"))?;
        self.number(Kind::Float, n)
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<(), E> {
        self.kind(Kind::String)?;
        self.string_listed(s)
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        self.kind(Kind::Array)?;
        self.no_enum()?;
        let mut n: u64 = 0;
        loop {
            let more = match self.node.items.as_deref() {
                Some(node) => seq.next_element_seed(Check { node })?.is_some(),
                None => seq.next_element::<IgnoredAny>()?.is_some(),
            };
            if !more {
                break;
            }
            n += 1;
        }
        let below = self.node.min_items.is_some_and(|min| n < min);
        let above = self.node.max_items.is_some_and(|max| n > max);
        if below || above {
            return Err(de::Error::custom("items"));
        }
        Ok(())
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        self.kind(Kind::Object)?;
        self.no_enum()?;
        if self.node.too_many_required {
            return Err(de::Error::custom("too many required properties"));
        }
        let required = &self.node.required;
        let mut seen: u64 = 0;
        while let Some(key) = map.next_key_seed(Key)? {
            if let Some(i) = required.iter().position(|r| **r == *key) {
                seen |= 1 << i;
            }
            match self.node.property(&key) {
                Some(node) => map.next_value_seed(Check { node })?,
                None if self.node.closed => return Err(de::Error::custom("unexpected property")),
                None => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        if seen.count_ones() as usize != required.len() {
            return Err(de::Error::custom("missing required property"));
        }
        Ok(())
    }
}

/// An object key, borrowed from the text unless it holds escapes.
struct Key;

impl<'de> DeserializeSeed<'de> for Key {
    type Value = Cow<'de, str>;

    fn deserialize<D: Deserializer<'de>>(self, d: D) -> Result<Self::Value, D::Error> {
        d.deserialize_str(self)
    }
}

impl<'de> Visitor<'de> for Key {
    type Value = Cow<'de, str>;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a key")
    }

    fn visit_borrowed_str<E: de::Error>(self, s: &'de str) -> Result<Self::Value, E> {
        Ok(Cow::Borrowed(s))
    }

    fn visit_str<E: de::Error>(self, s: &str) -> Result<Self::Value, E> {
        Ok(Cow::Owned(s.to_owned()))
    }
}

#[cfg(test)]
mod tests {
    use super::COMPILED_PER_THREAD;
    use crate::model::schema::{tests::schema, validate};
    use proptest::prelude::*;
    use serde_json::{json, Value};
    use std::sync::Arc;

    /// Each call with a schema of its own: compiled afresh, and pushing the others out of the
    /// thread's cache.
    fn conforms(text: &str, schema: &Value) -> bool {
        super::conforms(text, &Arc::new(schema.clone()))
    }

    #[test]
    fn a_shared_schema_is_compiled_once_and_each_schema_keeps_its_own_answer() {
        let strings = Arc::new(json!({"type": "array", "items": {"type": "string"}}));
        let numbers = Arc::new(json!({"type": "array", "items": {"type": "number"}}));
        assert!(super::conforms(r#"["a"]"#, &strings));
        assert!(!super::conforms(r#"["a"]"#, &numbers));
        assert!(super::conforms("[1]", &numbers));
        assert!(!super::conforms("[1]", &strings));
        // More schemas than the cache keeps: the first is compiled again, and still right.
        let others: Vec<Arc<Value>> = (0..=COMPILED_PER_THREAD as u64)
            .map(|n| Arc::new(json!({"type": "integer", "minimum": n})))
            .collect();
        for (n, s) in others.iter().enumerate() {
            assert!(super::conforms(&n.to_string(), s));
            assert!(n == 0 || !super::conforms(&(n - 1).to_string(), s));
        }
        assert!(super::conforms(r#"["b"]"#, &strings));
        assert!(!super::conforms("[2]", &strings));
    }

    #[test]
    fn a_matching_answer_conforms_and_each_kind_of_problem_does_not() {
        let s = schema();
        assert!(conforms(
            r#" {"action":"ask","ratio":0.5,"steps":[{"id":"a\"b","x":[1,{}]}]} "#,
            &s
        ));
        for bad in [
            r#"{"action":"fly","steps":[{"id":"a"}]}"#,
            r#"{"action":"ask","ratio":1.5,"steps":[{"id":"a"}]}"#,
            r#"{"action":"ask","steps":[{"id":3}]}"#,
            r#"{"action":"ask","steps":[]}"#,
            r#"{"action":"ask","steps":[{"id":"a"},{"id":"b"},{"id":"c"}]}"#,
            r#"{"action":"ask","steps":[{"id":"a"}],"extra":1}"#,
            r#"{"steps":[{"id":"a"}]}"#,
            r#"{"action":"ask","steps":[{"id":"a"}]} trailing"#,
            r#"["action"]"#,
            "not json",
        ] {
            assert!(!conforms(bad, &s), "{bad}");
            let verdict = serde_json::from_str::<Value>(bad.trim())
                .map(|v| validate(&v, &s).is_ok())
                .unwrap_or(false);
            assert!(!verdict, "the slow path accepts {bad}");
        }
    }

    #[test]
    fn integers_and_floats_are_told_apart_as_the_parsed_value_tells_them() {
        let int = json!({"type": "integer", "enum": [1, 2]});
        assert!(conforms("1", &int));
        assert!(!conforms("1.0", &int));
        assert!(!conforms("3", &int));
        assert!(conforms("-4", &json!({"type": ["integer", "null"]})));
        assert!(conforms("null", &json!({"type": ["integer", "null"]})));
        assert!(conforms("2.5", &json!({"type": "number", "minimum": 2.5})));
    }

    /// Schemas built from the keywords `validate` knows, values of every kind.
    fn arb_schema() -> impl Strategy<Value = Value> {
        let types = prop_oneof![
            Just(json!("object")),
            Just(json!("array")),
            Just(json!("string")),
            Just(json!("number")),
            Just(json!("integer")),
            Just(json!("boolean")),
            Just(json!("null")),
            Just(json!(["string", "null"])),
            Just(json!(["integer", "array"])),
        ];
        let leaf = (
            proptest::option::of(types),
            proptest::option::of(prop_oneof![
                Just(json!(["a", "b", 1, true])),
                Just(json!([null, 2.5, "x"])),
                Just(json!([[1], {"a": 1}]))
            ]),
            proptest::option::of(-3i64..3),
            proptest::option::of(-3i64..3),
            proptest::option::of(0u64..3),
            proptest::option::of(0u64..3),
        )
            .prop_map(|(ty, en, min, max, min_items, max_items)| {
                let mut s = serde_json::Map::new();
                if let Some(t) = ty {
                    s.insert("type".into(), t);
                }
                if let Some(e) = en {
                    s.insert("enum".into(), e);
                }
                if let Some(m) = min {
                    s.insert("minimum".into(), json!(m));
                }
                if let Some(m) = max {
                    s.insert("maximum".into(), json!(m));
                }
                if let Some(m) = min_items {
                    s.insert("minItems".into(), json!(m));
                }
                if let Some(m) = max_items {
                    s.insert("maxItems".into(), json!(m));
                }
                Value::Object(s)
            });
        leaf.prop_recursive(3, 24, 4, |inner| {
            (
                inner.clone(),
                proptest::collection::btree_map("[abc]", inner.clone(), 0..3),
                proptest::collection::vec("[abcd]", 0..3),
                any::<bool>(),
                proptest::option::of(inner),
            )
                .prop_map(|(mut base, props, required, closed, items)| {
                    if let Value::Object(s) = &mut base {
                        s.insert("properties".into(), json!(props));
                        s.insert("required".into(), json!(required));
                        if closed {
                            s.insert("additionalProperties".into(), json!(false));
                        }
                        if let Some(i) = items {
                            s.insert("items".into(), i);
                        }
                    }
                    base
                })
        })
    }

    fn arb_value() -> impl Strategy<Value = Value> {
        let leaf = prop_oneof![
            Just(Value::Null),
            any::<bool>().prop_map(Value::Bool),
            (-4i64..4).prop_map(|n| json!(n)),
            (-4.0f64..4.0).prop_map(|x| json!(x)),
            prop_oneof![Just("a"), Just("b"), Just("x"), Just("q\"uote")].prop_map(|s| json!(s)),
        ];
        leaf.prop_recursive(3, 24, 4, |inner| {
            prop_oneof![
                proptest::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
                proptest::collection::btree_map("[abcd]|\\\\u0061", inner, 0..4)
                    .prop_map(|m| Value::Object(m.into_iter().collect())),
            ]
        })
    }

    /// Whether `conforms` leaves this value to the slow path: an `enum` over a container.
    fn needs_tree(v: &Value, s: &Value) -> bool {
        let Some(o) = s.as_object().filter(|o| !o.is_empty()) else {
            return false;
        };
        let listed = o.get("enum").is_some_and(Value::is_array);
        match v {
            Value::Array(items) => {
                listed
                    || o.get("items")
                        .is_some_and(|is| items.iter().any(|x| needs_tree(x, is)))
            }
            Value::Object(m) => {
                listed
                    || m.iter().any(|(k, x)| {
                        o.get("properties")
                            .and_then(|p| p.get(k))
                            .is_some_and(|ps| needs_tree(x, ps))
                    })
            }
            _ => false,
        }
    }

    proptest! {
        #[test]
        fn an_answer_that_conforms_is_one_validate_accepts(schema in arb_schema(), value in arb_value()) {
            let text = serde_json::to_string(&value).unwrap();
            let accepted = validate(&value, &schema).is_ok();
            if conforms(&text, &schema) {
                prop_assert!(accepted, "conforms but validate rejects: {text} against {schema}");
            }
            // Everything decidable without the value tree is decided the same way.
            if accepted && !needs_tree(&value, &schema) {
                prop_assert!(conforms(&text, &schema), "validate accepts but conforms does not: {text} against {schema}");
            }
        }
    }
}
