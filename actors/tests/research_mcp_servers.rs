//! The research planner's `mcp` steps against the official tool servers from their registries
//! (see `mcp_support`): a plan whose steps call `@modelcontextprotocol/server-filesystem` and
//! `@modelcontextprotocol/server-everything` over stdio and a Python `mcp` server over
//! Streamable HTTP, in parallel, next to servers that hang, error and return garbage. The brief
//! must cite the tools' results with their provenance, and the failures must become reported
//! gaps. The `research` command takes the same servers with `--tools`.

mod mcp_support;
mod research_support;

use mcp_support::*;
use planwright_actors::research::policy::{
    OfflineResearchPolicy, PlanRequest, PolicyError, PolicyReply, RepairRequest, ReplanRequest,
    Report, ResearchPolicy, SynthesisRequest,
};
use planwright_actors::research::state::{Criterion, PlanStep, StepParams, StepStatus};
use planwright_actors::research::{graph, initial_update, output_json, GraphOptions};
use planwright_actors::tools::mcp::{CallPolicy, McpTools, ServerSpec};
use research_support::input;
use serde_json::{json, Value};
use std::sync::Arc;
use std::time::Duration;

const GOAL: &str = "Should our customer support adopt retrieval-augmented generation";
const RISKS: &str = "Hallucinated answers are the main risk of retrieval-augmented support. \
    In the pilot, 2 percent of sampled answers cited an outdated refund policy.";
const ECHOED: &str = "Stale knowledge base articles are a support risk when nobody owns them.";

/// The offline policy, with more steps after its plan.
struct WithSteps(Vec<PlanStep>);

#[async_trait::async_trait]
impl ResearchPolicy for WithSteps {
    fn name(&self) -> &str {
        "offline+steps"
    }
    async fn create_plan(
        &self,
        r: &PlanRequest,
    ) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        let mut reply = OfflineResearchPolicy.create_plan(r).await?;
        reply.value.extend(self.0.iter().cloned());
        Ok(reply)
    }
    async fn repair_plan(
        &self,
        r: &RepairRequest,
    ) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        OfflineResearchPolicy.repair_plan(r).await
    }
    async fn replan(&self, r: &ReplanRequest) -> Result<PolicyReply<Vec<PlanStep>>, PolicyError> {
        OfflineResearchPolicy.replan(r).await
    }
    async fn synthesize_report(
        &self,
        r: &SynthesisRequest,
    ) -> Result<PolicyReply<Report>, PolicyError> {
        OfflineResearchPolicy.synthesize_report(r).await
    }
}

fn call_step(id: &str, server: &str, tool: &str, arguments: Value, optional: bool) -> PlanStep {
    PlanStep {
        id: id.into(),
        description: format!("ask {server}/{tool} about risks"),
        tool: "mcp".into(),
        params: Arc::new(StepParams {
            aspect: Some("risks".into()),
            query: Some("support risks".into()),
            server: Some(server.into()),
            tool: Some(tool.into()),
            arguments: arguments.as_object().cloned(),
            ..StepParams::default()
        }),
        acceptance_criteria: vec![
            Criterion::MinSources(1),
            Criterion::Covers(vec!["risk".into()]),
        ]
        .into(),
        optional,
        ..PlanStep::default()
    }
}

/// A directory of documents the filesystem server may read.
fn docs_dir() -> std::path::PathBuf {
    let dir = std::path::Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("mcp-docs-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("risks.md"), format!("# Risks\n\n{RISKS}\n")).unwrap();
    dir
}

fn spec(s: &str) -> ServerSpec {
    s.parse().unwrap_or_else(|e| panic!("{s}: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_plan_calls_the_official_servers_in_parallel_and_the_brief_cites_them() {
    install().await;
    let kb = KbServer::start().await;
    let docs = docs_dir();
    let risks_file = docs.join("risks.md").display().to_string();
    let specs: Vec<ServerSpec> = [
        format!(
            "fs={}",
            npm_server("mcp-server-filesystem", &[&docs.display().to_string()])
        ),
        format!(
            "everything={}",
            npm_server("mcp-server-everything", &["stdio"])
        ),
        kb.spec(),
        misbehaving("slow", "hang"),
        misbehaving("broken", "error"),
        misbehaving("noisy", "garbage"),
    ]
    .iter()
    .map(|s| spec(s))
    .collect();
    let policy = CallPolicy {
        timeout: Duration::from_secs(3),
        attempts: 2,
        backoff: Duration::from_millis(100),
        connect_timeout: Duration::from_secs(120),
    };
    let mcp = Arc::new(McpTools::connect(&specs, policy).await.unwrap());
    // Every server's tools, with their schemas.
    let read = mcp.find(Some("fs"), "read_text_file").unwrap();
    assert!(
        read.input_schema["properties"]["path"].is_object(),
        "{:?}",
        read.input_schema
    );
    assert!(mcp.find(Some("everything"), "echo").is_ok());
    let pricing = mcp.find(Some("kb"), "search_vendor_pricing").unwrap();
    assert!(pricing.description.contains("licence cost"), "{pricing:?}");
    assert_eq!(
        mcp.server_names(),
        ["fs", "everything", "kb", "slow", "broken", "noisy"]
    );

    let extra = vec![
        call_step(
            "fs_risks",
            "fs",
            "read_text_file",
            json!({"path": risks_file}),
            false,
        ),
        call_step(
            "echo_risks",
            "everything",
            "echo",
            json!({"message": ECHOED}),
            false,
        ),
        call_step(
            "slow_risks",
            "slow",
            "lookup",
            json!({"query": "risks"}),
            true,
        ),
        call_step(
            "broken_risks",
            "broken",
            "lookup",
            json!({"query": "risks"}),
            true,
        ),
        call_step(
            "noisy_risks",
            "noisy",
            "lookup",
            json!({"query": "risks"}),
            true,
        ),
    ];
    let g = graph(
        Arc::new(WithSteps(extra)),
        GraphOptions {
            mcp: Some(mcp),
            ..GraphOptions::default()
        },
    )
    .unwrap();
    let engine = planwright::Engine::builder(g).build().await;
    let out = engine
        .run(
            planwright::ThreadId::new("mcp"),
            initial_update(input(
                GOAL,
                json!({"required_sections": ["cost", "risks"], "max_steps": 12}),
                None,
            ))
            .unwrap(),
            planwright::RunOptions::default(),
        )
        .await
        .unwrap();
    let s = &out.state;
    assert_eq!(s.status, "ok", "{:?} {:?}", s.blocked_reason, s.errors);

    // The offline policy chose the knowledge base's pricing tool for `cost` by its description.
    let kb_step = s
        .plan
        .iter()
        .find(|p| p.tool == "mcp" && p.params.server.as_deref() == Some("kb"))
        .unwrap_or_else(|| panic!("{:#?}", s.plan));
    assert_eq!(kb_step.params.aspect.as_deref(), Some("cost"));

    // Every tool step was selected in the first batch: they ran as parallel tasks.
    let first_batch = s
        .execution_history
        .iter()
        .find(|h| h.event == "steps_selected")
        .unwrap();
    for id in [
        kb_step.id.as_str(),
        "fs_risks",
        "echo_risks",
        "slow_risks",
        "broken_risks",
        "noisy_risks",
    ] {
        assert!(
            first_batch.detail.contains(id),
            "{id}: {}",
            first_batch.detail
        );
    }

    // The brief cites each result, and the evidence carries its provenance.
    let out = output_json(s, &s.status);
    let evidence = out["evidence"].as_array().unwrap();
    let cited = |id: &str| -> &Value {
        assert!(
            s.final_report.contains(&format!("[{id}]")),
            "{id}:\n{}",
            s.final_report
        );
        evidence
            .iter()
            .find(|e| e["source_id"] == id)
            .unwrap_or_else(|| panic!("{id}: {evidence:#?}"))
    };
    let e = cited(&format!("kb:search_vendor_pricing:{}", kb_step.id));
    assert!(
        e["tool_call"]["content"]
            .as_str()
            .unwrap()
            .contains("1,200 USD per month"),
        "{e}"
    );
    assert!(
        s.final_report.contains("1,200 USD per month"),
        "{}",
        s.final_report
    );
    let e = cited("fs:read_text_file:fs_risks");
    assert_eq!(e["tool_call"]["server"], "fs");
    assert_eq!(e["tool_call"]["arguments"]["path"], risks_file.as_str());
    assert!(
        e["tool_call"]["content"].as_str().unwrap().contains(RISKS),
        "{e}"
    );
    assert!(
        s.final_report
            .contains("Hallucinated answers are the main risk"),
        "{}",
        s.final_report
    );
    let e = cited("everything:echo:echo_risks");
    assert_eq!(e["tool_call"]["arguments"]["message"], ECHOED);
    assert!(
        e["tool_call"]["content"].as_str().unwrap().contains(ECHOED),
        "{e}"
    );

    // The failures are reported gaps, the brief goes on without them.
    for (id, expected) in [
        (
            "slow_risks",
            "slow/lookup: no answer within 3s (2 attempt(s))",
        ),
        (
            "broken_risks",
            "broken/lookup returned an error: backend database unavailable",
        ),
        ("noisy_risks", "noisy/lookup returned no usable content"),
    ] {
        assert_eq!(s.step(id).unwrap().status, StepStatus::Skipped, "{id}");
        assert!(
            s.knowledge_gaps.iter().any(|g| g.contains(expected)),
            "{id}: {:?}",
            s.knowledge_gaps
        );
    }
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_does_not_start_or_speak_mcp_is_an_error_naming_it() {
    let policy = CallPolicy {
        connect_timeout: Duration::from_secs(20),
        ..CallPolicy::default()
    };
    let err = McpTools::connect(
        &[spec("ghost=mcp+stdio:/nonexistent/mcp-server")],
        policy.clone(),
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("tool server `ghost` (mcp+stdio:/nonexistent/mcp-server) did not start"),
        "{err}"
    );
    // A program that exits instead of answering the handshake.
    let err = McpTools::connect(
        &[spec(
            "mute=mcp+stdio:python3 -c 'import sys; print(\"no mcp here\", file=sys.stderr)'",
        )],
        policy.clone(),
    )
    .await
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("tool server `mute` ("), "{msg}");
    assert!(msg.contains("does not speak MCP"), "{msg}");
    // Nothing listening at a URL.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = McpTools::connect(
        &[spec(&format!("gone=mcp+http://127.0.0.1:{port}/mcp"))],
        policy,
    )
    .await
    .unwrap_err();
    assert!(
        err.to_string()
            .starts_with("tool server `gone` (mcp+http://127.0.0.1:"),
        "{err}"
    );
}

fn planwright() -> std::process::Command {
    let mut cmd = std::process::Command::new(env!("CARGO_BIN_EXE_planwright"));
    cmd.env_remove("OPENAI_API_KEY");
    cmd
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_research_command_takes_tool_servers_and_says_which_one_failed() {
    install().await;
    let kb = KbServer::start().await;
    let kb_spec = kb.spec();
    let out = tokio::task::spawn_blocking(move || {
        planwright()
            .args([
                "research",
                "--goal",
                GOAL,
                "--checkpoint",
                "memory:",
                "--json",
            ])
            .args([
                "--constraints",
                r#"{"required_sections": ["cost", "risks"]}"#,
            ])
            .args(["--tools", &kb_spec])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    let tool_evidence: Vec<&Value> = v["evidence"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|e| e["tool_call"].is_object())
        .collect();
    assert_eq!(tool_evidence.len(), 1, "{:#}", v["evidence"]);
    assert_eq!(tool_evidence[0]["tool_call"]["server"], "kb");
    let id = tool_evidence[0]["source_id"].as_str().unwrap();
    assert!(
        v["final_report"]
            .as_str()
            .unwrap()
            .contains(&format!("[{id}]")),
        "{v:#}"
    );

    for (spec, code, says) in [
        (
            "ftp://example",
            2,
            "--tools `ftp://example`: a tool server is",
        ),
        (
            "ghost=mcp+stdio:/nonexistent/server",
            1,
            "tool server `ghost` (mcp+stdio:/nonexistent/server) did not start",
        ),
    ] {
        let out = planwright()
            .args([
                "research",
                "--goal",
                GOAL,
                "--checkpoint",
                "memory:",
                "--tools",
                spec,
            ])
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(code), "{spec}: {stderr}");
        assert!(stderr.contains(says), "{spec}: {stderr}");
    }
    // `acquire` takes the same flag.
    let schema = fixtures().join("../field/bikes.schema.json");
    let out = planwright()
        .args([
            "acquire",
            "--checkpoint",
            "memory:",
            "--tools",
            "ftp://example",
            "--schema",
        ])
        .arg(&schema)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("acquire: --tools `ftp://example`"),
        "{stderr}"
    );
}
