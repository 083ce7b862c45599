//! Effects that happen once (`NodeContext::effect`): a tool call counted at the tool, by its
//! idempotency key, is made once per task across a retry, an interrupt and resume, and a crash
//! between the call and the task's commit (SIGKILL, then a new process continues the thread) —
//! on every backend; a node that opted out (`NodeOptions::repeat_effects`) calls again.
//!
//! The crash cases run a child process (this test binary, re-executed with `--exact
//! child_process_entry` and `PW_EFFECT_*` set) whose last task SIGKILLs its own process right
//! after its calls returned, before it returns its update; a second child continues the thread.

#[path = "support/backends.rs"]
mod backends;
mod support;

use planwright::checkpoint::{connect, Checkpointer};
use planwright::graph::{Route, Send, StateGraph, END, START};
use planwright::{
    CompiledGraph, Engine, NodeContext, NodeError, NodeOptions, Resume, RetryPolicy, RunOptions,
    RunStatus, ThreadId,
};
use std::collections::BTreeMap;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use support::{Walk, WalkUpdate};

/// A tool that counts its calls by idempotency key, and answers with a receipt naming it.
#[derive(Clone, Default)]
struct Tool(Arc<Mutex<BTreeMap<String, u32>>>);

impl Tool {
    fn call(&self, key: &str) -> String {
        *self.0.lock().unwrap().entry(key.to_string()).or_default() += 1;
        format!("receipt-{key}")
    }

    /// Calls per key.
    fn counts(&self) -> Vec<u32> {
        self.0.lock().unwrap().values().copied().collect()
    }
}

/// `send` sends an email through `tool` (an effect), then pauses for a review when `review`,
/// and fails its first attempt when `flaky` (retried at once).
fn send_graph(tool: Tool, flaky: bool, review: bool, repeat: bool) -> StateGraph<Walk> {
    let mut options = NodeOptions::default().retry(RetryPolicy::exponential(3, Duration::ZERO));
    if repeat {
        options = options.repeat_effects();
    }
    StateGraph::new("send")
        .add_node("send", move |_s: Arc<Walk>, ctx: NodeContext| {
            let tool = tool.clone();
            async move {
                let receipt: String = ctx
                    .effect(
                        "email",
                        |key| async move { Ok::<_, NodeError>(tool.call(&key)) },
                    )
                    .await?;
                assert_eq!(receipt, format!("receipt-{}", ctx.effect_key("email", 0)));
                if review {
                    ctx.interrupt(serde_json::json!({"sent": receipt}))?;
                }
                if flaky && ctx.attempt() == 1 {
                    return Err(NodeError::Retryable("the mail server hung up".into()));
                }
                Ok(WalkUpdate::default().trace(vec![receipt]))
            }
        })
        .node_options("send", options)
        .add_edge(START, "send")
        .add_edge("send", END)
}

async fn engine(graph: StateGraph<Walk>, cp: Option<Arc<dyn Checkpointer>>) -> Engine<Walk> {
    Engine::builder(graph.compile().unwrap())
        .maybe_checkpointer(cp)
        .build()
        .await
}

/// Every backend, and no checkpointer (effects kept like memos).
async fn every_store() -> Vec<(Option<Arc<dyn Checkpointer>>, String)> {
    let mut all: Vec<(Option<Arc<dyn Checkpointer>>, String)> = backends::every("effects")
        .await
        .into_iter()
        .map(|(cp, prefix)| (Some(cp), prefix))
        .collect();
    all.push((None, format!("none-{}", backends::unique())));
    all
}

/// A retry within one process: the first attempt's call is journaled, the second attempt gets
/// its result and does not call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_retried_task_calls_its_tool_once() {
    for (cp, prefix) in every_store().await {
        let tool = Tool::default();
        let e = engine(send_graph(tool.clone(), true, false, false), cp).await;
        let out = e
            .run(
                ThreadId::new(format!("{prefix}/retry")),
                WalkUpdate::default(),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Finished, "{prefix}");
        assert_eq!(tool.counts(), [1], "{prefix}: one key, called once");
    }
}

/// An interrupt and a resume: the node runs again from its start, and its call is not made
/// again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_task_calls_its_tool_once() {
    for (cp, prefix) in every_store().await {
        let tool = Tool::default();
        let e = engine(send_graph(tool.clone(), false, true, false), cp).await;
        let t = ThreadId::new(format!("{prefix}/resume"));
        let out = e
            .run(t.clone(), WalkUpdate::default(), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Interrupted, "{prefix}");
        let out = e
            .resume(t, Resume::Value("ok".into()), RunOptions::default())
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Finished, "{prefix}");
        assert_eq!(tool.counts(), [1], "{prefix}: one key, called once");
        assert_eq!(out.state.trace.len(), 1, "{prefix}");
    }
}

/// A node that opted out calls again on the retry, with the same key.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_that_opted_out_calls_again() {
    for (cp, prefix) in every_store().await {
        let tool = Tool::default();
        let e = engine(send_graph(tool.clone(), true, false, true), cp).await;
        let out = e
            .run(
                ThreadId::new(format!("{prefix}/repeat")),
                WalkUpdate::default(),
                RunOptions::default(),
            )
            .await
            .unwrap();
        assert_eq!(out.status, RunStatus::Finished, "{prefix}");
        assert_eq!(
            tool.counts(),
            [2],
            "{prefix}: one key, called on each attempt"
        );
    }
}

/// Tasks of other threads, and later tasks of the same thread, get keys of their own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_task_and_thread_has_keys_of_its_own() {
    for (cp, prefix) in every_store().await {
        let tool = Tool::default();
        let e = engine(send_graph(tool.clone(), false, false, false), cp).await;
        let t = ThreadId::new(format!("{prefix}/keys"));
        for thread in [
            t.clone(),
            t.clone(),
            ThreadId::new(format!("{prefix}/keys-2")),
        ] {
            let out = e
                .run(thread, WalkUpdate::default(), RunOptions::default())
                .await
                .unwrap();
            assert_eq!(out.status, RunStatus::Finished, "{prefix}");
        }
        assert_eq!(
            tool.counts(),
            [1, 1, 1],
            "{prefix}: three tasks, three keys"
        );
    }
}

/// A call that fails journals nothing: the call tried again gets the same key, and succeeds.
#[tokio::test]
async fn a_failed_call_is_tried_again_under_its_key() {
    let cp: Arc<dyn Checkpointer> = Arc::new(planwright::checkpoint::MemoryCheckpointer::new());
    let tool = Tool::default();
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let graph = StateGraph::<Walk>::new("flaky-call")
        .add_node("send", {
            let (tool, seen) = (tool.clone(), seen.clone());
            move |_s: Arc<Walk>, ctx: NodeContext| {
                let (tool, seen) = (tool.clone(), seen.clone());
                async move {
                    let mut failures = 0;
                    let receipt: String = loop {
                        let tool = tool.clone();
                        let r = ctx
                            .effect("email", |key| {
                                seen.lock().unwrap().push(key.clone());
                                async move {
                                    if failures == 0 {
                                        Err(NodeError::Retryable("timeout".into()))
                                    } else {
                                        Ok(tool.call(&key))
                                    }
                                }
                            })
                            .await;
                        match r {
                            Ok(v) => break v,
                            Err(_) => failures += 1,
                        }
                    };
                    Ok(WalkUpdate::default().trace(vec![receipt]))
                }
            }
        })
        .add_edge(START, "send")
        .add_edge("send", END);
    let e = engine(graph, Some(cp)).await;
    e.run(
        ThreadId::new("flaky-call"),
        WalkUpdate::default(),
        RunOptions::default(),
    )
    .await
    .unwrap();
    let seen = seen.lock().unwrap().clone();
    assert_eq!(seen.len(), 2);
    assert_eq!(
        seen[0], seen[1],
        "the call tried again has the failed call's key"
    );
    assert_eq!(tool.counts(), [1]);
}

// ---- The crash: SIGKILL between the calls and the commit ----

/// Tasks of `pay`, in parallel.
const PAYMENTS: u64 = 3;

/// `plan` sends `PAYMENTS` tasks to `pay`, each of which charges a card and emails a receipt
/// (two effects, logged at the tool as `<pid> <name> <key>`). With `die`, the last task SIGKILLs
/// this process once its calls returned.
/// Calls of the `pay` tasks that have returned in this process.
static CALLS_RETURNED: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);

fn pay_graph(log: std::path::PathBuf, die: bool, repeat: bool) -> CompiledGraph<Walk> {
    let mut options = NodeOptions::default();
    if repeat {
        options = options.repeat_effects();
    }
    StateGraph::<Walk>::new("pay")
        .add_sync_node(
            "plan",
            |_: &Walk, _: &NodeContext| Ok(WalkUpdate::default()),
        )
        .add_conditional_edges(
            "plan",
            |_: &Walk| Route::Send((0..PAYMENTS).map(|i| Send::new("pay", i.into())).collect()),
            ["pay"],
        )
        .add_node("pay", move |_s: Arc<Walk>, ctx: NodeContext| {
            let log = log.clone();
            async move {
                let mut receipts = Vec::new();
                for name in ["charge", "email"] {
                    let log = log.clone();
                    let receipt: String = ctx
                        .effect(name, |key| async move {
                            let mut f = std::fs::OpenOptions::new()
                                .create(true)
                                .append(true)
                                .open(&log)
                                .map_err(NodeError::fatal)?;
                            writeln!(f, "{} {name} {key}", std::process::id())
                                .map_err(NodeError::fatal)?;
                            Ok::<_, NodeError>(format!("{name}:{key}"))
                        })
                        .await?;
                    receipts.push(receipt);
                    CALLS_RETURNED.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                }
                if die && ctx.input().and_then(|v| v.as_u64()) == Some(PAYMENTS - 1) {
                    // Every task's calls have returned (so each is journaled, or, opted out,
                    // made): the kill falls between the calls and this task's commit, never
                    // inside another task's call.
                    while CALLS_RETURNED.load(std::sync::atomic::Ordering::SeqCst) < 2 * PAYMENTS {
                        tokio::time::sleep(std::time::Duration::from_millis(1)).await;
                    }
                    // Dead before this task's update is stored.
                    let _ = Command::new("kill")
                        .args(["-KILL", &std::process::id().to_string()])
                        .status();
                    std::future::pending::<()>().await;
                }
                Ok(WalkUpdate::default().trace(receipts))
            }
        })
        .node_options("pay", options)
        .add_edge(START, "plan")
        .add_edge("pay", END)
        .compile()
        .expect("pay graph compiles")
}

/// The child process's body; a no-op unless a crash test started this process.
#[test]
fn child_process_entry() {
    let (Ok(url), Ok(thread), Ok(log)) = (
        std::env::var("PW_EFFECT_URL"),
        std::env::var("PW_EFFECT_THREAD"),
        std::env::var("PW_EFFECT_LOG"),
    ) else {
        return;
    };
    let die = std::env::var_os("PW_EFFECT_DIE").is_some();
    let repeat = std::env::var_os("PW_EFFECT_REPEAT").is_some();
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let cp = connect(&url).await.expect("checkpointer");
        let engine = Engine::builder(pay_graph(log.into(), die, repeat))
            .checkpointer(cp.clone())
            .build()
            .await;
        let thread = ThreadId::new(thread);
        let out = match cp.head(&thread).await.expect("head") {
            None => {
                engine
                    .run(thread, WalkUpdate::default(), RunOptions::default())
                    .await
            }
            Some(_) => engine.continue_run(thread, RunOptions::default()).await,
        }
        .expect("run");
        assert_eq!(out.status, RunStatus::Finished);
    });
}

/// Runs the pay graph in a child that dies after the last task's calls, then in one that
/// continues the thread; returns the calls per key the tool logged, and the receipts the thread
/// ended with.
async fn crash_then_continue(url: &str, repeat: bool) -> (BTreeMap<String, u32>, Vec<String>) {
    let log = backends::sqlite_path("effects-log").with_extension("log");
    let thread = format!("effects-crash-{}", backends::unique());
    let me = std::env::current_exe().expect("test binary");
    let run = |die: bool| {
        let mut c = Command::new(&me);
        c.args([
            "--exact",
            "child_process_entry",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("PW_EFFECT_URL", url)
        .env("PW_EFFECT_THREAD", &thread)
        .env("PW_EFFECT_LOG", &log)
        .stdout(Stdio::null())
        .stderr(Stdio::null());
        if die {
            c.env("PW_EFFECT_DIE", "1");
        }
        if repeat {
            c.env("PW_EFFECT_REPEAT", "1");
        }
        c.status().expect("child runs")
    };
    let died = run(true);
    {
        use std::os::unix::process::ExitStatusExt;
        assert_eq!(
            died.signal(),
            Some(9),
            "the first process was SIGKILLed: {died}"
        );
    }
    let finished = run(false);
    assert!(finished.success(), "the continue fails: {finished}");
    let mut calls: BTreeMap<String, u32> = BTreeMap::new();
    for line in std::fs::read_to_string(&log).expect("tool log").lines() {
        let key = line.rsplit(' ').next().expect("a key").to_string();
        *calls.entry(key).or_default() += 1;
    }
    let cp = connect(url).await.expect("checkpointer");
    let engine = Engine::builder(pay_graph(log, false, repeat))
        .checkpointer(cp)
        .build()
        .await;
    let state = engine
        .get_state(&ThreadId::new(thread))
        .await
        .expect("state")
        .expect("the thread exists");
    assert!(state.next.is_empty(), "the run finished");
    println!(
        "{url} repeat={repeat}: {} keys, {} calls at the tool",
        calls.len(),
        calls.values().sum::<u32>()
    );
    (calls, state.values.trace.clone())
}

/// Journaled: after the crash, the continue calls the tool zero more times; every key is called
/// once and every receipt names a key the tool saw.
async fn journaled_calls_survive_a_crash(url: &str) {
    let (calls, receipts) = crash_then_continue(url, false).await;
    assert_eq!(calls.len(), 2 * PAYMENTS as usize, "{calls:?}");
    assert!(
        calls.values().all(|&n| n == 1),
        "{url}: a key was called twice: {calls:?}"
    );
    assert_eq!(receipts.len(), 2 * PAYMENTS as usize);
    for r in &receipts {
        let key = r.split(':').nth(1).unwrap();
        assert!(calls.contains_key(key), "{r}");
    }
}

/// Opted out: the task that died calls again on the continue, with the same keys.
async fn repeated_calls_repeat_after_a_crash(url: &str) {
    let (calls, _) = crash_then_continue(url, true).await;
    assert_eq!(calls.len(), 2 * PAYMENTS as usize, "{calls:?}");
    assert!(
        calls.values().filter(|&&n| n == 2).count() >= 2,
        "{url}: the killed task's two calls were made again: {calls:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_journaled_calls_are_not_made_again_after_sigkill() {
    let path = backends::sqlite_path("effects-crash");
    let url = format!("sqlite:{}", path.display());
    journaled_calls_survive_a_crash(&url).await;
    repeated_calls_repeat_after_a_crash(&url).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_journaled_calls_are_not_made_again_after_sigkill() {
    if backends::postgres().await.is_none() {
        return;
    }
    journaled_calls_survive_a_crash(&backends::pg_url()).await;
    repeated_calls_repeat_after_a_crash(&backends::pg_url()).await;
}
