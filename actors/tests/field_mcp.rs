//! The field planner reading a number from a tool server's result: a search also asks the tool
//! whose description fits its query, and the result is a document among the hits, read under the
//! corpus's provenance rules (the quote verbatim in it, the value following from the span). A
//! tool that fails leaves the corpus's hits, and the planner asks as it would without it.

mod field_support;

use field_support::*;
use planwright_actors::field::runner::{self, AnswerSource, Start};
use planwright_actors::field::{input, GraphOptions, Topology};
use planwright_actors::tools::mcp::{AttemptError, CallPolicy, McpTools, ToolBackend, ToolInfo};
use serde_json::{json, Map, Value};
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

const LEASES: &str = "Lease price list, Rivertown 2026. Leasing one cargo bike costs 1,800 EUR \
    per year, service included.";

/// Answers per field; records the fields asked about.
#[derive(Default)]
struct Script {
    answers: BTreeMap<String, String>,
    asked: Vec<String>,
}

impl AnswerSource for Script {
    fn answer(&mut self, field: &str, _question: &str) -> Option<String> {
        self.asked.push(field.to_string());
        self.answers.get(field).cloned()
    }
}

struct Stub(Option<Value>);

impl ToolBackend for Stub {
    fn call<'a>(
        &'a self,
        _tool: &'a str,
        _arguments: Map<String, Value>,
    ) -> Pin<Box<dyn Future<Output = Result<Value, AttemptError>> + Send + 'a>> {
        let answer = self.0.clone();
        Box::pin(async move {
            match answer {
                Some(v) => Ok(v),
                None => std::future::pending().await,
            }
        })
    }
}

fn leases(answer: Option<Value>) -> Arc<McpTools> {
    let tool = ToolInfo {
        server: String::new(),
        name: "lease_prices".into(),
        description: "Lease price lists: the yearly lease of a cargo bike by city".into(),
        input_schema: json!({"type": "object", "required": ["query"],
            "properties": {"query": {"type": "string"}}}),
        read_only: Some(true),
    };
    Arc::new(McpTools::from_backends(
        vec![(
            "leases".into(),
            vec![tool],
            Arc::new(Stub(answer)) as Arc<dyn ToolBackend>,
        )],
        CallPolicy {
            timeout: Duration::from_secs(2),
            attempts: 2,
            backoff: Duration::from_millis(100),
            connect_timeout: Duration::from_secs(2),
        },
    ))
}

async fn run(mcp: Arc<McpTools>, script: &mut Script) -> runner::AcquireRun {
    let options = GraphOptions {
        model_retry: fast_retry(),
        mcp: Some(mcp),
        ..GraphOptions::default()
    };
    let e = engine(offline(), &options, None).await;
    let sc = scenario("bikes");
    let update = input::initial_update("bikes", "size cargo bike leasing", sc.schema, sc.corpus);
    let out = runner::run(
        &e,
        Topology::Staged,
        "bikes",
        Start::Input(Box::new(update)),
        script,
    )
    .await
    .unwrap();
    e.shutdown().await;
    out
}

fn script() -> Script {
    Script {
        answers: BTreeMap::from([
            ("region".to_string(), "Rivertown".to_string()),
            ("currency".to_string(), "EUR".to_string()),
            ("lease_price".to_string(), "2,000".to_string()),
        ]),
        asked: Vec::new(),
    }
}

#[tokio::test(start_paused = true)]
async fn the_lease_price_is_read_from_the_tool_s_result_with_its_provenance() {
    let mut script = script();
    let run = run(
        leases(Some(json!({"content": [{"type": "text", "text": LEASES}]}))),
        &mut script,
    )
    .await;
    assert_eq!(run.status(), "ok", "{:#?}", run.state.reflections);
    let price = run.output_json()["fields"]["lease_price"].clone();
    assert_eq!(price["value"], 1800.0, "{price}");
    let p = &price["provenance"];
    assert_eq!(p["kind"], "search", "{p}");
    assert_eq!(p["source_id"], "leases:lease_prices:lease_price", "{p}");
    assert!(LEASES.contains(p["quote"].as_str().unwrap()), "{p}");
    assert!(
        !script.asked.contains(&"lease_price".to_string()),
        "{:?}",
        script.asked
    );
}

#[tokio::test(start_paused = true)]
async fn a_tool_that_hangs_leaves_the_corpus_and_the_planner_asks() {
    let mut script = script();
    let run = run(leases(None), &mut script).await;
    assert_eq!(run.status(), "ok", "{:#?}", run.state.reflections);
    let price = run.output_json()["fields"]["lease_price"].clone();
    assert_eq!(price["value"], 2000.0, "{price}");
    assert_eq!(price["provenance"]["kind"], "user", "{price}");
    assert!(
        script.asked.contains(&"lease_price".to_string()),
        "{:?}",
        script.asked
    );
}
