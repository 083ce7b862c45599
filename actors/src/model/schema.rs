//! A JSON Schema validator for the subset structured output uses: `type` (one or a list),
//! `properties`, `required`, `additionalProperties: false`, `items`, `enum`, `minimum`, `maximum`,
//! `minItems`, `maxItems`. Every error names the JSON path where it was found.

use serde_json::Value;

/// Checks `value` against `schema`; on failure, every problem found, each with its path.
pub fn validate(value: &Value, schema: &Value) -> Result<(), Vec<String>> {
    let mut errors = Vec::new();
    check(value, schema, &Path::Root, &mut errors);
    if errors.is_empty() {
        Ok(())
    } else {
        Err(errors)
    }
}

fn type_matches(value: &Value, ty: &str) -> bool {
    match ty {
        "object" => value.is_object(),
        "array" => value.is_array(),
        "string" => value.is_string(),
        "number" => value.is_number(),
        "integer" => value.as_i64().is_some() || value.as_u64().is_some(),
        "boolean" => value.is_boolean(),
        "null" => value.is_null(),
        _ => false,
    }
}

/// Where a value sits in the answer (`$.steps[0].id`), written out only when it is reported:
/// a valid answer costs no string per value it holds.
enum Path<'a> {
    Root,
    Key(&'a Path<'a>, &'a str),
    Index(&'a Path<'a>, usize),
}

impl std::fmt::Display for Path<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Path::Root => f.write_str("$"),
            Path::Key(parent, k) => write!(f, "{parent}.{k}"),
            Path::Index(parent, i) => write!(f, "{parent}[{i}]"),
        }
    }
}

fn check(value: &Value, schema: &Value, path: &Path<'_>, errors: &mut Vec<String>) {
    let Some(schema) = schema.as_object() else {
        return; // `true` or an empty schema: anything goes
    };
    if let Some(ty) = schema.get("type") {
        let (named, matched) = match ty {
            Value::String(t) => (true, type_matches(value, t)),
            Value::Array(ts) => {
                let mut names = ts.iter().filter_map(Value::as_str).peekable();
                let named = names.peek().is_some();
                (named, names.any(|t| type_matches(value, t)))
            }
            _ => (false, true),
        };
        if named && !matched {
            let types: Vec<&str> = match ty {
                Value::String(t) => vec![t.as_str()],
                _ => ty
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(Value::as_str)
                    .collect(),
            };
            errors.push(format!(
                "{path}: expected {}, found {}",
                types.join(" or "),
                kind(value)
            ));
            return;
        }
    }
    if let Some(Value::Array(allowed)) = schema.get("enum") {
        if !allowed.contains(value) {
            errors.push(format!(
                "{path}: {value} is not one of {}",
                Value::Array(allowed.clone())
            ));
        }
    }
    if let Some(n) = value.as_f64() {
        if let Some(min) = schema.get("minimum").and_then(Value::as_f64) {
            if n < min {
                errors.push(format!("{path}: {n} is below the minimum {min}"));
            }
        }
        if let Some(max) = schema.get("maximum").and_then(Value::as_f64) {
            if n > max {
                errors.push(format!("{path}: {n} is above the maximum {max}"));
            }
        }
    }
    if let Some(obj) = value.as_object() {
        let props = schema.get("properties").and_then(Value::as_object);
        if let Some(Value::Array(required)) = schema.get("required") {
            for r in required.iter().filter_map(Value::as_str) {
                if !obj.contains_key(r) {
                    errors.push(format!("{path}: missing required property `{r}`"));
                }
            }
        }
        for (k, v) in obj {
            match props.and_then(|p| p.get(k)) {
                Some(sub) => check(v, sub, &Path::Key(path, k), errors),
                None if schema.get("additionalProperties") == Some(&Value::Bool(false)) => {
                    errors.push(format!("{path}: unexpected property `{k}`"))
                }
                None => {}
            }
        }
    }
    if let Some(items) = value.as_array() {
        if let Some(min) = schema.get("minItems").and_then(Value::as_u64) {
            if (items.len() as u64) < min {
                errors.push(format!(
                    "{path}: {} items, at least {min} needed",
                    items.len()
                ));
            }
        }
        if let Some(max) = schema.get("maxItems").and_then(Value::as_u64) {
            if items.len() as u64 > max {
                errors.push(format!(
                    "{path}: {} items, at most {max} allowed",
                    items.len()
                ));
            }
        }
        if let Some(item_schema) = schema.get("items") {
            for (i, v) in items.iter().enumerate() {
                check(v, item_schema, &Path::Index(path, i), errors);
            }
        }
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use serde_json::json;

    /// A schema using every keyword the validator knows (shared with `conforms`' tests).
    pub(crate) fn schema() -> Value {
        json!({
            "type": "object",
            "required": ["action", "steps"],
            "additionalProperties": false,
            "properties": {
                "action": {"type": "string", "enum": ["search", "ask"]},
                "ratio": {"type": "number", "minimum": 0, "maximum": 1},
                "steps": {"type": "array", "minItems": 1, "maxItems": 2, "items": {
                    "type": "object", "required": ["id"], "properties": {"id": {"type": "string"}}
                }}
            }
        })
    }

    #[test]
    fn a_matching_value_passes() {
        assert!(validate(
            &json!({"action": "ask", "ratio": 0.5, "steps": [{"id": "a"}]}),
            &schema()
        )
        .is_ok());
    }

    #[test]
    fn every_problem_is_named_with_its_path() {
        let errs = validate(
            &json!({"action": "fly", "ratio": 1.5, "steps": [{"id": 3}], "extra": 1}),
            &schema(),
        )
        .unwrap_err();
        let all = errs.join("\n");
        assert!(all.contains("$.action: \"fly\" is not one of"), "{all}");
        assert!(all.contains("$.ratio: 1.5 is above the maximum 1"), "{all}");
        assert!(
            all.contains("$.steps[0].id: expected string, found number"),
            "{all}"
        );
        assert!(all.contains("$: unexpected property `extra`"), "{all}");
        let errs = validate(&json!({"steps": []}), &schema())
            .unwrap_err()
            .join("\n");
        assert!(
            errs.contains("missing required property `action`"),
            "{errs}"
        );
        assert!(
            errs.contains("$.steps: 0 items, at least 1 needed"),
            "{errs}"
        );
        assert!(validate(&json!([1]), &schema()).unwrap_err()[0]
            .contains("expected object, found array"));
    }
}
