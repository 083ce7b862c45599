//! The research planner's topology: the plan-and-execute loop's nodes and edges, plus the edges
//! its failure cases need (an empty goal or a model error stops before validation; an edited plan
//! is validated again).

use super::clock::{Clock, SystemClock};
use super::nodes::{assess, execute, finish, planning, prepare, review, Env};
use super::policy::ResearchPolicy;
use super::routes;
use super::state::{ResearchState, ResearchUpdate};
use planwright::graph::{StateGraph, END, START};
use planwright::{CompiledGraph, GraphError, NodeContext, NodeError, NodeOptions, RetryPolicy};
use std::sync::Arc;
use std::time::Duration;

/// How the graph is built: clock, simulated step latency, model retries.
#[derive(Clone)]
pub struct GraphOptions {
    /// Timestamps for `execution_history` (default: wall clock).
    pub clock: Arc<dyn Clock>,
    /// Sleep this long in each step before running its tool (default zero; tests and demos use it
    /// to make parallel execution visible).
    pub step_latency: Duration,
    /// Simulated latency of each tool call, by tool (default none; `load --tools sim:…`).
    pub tool_latency: Option<Arc<dyn super::tools::ToolLatency>>,
    /// Retries of model-calling nodes on transient errors (default 3 attempts, 200 ms backoff).
    pub model_retry: RetryPolicy,
    /// The tool servers `mcp` steps call, connected (default none; `--tools`). Their tools are
    /// shown to the policy when it plans.
    pub mcp: Option<Arc<crate::tools::mcp::McpTools>>,
}

impl Default for GraphOptions {
    fn default() -> Self {
        Self {
            clock: Arc::new(SystemClock),
            step_latency: Duration::ZERO,
            tool_latency: None,
            model_retry: RetryPolicy::exponential(3, Duration::from_millis(200)),
            mcp: None,
        }
    }
}

/// The graph's name (in diagrams and fingerprints).
pub const NAME: &str = "research-planner";

/// A node body over the graph's one environment: the graph holds a single `Arc<Env>` (policy,
/// clock, latency), built once with the graph — configuration of the graph, not of a run, so it is
/// neither cloned per node by hand nor passed as a run's context.
fn with_env<Fut>(
    env: &Arc<Env>,
    node: fn(Arc<Env>, Arc<ResearchState>, NodeContext) -> Fut,
) -> impl Fn(Arc<ResearchState>, NodeContext) -> Fut + Send + Sync + 'static
where
    Fut: std::future::Future<Output = Result<ResearchUpdate, NodeError>> + Send + 'static,
{
    let env = env.clone();
    move |s, ctx| node(env.clone(), s, ctx)
}

/// Builds the research planner over `policy`.
pub fn build(
    policy: Arc<dyn ResearchPolicy>,
    options: GraphOptions,
) -> Result<CompiledGraph<ResearchState>, GraphError> {
    let env = Arc::new(Env {
        policy,
        clock: options.clock.clone(),
        step_latency: options.step_latency,
        tool_latency: options.tool_latency.clone(),
        model_attempts: options.model_retry.max_attempts,
        mcp: options.mcp.clone(),
    });
    let model = NodeOptions::default().retry(options.model_retry.clone());
    StateGraph::<ResearchState>::new(NAME)
        .add_sync_node("prepare_input", prepare::prepare_input)
        .add_node("create_plan", with_env(&env, planning::create_plan))
        .add_sync_node("validate_plan", planning::validate_plan)
        .add_node("repair_plan", with_env(&env, planning::repair_plan))
        .add_sync_node("review_plan", {
            let mcp = options.mcp.clone();
            move |s: &ResearchState, ctx: &NodeContext| {
                review::review_plan_with(mcp.as_deref(), s, ctx)
            }
        })
        .add_sync_node("select_next_step", execute::select_next_step)
        .add_node("execute_step", with_env(&env, execute::execute_step))
        .add_sync_node("assess_progress", assess::assess_progress)
        .add_node("replan", with_env(&env, planning::replan))
        .add_node(
            "synthesize_report",
            with_env(&env, finish::synthesize_report),
        )
        .add_sync_node("mark_needs_review", finish::mark_needs_review)
        .node_options("create_plan", model.clone())
        .node_options("repair_plan", model.clone())
        .node_options("replan", model.clone())
        .node_options("synthesize_report", model)
        .add_edge(START, "prepare_input")
        .add_conditional_edges(
            "prepare_input",
            routes::after_prepare,
            [
                ("plan", "create_plan"),
                ("needs_review", "mark_needs_review"),
            ],
        )
        .add_conditional_edges(
            "create_plan",
            routes::after_model_call,
            [
                ("validate", "validate_plan"),
                ("failed", "mark_needs_review"),
            ],
        )
        .add_conditional_edges(
            "validate_plan",
            routes::after_validate,
            [
                ("valid", "review_plan"),
                ("repair", "repair_plan"),
                ("needs_review", "mark_needs_review"),
            ],
        )
        .add_conditional_edges(
            "repair_plan",
            routes::after_model_call,
            [
                ("validate", "validate_plan"),
                ("failed", "mark_needs_review"),
            ],
        )
        .add_conditional_edges(
            "review_plan",
            routes::after_review,
            [
                ("approved", "select_next_step"),
                ("edited", "validate_plan"),
                ("denied", "mark_needs_review"),
            ],
        )
        .add_conditional_edges(
            "select_next_step",
            routes::after_select,
            [
                ("execute_step", "execute_step"),
                ("done", "synthesize_report"),
            ],
        )
        .add_edge("execute_step", "assess_progress")
        .add_conditional_edges(
            "assess_progress",
            routes::after_assess,
            [
                ("continue", "select_next_step"),
                ("replan", "replan"),
                ("synthesize", "synthesize_report"),
                ("needs_review", "mark_needs_review"),
            ],
        )
        .add_conditional_edges(
            "replan",
            routes::after_model_call,
            [
                ("validate", "validate_plan"),
                ("failed", "mark_needs_review"),
            ],
        )
        .add_edge("synthesize_report", END)
        .add_edge("mark_needs_review", END)
        .step_limit(500)
        .compression_dictionary(super::dictionary::DICTIONARY)
        .compile()
}
