//! Typed graph state and typed partial updates.
//!
//! A graph's state is a plain struct; a node returns an *update*: the same fields, each optional.
//! [`State::apply`] merges an update into the state field by field, each field through its own
//! reducer (see [`crate::reducer`]). The [`state!`](crate::state!) macro writes the state struct, the
//! update struct and `apply` from one declaration, so the reducer of every field is visible where
//! the field is declared.
//!
//! Updates are also what the checkpointer stores between snapshots: replaying a superstep's updates
//! onto the previous state reproduces the next state exactly, which is why reducers must be
//! deterministic functions of (current value, written value).

use crate::reducer::MergeCtx;
use serde::de::DeserializeOwned;
use serde::Serialize;
use std::fmt::Debug;

/// A graph's state: cloneable, serialisable, with a typed partial update.
pub trait State:
    Clone + Debug + Default + Send + Sync + Serialize + DeserializeOwned + 'static
{
    /// The partial update a node returns: every field optional.
    type Update: Update;

    /// Merges `update` into `self`, each field through its reducer. `ctx` detects two writes to the
    /// same replace-field within one superstep.
    fn apply(
        &mut self,
        update: Self::Update,
        ctx: &mut MergeCtx,
    ) -> Result<(), crate::reducer::MergeError>;

    /// The names of the state's fields, in declaration order (used by docs and error messages).
    fn field_names() -> &'static [&'static str];
}

/// A partial update to a [`State`].
pub trait Update:
    Clone + Debug + Default + Send + Sync + Serialize + DeserializeOwned + 'static
{
    /// True when the update writes no field at all.
    fn is_empty(&self) -> bool;

    /// The names of the fields this update writes.
    fn written_fields(&self) -> Vec<&'static str>;
}

/// Deserialises a field that is present in an update as a write: `Some(value)`, even when the value
/// is `null`. Without it, a write of `None` to an `Option` field (`"field": null`) would read back
/// as no write at all, and a checkpoint replayed from its deltas would keep the old value. The
/// macro names it as `::planwright::state::present`, so the crate must be a dependency under
/// that name.
pub fn present<'de, T, D>(d: D) -> Result<Option<T>, D::Error>
where
    T: serde::Deserialize<'de>,
    D: serde::Deserializer<'de>,
{
    T::deserialize(d).map(Some)
}

/// Declares a graph state, its update type and the reducer of each field.
///
/// ```
/// use std::collections::BTreeMap;
/// planwright::state! {
///     /// A counter that remembers what it saw.
///     #[derive(PartialEq)]
///     pub struct Counter => CounterUpdate {
///         /// Replaced by each write (two writes in one superstep are an error).
///         replace count: u64,
///         /// Appended to.
///         append log: Vec<String>,
///         /// Merged key by key; later writes win per key.
///         merge seen: BTreeMap<String, u32>,
///         /// Combined by a custom function.
///         custom(planwright::reducer::max) best: u64,
///     }
/// }
/// let update = CounterUpdate::default().count(3).log(vec!["a".into()]).best(7);
/// let mut state = Counter::default();
/// planwright::reducer::apply_one(&mut state, update).unwrap();
/// assert_eq!(state.count, 3);
/// assert_eq!(state.log, vec!["a".to_string()]);
/// assert_eq!(state.best, 7);
/// ```
#[macro_export]
macro_rules! state {
    (
        $(#[$sattr:meta])*
        $vis:vis struct $name:ident => $update:ident {
            $(
                $(#[$fattr:meta])*
                $reducer:ident $(($custom:path))? $field:ident : $ty:ty
            ),* $(,)?
        }
    ) => {
        $(#[$sattr])*
        #[derive(Clone, Debug, Default, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(default)]
        $vis struct $name {
            $( $(#[$fattr])* pub $field: $ty, )*
        }

        #[doc = concat!("A partial update to [`", stringify!($name), "`]: every field optional.")]
        #[derive(Clone, Debug, Default, PartialEq, ::serde::Serialize, ::serde::Deserialize)]
        #[serde(default)]
        $vis struct $update {
            $(
                #[doc = concat!("Write to `", stringify!($field), "` (reducer: ", stringify!($reducer), ").")]
                #[serde(
                    skip_serializing_if = "Option::is_none",
                    deserialize_with = "::planwright::state::present"
                )]
                pub $field: Option<$ty>,
            )*
        }

        impl $update {
            /// This update followed by `next`, as one update that applies like the two in order:
            /// each field combines through its reducer (`replace`: `next` wins; `append`: both, in
            /// order; `merge`: both, `next` winning per key; `custom`: the reducer applied to the
            /// two writes, so it must be associative, as `max` and `sum` are). A node that runs
            /// several steps inside itself returns their updates combined this way.
            #[must_use]
            pub fn then(mut self, next: Self) -> Self {
                $( $crate::__combine!($reducer $(($custom))?, &mut self.$field, next.$field); )*
                self
            }

            $(
                #[doc = concat!("Sets the write to `", stringify!($field), "`.")]
                #[must_use]
                pub fn $field(mut self, value: $ty) -> Self {
                    self.$field = Some(value);
                    self
                }
            )*
        }

        impl $crate::state::Update for $update {
            fn is_empty(&self) -> bool {
                true $( && self.$field.is_none() )*
            }

            fn written_fields(&self) -> Vec<&'static str> {
                let mut out = Vec::new();
                $( if self.$field.is_some() { out.push(stringify!($field)); } )*
                out
            }
        }

        impl $crate::state::State for $name {
            type Update = $update;

            fn apply(
                &mut self,
                update: $update,
                ctx: &mut $crate::reducer::MergeCtx,
            ) -> Result<(), $crate::reducer::MergeError> {
                $(
                    if let Some(value) = update.$field {
                        $crate::__reduce!($reducer $(($custom))?, &mut self.$field, value, stringify!($field), ctx);
                    }
                )*
                Ok(())
            }

            fn field_names() -> &'static [&'static str] {
                &[$(stringify!($field)),*]
            }
        }
    };
}

/// Combines two writes of one field through its reducer (used by [`state!`](crate::state!)'s
/// `then`).
#[doc(hidden)]
#[macro_export]
macro_rules! __combine {
    (replace, $a:expr, $b:expr) => {
        if let Some(v) = $b {
            *$a = Some(v);
        }
    };
    (append, $a:expr, $b:expr) => {
        $crate::reducer::combine_writes($a, $b, $crate::reducer::append)
    };
    (merge, $a:expr, $b:expr) => {
        $crate::reducer::combine_writes($a, $b, $crate::reducer::merge)
    };
    (custom($f:path), $a:expr, $b:expr) => {
        $crate::reducer::combine_writes($a, $b, $f)
    };
}

/// Dispatches one field to its reducer (used by [`state!`](crate::state!)).
#[doc(hidden)]
#[macro_export]
macro_rules! __reduce {
    (replace, $slot:expr, $value:expr, $name:expr, $ctx:expr) => {
        $crate::reducer::replace($slot, $value, $name, $ctx)?
    };
    (append, $slot:expr, $value:expr, $name:expr, $ctx:expr) => {
        $crate::reducer::append($slot, $value)
    };
    (merge, $slot:expr, $value:expr, $name:expr, $ctx:expr) => {
        $crate::reducer::merge($slot, $value)
    };
    (custom($f:path), $slot:expr, $value:expr, $name:expr, $ctx:expr) => {
        $f($slot, $value)
    };
}

#[cfg(test)]
mod tests {
    crate::state! {
        /// A state with an optional field.
        #[allow(dead_code)]
        pub struct Opt => OptUpdate {
            /// Set and cleared.
            replace note: Option<String>,
            /// Counted.
            replace n: u32,
            /// Appended to.
            append log: Vec<u32>,
            /// Merged per key.
            merge seen: std::collections::BTreeMap<String, u32>,
            /// The largest.
            custom(crate::reducer::max) best: u32,
        }
    }

    #[test]
    fn then_applies_like_the_two_updates_in_order() {
        let a = OptUpdate::default()
            .note(Some("a".into()))
            .n(1)
            .log(vec![1])
            .seen([("x".to_string(), 1), ("y".to_string(), 1)].into())
            .best(7);
        let b = OptUpdate::default()
            .n(2)
            .log(vec![2, 3])
            .seen([("y".to_string(), 2)].into())
            .best(5);
        let mut one = Opt::default();
        crate::reducer::apply_one(&mut one, a.clone()).unwrap();
        crate::reducer::apply_one(&mut one, b.clone()).unwrap();
        let mut combined = Opt::default();
        crate::reducer::apply_one(&mut combined, a.then(b)).unwrap();
        assert_eq!(
            serde_json::to_value(&one).unwrap(),
            serde_json::to_value(&combined).unwrap()
        );
        assert_eq!(combined.log, [1, 2, 3]);
        assert_eq!(combined.seen["y"], 2);
        assert_eq!(combined.best, 7);
        assert_eq!(combined.note.as_deref(), Some("a"));
    }

    #[test]
    fn a_write_of_none_survives_serialisation() {
        // Checkpoints store updates as JSON; clearing a field must read back as a write.
        let clear = OptUpdate::default().note(None);
        let text = serde_json::to_string(&clear).unwrap();
        assert_eq!(text, r#"{"note":null}"#);
        let back: OptUpdate = serde_json::from_str(&text).unwrap();
        assert_eq!(back, clear);
        let none: OptUpdate = serde_json::from_str("{}").unwrap();
        assert_eq!(none, OptUpdate::default());
        let set: OptUpdate = serde_json::from_str(r#"{"note":"x","n":3}"#).unwrap();
        assert_eq!(set, OptUpdate::default().note(Some("x".into())).n(3));
    }
}
