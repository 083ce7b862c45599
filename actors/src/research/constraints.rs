//! User constraints on a research run: limits, audience, sections, tools, and their defaults.
//!
//! Unknown keys are rejected (a typo such as `max_step` must not be silently ignored), and every
//! limit is range-checked, so a run never starts from constraints it would misread.

use serde::{Deserialize, Serialize};

/// Steps a plan may have when the user does not say.
pub const DEFAULT_MAX_STEPS: u32 = 6;
/// Tokens of notes a model call carries when the user does not say.
pub const DEFAULT_NOTE_TOKENS: u32 = 1_000;
/// Upper bound accepted for `max_steps`.
pub const MAX_STEPS_LIMIT: u32 = 50;

/// Constraints of a run. Every field has a default.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Constraints {
    /// Steps a plan may have (validation), 1..=50.
    pub max_steps: u32,
    /// Replans allowed.
    pub max_replans: u32,
    /// Repair attempts allowed per plan.
    pub max_repairs: u32,
    /// Steps executing at once, at least 1.
    pub max_parallel_steps: u32,
    /// Pause at `review_plan` for a person to approve, deny or edit the plan.
    pub require_approval: bool,
    /// Who the brief is for.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
    /// Length of the brief's body, in words (headings and the source list not counted).
    pub max_words: u32,
    /// Sections the brief must have; each becomes a required sub-question.
    pub required_sections: Vec<String>,
    /// Dimensions the findings must be compared along.
    pub dimensions: Vec<String>,
    /// Tools the plan may use (default: every local tool).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub allowed_tools: Option<Vec<String>>,
    /// Notes a search step must find to count (the offline planner's default criterion).
    pub min_sources: u32,
    /// Tokens of notes one model call may carry (the notes best for that call's query; see
    /// `budget`), 50..=200000.
    pub note_tokens: u32,
    /// A deadline, recorded and shown in the brief; the local tools are instant.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub deadline: Option<String>,
}

impl Default for Constraints {
    fn default() -> Self {
        Self {
            max_steps: DEFAULT_MAX_STEPS,
            max_replans: 2,
            max_repairs: 2,
            max_parallel_steps: 4,
            require_approval: false,
            audience: None,
            max_words: 400,
            required_sections: Vec::new(),
            dimensions: Vec::new(),
            allowed_tools: None,
            min_sources: 2,
            note_tokens: DEFAULT_NOTE_TOKENS,
            deadline: None,
        }
    }
}

/// Why constraints were rejected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConstraintsError {
    /// Not a JSON object of known keys and types.
    #[error("malformed constraints: {0}")]
    Malformed(String),
    /// A value out of range.
    #[error("constraint `{field}` = {value} is out of range ({allowed})")]
    OutOfRange {
        /// The key.
        field: &'static str,
        /// The value given.
        value: u32,
        /// What is accepted.
        allowed: &'static str,
    },
}

impl Constraints {
    /// Parses and checks constraints from a JSON value (`null` gives the defaults).
    pub fn from_json(value: &serde_json::Value) -> Result<Self, ConstraintsError> {
        if value.is_null() {
            return Ok(Self::default());
        }
        if !value.is_object() {
            return Err(ConstraintsError::Malformed(format!(
                "expected a JSON object, got {value}"
            )));
        }
        let c: Self = serde_json::from_value(value.clone())
            .map_err(|e| ConstraintsError::Malformed(e.to_string()))?;
        c.check()?;
        Ok(c)
    }

    /// Checks ranges.
    pub fn check(&self) -> Result<(), ConstraintsError> {
        let range = |field, value: u32, lo: u32, hi: u32, allowed| {
            if value < lo || value > hi {
                Err(ConstraintsError::OutOfRange {
                    field,
                    value,
                    allowed,
                })
            } else {
                Ok(())
            }
        };
        range("max_steps", self.max_steps, 1, MAX_STEPS_LIMIT, "1..=50")?;
        range("max_replans", self.max_replans, 0, 10, "0..=10")?;
        range("max_repairs", self.max_repairs, 0, 10, "0..=10")?;
        range(
            "max_parallel_steps",
            self.max_parallel_steps,
            1,
            64,
            "1..=64",
        )?;
        range("max_words", self.max_words, 20, 5000, "20..=5000")?;
        range("min_sources", self.min_sources, 1, 20, "1..=20")?;
        range("note_tokens", self.note_tokens, 50, 200_000, "50..=200000")?;
        Ok(())
    }

    /// Whether `tool` is allowed.
    pub fn allows(&self, tool: &str) -> bool {
        self.allowed_tools
            .as_ref()
            .is_none_or(|list| list.iter().any(|t| t == tool))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn defaults_fill_missing_keys() {
        let c = Constraints::from_json(&json!({"max_steps": 4})).unwrap();
        assert_eq!(c.max_steps, 4);
        assert_eq!(c.max_replans, 2);
    }

    #[test]
    fn unknown_keys_and_bad_ranges_are_named() {
        let e = Constraints::from_json(&json!({"max_step": 4})).unwrap_err();
        assert!(e.to_string().contains("max_step"), "{e}");
        let e = Constraints::from_json(&json!({"max_steps": 0})).unwrap_err();
        assert!(e.to_string().contains("max_steps"), "{e}");
        assert!(Constraints::from_json(&json!([1])).is_err());
    }
}
