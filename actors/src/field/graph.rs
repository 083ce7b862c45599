//! The two topologies over the same stage functions.
//!
//! [`Topology::Staged`] is the staged graph: `tick → prepare → calc_gate → acquire
//! → decide → enforce_policy → search | ask_user | calculate | reflect | finish`, with `observe`
//! and `observe_user`; every model call sits in its own node. [`Topology::Plan`] is the old graph:
//! one `plan` node runs the control stages in sequence (walking them with the same routers) and
//! the action nodes loop back to it. A differential test holds both to the same decisions and
//! outputs.

use super::routes;
use super::stages::{acquire, actions, calc_gate, decide, enforce, prepare, tick, user};
use super::stages::{applied, Env, StageResult};
use super::state::{FieldState, FieldUpdate};
use planwright::graph::{Route, StateGraph, END, START};
use planwright::{CompiledGraph, GraphError, NodeContext, RetryPolicy};
use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

/// Which graph.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Topology {
    /// The refactored graph (namespace `planner:v2`).
    Staged,
    /// The old single-`plan`-node graph (namespace `planner`).
    Plan,
}

impl Topology {
    /// The graph's name.
    pub fn name(self) -> &'static str {
        match self {
            Topology::Staged => "field-planner",
            Topology::Plan => "field-planner-plan-node",
        }
    }

    /// The thread namespace suffix: threads are `{conversation_id}:{namespace}`.
    pub fn namespace(self) -> &'static str {
        match self {
            Topology::Staged => "planner:v2",
            Topology::Plan => "planner",
        }
    }
}

/// How the graph is built.
#[derive(Clone, Debug)]
pub struct GraphOptions {
    /// Which topology.
    pub topology: Topology,
    /// Retries of each model call on transient errors (default 3 attempts, 200 ms backoff).
    pub model_retry: RetryPolicy,
    /// The superstep cap (a safety net above `max_iters`).
    pub step_limit: u64,
    /// Nodes after which the run pauses (for approval, or to prove that a model call is never
    /// repeated when a run stops after it).
    pub pause_after: Vec<&'static str>,
    /// Tool servers a search also asks: the tool whose description fits the search's query is
    /// called with it, and its result is one more document among the hits (`docs/tools.md`).
    pub mcp: Option<std::sync::Arc<crate::tools::mcp::McpTools>>,
}

impl Default for GraphOptions {
    fn default() -> Self {
        Self {
            topology: Topology::Staged,
            model_retry: RetryPolicy::exponential(3, Duration::from_millis(200)),
            step_limit: 2_000,
            pause_after: Vec::new(),
            mcp: None,
        }
    }
}

type Stage = for<'a> fn(
    &'a Env,
    &'a FieldState,
    &'a NodeContext,
) -> Pin<Box<dyn Future<Output = StageResult> + Send + 'a>>;

macro_rules! stage {
    ($f:path) => {{
        fn boxed<'a>(
            env: &'a Env,
            s: &'a FieldState,
            ctx: &'a NodeContext,
        ) -> Pin<Box<dyn Future<Output = StageResult> + Send + 'a>> {
            Box::pin($f(env, s, ctx))
        }
        boxed as Stage
    }};
}

fn node(g: StateGraph<FieldState>, name: &str, env: &Arc<Env>, f: Stage) -> StateGraph<FieldState> {
    let env = env.clone();
    g.add_node(name, move |s: Arc<FieldState>, ctx: NodeContext| {
        let env = env.clone();
        async move {
            let u = f(&env, &s, &ctx).await?;
            announce(&u, &ctx);
            Ok(u)
        }
    })
}

/// Custom events for whoever streams the run: `{"planning_step": n}` when a tick starts an
/// iteration and `{"decision": entry}` for each logged decision. They are derived from the update,
/// so both topologies emit the same ones.
fn announce(u: &FieldUpdate, ctx: &NodeContext) {
    if let Some(n) = u.iterations {
        ctx.emit(serde_json::json!({ "planning_step": n }));
    }
    for entry in u.decisions.iter().flatten() {
        ctx.emit(serde_json::json!({ "decision": entry }));
    }
}

/// A label router as the runtime's router.
fn route(f: fn(&FieldState) -> &'static str) -> impl Fn(&FieldState) -> Route + Send + Sync {
    move |s| Route::to(f(s))
}

/// The single `plan` node: tick, prepare, calc_gate, acquire, decide, enforce_policy in sequence,
/// branching with the staged graph's routers, each stage seeing the previous ones' writes; the
/// stages' updates are returned as one.
pub async fn plan(env: &Env, s: &FieldState, ctx: &NodeContext) -> StageResult {
    let mut st = s.clone();
    let mut total = FieldUpdate::default();
    let mut stage: &str = "tick";
    loop {
        let f = match stage {
            "tick" => stage!(tick::tick),
            "prepare" => stage!(prepare::prepare),
            "calc_gate" => stage!(calc_gate::calc_gate),
            "acquire" => stage!(acquire::acquire),
            "decide" => stage!(decide::decide),
            _ => stage!(enforce::enforce_policy),
        };
        let u = f(env, &st, ctx).await?;
        st = applied(&st, &u)?;
        total = total.then(u);
        stage = match stage {
            "tick" => match routes::after_tick(&st) {
                "prepare" => "prepare",
                _ => return Ok(total),
            },
            "prepare" => "calc_gate",
            "calc_gate" => match routes::after_calc_gate(&st) {
                "acquire" => "acquire",
                _ => return Ok(total),
            },
            "acquire" => routes::after_acquire(&st),
            "decide" => match routes::after_decide(&st) {
                "enforce_policy" => "enforce_policy",
                _ => return Ok(total),
            },
            _ => return Ok(total),
        };
    }
}

/// Builds the planner graph over `env`.
pub fn build(
    env: Arc<Env>,
    options: &GraphOptions,
) -> Result<CompiledGraph<FieldState>, GraphError> {
    let actions = [
        ("search", "search"),
        ("ask_user", "ask_user"),
        ("calculate", "calculate"),
        ("reflect", "reflect"),
        ("finish", "finish"),
    ];
    let mut g = StateGraph::<FieldState>::new(options.topology.name());
    let entry = match options.topology {
        Topology::Staged => {
            g = node(g, "tick", &env, stage!(tick::tick));
            g = node(g, "prepare", &env, stage!(prepare::prepare));
            g = node(g, "calc_gate", &env, stage!(calc_gate::calc_gate));
            g = node(g, "acquire", &env, stage!(acquire::acquire));
            g = node(g, "decide", &env, stage!(decide::decide));
            g = node(g, "enforce_policy", &env, stage!(enforce::enforce_policy));
            g = g
                .add_conditional_edges(
                    "tick",
                    route(routes::after_tick),
                    [
                        ("finish", "finish"),
                        ("ask_user", "ask_user"),
                        ("prepare", "prepare"),
                    ],
                )
                .add_edge("prepare", "calc_gate")
                .add_conditional_edges(
                    "calc_gate",
                    route(routes::after_calc_gate),
                    [("finish", "finish"), ("acquire", "acquire")],
                )
                .add_conditional_edges(
                    "acquire",
                    route(routes::after_acquire),
                    [("enforce_policy", "enforce_policy"), ("decide", "decide")],
                )
                .add_conditional_edges(
                    "decide",
                    route(routes::after_decide),
                    [("finish", "finish"), ("enforce_policy", "enforce_policy")],
                )
                .add_conditional_edges("enforce_policy", route(routes::after_policy), actions);
            "tick"
        }
        Topology::Plan => {
            g = node(g, "plan", &env, stage!(plan));
            g = g.add_conditional_edges("plan", route(routes::after_policy), actions);
            "plan"
        }
    };
    g = node(g, "search", &env, stage!(actions::search));
    g = node(g, "observe", &env, stage!(actions::observe));
    g = node(g, "calculate", &env, stage!(actions::calculate));
    g = node(g, "reflect", &env, stage!(actions::reflect));
    g = node(g, "ask_user", &env, stage!(user::ask_user));
    g = node(g, "observe_user", &env, stage!(user::observe_user));
    g = node(g, "finish", &env, stage!(actions::finish));
    g.add_edge(START, entry)
        .add_conditional_edges(
            "search",
            route(routes::after_search),
            [("observe", "observe"), ("loop", entry)],
        )
        .add_edge("observe", entry)
        .add_edge("calculate", entry)
        .add_edge("reflect", entry)
        .add_edge("ask_user", "observe_user")
        .add_edge("observe_user", entry)
        .add_edge("finish", END)
        .step_limit(options.step_limit)
        .interrupt_after(options.pause_after.iter().copied())
        .compile()
}
