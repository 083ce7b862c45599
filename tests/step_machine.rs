//! The superstep machine driven directly, without actors: random task graphs (dependencies and
//! batch limits), random completion orders, failures with and without retries, interrupts, and
//! late results of superseded attempts. Checked every step: the dependency rule, the batch rule,
//! that late results change nothing, that `completes_with` foretells a completing update; at the
//! end: the join rule (complete only when every task is done) and determinism (the updates come
//! out in task order whatever order they arrived in).

use planwright::events::Interrupt;
use planwright::ids::{InterruptId, NodeId, TaskId};
use planwright::runtime::machine::step::{Effect, End, Outcome, Slot, Step};
use planwright::runtime::machine::superstep::TaskSpec;
use proptest::prelude::*;
use std::sync::Arc;

/// A superstep of `n` tasks: task `i` is after the earlier tasks its mask names; tasks with the
/// same batch share its limit.
fn tasks(n: usize, deps: &[u16], batches: &[(u8, u8)]) -> Vec<TaskSpec> {
    (0..n)
        .map(|i| {
            let after: Vec<u32> = (0..i)
                .filter(|j| deps[i] & (1 << j) != 0)
                .map(|j| j as u32)
                .collect();
            let (b, _) = batches[i];
            // Batch 100 runs one task at a time, batch 200 two (the planner gives every task of
            // a batch the same limit).
            let batch = (b % 3 != 0).then_some((b % 3) as u32 * 100);
            TaskSpec {
                id: TaskId {
                    step: 1,
                    index: i as u32,
                },
                node: Arc::from(format!("n{i}")),
                node_id: NodeId(0),
                input: None,
                after,
                batch_limit: batch.map(|b| b / 100),
                batch,
                deferred: false,
            }
        })
        .collect()
}

#[derive(Clone, Debug)]
enum Act {
    /// Complete the k-th running task with an update.
    Finish(usize),
    /// Fail the k-th running task; retry allowed?
    Fail(usize, bool),
    /// The k-th running task pauses.
    Pause(usize),
    /// A late result for the k-th running task's previous attempt.
    Stale(usize),
    /// The k-th retry-waiting task's backoff ends.
    RetryDue(usize),
}

fn act() -> impl Strategy<Value = Act> {
    prop_oneof![
        6 => any::<usize>().prop_map(Act::Finish),
        1 => (any::<usize>(), any::<bool>()).prop_map(|(k, r)| Act::Fail(k, r)),
        1 => any::<usize>().prop_map(Act::Pause),
        1 => any::<usize>().prop_map(Act::Stale),
        2 => any::<usize>().prop_map(Act::RetryDue),
    ]
}

fn interrupt(i: usize) -> Interrupt {
    Interrupt {
        id: InterruptId(format!("n{i}")),
        node: format!("n{i}"),
        value: serde_json::Value::Null,
        index: 0,
    }
}

/// Drives a superstep like the supervisor does (dispatch everything ready after each event),
/// checking the rules after every event. Returns how it ended, or `None` when a task failed for
/// good.
fn drive(tasks: &[TaskSpec], acts: &[Act]) -> Result<Option<End<usize>>, TestCaseError> {
    drive_step(&mut Step::new(tasks.len()), tasks, acts)
}

/// [`drive`] on a given superstep of `tasks.len()` tasks.
fn drive_step(
    step: &mut Step<usize>,
    tasks: &[TaskSpec],
    acts: &[Act],
) -> Result<Option<End<usize>>, TestCaseError> {
    let mut attempt = vec![0u32; tasks.len()];
    // The acts given, then finishing and retrying until the superstep settles.
    let tail = [Act::Finish(0), Act::RetryDue(0)];
    let mut acts = acts.iter().chain(tail.iter().cycle());
    for _ in 0..10_000 {
        for i in step.ready(tasks) {
            // The dependency rule.
            for &d in &tasks[i].after {
                prop_assert_eq!(
                    step.slot(d as usize),
                    Some(Slot::Done),
                    "task {} before {}",
                    i,
                    d
                );
            }
            attempt[i] = step.dispatch(i);
        }
        // The batch rule.
        for t in tasks {
            if let (Some(b), Some(limit)) = (t.batch, t.batch_limit) {
                let busy = tasks
                    .iter()
                    .enumerate()
                    .filter(|(j, u)| {
                        u.batch == Some(b)
                            && matches!(step.slot(*j), Some(Slot::Running | Slot::RetryWait))
                    })
                    .count();
                prop_assert!(
                    busy <= limit as usize,
                    "batch {} has {} > {}",
                    b,
                    busy,
                    limit
                );
            }
        }
        match step.end() {
            End::Running => {}
            other => return Ok(Some(other)),
        }
        let running: Vec<usize> = (0..tasks.len())
            .filter(|&i| step.slot(i) == Some(Slot::Running))
            .collect();
        let waiting: Vec<usize> = (0..tasks.len())
            .filter(|&i| step.slot(i) == Some(Slot::RetryWait))
            .collect();
        let pick = |v: &[usize], k: usize| v.get(k % v.len().max(1)).copied();
        match acts.next().unwrap() {
            Act::Finish(k) | Act::Stale(k) if running.is_empty() => {
                if let Some(i) = pick(&waiting, *k) {
                    prop_assert!(step.retry_due(i));
                }
            }
            Act::Finish(k) => {
                let i = pick(&running, *k).unwrap();
                // Said before the result is taken (the supervisor then saves no write of it):
                // exactly when this update leaves the superstep complete.
                let completes = step.completes_with(i);
                prop_assert_eq!(
                    step.complete(i, attempt[i], Outcome::Updated(i)),
                    Effect::Continue
                );
                prop_assert_eq!(
                    completes,
                    matches!(step.clone().end(), End::Complete(_)),
                    "completes_with({}) said {}",
                    i,
                    completes
                );
            }
            Act::Fail(k, retry) => {
                let Some(i) = pick(&running, *k) else {
                    continue;
                };
                match step.complete(i, attempt[i], Outcome::Failed { retry: *retry }) {
                    Effect::Retry => prop_assert_eq!(step.slot(i), Some(Slot::RetryWait)),
                    Effect::Fail => return Ok(None),
                    e => prop_assert!(false, "unexpected {:?}", e),
                }
            }
            Act::Pause(k) => {
                let Some(i) = pick(&running, *k) else {
                    continue;
                };
                prop_assert_eq!(
                    step.complete(i, attempt[i], Outcome::Interrupted(interrupt(i))),
                    Effect::Continue
                );
            }
            Act::Stale(k) => {
                let i = pick(&running, *k).unwrap();
                let before = step.slot(i);
                prop_assert_eq!(
                    step.complete(i, attempt[i] + 7, Outcome::Updated(999)),
                    Effect::Ignore
                );
                prop_assert_eq!(step.slot(i), before, "a late result changes nothing");
            }
            Act::RetryDue(k) => {
                if let Some(i) = pick(&waiting, *k) {
                    prop_assert!(step.retry_due(i));
                } else if let Some(i) = pick(&running, *k) {
                    prop_assert!(!step.retry_due(i), "only a task waiting for a retry");
                }
            }
        }
    }
    prop_assert!(false, "the superstep never settled");
    unreachable!()
}

fn graph() -> impl Strategy<Value = (usize, Vec<u16>, Vec<(u8, u8)>)> {
    (1usize..10).prop_flat_map(|n| {
        (
            Just(n),
            proptest::collection::vec(any::<u16>(), n),
            proptest::collection::vec(any::<(u8, u8)>(), n),
        )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn the_rules_hold_whatever_happens((n, deps, batches) in graph(), acts in proptest::collection::vec(act(), 1..40)) {
        let tasks = tasks(n, &deps, &batches);
        match drive(&tasks, &acts)? {
            // The join rule and determinism: complete means every task's update, in task order.
            Some(End::Complete(updates)) => prop_assert_eq!(updates, (0..n).collect::<Vec<_>>()),
            // A pause leaves at least one interrupt, and only tasks waiting on it.
            Some(End::Paused(ints)) => prop_assert!(!ints.is_empty()),
            Some(End::Running) => prop_assert!(false, "drive returns only settled ends"),
            None => {} // a task failed for good
        }
    }

    #[test]
    fn a_reset_superstep_runs_as_a_new_one(
        (n, deps, batches) in graph(),
        (m, deps2, batches2) in graph(),
        acts in proptest::collection::vec(act(), 1..40),
        acts2 in proptest::collection::vec(act(), 1..40),
    ) {
        let mut step: Step<usize> = Step::new(n);
        drive_step(&mut step, &tasks(n, &deps, &batches), &acts)?;
        step.reset(m);
        prop_assert_eq!(format!("{step:?}"), format!("{:?}", Step::<usize>::new(m)));
        let next = tasks(m, &deps2, &batches2);
        prop_assert_eq!(drive_step(&mut step, &next, &acts2)?, drive(&next, &acts2)?);
    }

    #[test]
    fn the_merge_order_does_not_depend_on_the_completion_order(
        (n, deps, batches) in graph(),
        a in proptest::collection::vec(any::<usize>(), 1..20),
        b in proptest::collection::vec(any::<usize>(), 1..20),
    ) {
        let tasks = tasks(n, &deps, &batches);
        let finish = |ks: &[usize]| ks.iter().map(|k| Act::Finish(*k)).collect::<Vec<_>>();
        let x = drive(&tasks, &finish(&a))?;
        let y = drive(&tasks, &finish(&b))?;
        prop_assert_eq!(x, y);
    }
}

#[test]
fn a_restored_superstep_runs_only_what_is_left() {
    let three = tasks(3, &[0, 0b1, 0b11], &[(0, 0); 3]);
    let mut step: Step<usize> = Step::new(3);
    step.restore_done(0, 0);
    assert_eq!(step.ready(&three), [1], "0 is done, 2 waits on 1");
    let a = step.dispatch(1);
    step.complete(1, a, Outcome::Updated(1));
    let a = step.dispatch(2);
    step.complete(2, a, Outcome::Updated(2));
    assert_eq!(step.end(), End::Complete(vec![0, 1, 2]));
    let mut paused: Step<usize> = Step::new(2);
    paused.restore_interrupted(0, interrupt(0));
    assert_eq!(
        paused.ready(&tasks(2, &[0, 0b1], &[(0, 0); 2])),
        Vec::<usize>::new()
    );
    assert!(matches!(paused.end(), End::Paused(ref i) if i.len() == 1));
}
