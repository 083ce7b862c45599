//! What a conversation against any Agent Server API sends: an input template whose `{{column}}`
//! placeholders are filled per conversation from a data file's rows (CSV or JSON lines, taken in
//! turn and cycling, as k6's data parameterisation does), and the answers a scripted person gives
//! to the graph's interrupts — rules keyed by the interrupt value's fields or by the node that
//! paused, and a default.
//!
//! A string that is exactly one placeholder (`"{{age}}"`) takes the row's value with its JSON type
//! (a JSON-lines row's number stays a number; a CSV cell is a string); a placeholder inside a longer
//! string is replaced by the value's text. `{{conversation}}` is the conversation's number unless
//! the data has a column of that name. Every placeholder is checked against every row before the
//! run starts, so a typo is a usage error, not a thousand failed conversations.

use serde::Deserialize;
use serde_json::{Map, Value};
use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Arc;

/// The placeholder every conversation has: its number.
pub const CONVERSATION: &str = "conversation";

/// One row of the data file: column → value.
pub type Row = Map<String, Value>;

/// Why a template, data file or answers file is unusable.
#[derive(Debug, thiserror::Error)]
pub enum TemplateError {
    /// The file could not be read.
    #[error("{flag} {path}: {source}")]
    Read {
        /// The flag that named the file.
        flag: &'static str,
        /// The file.
        path: String,
        /// Why.
        source: std::io::Error,
    },
    /// The file's contents are malformed.
    #[error("{flag} {path}: {why}")]
    Malformed {
        /// The flag that named the file.
        flag: &'static str,
        /// The file.
        path: String,
        /// What is wrong.
        why: String,
    },
    /// A placeholder names a column a row does not have.
    #[error("placeholder {{{{{name}}}}} in {flag}: {why}")]
    Unknown {
        /// The flag whose file holds the placeholder.
        flag: &'static str,
        /// The placeholder's name.
        name: String,
        /// Which row lacks it.
        why: String,
    },
}

fn read(flag: &'static str, path: &Path) -> Result<String, TemplateError> {
    std::fs::read_to_string(path).map_err(|source| TemplateError::Read {
        flag,
        path: path.display().to_string(),
        source,
    })
}

fn malformed(flag: &'static str, path: &Path, why: impl std::fmt::Display) -> TemplateError {
    TemplateError::Malformed {
        flag,
        path: path.display().to_string(),
        why: why.to_string(),
    }
}

/// Reads a data file: `.csv` (a header row, then one row per line; `"…"` quotes a cell holding
/// commas, quotes (doubled) or line breaks) or JSON lines (one object per line; `.jsonl`,
/// `.ndjson`, or anything else whose first character is `{`).
pub fn read_data(path: &Path) -> Result<Vec<Row>, TemplateError> {
    let text = read("--data", path)?;
    let csv = path
        .extension()
        .is_some_and(|e| e.eq_ignore_ascii_case("csv"))
        || !text.trim_start().starts_with('{');
    let rows = if csv {
        parse_csv(&text).map_err(|why| malformed("--data", path, why))?
    } else {
        text.lines()
            .enumerate()
            .filter(|(_, l)| !l.trim().is_empty())
            .map(|(n, l)| match serde_json::from_str::<Value>(l) {
                Ok(Value::Object(m)) => Ok(m),
                Ok(_) => Err(malformed(
                    "--data",
                    path,
                    format!("line {}: not a JSON object", n + 1),
                )),
                Err(e) => Err(malformed("--data", path, format!("line {}: {e}", n + 1))),
            })
            .collect::<Result<Vec<_>, _>>()?
    };
    if rows.is_empty() {
        return Err(malformed("--data", path, "no rows"));
    }
    Ok(rows)
}

/// Parses CSV text with a header row into rows of string cells.
pub fn parse_csv(text: &str) -> Result<Vec<Row>, String> {
    let mut records: Vec<Vec<String>> = Vec::new();
    let (mut record, mut cell) = (Vec::new(), String::new());
    let (mut quoted, mut chars) = (false, text.chars().peekable());
    let mut line = 1;
    while let Some(ch) = chars.next() {
        match (quoted, ch) {
            (true, '"') if chars.peek() == Some(&'"') => {
                chars.next();
                cell.push('"');
            }
            (true, '"') => quoted = false,
            (true, c) => {
                if c == '\n' {
                    line += 1;
                }
                cell.push(c);
            }
            (false, '"') if cell.is_empty() => quoted = true,
            (false, ',') => record.push(std::mem::take(&mut cell)),
            (false, '\r') => {}
            (false, '\n') => {
                line += 1;
                record.push(std::mem::take(&mut cell));
                records.push(std::mem::take(&mut record));
            }
            (false, c) => cell.push(c),
        }
    }
    if quoted {
        return Err(format!("line {line}: a quoted cell is not closed"));
    }
    if !cell.is_empty() || !record.is_empty() {
        record.push(cell);
        records.push(record);
    }
    records.retain(|r| !(r.len() == 1 && r[0].trim().is_empty()));
    let mut records = records.into_iter();
    let header: Vec<String> = records
        .next()
        .ok_or("empty: expected a header row")?
        .into_iter()
        .map(|h| h.trim().to_string())
        .collect();
    if header.iter().any(String::is_empty) {
        return Err("the header row has an empty column name".into());
    }
    records
        .enumerate()
        .map(|(n, r)| {
            if r.len() != header.len() {
                return Err(format!(
                    "row {}: {} cells, the header has {}",
                    n + 2,
                    r.len(),
                    header.len()
                ));
            }
            Ok(header
                .iter()
                .cloned()
                .zip(r.into_iter().map(Value::String))
                .collect())
        })
        .collect()
}

/// The names of the `{{…}}` placeholders in `v`'s strings.
pub fn placeholders(v: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    walk_strings(v, &mut |s| {
        let mut rest = s;
        while let Some(open) = rest.find("{{") {
            let after = &rest[open + 2..];
            let Some(close) = after.find("}}") else { break };
            out.insert(after[..close].trim().to_string());
            rest = &after[close + 2..];
        }
    });
    out
}

fn walk_strings(v: &Value, f: &mut impl FnMut(&str)) {
    match v {
        Value::String(s) => f(s),
        Value::Array(a) => a.iter().for_each(|x| walk_strings(x, f)),
        Value::Object(m) => m.values().for_each(|x| walk_strings(x, f)),
        _ => {}
    }
}

fn lookup(name: &str, row: Option<&Row>, i: usize) -> Option<Value> {
    match row.and_then(|r| r.get(name)) {
        Some(v) => Some(v.clone()),
        None if name == CONVERSATION => Some(Value::from(i)),
        None => None,
    }
}

/// `template` with its placeholders filled from `row` (conversation `i`). A placeholder with no
/// value is left as written ([`Template::new`] refuses those beforehand).
pub fn fill(template: &Value, row: Option<&Row>, i: usize) -> Value {
    match template {
        Value::String(s) => {
            let t = s.trim();
            if let Some(name) = t
                .strip_prefix("{{")
                .and_then(|x| x.strip_suffix("}}"))
                .filter(|x| !x.contains("{{") && !x.contains("}}"))
            {
                if let Some(v) = lookup(name.trim(), row, i) {
                    return v;
                }
            }
            let mut out = String::with_capacity(s.len());
            let mut rest = s.as_str();
            while let Some(open) = rest.find("{{") {
                let after = &rest[open + 2..];
                let Some(close) = after.find("}}") else { break };
                out.push_str(&rest[..open]);
                match lookup(after[..close].trim(), row, i) {
                    Some(Value::String(v)) => out.push_str(&v),
                    Some(v) => out.push_str(&v.to_string()),
                    None => out.push_str(&rest[open..open + 2 + close + 2]),
                }
                rest = &after[close + 2..];
            }
            out.push_str(rest);
            Value::String(out)
        }
        Value::Array(a) => Value::Array(a.iter().map(|x| fill(x, row, i)).collect()),
        Value::Object(m) => Value::Object(
            m.iter()
                .map(|(k, x)| (k.clone(), fill(x, row, i)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Checks that every placeholder in `v` has a value in every row.
fn check(flag: &'static str, v: &Value, rows: &[Row]) -> Result<(), TemplateError> {
    for name in placeholders(v) {
        if rows.is_empty() {
            if name != CONVERSATION {
                return Err(TemplateError::Unknown {
                    flag,
                    name,
                    why: "no --data file gives it".into(),
                });
            }
            continue;
        }
        if let Some(n) = rows
            .iter()
            .position(|r| !r.contains_key(&name) && name != CONVERSATION)
        {
            return Err(TemplateError::Unknown {
                flag,
                name,
                why: format!("row {} of --data has no such column", n + 1),
            });
        }
    }
    Ok(())
}

/// The run input of each conversation: a template and the data rows it cycles through.
#[derive(Clone, Debug)]
pub struct Template {
    template: Value,
    rows: Arc<Vec<Row>>,
}

impl Template {
    /// A template over `rows` (may be empty: the template is sent as written, but for
    /// `{{conversation}}`). Refuses a placeholder some row cannot fill.
    pub fn new(template: Value, rows: Vec<Row>) -> Result<Self, TemplateError> {
        check("--input", &template, &rows)?;
        Ok(Template {
            template,
            rows: Arc::new(rows),
        })
    }

    /// Reads `--input FILE` (a JSON value; absent: `{}`) and `--data FILE`.
    pub fn read(input: Option<&Path>, data: Option<&Path>) -> Result<Self, TemplateError> {
        let template = match input {
            Some(p) => serde_json::from_str(&read("--input", p)?)
                .map_err(|e| malformed("--input", p, e))?,
            None => Value::Object(Map::new()),
        };
        let rows = match data {
            Some(p) => read_data(p)?,
            None => Vec::new(),
        };
        Template::new(template, rows)
    }

    /// The data row of conversation `i` (rows taken in turn, cycling).
    pub fn row(&self, i: usize) -> Option<&Row> {
        (!self.rows.is_empty()).then(|| &self.rows[i % self.rows.len()])
    }

    /// The run input of conversation `i`.
    pub fn input(&self, i: usize) -> Value {
        fill(&self.template, self.row(i), i)
    }
}

/// One answer rule: it applies to an interrupt when its `node` (if given) paused and its `when`
/// (if given) matches the interrupt's value — each field of an object `when` equal to the value's
/// field of that name, or any other `when` equal to the whole value.
#[derive(Clone, Debug, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The node that paused.
    #[serde(default)]
    pub node: Option<String>,
    /// What the interrupt's value must hold.
    #[serde(default)]
    pub when: Option<Value>,
    /// The resume value (placeholders filled from the conversation's data row).
    pub resume: Value,
}

impl Rule {
    fn matches(&self, node: Option<&str>, value: &Value) -> bool {
        if let Some(n) = &self.node {
            if node != Some(n.as_str()) {
                return false;
            }
        }
        match &self.when {
            None => true,
            Some(Value::Object(fields)) => {
                fields.iter().all(|(k, want)| value.get(k) == Some(want))
            }
            Some(whole) => whole == value,
        }
    }
}

/// `--answers FILE` for an Agent Server API target: the first matching rule's resume value, else
/// the default; no match and no default leaves the conversation paused.
#[derive(Clone, Debug, Default, Deserialize, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Answers {
    /// Tried in order.
    #[serde(default)]
    pub rules: Vec<Rule>,
    /// The resume value when no rule matches.
    #[serde(default)]
    pub default: Option<Value>,
    /// More interrupts than this in one conversation fail it (default 20).
    #[serde(default)]
    pub max_resumes: Option<usize>,
}

/// How many interrupts a conversation may answer unless the answers file says otherwise.
pub const MAX_RESUMES: usize = 20;

impl Answers {
    /// Reads `--answers FILE` and checks its placeholders against the data rows.
    pub fn read(path: &Path, rows: &Template) -> Result<Self, TemplateError> {
        let a: Answers = serde_json::from_str(&read("--answers", path)?)
            .map_err(|e| malformed("--answers", path, e))?;
        for v in a.rules.iter().map(|r| &r.resume).chain(a.default.as_ref()) {
            check("--answers", v, &rows.rows)?;
        }
        Ok(a)
    }

    /// The resume value for an interrupt with `value` that `node` raised, in conversation `i`
    /// (whose data row is `row`); `None`: no rule and no default.
    pub fn answer(
        &self,
        node: Option<&str>,
        value: &Value,
        row: Option<&Row>,
        i: usize,
    ) -> Option<Value> {
        self.rules
            .iter()
            .find(|r| r.matches(node, value))
            .map(|r| &r.resume)
            .or(self.default.as_ref())
            .map(|v| fill(v, row, i))
    }

    /// The most interrupts one conversation may answer.
    pub fn max_resumes(&self) -> usize {
        self.max_resumes.unwrap_or(MAX_RESUMES)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn csv_cells_quotes_and_line_breaks() {
        let rows =
            parse_csv("topic,who\ntea,\"Ann, B.\"\r\n\"say \"\"hi\"\"\",\"two\nlines\"\n").unwrap();
        assert_eq!(rows.len(), 2);
        assert_eq!(rows[0]["who"], "Ann, B.");
        assert_eq!(rows[1]["topic"], "say \"hi\"");
        assert_eq!(rows[1]["who"], "two\nlines");
        assert!(parse_csv("a,b\n1\n").unwrap_err().contains("row 2"));
        assert!(parse_csv("a\n\"open\n").unwrap_err().contains("not closed"));
        assert!(parse_csv("").is_err());
    }

    #[test]
    fn placeholders_are_filled_per_conversation_cycling_through_the_rows() {
        let rows: Vec<Row> = [
            json!({"topic": "tea", "n": 3}),
            json!({"topic": "rust", "n": 5}),
        ]
        .into_iter()
        .map(|v| v.as_object().unwrap().clone())
        .collect();
        let t = Template::new(
            json!({"topic": "{{topic}}", "count": "{{ n }}", "say": "about {{topic}} ×{{n}} #{{conversation}}", "k": 1}),
            rows,
        )
        .unwrap();
        assert_eq!(
            t.input(0),
            json!({"topic": "tea", "count": 3, "say": "about tea ×3 #0", "k": 1})
        );
        assert_eq!(t.input(1)["topic"], "rust");
        assert_eq!(t.input(2)["topic"], "tea", "rows cycle");
        assert_eq!(t.input(3)["say"], "about rust ×5 #3");
        let err = Template::new(json!({"x": "{{nope}}"}), t.rows.to_vec()).unwrap_err();
        assert!(err.to_string().contains("{{nope}}"), "{err}");
        assert!(Template::new(json!("{{topic}}"), vec![]).is_err());
        assert_eq!(
            Template::new(json!({"i": "{{conversation}}"}), vec![])
                .unwrap()
                .input(7),
            json!({"i": 7})
        );
    }

    #[test]
    fn answers_by_value_fields_by_node_then_the_default() {
        let a: Answers = serde_json::from_value(json!({
            "rules": [
                {"when": {"type": "approval"}, "resume": {"action": "approve", "by": "{{who}}"}},
                {"node": "ask_budget", "resume": 100},
                {"when": "continue?", "resume": "yes"}
            ],
            "default": "ok"
        }))
        .unwrap();
        let row: Row = json!({"who": "ann"}).as_object().unwrap().clone();
        assert_eq!(
            a.answer(
                Some("review"),
                &json!({"type": "approval", "q": "?"}),
                Some(&row),
                0
            ),
            Some(json!({"action": "approve", "by": "ann"}))
        );
        assert_eq!(
            a.answer(Some("ask_budget"), &json!({"type": "ask"}), None, 0),
            Some(json!(100))
        );
        assert_eq!(
            a.answer(None, &json!("continue?"), None, 0),
            Some(json!("yes"))
        );
        assert_eq!(
            a.answer(Some("x"), &json!({"type": "other"}), None, 0),
            Some(json!("ok"))
        );
        assert_eq!(Answers::default().answer(None, &json!(1), None, 0), None);
        assert_eq!(a.max_resumes(), MAX_RESUMES);
        assert!(serde_json::from_value::<Answers>(json!({"rulez": []})).is_err());
    }
}
