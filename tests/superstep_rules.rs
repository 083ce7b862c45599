//! The scheduling rules of the pure superstep machine, tested without actors.

use planwright::graph::{Dag, DagTask, Route, Send, StateGraph, END, START};
use planwright::runtime::machine::superstep::{self, TaskSpec};
use planwright::{CompiledGraph, NodeContext, NodeError, RunError};
use proptest::prelude::*;
use serde_json::json;

planwright::state! {
    /// A state with one field of each reducer.
    #[derive(PartialEq)]
    pub struct S => SU {
        replace owner: String,
        append log: Vec<String>,
        merge seen: std::collections::BTreeMap<String, u32>,
        replace go: String,
    }
}

fn noop(_: &S, _: &NodeContext) -> Result<SU, NodeError> {
    Ok(SU::default())
}

/// START → a, b (parallel); a → join, b → join; join routes by `go`.
fn diamond() -> CompiledGraph<S> {
    StateGraph::new("diamond")
        .add_sync_node("a", noop)
        .add_sync_node("b", noop)
        .add_sync_node("join", noop)
        .add_sync_node("fan", noop)
        .add_sync_node("work", noop)
        .add_edge(START, "a")
        .add_edge(START, "b")
        .add_edge("a", "join")
        .add_edge("b", "join")
        .add_conditional_edges(
            "join",
            |s: &S| match s.go.as_str() {
                "send" => Route::Send(vec![
                    Send::new("work", json!({"n": 1})),
                    Send::new("work", json!({"n": 2})),
                ]),
                "dag" => Route::Dag(Dag {
                    tasks: vec![
                        DagTask {
                            key: "x".into(),
                            node: "work".into(),
                            input: json!("x"),
                            after: vec![],
                        },
                        DagTask {
                            key: "y".into(),
                            node: "work".into(),
                            input: json!("y"),
                            after: vec!["x".into()],
                        },
                    ],
                    max_parallel: Some(2),
                }),
                "bad-dag" => Route::Dag(Dag {
                    tasks: vec![
                        DagTask {
                            key: "x".into(),
                            node: "work".into(),
                            input: json!(null),
                            after: vec!["y".into()],
                        },
                        DagTask {
                            key: "y".into(),
                            node: "work".into(),
                            input: json!(null),
                            after: vec!["x".into()],
                        },
                    ],
                    max_parallel: None,
                }),
                "both" => Route::Many(vec!["fan".into(), "end".into()]),
                "nowhere" => Route::to("nowhere"),
                _ => Route::to("end"),
            },
            [("work", "work"), ("fan", "fan"), ("end", END)],
        )
        .add_edge("work", END)
        .add_edge("fan", END)
        .compile()
        .expect("diamond compiles")
}

fn names(tasks: &[TaskSpec]) -> Vec<&str> {
    tasks.iter().map(|t| &*t.node).collect()
}

#[test]
fn start_edges_give_parallel_tasks_with_deterministic_ids() {
    let g = diamond();
    let tasks = superstep::start_tasks(&g, &S::default(), 1).unwrap();
    assert_eq!(names(&tasks), ["a", "b"]);
    assert_eq!(tasks[0].id.step, 1);
    assert_eq!(
        (tasks[0].id.index, tasks[1].id.index),
        (0, 1),
        "task ids follow task order"
    );
}

#[test]
fn a_node_triggered_by_two_edges_runs_once() {
    let g = diamond();
    let first = superstep::start_tasks(&g, &S::default(), 1).unwrap();
    let next = superstep::next_tasks(&g, &S::default(), &first, 2).unwrap();
    assert_eq!(names(&next), ["join"]);
}

#[test]
fn updates_merge_in_task_order_not_completion_order() {
    let g = diamond();
    let tasks = superstep::start_tasks(&g, &S::default(), 1).unwrap();
    let mut state = S::default();
    // b finished first in wall time, but merge takes updates by task index.
    let updates = vec![
        SU::default().log(vec!["from-a".into()]),
        SU::default().log(vec!["from-b".into()]),
    ];
    superstep::merge(&mut state, &tasks, updates).unwrap();
    assert_eq!(state.log, ["from-a", "from-b"]);
}

#[test]
fn two_writes_to_a_replace_field_in_one_superstep_name_field_and_nodes() {
    let g = diamond();
    let tasks = superstep::start_tasks(&g, &S::default(), 1).unwrap();
    let mut state = S::default();
    let updates = vec![
        SU::default().owner("a".into()),
        SU::default().owner("b".into()),
    ];
    let err = superstep::merge(&mut state, &tasks, updates).unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("`owner`"), "{msg}");
    assert!(msg.contains("`a`") && msg.contains("`b`"), "{msg}");
}

#[test]
fn merge_fields_combine_key_by_key() {
    let g = diamond();
    let tasks = superstep::start_tasks(&g, &S::default(), 1).unwrap();
    let mut state = S::default();
    let updates = vec![
        SU::default().seen([("k1".to_string(), 1)].into()),
        SU::default().seen([("k2".to_string(), 2), ("k1".to_string(), 3)].into()),
    ];
    superstep::merge(&mut state, &tasks, updates).unwrap();
    assert_eq!(state.seen.get("k1"), Some(&3), "later task wins per key");
    assert_eq!(state.seen.get("k2"), Some(&2));
}

fn after_join(go: &str) -> Result<Vec<TaskSpec>, RunError> {
    let g = diamond();
    let join = superstep::next_tasks(
        &g,
        &S::default(),
        &superstep::start_tasks(&g, &S::default(), 1).unwrap(),
        2,
    )
    .unwrap();
    let state = S {
        go: go.into(),
        ..S::default()
    };
    superstep::next_tasks(&g, &state, &join, 3)
}

#[test]
fn send_makes_one_task_per_input() {
    let tasks = after_join("send").unwrap();
    assert_eq!(names(&tasks), ["work", "work"]);
    assert_eq!(tasks[0].input.as_deref(), Some(&json!({"n": 1})));
    assert_eq!(tasks[1].input.as_deref(), Some(&json!({"n": 2})));
    assert!(tasks.iter().all(|t| t.after.is_empty()));
}

#[test]
fn many_labels_trigger_each_target_and_end_adds_no_task() {
    let tasks = after_join("both").unwrap();
    assert_eq!(names(&tasks), ["fan"]);
    assert!(after_join("end").unwrap().is_empty());
}

#[test]
fn an_undeclared_label_is_a_run_error_naming_node_and_label() {
    let err = after_join("nowhere").unwrap_err();
    assert!(
        matches!(&err, RunError::UnknownLabel { node, label, .. } if node == "join" && label == "nowhere"),
        "{err}"
    );
}

#[test]
fn dag_tasks_carry_dependencies_and_batch_limit() {
    let tasks = after_join("dag").unwrap();
    assert_eq!(names(&tasks), ["work", "work"]);
    assert!(tasks[0].after.is_empty());
    assert_eq!(tasks[1].after, [0]);
    assert_eq!(tasks[1].batch_limit, Some(2));
    // The superstep machine starts the second only once the first is done.
    let mut step: planwright::runtime::machine::step::Step<u8> =
        planwright::runtime::machine::step::Step::new(2);
    assert_eq!(step.ready(&tasks), [0]);
    let a = step.dispatch(0);
    step.complete(
        0,
        a,
        planwright::runtime::machine::step::Outcome::Updated(0),
    );
    assert_eq!(step.ready(&tasks), [1]);
}

#[test]
fn a_dependency_cycle_is_an_error_with_its_path() {
    let err = after_join("bad-dag").unwrap_err();
    let msg = err.to_string();
    assert!(msg.contains("cycle"), "{msg}");
    assert!(
        msg.contains("x -> y -> x") || msg.contains("y -> x -> y"),
        "{msg}"
    );
}

/// Builds `n` dependency-driven tasks where task `i` waits for `deps[i]` (all earlier indexes).
fn dag_tasks(deps: &[Vec<u32>]) -> Vec<TaskSpec> {
    let g = diamond();
    let work = g.node_id("work").unwrap();
    deps.iter()
        .enumerate()
        .map(|(i, after)| TaskSpec {
            id: planwright::TaskId {
                step: 1,
                index: i as u32,
            },
            node: "work".into(),
            node_id: work,
            input: None,
            after: after.clone(),
            batch_limit: None,
            batch: Some(0),
            deferred: false,
        })
        .collect()
}

fn arb_dag() -> impl Strategy<Value = Vec<Vec<u32>>> {
    (1usize..8).prop_flat_map(|n| {
        (0..n)
            .map(|i| proptest::collection::btree_set(0..(i.max(1) as u32), 0..=i.min(3)))
            .collect::<Vec<_>>()
            .prop_map(|sets| {
                sets.into_iter()
                    .enumerate()
                    .map(|(i, s)| s.into_iter().filter(|&d| (d as usize) < i).collect())
                    .collect()
            })
    })
}

fn transitive(deps: &[Vec<u32>], i: usize) -> std::collections::BTreeSet<usize> {
    let mut out = std::collections::BTreeSet::new();
    let mut stack: Vec<usize> = deps[i].iter().map(|&d| d as usize).collect();
    while let Some(d) = stack.pop() {
        if out.insert(d) {
            stack.extend(deps[d].iter().map(|&x| x as usize));
        }
    }
    out
}

proptest! {
    /// A dependency-driven task sees exactly its transitive dependencies' updates, in task order.
    #[test]
    fn dag_view_holds_exactly_the_transitive_dependencies(deps in arb_dag()) {
        let tasks = dag_tasks(&deps);
        let updates: Vec<Option<SU>> = (0..tasks.len())
            .map(|i| Some(SU::default().log(vec![format!("t{i}")])))
            .collect();
        for i in 0..tasks.len() {
            let view = superstep::dag_view(&S::default(), &tasks, &updates, i).unwrap();
            let expected: Vec<String> = transitive(&deps, i).into_iter().map(|d| format!("t{d}")).collect();
            prop_assert_eq!(view.log, expected);
        }
    }

    /// Whatever order tasks complete in, the merged state is the same: updates are slotted by
    /// task index and merged in task order.
    #[test]
    fn merge_result_is_independent_of_completion_order(order in Just((0..6usize).collect::<Vec<_>>()).prop_shuffle()) {
        let tasks = dag_tasks(&vec![vec![]; 6]);
        let mut slots: Vec<Option<SU>> = vec![None; 6];
        for &i in &order {
            slots[i] = Some(SU::default().log(vec![format!("t{i}")]).seen([(format!("k{}", i % 2), i as u32)].into()));
        }
        let mut state = S::default();
        superstep::merge(&mut state, &tasks, slots.into_iter().map(|u| u.unwrap())).unwrap();
        prop_assert_eq!(state.log, (0..6).map(|i| format!("t{i}")).collect::<Vec<_>>());
        prop_assert_eq!(state.seen.get("k0"), Some(&4));
        prop_assert_eq!(state.seen.get("k1"), Some(&5));
    }
}

/// `START` fans out to branches of the given lengths (`b{i}_{j}`), all of which lead to the
/// deferred node `join`; `join` → `END`.
fn branches_to_deferred_join(lengths: &[usize]) -> CompiledGraph<S> {
    let mut g = StateGraph::new("branches")
        .add_sync_node("join", noop)
        .defer(["join"])
        .add_edge("join", END);
    for (i, &len) in lengths.iter().enumerate() {
        for j in 0..len {
            let name = format!("b{i}_{j}");
            g = g.add_sync_node(&name, noop);
            if j == 0 {
                g = g.add_edge(START, &name);
            } else {
                g = g.add_edge(&format!("b{i}_{}", j - 1), &name);
            }
        }
        g = g.add_edge(&format!("b{i}_{}", len - 1), "join");
    }
    g.compile().expect("branches compile")
}

/// Drives the pure machine to the end (every task finishes with an empty update) and returns
/// the node names of each superstep.
fn drive(g: &CompiledGraph<S>) -> Vec<Vec<String>> {
    let first = superstep::start_tasks(g, &S::default(), 0).unwrap();
    let (mut run, mut waiting) = superstep::schedule(g, first, Vec::new(), 0);
    let mut steps = Vec::new();
    let mut step = 0;
    while !run.is_empty() {
        steps.push(names(&run).iter().map(|n| n.to_string()).collect());
        step += 1;
        let next = superstep::next_tasks(g, &S::default(), &run, step).unwrap();
        (run, waiting) = superstep::schedule(g, next, std::mem::take(&mut waiting), step);
        assert!(steps.len() < 100, "the machine does not end: {steps:?}");
    }
    assert!(waiting.is_empty(), "nothing waits once nothing runs");
    steps
}

#[test]
fn a_deferred_node_waits_for_the_longest_branch_and_runs_once() {
    let g = branches_to_deferred_join(&[1, 3]);
    assert_eq!(
        drive(&g),
        [
            vec!["b0_0", "b1_0"],
            vec!["b1_1"],
            vec!["b1_2"],
            vec!["join"]
        ]
    );
}

#[test]
fn deferred_tasks_are_stored_after_the_runnable_ones_and_split_back() {
    let g = branches_to_deferred_join(&[1, 2]);
    let first = superstep::start_tasks(&g, &S::default(), 0).unwrap();
    let (run, waiting) = superstep::schedule(&g, first, Vec::new(), 0);
    let next = superstep::next_tasks(&g, &S::default(), &run, 1).unwrap();
    assert_eq!(
        names(&next),
        ["join", "b1_1"],
        "join is asked for after step 0"
    );
    let (run, waiting) = superstep::schedule(&g, next, waiting, 1);
    assert_eq!(names(&run), ["b1_1"]);
    assert_eq!(names(&waiting), ["join"]);
    assert_eq!(
        (run[0].id.index, waiting[0].id.index),
        (0, 1),
        "waiting tasks are numbered after the runnable ones"
    );
    let stored = superstep::stored_next(&run, &waiting);
    let bytes = serde_json::to_vec(&stored).unwrap();
    let back: Vec<TaskSpec> = serde_json::from_slice(&bytes).unwrap();
    let (run2, waiting2) = superstep::split_stored(back);
    assert_eq!(names(&run2), ["b1_1"]);
    assert_eq!(names(&waiting2), ["join"]);
    assert!(waiting2[0].deferred && !run2[0].deferred);
}

#[test]
fn a_graph_without_deferred_nodes_keeps_its_fingerprint_and_defer_names_must_exist() {
    let plain = diamond();
    let text = plain.mermaid();
    assert!(!text.contains("deferred"), "{text}");
    let deferred = branches_to_deferred_join(&[1]);
    assert!(deferred.mermaid().contains("%% deferred: join"));
    let err = StateGraph::<S>::new("bad")
        .add_sync_node("a", noop)
        .add_edge(START, "a")
        .add_edge("a", END)
        .defer(["ghost"])
        .compile()
        .err()
        .expect("an unknown deferred node is refused");
    assert!(err.to_string().contains("ghost"), "{err}");
}

proptest! {
    /// Whatever the branches' lengths, the deferred join runs exactly once, alone, in the last
    /// superstep, after every branch node ran exactly once.
    #[test]
    fn a_deferred_join_runs_once_after_every_branch(lengths in proptest::collection::vec(1usize..5, 1..4)) {
        let g = branches_to_deferred_join(&lengths);
        let steps = drive(&g);
        let (last, before) = steps.split_last().unwrap();
        prop_assert_eq!(last, &vec!["join".to_string()]);
        prop_assert_eq!(steps.len(), lengths.iter().max().unwrap() + 1);
        let ran: Vec<&String> = before.iter().flatten().collect();
        prop_assert_eq!(ran.len(), lengths.iter().sum::<usize>());
        prop_assert!(!ran.iter().any(|n| *n == "join"));
    }
}
