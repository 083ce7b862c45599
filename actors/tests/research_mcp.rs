//! The research planner's `mcp` steps over stand-in tool servers (in-process backends, paused
//! time): the offline choice of a tool by its description, the brief citing the tool's result
//! with its provenance, and every way a call fails (a hang, a tool error, garbage, no server)
//! becoming a reported gap instead of a crash. `research_mcp_servers` runs the same against the
//! official servers.

mod research_support;

use planwright_actors::research::state::{Criterion, PlanStep, StepParams, StepStatus};
use planwright_actors::research::{graph, initial_update, GraphOptions, ResearchState};
use planwright_actors::tools::mcp::{AttemptError, CallPolicy, McpTools, ToolBackend, ToolInfo};
use research_support::*;
use serde_json::{json, Map, Value};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

const GOAL: &str = "Should our customer support adopt retrieval-augmented generation";

const PRICING: &str = "Vendor pricing for support assistants, 2026. The licence cost of the \
    retrieval assistant is 1,200 USD per month for ten agents. Hosting the search index adds a \
    cost of 300 USD per month.";

/// How a stand-in server answers a call.
#[derive(Clone)]
enum Answer {
    /// This `CallToolResult`.
    Result(Value),
    /// Never.
    Hang,
}

struct Stub(Answer);

impl ToolBackend for Stub {
    fn call<'a>(
        &'a self,
        _tool: &'a str,
        _arguments: Map<String, Value>,
    ) -> Pin<Box<dyn Future<Output = Result<Value, AttemptError>> + Send + 'a>> {
        let answer = self.0.clone();
        Box::pin(async move {
            match answer {
                Answer::Result(v) => Ok(v),
                Answer::Hang => std::future::pending().await,
            }
        })
    }
}

fn tool(name: &str, description: &str) -> ToolInfo {
    ToolInfo {
        server: String::new(),
        name: name.into(),
        description: description.into(),
        input_schema: json!({"type": "object", "required": ["query"],
            "properties": {"query": {"type": "string"}}}),
        read_only: Some(true),
    }
}

fn text(t: &str) -> Answer {
    Answer::Result(json!({"content": [{"type": "text", "text": t}]}))
}

fn policy() -> CallPolicy {
    CallPolicy {
        timeout: Duration::from_secs(5),
        attempts: 2,
        backoff: Duration::from_millis(100),
        connect_timeout: Duration::from_secs(5),
    }
}

fn servers(list: Vec<(&str, Vec<ToolInfo>, Answer)>) -> Arc<McpTools> {
    Arc::new(McpTools::from_backends(
        list.into_iter()
            .map(|(name, tools, answer)| {
                (
                    name.to_string(),
                    tools,
                    Arc::new(Stub(answer)) as Arc<dyn ToolBackend>,
                )
            })
            .collect(),
        policy(),
    ))
}

async fn run_with(
    policy: Arc<dyn planwright_actors::research::policy::ResearchPolicy>,
    mcp: Option<Arc<McpTools>>,
    constraints: Value,
) -> Arc<ResearchState> {
    let g = graph(
        policy,
        GraphOptions {
            mcp,
            ..GraphOptions::default()
        },
    )
    .unwrap();
    let engine = planwright::Engine::builder(g).build().await;
    let out = engine
        .run(
            planwright::ThreadId::new("t"),
            initial_update(input(GOAL, constraints, None)).unwrap(),
            planwright::RunOptions::default(),
        )
        .await
        .unwrap();
    out.state
}

fn mcp_step(id: &str, server: &str, aspect: &str) -> PlanStep {
    PlanStep {
        id: id.into(),
        description: format!("ask {server} about {aspect}"),
        tool: "mcp".into(),
        params: Arc::new(StepParams {
            aspect: Some(aspect.into()),
            query: Some(format!("support {aspect}")),
            server: Some(server.into()),
            tool: Some("lookup".into()),
            ..StepParams::default()
        }),
        acceptance_criteria: vec![Criterion::MinSources(1)].into(),
        optional: true,
        ..PlanStep::default()
    }
}

#[tokio::test(start_paused = true)]
async fn the_offline_plan_asks_the_tool_whose_description_fits_and_the_brief_cites_it() {
    let mcp = servers(vec![(
        "kb",
        vec![
            tool("echo", "Echoes back the input string"),
            tool(
                "search_vendor_pricing",
                "Search vendor pricing sheets: licence cost, hosting cost and price per \
                     resolved conversation of support automation.",
            ),
        ],
        text(PRICING),
    )]);
    let s = run_with(
        Arc::new(planwright_actors::research::policy::OfflineResearchPolicy),
        Some(mcp),
        json!({"required_sections": ["cost", "risks"]}),
    )
    .await;
    assert_eq!(s.status, "ok", "{:?}", s.blocked_reason);
    // One tool step, for `cost` only: no tool's description speaks of risks.
    let tool_steps: Vec<&PlanStep> = s.plan.iter().filter(|p| p.tool == "mcp").collect();
    assert_eq!(tool_steps.len(), 1, "{:#?}", s.plan);
    let step = tool_steps[0];
    assert_eq!(step.params.aspect.as_deref(), Some("cost"));
    assert_eq!(step.params.server.as_deref(), Some("kb"));
    assert_eq!(step.params.tool.as_deref(), Some("search_vendor_pricing"));
    assert_eq!(step.status, StepStatus::Complete);
    let id = format!("kb:search_vendor_pricing:{}", step.id);
    assert!(
        s.final_report.contains(&format!("[{id}]")),
        "{}",
        s.final_report
    );
    assert!(
        s.final_report
            .contains("The licence cost of the retrieval assistant is 1,200 USD per month"),
        "{}",
        s.final_report
    );
    let out = planwright_actors::research::output_json(&s, &s.status);
    let evidence = out["evidence"].as_array().unwrap();
    let e = evidence
        .iter()
        .find(|e| e["source_id"] == id.as_str())
        .unwrap_or_else(|| panic!("{evidence:#?}"));
    assert_eq!(e["tool_call"]["server"], "kb");
    assert_eq!(e["tool_call"]["tool"], "search_vendor_pricing");
    assert_eq!(
        e["tool_call"]["arguments"]["query"],
        step.params.query.as_deref().unwrap()
    );
    assert_eq!(e["tool_call"]["content"], PRICING);
    assert!(
        s.final_output["sources"]
            .as_array()
            .unwrap()
            .iter()
            .any(|x| x == id.as_str()),
        "{}",
        s.final_output
    );
}

#[tokio::test(start_paused = true)]
async fn a_sentence_the_tool_result_does_not_support_is_removed() {
    let mcp = servers(vec![(
        "kb",
        vec![tool(
            "search_vendor_pricing",
            "Search vendor pricing: licence cost",
        )],
        text(PRICING),
    )]);
    let id = "kb:search_vendor_pricing:step_3";
    let policy = ScriptedPolicy::new();
    policy
        .reports
        .lock()
        .unwrap()
        .push_back(Ok(planwright_actors::research::policy::Report {
            text: format!(
                "The licence cost of the retrieval assistant is 1,200 USD per month [{id}]. \
                 The licence cost of the retrieval assistant is 9,900 USD per month [{id}].\n"
            ),
        }));
    let s = run_with(
        policy,
        Some(mcp),
        json!({"required_sections": ["cost", "risks"]}),
    )
    .await;
    assert!(
        s.final_report.contains("1,200 USD"),
        "{} {:?} {:?} {:?}",
        s.final_report,
        s.status,
        s.knowledge_gaps,
        s.plan.iter().map(|p| (&p.id, &p.tool)).collect::<Vec<_>>()
    );
    assert!(!s.final_report.contains("9,900"), "{}", s.final_report);
    assert!(
        s.knowledge_gaps
            .iter()
            .any(|g| g.contains("9,900") && g.contains("does not support")),
        "{:?}",
        s.knowledge_gaps
    );
}

#[tokio::test(start_paused = true)]
async fn a_hang_an_error_garbage_and_a_missing_server_are_reported_gaps_not_crashes() {
    let lookup = || vec![tool("lookup", "Look up incident reports")];
    let mcp = servers(vec![
        ("slow", lookup(), Answer::Hang),
        (
            "broken",
            lookup(),
            Answer::Result(json!({"isError": true,
                "content": [{"type": "text", "text": "backend database unavailable"}]})),
        ),
        (
            "noisy",
            lookup(),
            text("\u{1}\u{2}\u{3}\u{4}\u{5}\u{6}\u{7}\u{8}"),
        ),
    ]);
    let mut plan = vec![search(
        "notes",
        "retrieval augmented generation support cost",
        &[],
        vec![Criterion::MinSources(1)],
    )];
    for (id, server) in [
        ("s_slow", "slow"),
        ("s_broken", "broken"),
        ("s_noisy", "noisy"),
        ("s_none", "absent"),
    ] {
        plan.push(mcp_step(id, server, "risks"));
    }
    let policy = ScriptedPolicy::new().plan(plan);
    let start = tokio::time::Instant::now();
    let s = run_with(policy, Some(mcp), json!({})).await;
    // Two attempts of 5 s with 100 ms between them: the hang ends on the timeout.
    assert_eq!(start.elapsed(), Duration::from_millis(10_100));
    assert_eq!(s.status, "ok", "{:?}", s.blocked_reason);
    for (id, expected) in [
        ("s_slow", "slow/lookup: no answer within 5s (2 attempt(s))"),
        (
            "s_broken",
            "broken/lookup returned an error: backend database unavailable",
        ),
        ("s_noisy", "noisy/lookup returned no usable content"),
        (
            "s_none",
            "no tool server `absent` is connected (connected: slow, broken, noisy)",
        ),
    ] {
        assert_eq!(s.step(id).unwrap().status, StepStatus::Skipped, "{id}");
        assert!(
            s.knowledge_gaps.iter().any(|g| g.contains(expected)),
            "{id}: {:?}",
            s.knowledge_gaps
        );
        assert!(
            s.errors
                .iter()
                .any(|e| e.starts_with(&format!("{id}: tool mcp: ")) && e.contains(expected)),
            "{id}: {:?}",
            s.errors
        );
    }
    assert!(!s.final_report.contains("[slow:"), "{}", s.final_report);
}

#[tokio::test]
async fn without_tool_servers_an_mcp_step_fails_and_says_how_to_give_them() {
    let policy = ScriptedPolicy::new().plan(vec![
        search(
            "notes",
            "retrieval augmented generation support",
            &[],
            vec![Criterion::MinSources(1)],
        ),
        mcp_step("ask", "kb", "cost"),
    ]);
    let s = run_with(policy, None, json!({})).await;
    assert_eq!(s.status, "ok");
    assert!(
        s.knowledge_gaps
            .iter()
            .any(|g| g.contains("no tool server is connected (give them with --tools")),
        "{:?}",
        s.knowledge_gaps
    );
}

/// A stand-in OpenAI-compatible server: records each request's body and answers each with the
/// next message of its script.
struct FakeOpenAi {
    requests: std::sync::Mutex<Vec<Value>>,
    script: std::sync::Mutex<std::collections::VecDeque<Value>>,
}

async fn fake_openai(script: Vec<Value>) -> (Arc<FakeOpenAi>, String) {
    use axum::extract::State;
    let state = Arc::new(FakeOpenAi {
        requests: Default::default(),
        script: std::sync::Mutex::new(script.into()),
    });
    async fn handle(
        State(s): State<Arc<FakeOpenAi>>,
        axum::Json(body): axum::Json<Value>,
    ) -> axum::Json<Value> {
        s.requests.lock().unwrap().push(body);
        let message = s
            .script
            .lock()
            .unwrap()
            .pop_front()
            .unwrap_or(json!({"content": "no"}));
        axum::Json(json!({"choices": [{"message": message}],
            "usage": {"prompt_tokens": 40, "completion_tokens": 9}}))
    }
    let app = axum::Router::new()
        .route("/v1/chat/completions", axum::routing::post(handle))
        .with_state(state.clone());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/v1", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    (state, url)
}

fn openai(url: &str) -> Arc<dyn planwright_actors::model::ChatModel> {
    let mut cfg = planwright_actors::model::OpenAiConfig::new(url, "test-model");
    cfg.max_retries = 0;
    Arc::new(planwright_actors::model::OpenAiModel::new(cfg).unwrap())
}

/// The offline policy, except that a chat policy chooses tools.
struct ModelChoosesTools {
    plan: Vec<PlanStep>,
    chat: planwright_actors::research::policy::ChatResearchPolicy,
}

#[async_trait::async_trait]
impl planwright_actors::research::policy::ResearchPolicy for ModelChoosesTools {
    fn name(&self) -> &str {
        "offline+model-tools"
    }
    async fn create_plan(
        &self,
        _: &planwright_actors::research::policy::PlanRequest,
    ) -> Result<
        planwright_actors::research::policy::PolicyReply<Vec<PlanStep>>,
        planwright_actors::research::policy::PolicyError,
    > {
        Ok(planwright_actors::research::policy::PolicyReply::offline(
            self.plan.clone(),
        ))
    }
    async fn repair_plan(
        &self,
        r: &planwright_actors::research::policy::RepairRequest,
    ) -> Result<
        planwright_actors::research::policy::PolicyReply<Vec<PlanStep>>,
        planwright_actors::research::policy::PolicyError,
    > {
        planwright_actors::research::policy::OfflineResearchPolicy
            .repair_plan(r)
            .await
    }
    async fn replan(
        &self,
        r: &planwright_actors::research::policy::ReplanRequest,
    ) -> Result<
        planwright_actors::research::policy::PolicyReply<Vec<PlanStep>>,
        planwright_actors::research::policy::PolicyError,
    > {
        planwright_actors::research::policy::OfflineResearchPolicy
            .replan(r)
            .await
    }
    async fn synthesize_report(
        &self,
        r: &planwright_actors::research::policy::SynthesisRequest,
    ) -> Result<
        planwright_actors::research::policy::PolicyReply<
            planwright_actors::research::policy::Report,
        >,
        planwright_actors::research::policy::PolicyError,
    > {
        planwright_actors::research::policy::OfflineResearchPolicy
            .synthesize_report(r)
            .await
    }
    async fn choose_tool(
        &self,
        r: &planwright_actors::research::policy::ToolChoiceRequest,
    ) -> Result<
        Option<
            planwright_actors::research::policy::PolicyReply<planwright_actors::tools::mcp::Choice>,
        >,
        planwright_actors::research::policy::PolicyError,
    > {
        self.chat.choose_tool(r).await
    }
}

fn open_step(id: &str, aspect: &str) -> PlanStep {
    PlanStep {
        id: id.into(),
        description: format!("find what the tools say about {aspect}"),
        tool: "mcp".into(),
        params: Arc::new(StepParams {
            aspect: Some(aspect.into()),
            query: Some(format!("support {aspect}")),
            ..StepParams::default()
        }),
        acceptance_criteria: vec![Criterion::MinSources(1)].into(),
        optional: true,
        ..PlanStep::default()
    }
}

#[tokio::test]
async fn a_chat_model_chooses_the_tool_by_function_calling() {
    // The model calls the pricing tool with arguments of its own; for the second step it calls
    // none.
    let (fake, url) = fake_openai(vec![
        json!({"content": null, "tool_calls": [{"id": "call_7", "type": "function",
            "function": {"name": "kb__search_vendor_pricing",
                         "arguments": "{\"query\": \"licence cost per agent\"}"}}]}),
        json!({"content": "No tool covers staffing."}),
    ])
    .await;
    let mcp = servers(vec![(
        "kb",
        vec![
            tool("echo", "Echoes back the input string"),
            tool(
                "search_vendor_pricing",
                "Search vendor pricing sheets: licence cost",
            ),
        ],
        text(PRICING),
    )]);
    let policy = Arc::new(ModelChoosesTools {
        plan: vec![
            search(
                "notes",
                "retrieval augmented generation support",
                &[],
                vec![Criterion::MinSources(1)],
            ),
            PlanStep {
                depends_on: vec!["notes".into()],
                ..open_step("ask_cost", "cost")
            },
            PlanStep {
                depends_on: vec!["ask_cost".into()],
                ..open_step("ask_staffing", "staffing")
            },
        ],
        chat: planwright_actors::research::policy::ChatResearchPolicy::new(openai(&url)),
    });
    let s = run_with(policy, Some(mcp), json!({})).await;
    assert_eq!(s.status, "ok", "{:?}", s.blocked_reason);

    let r = &s.step_results["ask_cost"];
    let call = r.tool_call.as_ref().expect("the cost step called a tool");
    assert_eq!(
        (call.server.as_str(), call.tool.as_str()),
        ("kb", "search_vendor_pricing")
    );
    assert_eq!(call.arguments, json!({"query": "licence cost per agent"}));
    assert_eq!(call.chosen_by.as_deref(), Some("model"));
    assert!(
        s.final_report
            .contains("[kb:search_vendor_pricing:ask_cost]"),
        "{}",
        s.final_report
    );
    assert!(
        s.model_usage
            .iter()
            .any(|u| u.call == "choose_tool" && u.prompt_tokens == 40),
        "{:?}",
        s.model_usage
    );
    assert_eq!(s.step("ask_staffing").unwrap().status, StepStatus::Skipped);
    assert!(
        s.knowledge_gaps.iter().any(|g| g.contains(
            "the model called no tool for step `ask_staffing`: No tool covers staffing."
        )),
        "{:?}",
        s.knowledge_gaps
    );

    // What the model was sent: the tools as functions with their schemas, and the step.
    let requests = fake.requests.lock().unwrap().clone();
    assert_eq!(requests.len(), 2);
    let body = &requests[0];
    let names: Vec<&str> = body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["function"]["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["kb__echo", "kb__search_vendor_pricing"]);
    assert_eq!(body["tools"][1]["type"], "function");
    assert_eq!(
        body["tools"][1]["function"]["parameters"]["required"],
        json!(["query"])
    );
    let user = body["messages"][1]["content"].as_str().unwrap();
    assert!(
        user.contains("\"aspect\":\"cost\"") && user.contains("ask_cost"),
        "{user}"
    );
}

#[tokio::test]
async fn the_openai_client_puts_tool_calls_and_tool_results_in_the_conversation() {
    use planwright_actors::model::functions::{
        FunctionCall, FunctionMessage, FunctionRequest, FunctionSpec,
    };
    use planwright_actors::model::ChatModel;
    let (fake, url) = fake_openai(vec![
        json!({"content": "The licence costs 1,200 USD a month."}),
    ])
    .await;
    // Counted (as `load` wraps models): the counting wrapper passes function calls through.
    let stats = Arc::new(planwright_actors::model::ModelStats::default());
    let model = planwright_actors::model::CountedModel::new(openai(&url), stats.clone());
    assert!(model.calls_functions());
    let call = FunctionCall {
        id: "call_1".into(),
        name: "kb__search".into(),
        arguments: r#"{"query":"cost"}"#.into(),
    };
    let reply = model
        .chat_with_functions(&FunctionRequest {
            call: "answer".into(),
            messages: vec![
                FunctionMessage::User("What does the licence cost?".into()),
                FunctionMessage::Assistant {
                    content: None,
                    calls: vec![call],
                },
                FunctionMessage::Result {
                    call_id: "call_1".into(),
                    content: PRICING.into(),
                },
            ],
            functions: vec![FunctionSpec {
                name: "kb__search".into(),
                description: "search".into(),
                parameters: json!({"type": "object"}),
            }],
        })
        .await
        .unwrap();
    assert_eq!(
        reply.content.as_deref(),
        Some("The licence costs 1,200 USD a month.")
    );
    assert!(reply.calls.is_empty());
    let counted = stats.snapshot();
    assert_eq!(
        (
            counted[0].call.as_str(),
            counted[0].calls,
            counted[0].prompt_tokens
        ),
        ("answer", 1, 40)
    );
    let body = fake.requests.lock().unwrap()[0].clone();
    assert_eq!(body["messages"][1]["tool_calls"][0]["id"], "call_1");
    assert_eq!(
        body["messages"][1]["tool_calls"][0]["function"]["name"],
        "kb__search"
    );
    assert_eq!(
        body["messages"][2],
        json!({"role": "tool", "tool_call_id": "call_1", "content": PRICING})
    );
}

#[tokio::test(start_paused = true)]
async fn a_step_calling_a_tool_that_writes_waits_for_approval() {
    let mut writer = tool("write_file", "Write a file");
    writer.read_only = Some(false);
    let mcp = servers(vec![("fs", vec![writer], text("written"))]);
    let step = PlanStep {
        params: Arc::new(StepParams {
            aspect: Some("risks".into()),
            query: Some("risks".into()),
            server: Some("fs".into()),
            tool: Some("write_file".into()),
            arguments: json!({"path": "/tmp/x", "content": "y"})
                .as_object()
                .cloned(),
            ..StepParams::default()
        }),
        ..mcp_step("write", "fs", "risks")
    };
    let plan = vec![
        search(
            "notes",
            "retrieval augmented generation support",
            &[],
            vec![Criterion::MinSources(1)],
        ),
        step,
    ];
    let g = graph(
        ScriptedPolicy::new().plan(plan),
        GraphOptions {
            mcp: Some(mcp),
            ..GraphOptions::default()
        },
    )
    .unwrap();
    let engine = planwright::Engine::builder(g).build().await;
    let out = engine
        .run(
            planwright::ThreadId::new("w"),
            initial_update(input(GOAL, json!({}), None)).unwrap(),
            planwright::RunOptions::default(),
        )
        .await
        .unwrap();
    assert_eq!(
        out.status,
        planwright::RunStatus::Interrupted,
        "{:#?}",
        out.state.execution_history
    );
    assert!(
        out.state.step_results.is_empty(),
        "{:?}",
        out.state.step_results
    );
    // The offline choice and a model never pick it by themselves.
    assert_eq!(
        planwright_actors::tools::mcp::choose(
            servers(vec![(
                "fs",
                vec![{
                    let mut w = tool("write_file", "Write the risks file");
                    w.read_only = Some(false);
                    w
                }],
                text("x")
            )])
            .tools(),
            "risks",
            "risks"
        ),
        None
    );
}
