//! The offline choice of a tool for a plan step: the step's question (its aspect and query) is
//! matched against each tool's name and description with BM25, and the best tool whose required
//! arguments can be filled from the question is chosen — lexical and deterministic, so the same
//! plan over the same servers always calls the same tools. A tool must share at least one word
//! with the question (stopwords aside, plurals folded); a score threshold would depend on how
//! many tools there are (BM25's weights do), a shared word does not. A tool that declares
//! `readOnlyHint: false` is never chosen offline: a plan must name it.
//!
//! Arguments are filled from the tool's input schema: a required string parameter gets the
//! step's query; one with an `enum` its first value; one with a `default` that value. A tool that
//! needs anything else (a number without a default, an object, a file path or URL, which a query
//! cannot be) is not chosen offline: a plan names it with explicit arguments instead.

use super::ToolInfo;
use crate::tools::bm25::{tokenize, Bm25Index};
use serde_json::{Map, Value};

/// Words that say nothing about what a tool is for.
const STOPWORDS: &[&str] = &[
    "the", "and", "for", "with", "from", "that", "this", "are", "its", "into", "about", "find",
    "notes", "note", "given", "any", "all", "use", "using", "tool", "returns", "return", "string",
];

/// The tool chosen for a step, and the arguments it is called with.
#[derive(Clone, Debug, PartialEq)]
pub struct Choice {
    /// The server.
    pub server: String,
    /// The tool.
    pub tool: String,
    /// Its arguments.
    pub arguments: Map<String, Value>,
    /// How well its description matched the question (BM25).
    pub score: f64,
}

/// A word's form for matching: lower case, a plural `s` dropped (`costs` matches `cost`).
fn norm(word: &str) -> Option<String> {
    if word.len() < 3 || STOPWORDS.contains(&word) {
        return None;
    }
    let w = match word.strip_suffix('s') {
        Some(stem) if word.len() > 3 && !word.ends_with("ss") => stem,
        _ => word,
    };
    Some(w.to_string())
}

/// `text` as the words matching compares.
fn words(text: &str) -> String {
    tokenize(&text.replace(['_', '-'], " "))
        .iter()
        .filter_map(|w| norm(w))
        .collect::<Vec<_>>()
        .join(" ")
}

/// Property names whose values are locations, which a query cannot stand for.
const LOCATION_WORDS: &[&str] = &["path", "uri", "url", "file", "dir", "directory", "root"];

/// Arguments for a tool with input schema `schema`, filled from `query` (see the module's
/// rules), or `None` when a required parameter cannot be filled.
pub fn arguments_for(schema: &Value, query: &str) -> Option<Map<String, Value>> {
    let props = schema.get("properties").and_then(Value::as_object);
    let required: Vec<&str> = schema
        .get("required")
        .and_then(Value::as_array)
        .map(|r| r.iter().filter_map(Value::as_str).collect())
        .unwrap_or_default();
    let mut args = Map::new();
    for name in required {
        let prop = props.and_then(|p| p.get(name)).cloned().unwrap_or_default();
        let value = if let Some(first) = prop
            .get("enum")
            .and_then(Value::as_array)
            .and_then(|e| e.first())
        {
            first.clone()
        } else if let Some(d) = prop.get("default") {
            d.clone()
        } else {
            let is_string = match prop.get("type") {
                Some(Value::String(t)) => t == "string",
                Some(Value::Array(ts)) => ts.iter().any(|t| t == "string"),
                _ => false,
            };
            let lower = name.to_lowercase();
            let location = LOCATION_WORDS.iter().any(|w| lower.contains(w));
            if !is_string || location {
                return None;
            }
            Value::String(query.to_string())
        };
        args.insert(name.to_string(), value);
    }
    Some(args)
}

/// The tool of `tools` that best fits a step asking `question` (its aspect, description and
/// query), called with `query`; `None` when no tool's description shares enough with the
/// question or none of those that do can be called from a query. Ties go to the earlier tool.
pub fn choose(tools: &[ToolInfo], question: &str, query: &str) -> Option<Choice> {
    let docs: Vec<(String, String)> = tools
        .iter()
        .map(|t| (words(&t.name), words(&t.description)))
        .collect();
    let index = Bm25Index::build(docs.iter().map(|(n, d)| (n.as_str(), d.as_str())));
    let hits = index.search(&words(question), tools.len());
    let hits = hits
        .into_iter()
        .filter(|h| tools[h.doc].read_only != Some(false));
    hits.filter(|h| h.score > 0.0).find_map(|h| {
        let t = &tools[h.doc];
        let arguments = arguments_for(&t.input_schema, query)?;
        Some(Choice {
            server: t.server.clone(),
            tool: t.name.clone(),
            arguments,
            score: h.score,
        })
    })
}

/// A citation id's part: letters, digits, `-` and `_` kept, the rest `-`.
fn id_part(s: &str) -> String {
    s.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The citation id of step `step`'s call of `tool` on `server`.
pub fn citation_id(server: &str, tool: &str, step: &str) -> String {
    format!("{}:{}:{}", id_part(server), id_part(tool), id_part(step))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tool(server: &str, name: &str, description: &str, schema: Value) -> ToolInfo {
        ToolInfo {
            server: server.into(),
            name: name.into(),
            description: description.into(),
            input_schema: schema,
            read_only: None,
        }
    }

    fn catalog() -> Vec<ToolInfo> {
        let query_schema = json!({"type": "object", "required": ["query"],
            "properties": {"query": {"type": "string"}, "limit": {"type": "integer"}}});
        vec![
            tool(
                "fs",
                "read_text_file",
                "Read the complete contents of a file as text",
                json!({"type": "object", "required": ["path"], "properties": {"path": {"type": "string"}}}),
            ),
            tool(
                "kb",
                "search_pricing",
                "Search the pricing and cost figures of vendors",
                query_schema.clone(),
            ),
            tool(
                "kb",
                "search_incidents",
                "Search incident reports about outages, risks and security",
                query_schema,
            ),
        ]
    }

    #[test]
    fn the_step_s_aspect_picks_the_tool_whose_description_names_it() {
        let c = choose(&catalog(), "costs of support automation", "support costs").unwrap();
        assert_eq!(
            (c.server.as_str(), c.tool.as_str()),
            ("kb", "search_pricing")
        );
        assert_eq!(
            c.arguments,
            json!({"query": "support costs"})
                .as_object()
                .cloned()
                .unwrap()
        );
        let c = choose(&catalog(), "risks", "rag risks").unwrap();
        assert_eq!(c.tool, "search_incidents");
    }

    #[test]
    fn one_shared_word_is_enough_however_many_tools_there_are() {
        let one = &catalog()[1..2];
        assert_eq!(
            choose(one, "cost", "cost").map(|c| c.tool),
            Some("search_pricing".into())
        );
        let mut writer = catalog()[1].clone();
        writer.read_only = Some(false);
        assert_eq!(choose(&[writer], "cost", "cost"), None);
    }

    #[test]
    fn no_tool_is_chosen_without_a_shared_word_or_fillable_arguments() {
        assert_eq!(choose(&catalog(), "staffing", "staffing"), None);
        // The file tool matches `file` but needs a path, which a query cannot be.
        assert_eq!(
            choose(&catalog()[..1], "file contents", "file contents"),
            None
        );
    }

    #[test]
    fn arguments_take_enums_and_defaults_and_refuse_what_a_query_cannot_fill() {
        let schema = json!({"type": "object", "required": ["q", "mode", "n"], "properties": {
            "q": {"type": "string"}, "mode": {"enum": ["fast", "slow"]}, "n": {"type": "integer", "default": 3}}});
        assert_eq!(
            arguments_for(&schema, "heat pumps").map(Value::Object),
            Some(json!({"q": "heat pumps", "mode": "fast", "n": 3}))
        );
        let number = json!({"required": ["n"], "properties": {"n": {"type": "number"}}});
        assert_eq!(arguments_for(&number, "x"), None);
        assert_eq!(arguments_for(&json!({}), "x"), Some(Map::new()));
    }
}
