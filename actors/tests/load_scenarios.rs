//! Every scenario kind on tokio's paused clock, through the library entry point on a graph of
//! our own: arrival times exact, late arrivals counted and latency counted from the due time,
//! thresholds crossed and not crossed (and stopping a run early), simulated people, a weighted
//! mix, and the execute-phase analysis with simulated tools on the research planner.

use planwright::graph::{StateGraph, END, START};
use planwright::runtime::Resume;
use planwright::{Engine, NodeContext};
use planwright_actors::load::people::People;
use planwright_actors::load::thresholds::Threshold;
use planwright_actors::load::{
    self, run_scenario, EngineConversations, Entry, LoadReport, Scenario, ScenarioOptions, Stage,
    Workload,
};
use serde_json::json;
use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::time::Instant;

planwright::state! {
    /// A conversation that works for a while, maybe asking a question first.
    pub struct Toy => ToyUpdate {
        append log: Vec<String>,
    }
}

type Starts = Arc<Mutex<Vec<(usize, Instant)>>>;

/// An entry whose conversations run node `node` for `work` (after asking, when `ask`), and record
/// when each started.
async fn toy(node: &'static str, work: Duration, ask: bool, starts: Starts) -> Entry {
    let mut g = StateGraph::<Toy>::new("toy").add_node(
        node,
        move |_s: Arc<Toy>, ctx: NodeContext| async move {
            if ask {
                ctx.interrupt(json!({"question": "go on?"}))?;
            }
            tokio::time::sleep(work).await;
            Ok(ToyUpdate::default().log(vec!["worked".into()]))
        },
    );
    g = g.add_edge(START, node).add_edge(node, END);
    let engine = Engine::new(g.compile().expect("compiles")).await;
    let workload = Workload {
        graph: node.into(),
        conversations: 0,
        concurrency: 0,
        thread_prefix: format!("toy-{node}"),
        input: Arc::new(move |i| {
            starts.lock().unwrap().push((i, Instant::now()));
            ToyUpdate::default()
        }),
        answer: Arc::new(|_, _| Some(Resume::Value(json!("yes")))),
        model_nodes: HashSet::new(),
        on_done: Arc::new(|| {}),
        steps: None,
    };
    Entry {
        weight: 1,
        conversations: EngineConversations::new(engine, workload),
    }
}

async fn run(opts: ScenarioOptions, work: Duration) -> (LoadReport, Vec<Duration>, Instant) {
    let starts: Starts = Arc::default();
    let t0 = Instant::now();
    let e = toy("work", work, false, starts.clone()).await;
    let r = run_scenario(opts, vec![e]).await.expect("runs");
    let mut s = starts.lock().unwrap().clone();
    s.sort();
    (r, s.into_iter().map(|(_, at)| at - t0).collect(), t0)
}

fn near(a: f64, b: f64, rel: f64) -> bool {
    (a - b).abs() <= b.abs() * rel + 1e-3
}

#[tokio::test(start_paused = true)]
async fn a_constant_rate_starts_each_conversation_when_due() {
    let scenario = Scenario::Constant {
        rate: 10.0,
        duration: Duration::from_secs(2),
    };
    let (r, starts, _) = run(ScenarioOptions::new(scenario), Duration::from_millis(50)).await;
    let want: Vec<Duration> = (0..20).map(|k| Duration::from_millis(100 * k)).collect();
    assert_eq!(starts, want, "arrival times exact");
    assert_eq!((r.started, r.completed), (20, 20));
    assert_eq!(r.lateness.late, 0);
    assert!(r.lateness.lateness_ms.max <= 0.001, "{:?}", r.lateness);
    assert!(
        near(r.conversation_latency_ms.p50, 50.0, 0.002),
        "{:?}",
        r.conversation_latency_ms
    );
    // One sample per second; the series counts every start.
    assert!(r.series.len() >= 2);
    assert_eq!(r.series[0].t_s, 1.0);
    assert_eq!(r.series[0].started, 10);
    assert_eq!(r.series.iter().map(|s| s.started).sum::<u64>(), 20);
    assert_eq!(r.scenario.as_ref().map(|s| s.kind()), Some("constant"));
}

#[tokio::test(start_paused = true)]
async fn a_ramp_starts_conversations_on_its_integral() {
    let scenario = Scenario::Ramping {
        start_rate: 0.0,
        stages: vec![
            Stage {
                target: 10.0,
                duration: Duration::from_secs(2),
            },
            Stage {
                target: 10.0,
                duration: Duration::from_secs(1),
            },
        ],
    };
    let due = scenario.due_times();
    let (r, starts, _) = run(ScenarioOptions::new(scenario), Duration::from_millis(10)).await;
    assert_eq!(starts.len(), 20);
    for (k, (s, d)) in starts.iter().zip(&due).enumerate() {
        // Due at sqrt(k / 2.5) s in the ramp; tokio's timer wakes on the millisecond.
        assert!(
            *s >= *d && *s - *d < Duration::from_millis(1),
            "{k}: {s:?} vs {d:?}"
        );
    }
    assert_eq!(starts[10], Duration::from_secs(2));
    assert_eq!(r.lateness.late, 0);
}

#[tokio::test(start_paused = true)]
async fn arrivals_beyond_max_in_flight_are_late_and_latency_counts_from_due() {
    // 10 due 100 ms apart, 1 s each, 2 at a time: each waits for the slot of conversation
    // k − 2, so conversation k starts at ⌊k/2⌋ s + (k mod 2) · 100 ms.
    let mut opts = ScenarioOptions::new(Scenario::Constant {
        rate: 10.0,
        duration: Duration::from_secs(1),
    });
    opts.max_in_flight = 2;
    let (r, starts, _) = run(opts, Duration::from_secs(1)).await;
    let want: Vec<Duration> = (0..10)
        .map(|k| Duration::from_secs(k / 2) + Duration::from_millis(100 * (k % 2)))
        .collect();
    assert_eq!(starts, want);
    assert_eq!(r.lateness.late, 8, "all but the first two");
    // Conversation 9: due at 0.9 s, started at 4.1 s, ended at 5.1 s.
    assert!(
        near(r.lateness.lateness_ms.max, 3200.0, 0.001),
        "{:?}",
        r.lateness
    );
    assert!(
        near(r.conversation_latency_ms.max, 4200.0, 0.001),
        "{:?}",
        r.conversation_latency_ms
    );

    // The same work as a closed loop hides the queue: every conversation "takes" 1 s.
    let closed = ScenarioOptions::new(Scenario::Closed {
        conversations: 10,
        concurrency: 2,
    });
    let (c, starts, _) = run(closed, Duration::from_secs(1)).await;
    let want: Vec<Duration> = (0..10).map(|k| Duration::from_secs(k / 2)).collect();
    assert_eq!(starts, want);
    assert!(near(c.conversation_latency_ms.max, 1000.0, 0.001));
    assert_eq!(c.lateness.late, 0);
    assert!(near(c.wall_ms, 5000.0, 0.001));
}

#[tokio::test(start_paused = true)]
async fn a_soak_samples_every_second_and_judges_memory() {
    let mut opts = ScenarioOptions::new(Scenario::Soak {
        rate: 5.0,
        duration: Duration::from_secs(40),
    });
    opts.memory_slope_limit = 1e9;
    let (r, starts, _) = run(opts, Duration::from_millis(200)).await;
    assert_eq!(starts.len(), 200);
    assert_eq!(r.completed, 200);
    let whole: Vec<f64> = r.series.iter().map(|s| s.t_s).take(40).collect();
    assert_eq!(whole, (1..=40).map(f64::from).collect::<Vec<_>>());
    assert!(r
        .series
        .iter()
        .take(40)
        .all(|s| s.started == 5 && s.in_flight == 1));
    let m = r.memory.clone().expect("memory judged");
    assert!(m.samples >= 32 && !m.flagged);
    // The series is in the JSON, one object per second with `t_s`.
    let v = serde_json::to_value(&r).unwrap();
    assert_eq!(v["series"][0]["t_s"], 1.0);
    assert_eq!(v["scenario"]["kind"], "soak");
}

#[tokio::test(start_paused = true)]
async fn thresholds_are_crossed_or_not() {
    let mut opts = ScenarioOptions::new(Scenario::Closed {
        conversations: 20,
        concurrency: 4,
    });
    opts.thresholds = [
        "conversation_p99<2s",
        "conversation_p99<500ms",
        "failed<0.1%",
        "node:work:queue_p99<200ms",
        "node:work:p50>=1s",
        "node:absent:p99<1s",
    ]
    .iter()
    .map(|t| t.parse::<Threshold>().unwrap())
    .collect();
    let (r, _, _) = run(opts, Duration::from_secs(1)).await;
    let passed: Vec<bool> = r.thresholds.iter().map(|t| t.passed).collect();
    assert_eq!(
        passed,
        vec![true, false, true, true, true, false],
        "{:?}",
        r.thresholds
    );
    assert!(near(r.thresholds[0].value.unwrap(), 1000.0, 0.001));
    assert_eq!(r.thresholds[2].value, Some(0.0));
    assert_eq!(r.thresholds[5].value, None);
    assert!(!r.thresholds_passed());
    assert!(r.stopped_early.is_none(), "no --abort-on-fail");
}

#[tokio::test(start_paused = true)]
async fn a_crossed_threshold_stops_the_run_early() {
    let mut opts = ScenarioOptions::new(Scenario::Constant {
        rate: 10.0,
        duration: Duration::from_secs(60),
    });
    opts.thresholds = vec!["conversation_p99<500ms".parse().unwrap()];
    opts.abort_on_fail = true;
    let (r, _, _) = run(opts, Duration::from_secs(1)).await;
    let why = r.stopped_early.clone().expect("stopped early");
    assert!(why.contains("conversation_p99<500ms"), "{why}");
    // Judged once 20 conversations ended (at 3 s), the run stopped then.
    assert!(r.started < 40, "{} started", r.started);
    assert!(r.wall_ms < 5000.0);
    assert!(r.cut_off > 0, "those in flight were cancelled");
    assert_eq!(r.completed + r.cut_off, r.started, "none lost");
    assert!(!r.thresholds[0].passed);
}

#[tokio::test(start_paused = true)]
async fn people_think_before_answering_pause_and_abandon() {
    let closed = || {
        ScenarioOptions::new(Scenario::Closed {
            conversations: 10,
            concurrency: 10,
        })
    };
    let exactly = |d: Duration| planwright_actors::load::dist::Lognormal { p50: d, p99: d };
    let starts: Starts = Arc::default();
    // Think time: 2 s before each answer, not counted as the system's latency.
    let mut opts = closed();
    opts.people = People {
        think: Some(exactly(Duration::from_secs(2))),
        ..People::default()
    };
    let e = toy("work", Duration::from_millis(300), true, starts.clone()).await;
    let r = run_scenario(opts, vec![e]).await.unwrap();
    assert_eq!((r.completed, r.resumes, r.people.answers), (10, 10, 10));
    assert!(near(r.people.think_ms.p50, 2000.0, 0.001));
    assert!(
        near(r.conversation_latency_ms.max, 300.0, 0.01),
        "{:?}",
        r.conversation_latency_ms
    );
    assert!(near(r.wall_ms, 2300.0, 0.01));

    // A long pause before the first answer: the thread waits, then resumes.
    let mut opts = closed();
    opts.people = People {
        pause: 1.0,
        pause_for: Duration::from_secs(600),
        ..People::default()
    };
    let e = toy("work", Duration::from_millis(300), true, starts.clone()).await;
    let r = run_scenario(opts, vec![e]).await.unwrap();
    assert_eq!((r.completed, r.people.paused), (10, 10));
    assert!(r.wall_ms >= 600_000.0);

    // Everyone leaves after 100 ms of a 1 s conversation: cancelled, counted as abandoned.
    let mut opts = closed();
    opts.people = People {
        abandon: 1.0,
        abandon_after: Some(exactly(Duration::from_millis(100))),
        ..People::default()
    };
    let e = toy("work", Duration::from_secs(1), false, starts.clone()).await;
    let r = run_scenario(opts, vec![e]).await.unwrap();
    assert_eq!((r.abandoned, r.completed, r.people.abandoned), (10, 0, 10));
    assert!(near(r.conversation_latency_ms.max, 100.0, 0.01));
}

#[tokio::test(start_paused = true)]
async fn a_mix_follows_its_weights() {
    let starts: Starts = Arc::default();
    let mut a = toy("work_a", Duration::from_millis(10), false, starts.clone()).await;
    let mut b = toy("work_b", Duration::from_millis(10), false, starts.clone()).await;
    (a.weight, b.weight) = (7, 3);
    let opts = ScenarioOptions::new(Scenario::Constant {
        rate: 20.0,
        duration: Duration::from_secs(1),
    });
    let r = run_scenario(opts, vec![a, b]).await.unwrap();
    assert_eq!(r.nodes["work_a"].executions, 14);
    assert_eq!(r.nodes["work_b"].executions, 6);
    assert_eq!(r.graph, "work_a 70% + work_b 30%");
    assert_eq!(
        (r.graphs["work_a"].started, r.graphs["work_a"].completed),
        (14, 14)
    );
    assert_eq!(r.graphs["work_b"].conversation_latency_ms.count, 6);
}

#[tokio::test(start_paused = true)]
async fn simulated_tools_show_makespan_against_critical_path_and_waves() {
    use planwright_actors::load::tools::ToolSim;
    use planwright_actors::research::{self, GraphOptions, OfflineResearchPolicy};
    let tools: ToolSim = "sim:p50=400ms,p99=2s,seed=1".parse().unwrap();
    let options = GraphOptions {
        tool_latency: Some(Arc::new(tools)),
        ..GraphOptions::default()
    };
    let engine =
        Engine::new(research::graph(Arc::new(OfflineResearchPolicy), options).unwrap()).await;
    let w = load::research_workload(
        load::load_goals(None).unwrap(),
        "steps".into(),
        Arc::new(|| {}),
    )
    .unwrap();
    let opts = ScenarioOptions::new(Scenario::Closed {
        conversations: 12,
        concurrency: 4,
    });
    let r = run_scenario(
        opts,
        vec![Entry {
            weight: 1,
            conversations: EngineConversations::new(engine, w),
        }],
    )
    .await
    .unwrap();
    assert_eq!(r.completed, 12, "{:?}", r.errors);
    let s = r.steps.expect("the execute phase is analysed");
    assert!(s.conversations >= 10, "{s:?}");
    // Search steps take ~400 ms: the phase is dominated by them.
    assert!(s.critical_path_ms.p50 >= 200.0, "{s:?}");
    assert!(
        s.sum_ms.p50 >= s.waves_ms.p50 && s.waves_ms.p50 >= s.critical_path_ms.p50,
        "{s:?}"
    );
    assert!(s.makespan_ms.p50 + 1.0 >= s.critical_path_ms.p50, "{s:?}");
    assert!(
        s.makespan_over_critical_p50 >= 0.99 && s.sum_over_makespan_p50 >= 1.0,
        "{s:?}"
    );
}
