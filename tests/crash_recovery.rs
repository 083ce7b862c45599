//! Crash recovery, proven: a child process runs a multi-step graph with parallel tasks on a real
//! backend and is killed with SIGKILL at random points, 25 times; each time a new process continues
//! the thread. The thread must end with exactly the state an uninterrupted run reaches, and no task
//! whose write was durable when the process died may run again.
//!
//! The child is this same test binary, re-executed with `--exact child_process_entry` and
//! `PW_CRASH_URL` / `PW_CRASH_THREAD` / `PW_CRASH_LOG` set. Every task appends
//! `<pid> <step>.<index>` to the log when it finishes its body.

#[path = "support/backends.rs"]
mod backends;

use planwright::checkpoint::{connect, Checkpointer, WriteKind};
use planwright::graph::{Route, Send, StateGraph, END, START};
use planwright::{CompiledGraph, Engine, NodeContext, RunOptions, RunStatus, ThreadId};
use rand::{Rng, SeedableRng};
use std::collections::BTreeSet;
use std::io::Write;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

const ROUNDS: u64 = 40;
const WIDTH: u64 = 4;
const KILLS: usize = 25;

planwright::state! {
    /// What the crash graph accumulates.
    #[derive(PartialEq)]
    pub struct Acc => AccUpdate {
        replace rounds: u64,
        append items: Vec<u64>,
    }
}

fn crash_graph(log: Option<std::path::PathBuf>) -> CompiledGraph<Acc> {
    StateGraph::<Acc>::new("crash")
        .add_sync_node("plan", |_: &Acc, _: &NodeContext| Ok(AccUpdate::default()))
        .add_conditional_edges(
            "plan",
            |s: &Acc| {
                Route::Send(
                    (0..WIDTH)
                        .map(|i| Send::new("work", (s.rounds * 10 + i).into()))
                        .collect(),
                )
            },
            ["work"],
        )
        .add_node("work", move |_s: Arc<Acc>, ctx: NodeContext| {
            let log = log.clone();
            async move {
                let v = ctx.input().and_then(|v| v.as_u64()).unwrap_or(0);
                tokio::time::sleep(Duration::from_millis(3 + v % 5)).await;
                if let Some(path) = log {
                    let mut f = std::fs::OpenOptions::new()
                        .create(true)
                        .append(true)
                        .open(path)
                        .map_err(planwright::NodeError::fatal)?;
                    writeln!(f, "{} {}", std::process::id(), ctx.task_id())
                        .map_err(planwright::NodeError::fatal)?;
                }
                Ok(AccUpdate::default().items(vec![v]))
            }
        })
        .add_sync_node("tally", |s: &Acc, _: &NodeContext| {
            Ok(AccUpdate::default().rounds(s.rounds + 1))
        })
        .add_edge(START, "plan")
        .add_edge("work", "tally")
        .add_conditional_edges(
            "tally",
            |s: &Acc| Route::to(if s.rounds >= ROUNDS { "end" } else { "again" }),
            [("again", "plan"), ("end", END)],
        )
        .compile()
        .expect("crash graph compiles")
}

/// The child process's body; a no-op unless the crash test started this process.
#[test]
fn child_process_entry() {
    let (Ok(url), Ok(thread), Ok(log)) = (
        std::env::var("PW_CRASH_URL"),
        std::env::var("PW_CRASH_THREAD"),
        std::env::var("PW_CRASH_LOG"),
    ) else {
        return;
    };
    let rt = tokio::runtime::Runtime::new().expect("runtime");
    rt.block_on(async {
        let cp = connect(&url).await.expect("checkpointer");
        let engine = Engine::builder(crash_graph(Some(log.into())))
            .checkpointer(cp.clone())
            .build()
            .await;
        let thread = ThreadId::new(thread);
        if let Some(st) = engine.get_state(&thread).await.expect("state") {
            if st.next.is_empty() && st.interrupts.is_empty() {
                return; // an earlier process finished the run just before it was killed
            }
        }
        let out = match cp.head(&thread).await.expect("head") {
            None => {
                engine
                    .run(thread, AccUpdate::default(), RunOptions::default())
                    .await
            }
            Some(_) => engine.continue_run(thread, RunOptions::default()).await,
        }
        .expect("run");
        assert_eq!(out.status, RunStatus::Finished);
    });
}

/// Task ids whose results were durable: every task of supersteps before the head's (a task's
/// step is the step of the checkpoint it runs from), plus the tasks with a saved update at the head.
async fn durable_tasks(
    cp: &dyn Checkpointer,
    thread: &ThreadId,
    log: &[(u32, String)],
) -> BTreeSet<String> {
    let Some(head) = cp.head(thread).await.expect("head") else {
        return BTreeSet::new();
    };
    let step = cp
        .get(thread, head)
        .await
        .expect("head record")
        .metadata
        .step;
    if std::env::var_os("PW_CRASH_DEBUG").is_some() {
        eprintln!(
            "head {head:?} step {step} writes {:?}",
            cp.get_writes(thread, head)
                .await
                .map(|w| w.iter().map(|w| (w.task, w.kind)).collect::<Vec<_>>())
        );
    }
    let mut done: BTreeSet<String> = log
        .iter()
        .filter(|(_, task)| task_step(task) < step)
        .map(|(_, t)| t.clone())
        .collect();
    for w in cp.get_writes(thread, head).await.expect("writes") {
        if w.kind == WriteKind::Update {
            done.insert(w.task.to_string());
        }
    }
    done
}

fn task_step(task: &str) -> u64 {
    task.split(['.', ':', '/', '@'])
        .find_map(|p| p.trim().parse().ok())
        .unwrap_or(u64::MAX)
}

fn read_log(path: &std::path::Path) -> Vec<(u32, String)> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (pid, task) = l.split_once(' ')?;
            Some((pid.parse().ok()?, task.to_string()))
        })
        .collect()
}

async fn crash_and_recover(url: &str, thread: &str, kill_after_ms: std::ops::Range<u64>) {
    let log = backends::sqlite_path("crash-log").with_extension("log");
    let me = std::env::current_exe().expect("test binary");
    let spawn = || {
        Command::new(&me)
            .args([
                "--exact",
                "child_process_entry",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("PW_CRASH_URL", url)
            .env("PW_CRASH_THREAD", thread)
            .env("PW_CRASH_LOG", &log)
            .stdout(Stdio::null())
            .stderr(if std::env::var_os("PW_CRASH_DEBUG").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .spawn()
            .expect("child starts")
    };
    let cp = connect(url).await.expect("checkpointer");
    let t = ThreadId::new(thread);
    let mut rng = rand::rngs::SmallRng::seed_from_u64(0x5eed);
    let mut killed = 0;
    // (log length, tasks durable) at the last kill: what later processes must not run again.
    let mut since_kill: Option<(usize, BTreeSet<String>)> = None;
    let check = |since: &Option<(usize, BTreeSet<String>)>| {
        if let Some((from, durable)) = since {
            let entries = read_log(&log);
            let redone: Vec<&(u32, String)> = entries[*from..]
                .iter()
                .filter(|(_, task)| durable.contains(task))
                .collect();
            assert!(
                redone.is_empty(),
                "durable tasks ran again after a crash: {redone:?}"
            );
        }
    };
    while killed < KILLS {
        let mut child = spawn();
        tokio::time::sleep(Duration::from_millis(
            rng.random_range(kill_after_ms.clone()),
        ))
        .await;
        if child.try_wait().expect("wait").is_some() {
            break; // it finished before the kill: nothing left to crash
        }
        child.kill().expect("SIGKILL");
        child.wait().expect("reaped");
        killed += 1;
        check(&since_kill);
        let entries = read_log(&log);
        since_kill = Some((entries.len(), durable_tasks(&*cp, &t, &entries).await));
    }
    // Let the last process finish.
    let status = spawn().wait().expect("final child");
    assert!(status.success(), "final run fails: {status}");
    check(&since_kill);

    let engine = Engine::builder(crash_graph(None))
        .checkpointer(cp.clone())
        .build()
        .await;
    let recovered = engine
        .get_state(&t)
        .await
        .expect("state")
        .expect("thread exists")
        .values;
    let reference = Engine::new(crash_graph(None))
        .await
        .run(
            ThreadId::new("reference"),
            AccUpdate::default(),
            RunOptions::default(),
        )
        .await
        .expect("reference run")
        .state;
    assert_eq!(
        *recovered, *reference,
        "recovered state differs from an unbroken run"
    );
    let entries = read_log(&log);
    let pids: BTreeSet<u32> = entries.iter().map(|(p, _)| *p).collect();
    assert!(
        pids.len() > 3,
        "the crashes interrupted real work ({} processes logged)",
        pids.len()
    );
    println!(
        "{url}: {killed} kills, {} task executions logged by {} processes",
        entries.len(),
        pids.len()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sqlite_threads_survive_sigkill() {
    let path = backends::sqlite_path("crash");
    crash_and_recover(&format!("sqlite:{}", path.display()), "crash-thread", 5..40).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn postgres_threads_survive_sigkill() {
    if backends::postgres().await.is_none() {
        return;
    }
    let thread = format!("crash-{}", backends::unique());
    crash_and_recover(&backends::pg_url(), &thread, 30..90).await;
}
