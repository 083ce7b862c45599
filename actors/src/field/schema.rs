//! The acquisition schema (its reference is `docs/field-schema.md`): fields (raw or derived),
//! targets, and decompositions; and its validation. A malformed schema is refused before anything
//! runs, with an error naming the problem: an unknown field in a formula, a cycle among derived
//! fields (with its path), a decomposition of an unknown field, a target that is not a field.

use super::formula::{self, FormulaError};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Raw (acquired) or derived (computed).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// Searched for or asked.
    Raw,
    /// Computed by the calculator from its formula.
    Derived,
}

/// Where a raw field's value comes from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Source {
    /// Search first.
    Web,
    /// Ask the user.
    User,
    /// Either.
    #[default]
    Either,
}

/// A value's type.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ValueType {
    /// A number.
    #[default]
    Number,
    /// A number in 0–1.
    Ratio,
    /// Text (region, currency).
    Text,
}

/// One field.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Field {
    /// Unique name.
    pub name: String,
    /// Raw or derived.
    pub kind: Kind,
    /// For raw fields.
    #[serde(default)]
    pub source: Source,
    /// Value type.
    #[serde(default, rename = "type")]
    pub value_type: ValueType,
    /// Asked before anything else (region, currency).
    #[serde(default)]
    pub core: bool,
    /// Unit, for people.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit: Option<String>,
    /// Decimal places its value is shown with (JSON, text, the server). Without it: 2 for an
    /// amount of money (a `currency…` unit, or a derived field the formula makes one), otherwise
    /// twelve significant digits (see `field::rounding`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub precision: Option<u32>,
    /// What the field means, for search and questions.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Rarely found directly: acquired through a decomposition.
    #[serde(default)]
    pub requires_components: bool,
    /// For derived fields.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub formula: Option<String>,
}

/// A static recipe: `field = formula(components)`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Decomposition {
    /// The field it computes.
    pub field: String,
    /// The components (they become raw fields of the running schema).
    pub components: Vec<String>,
    /// Over the components.
    pub formula: String,
    /// What each component means (optional; used for its searches and questions).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub descriptions: BTreeMap<String, String>,
    /// Each component's type (optional; default `number`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub types: BTreeMap<String, ValueType>,
}

/// An acquisition schema.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Schema {
    /// A name for the scenario.
    pub name: String,
    /// The fields to report.
    pub targets: Vec<String>,
    /// Every field.
    pub fields: Vec<Field>,
    /// Static recipes.
    #[serde(default)]
    pub decompositions: Vec<Decomposition>,
}

/// Why a schema is refused.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SchemaError {
    /// Not JSON, or not the schema's shape.
    #[error("malformed schema: {0}")]
    Malformed(String),
    /// Two fields share a name.
    #[error("field `{0}` is declared twice")]
    DuplicateField(String),
    /// A target that is not a field.
    #[error("target `{0}` is not a field of the schema")]
    UnknownTarget(String),
    /// The schema has no target.
    #[error("the schema has no target")]
    NoTarget,
    /// A derived field without a formula.
    #[error("derived field `{0}` has no formula")]
    MissingFormula(String),
    /// A formula that does not parse.
    #[error("formula of `{field}`: {error}")]
    BadFormula {
        /// The field (or decomposition) it belongs to.
        field: String,
        /// The parse error.
        error: FormulaError,
    },
    /// A formula naming something that is not a field.
    #[error("formula of `{field}` names unknown field `{unknown}`")]
    UnknownFieldInFormula {
        /// Whose formula.
        field: String,
        /// The unknown name.
        unknown: String,
    },
    /// Derived fields that depend on each other in a circle.
    #[error("derived fields form a cycle: {}", .0.join(" -> "))]
    Cycle(Vec<String>),
    /// A decomposition of a field the schema does not have.
    #[error("decomposition of unknown field `{0}`")]
    UnknownDecomposed(String),
    /// Fields, targets and decompositions that cannot work together; the message names them.
    #[error("{0}")]
    Inconsistent(String),
}

/// The most fields a schema may declare.
pub const MAX_FIELDS: usize = 1_000;

impl Schema {
    /// The field named `name`.
    pub fn field(&self, name: &str) -> Option<&Field> {
        self.fields.iter().find(|f| f.name == name)
    }

    /// Parses and validates a schema document.
    pub fn from_json(text: &str) -> Result<Self, SchemaError> {
        let s: Schema =
            serde_json::from_str(text).map_err(|e| SchemaError::Malformed(e.to_string()))?;
        s.validate()?;
        Ok(s)
    }

    /// Checks the schema; the first problem found is returned.
    pub fn validate(&self) -> Result<(), SchemaError> {
        if self.fields.len() > MAX_FIELDS {
            return Err(SchemaError::Inconsistent(format!(
                "the schema declares {} fields; at most {MAX_FIELDS} are supported",
                self.fields.len()
            )));
        }
        let mut names = BTreeSet::new();
        for f in &self.fields {
            if !names.insert(f.name.as_str()) {
                return Err(SchemaError::DuplicateField(f.name.clone()));
            }
        }
        if self.targets.is_empty() {
            return Err(SchemaError::NoTarget);
        }
        if let Some(t) = self.targets.iter().find(|t| !names.contains(t.as_str())) {
            return Err(SchemaError::UnknownTarget(t.clone()));
        }
        let mut deps: BTreeMap<&str, Vec<String>> = BTreeMap::new();
        for f in self.fields.iter().filter(|f| f.kind == Kind::Derived) {
            let text = f
                .formula
                .as_deref()
                .ok_or_else(|| SchemaError::MissingFormula(f.name.clone()))?;
            let used = parsed_fields(&f.name, text)?;
            if let Some(u) = used.iter().find(|u| !names.contains(u.as_str())) {
                return Err(SchemaError::UnknownFieldInFormula {
                    field: f.name.clone(),
                    unknown: u.clone(),
                });
            }
            deps.insert(&f.name, used);
        }
        for d in &self.decompositions {
            if !names.contains(d.field.as_str()) {
                return Err(SchemaError::UnknownDecomposed(d.field.clone()));
            }
            let used = parsed_fields(&d.field, &d.formula)?;
            if let Some(u) = used
                .iter()
                .find(|u| !d.components.contains(u) && !names.contains(u.as_str()))
            {
                return Err(SchemaError::UnknownFieldInFormula {
                    field: d.field.clone(),
                    unknown: u.clone(),
                });
            }
        }
        if let Some(cycle) = find_cycle(&deps) {
            return Err(SchemaError::Cycle(cycle));
        }
        self.check_consistency(&deps)
    }

    /// The rules beyond names and formulas: numeric targets and formulas, core fields that can be
    /// asked, decompositions only of raw requires-components fields, with distinct components.
    fn check_consistency(&self, deps: &BTreeMap<&str, Vec<String>>) -> Result<(), SchemaError> {
        let bad = |m: String| Err(SchemaError::Inconsistent(m));
        let text = |n: &str| {
            self.field(n)
                .is_some_and(|f| f.value_type == ValueType::Text)
        };
        for t in &self.targets {
            if text(t) {
                return bad(format!(
                    "target `{t}` is a text field; targets must be numbers"
                ));
            }
        }
        for f in &self.fields {
            if f.core && (f.kind == Kind::Derived || f.requires_components) {
                return bad(format!(
                    "core field `{}` must be a raw field asked directly (not derived, not decomposed)",
                    f.name
                ));
            }
        }
        for (field, used) in deps {
            if let Some(u) = used.iter().find(|u| text(u)) {
                return bad(format!("formula of `{field}` uses text field `{u}`"));
            }
        }
        let mut decomposed = BTreeSet::new();
        for d in &self.decompositions {
            let Some(f) = self.field(&d.field) else {
                continue;
            };
            if f.kind == Kind::Derived {
                return bad(format!(
                    "decomposition of derived field `{}`: only raw fields are decomposed",
                    d.field
                ));
            }
            if !f.requires_components {
                return bad(format!(
                    "decomposition of `{}`, which is not marked `requires_components`",
                    d.field
                ));
            }
            if !decomposed.insert(d.field.as_str()) {
                return bad(format!("`{}` is decomposed twice", d.field));
            }
            let mut seen = BTreeSet::new();
            for c in &d.components {
                if !seen.insert(c.as_str()) {
                    return bad(format!("component `{c}` of `{}` is listed twice", d.field));
                }
                let clash = c == &d.field
                    || self.field(c).is_some_and(|f| {
                        f.kind == Kind::Derived || f.value_type == ValueType::Text
                    });
                if clash {
                    return bad(format!(
                        "component `{c}` of `{}` must be a new or raw numeric field, not the field itself, a derived or a text field",
                        d.field
                    ));
                }
            }
        }
        Ok(())
    }
}

fn parsed_fields(field: &str, text: &str) -> Result<Vec<String>, SchemaError> {
    formula::parse(text)
        .map(|e| e.fields())
        .map_err(|error| SchemaError::BadFormula {
            field: field.to_string(),
            error,
        })
}

/// A cycle among derived fields, as a closed path, if any.
fn find_cycle(deps: &BTreeMap<&str, Vec<String>>) -> Option<Vec<String>> {
    fn visit<'a>(
        n: &'a str,
        deps: &'a BTreeMap<&str, Vec<String>>,
        state: &mut BTreeMap<&'a str, u8>,
        path: &mut Vec<&'a str>,
    ) -> Option<Vec<String>> {
        match state.get(n) {
            Some(1) => {
                let start = path.iter().position(|p| *p == n).unwrap_or(0);
                let mut cycle: Vec<String> = path[start..].iter().map(|s| s.to_string()).collect();
                cycle.push(n.to_string());
                return Some(cycle);
            }
            Some(2) => return None,
            _ => {}
        }
        state.insert(n, 1);
        path.push(n);
        for d in deps.get(n).into_iter().flatten() {
            if let Some((k, _)) = deps.get_key_value(d.as_str()) {
                if let Some(c) = visit(k, deps, state, path) {
                    return Some(c);
                }
            }
        }
        path.pop();
        state.insert(n, 2);
        None
    }
    let mut state = BTreeMap::new();
    for n in deps.keys() {
        if let Some(c) = visit(n, deps, &mut state, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    const DESIGN_EXAMPLE: &str = r#"{
      "name": "dental-saas-market",
      "targets": ["tam", "sam", "som"],
      "fields": [
        {"name": "region",   "kind": "raw", "source": "user", "type": "text", "core": true},
        {"name": "currency", "kind": "raw", "source": "user", "type": "text", "core": true},
        {"name": "clinics",  "kind": "raw", "source": "web", "type": "number", "unit": "count",
         "description": "dental clinics in the region", "requires_components": true},
        {"name": "annual_price",      "kind": "raw", "source": "either", "type": "number", "unit": "currency/year"},
        {"name": "serviceable_share", "kind": "raw", "source": "either", "type": "ratio"},
        {"name": "obtainable_share",  "kind": "raw", "source": "user",   "type": "ratio"},
        {"name": "tam", "kind": "derived", "formula": "clinics * annual_price"},
        {"name": "sam", "kind": "derived", "formula": "tam * serviceable_share"},
        {"name": "som", "kind": "derived", "formula": "sam * obtainable_share"}
      ],
      "decompositions": [
        {"field": "clinics", "components": ["population", "dentists_per_100k", "dentists_per_clinic"],
         "formula": "population * dentists_per_100k / 100000 / dentists_per_clinic"}
      ]
    }"#;

    fn with(f: impl FnOnce(&mut serde_json::Value)) -> Result<Schema, SchemaError> {
        let mut v: serde_json::Value = serde_json::from_str(DESIGN_EXAMPLE).unwrap();
        f(&mut v);
        Schema::from_json(&v.to_string())
    }

    #[test]
    fn the_design_example_is_valid() {
        let s = Schema::from_json(DESIGN_EXAMPLE).unwrap();
        assert_eq!(s.targets, ["tam", "sam", "som"]);
        assert!(s.fields[2].requires_components);
        assert_eq!(s.fields[4].value_type, ValueType::Ratio);
    }

    #[test]
    fn malformed_schemas_are_named() {
        let e = |f: fn(&mut serde_json::Value)| with(f).unwrap_err().to_string();
        assert_eq!(
            e(|v| v["fields"][6]["formula"] = "clinics * price".into()),
            "formula of `tam` names unknown field `price`"
        );
        assert_eq!(
            e(|v| v["fields"][6]["formula"] = "som * 2".into()),
            "derived fields form a cycle: sam -> tam -> som -> sam"
        );
        assert_eq!(
            e(|v| v["decompositions"][0]["field"] = "dentists".into()),
            "decomposition of unknown field `dentists`"
        );
        assert_eq!(
            e(|v| v["targets"][0] = "ebitda".into()),
            "target `ebitda` is not a field of the schema"
        );
        assert_eq!(
            e(|v| v["targets"] = serde_json::json!([])),
            "the schema has no target"
        );
        assert_eq!(
            e(|v| v["fields"][1]["name"] = "region".into()),
            "field `region` is declared twice"
        );
        assert!(e(|v| v["fields"][7]["formula"] = "tam *".into())
            .starts_with("formula of `sam`: parse error"));
        assert!(e(|v| v["fields"][0]["kind"] = "magic".into()).starts_with("malformed schema"));
        assert_eq!(
            e(|v| v["decompositions"][0]["formula"] = "population * doctors".into()),
            "formula of `clinics` names unknown field `doctors`"
        );
        assert_eq!(
            e(|v| v["targets"] = serde_json::json!(["region"])),
            "target `region` is a text field; targets must be numbers"
        );
        assert!(
            e(|v| v["fields"][6]["formula"] = "region * 2".into()).contains("text field `region`")
        );
        assert!(
            e(|v| v["decompositions"][0]["field"] = "tam".into()).contains("derived field `tam`")
        );
        assert!(
            e(|v| v["decompositions"][0]["field"] = "annual_price".into())
                .contains("not marked `requires_components`")
        );
        assert!(e(
            |v| v["decompositions"][0]["components"] = serde_json::json!([
                "population",
                "population",
                "dentists_per_100k",
                "dentists_per_clinic"
            ])
        )
        .contains("listed twice"));
        assert!(e(|v| {
            v["decompositions"][0]["components"][0] = "tam".into();
            v["decompositions"][0]["formula"] = "tam * dentists_per_100k".into();
        })
        .contains("component `tam`"));
        assert!(e(|v| v["fields"][0]["requires_components"] = true.into())
            .contains("core field `region`"));
        assert!(Schema::from_json("not json")
            .unwrap_err()
            .to_string()
            .starts_with("malformed schema"));
    }
}
