//! The decisions taken between supersteps and on a failed attempt, as pure functions: each returns
//! what the supervisor does next, and the supervisor only carries it out (stores, emits, waits).
//!
//! - [`pause`]: whether the run pauses at this boundary, where (`interrupt_after` a node that
//!   just ran, or `interrupt_before` one about to run) and with which interrupts.
//! - [`step_end`]: once the superstep's checkpoint is stored, whether the run finishes, fails on
//!   its step limit, pauses, suspends (the engine drains) or goes on.
//! - [`next_superstep`]: once a superstep is merged, what runs next, what waits and that pause.
//! - [`step_end`]: once the superstep's checkpoint is stored, whether the run finishes, fails on
//!   its step limit, pauses, suspends (the engine drains) or goes on.
//! - [`on_failure`]: whether a failed attempt is retried, and after how long; [`after_result`]:
//!   what the supervisor does once the superstep took a result (go on, wait and retry, fail).
//! - [`at_start`]: whether a run finishes at once, pauses again or runs; [`end_status`]: the
//!   status a run ended with.
//! - [`RecentNodes`]: the nodes that ran last, which a step-limit failure names.

use super::per_run::PerRun;
use super::step::Effect;
use super::superstep::{self, TaskSpec};
use crate::checkpoint::{Pause, PauseAt};
use crate::events::RunStatus;
use crate::graph::{CompiledGraph, Route};
use crate::ids::NodeId;
use crate::node::NodeError;
use crate::policy::RetryPolicy;
use crate::runtime::error::RunError;
use crate::state::State;
use std::collections::VecDeque;
use std::sync::Arc;
use std::time::Duration;

/// The pause at the boundary between the `finished` superstep and the `next` one, if any.
///
/// A finished task whose node pauses after it (`pauses_after`) pauses the run, one interrupt per
/// such task, as long as something runs next (a run that ends has nothing to pause before).
/// Otherwise each next task whose node pauses before it (`pauses_before`) is an interrupt. The
/// interrupts are in task order.
pub(crate) fn pause(
    finished: &[TaskSpec],
    next: &[TaskSpec],
    pauses_after: impl Fn(NodeId) -> bool,
    pauses_before: impl Fn(NodeId) -> bool,
) -> Option<Pause> {
    let after: Vec<&TaskSpec> = finished
        .iter()
        .filter(|t| pauses_after(t.node_id))
        .collect();
    let (at, interrupts) = if !next.is_empty() && !after.is_empty() {
        let interrupts = after.iter().map(|t| t.static_pause("after")).collect();
        (PauseAt::After, interrupts)
    } else {
        let before = next.iter().filter(|t| pauses_before(t.node_id));
        (
            PauseAt::Before,
            before.map(|t| t.static_pause("before")).collect(),
        )
    };
    let interrupts: Vec<_> = interrupts;
    (!interrupts.is_empty()).then_some(Pause { at, interrupts })
}

/// What follows a finished superstep.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct NextStep {
    /// The tasks of the next superstep.
    pub run: Vec<TaskSpec>,
    /// Tasks of deferred nodes, waiting for every other task to finish.
    pub waiting: Vec<TaskSpec>,
    /// The pause at this boundary ([`pause`]), if any.
    pub pause: Option<Pause>,
}

/// What follows superstep `step` (its `finished` tasks, merged into `state`, `gotos` where its
/// command nodes said to go): the next tasks from the graph's edges and routes, the deferred
/// tasks still `waiting` scheduled with them, and the pause the graph and the run's settings ask
/// for at this boundary.
pub(crate) fn next_superstep<S: State>(
    graph: &CompiledGraph<S>,
    per_run: &PerRun,
    state: &S,
    finished: &[TaskSpec],
    gotos: &[Option<Route>],
    waiting: Vec<TaskSpec>,
    step: u64,
) -> Result<NextStep, RunError> {
    let next = superstep::next_tasks_after(graph, state, finished, gotos, step)?;
    let (run, waiting) = superstep::schedule(graph, next, waiting, step);
    let pause = self::pause(
        finished,
        &run,
        |n| per_run.pauses_after(graph, n),
        |n| per_run.pauses_before(graph, n),
    );
    Ok(NextStep {
        run,
        waiting,
        pause,
    })
}

/// The names of the last nodes a run ran (at most eight), oldest first.
#[derive(Clone, Debug, Default)]
pub(crate) struct RecentNodes(VecDeque<Arc<str>>);

impl RecentNodes {
    /// Most nodes remembered.
    const KEPT: usize = 8;

    /// Notes that `tasks` ran, in task order.
    pub fn ran(&mut self, tasks: &[TaskSpec]) {
        for t in tasks {
            if self.0.len() == Self::KEPT {
                self.0.pop_front();
            }
            self.0.push_back(t.node.clone());
        }
    }

    /// The node that ran last.
    pub fn last(&self) -> Option<&str> {
        self.0.back().map(|n| &**n)
    }

    /// The nodes remembered, oldest first.
    pub fn names(&self) -> Vec<String> {
        self.0.iter().map(|n| n.to_string()).collect()
    }
}

/// Where a run stands once a superstep's checkpoint is stored.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct AtBoundary {
    /// The next superstep has tasks.
    pub tasks_left: bool,
    /// Supersteps this run completed, the one just finished included.
    pub steps_run: u64,
    /// Supersteps the run may make.
    pub step_limit: u64,
    /// The pause [`pause`] found, if any.
    pub pause: Option<Pause>,
    /// The engine is shutting down: stop at this boundary.
    pub draining: bool,
}

/// What the supervisor does at a superstep's boundary.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum StepEnd {
    /// Nothing is left to run: the run finished.
    Finish,
    /// The run made as many supersteps as it may, with work left: it fails.
    StepLimit,
    /// The run pauses before the next superstep.
    Pause(Pause),
    /// The engine drains: the run stops here, resumable.
    Suspend,
    /// The next superstep starts.
    Next,
}

/// The rule of a superstep's end: a run with nothing left finishes (even on its last allowed
/// step); one with work left fails at its step limit before it would pause or suspend, so a limit
/// is never outrun by a pause; a pause comes before a drain, so a paused run stays paused.
pub(crate) fn step_end(at: AtBoundary) -> StepEnd {
    if !at.tasks_left {
        StepEnd::Finish
    } else if at.steps_run >= at.step_limit {
        StepEnd::StepLimit
    } else if let Some(pause) = at.pause {
        StepEnd::Pause(pause)
    } else if at.draining {
        StepEnd::Suspend
    } else {
        StepEnd::Next
    }
}

/// What a failed attempt leads to.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum OnFailure {
    /// The task runs again after this wait.
    Retry {
        /// The backoff before the next attempt.
        after: Duration,
    },
    /// The run fails with this error.
    Fail,
}

impl OnFailure {
    /// Whether the task runs again.
    pub fn retries(&self) -> bool {
        matches!(self, OnFailure::Retry { .. })
    }
}

/// Whether attempt `attempt` of a task, failed with `error`, is retried under `policy`, and after
/// how long; `unit` is a uniform draw in `[0, 1)` for the backoff's jitter (the supervisor draws
/// one per failure from a generator seeded by the run, so a run's waits are reproducible).
pub(crate) fn on_failure(
    policy: &RetryPolicy,
    error: &NodeError,
    attempt: u32,
    unit: f64,
) -> OnFailure {
    if policy.should_retry(error, attempt) {
        OnFailure::Retry {
            after: policy.backoff(attempt, unit),
        }
    } else {
        OnFailure::Fail
    }
}

/// How a run starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum AtStart {
    /// The thread has nothing to run: the run finishes at once.
    Finish,
    /// The thread is paused before its next superstep (`interrupt_before` its first nodes, or a
    /// pause not yet answered): the run pauses again with the thread's pauses.
    Pause,
    /// The superstep runs.
    Run,
}

/// How a run starts on a thread with `tasks_left`, `paused_before` its next superstep.
pub(crate) fn at_start(tasks_left: bool, paused_before: bool) -> AtStart {
    if !tasks_left {
        AtStart::Finish
    } else if paused_before {
        AtStart::Pause
    } else {
        AtStart::Run
    }
}

/// The status a run ended with: its own when it ended well, else cancelled or failed.
pub(crate) fn end_status(result: &Result<RunStatus, RunError>) -> RunStatus {
    match result {
        Ok(s) => *s,
        Err(RunError::Cancelled) => RunStatus::Cancelled,
        Err(_) => RunStatus::Failed,
    }
}

/// What the supervisor does once the superstep machine took a result.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) enum AfterResult {
    /// Dispatch what became ready.
    Go,
    /// Wait this long, then run the task again.
    RetryAfter(Duration),
    /// The task failed for good: the run fails.
    Fail,
}

/// What follows the machine's `effect` for a result; `failure` is [`on_failure`]'s verdict when
/// the attempt failed (a retry waits its backoff).
pub(crate) fn after_result(effect: Effect, failure: Option<OnFailure>) -> AfterResult {
    match effect {
        Effect::Retry => AfterResult::RetryAfter(match failure {
            Some(OnFailure::Retry { after }) => after,
            _ => Duration::ZERO,
        }),
        Effect::Fail => AfterResult::Fail,
        Effect::Continue | Effect::Ignore => AfterResult::Go,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::TaskId;
    use crate::policy::RetryOn;
    use proptest::prelude::*;
    use std::sync::Arc;

    /// Task `index` of a superstep, of node `node`.
    fn task(index: u32, node: u32) -> TaskSpec {
        TaskSpec {
            id: TaskId { step: 1, index },
            node: Arc::from(format!("n{node}")),
            node_id: NodeId(node),
            input: None,
            after: Vec::new(),
            batch_limit: None,
            batch: None,
            deferred: false,
        }
    }

    fn tasks(nodes: &[u32]) -> Vec<TaskSpec> {
        nodes
            .iter()
            .enumerate()
            .map(|(i, n)| task(i as u32, *n))
            .collect()
    }

    fn ids(p: &Pause) -> Vec<String> {
        p.interrupts.iter().map(|i| i.id.0.clone()).collect()
    }

    #[allow(dead_code)]
    mod counting {
        crate::state! {
            /// A counter for the boundary tests.
            pub struct Count => CountUpdate {
                /// Supersteps counted.
                replace n: u32,
            }
        }
    }
    use counting::{Count, CountUpdate};

    fn bump(_: &Count, _: &crate::node::NodeContext) -> Result<CountUpdate, NodeError> {
        Ok(CountUpdate::default())
    }

    /// START → a → b → END, `b` pausing before it in the graph when `graph_pauses`.
    fn chain(graph_pauses: bool) -> CompiledGraph<Count> {
        use crate::graph::{StateGraph, END, START};
        let g = StateGraph::new("chain")
            .add_sync_node("a", bump)
            .add_sync_node("b", bump)
            .add_edge(START, "a")
            .add_edge("a", "b")
            .add_edge("b", END);
        let g = if graph_pauses {
            g.interrupt_before(["b"])
        } else {
            g
        };
        g.compile().unwrap()
    }

    fn finished(graph: &CompiledGraph<Count>, node: &str) -> Vec<TaskSpec> {
        let mut t = task(0, graph.node_id(node).unwrap().0);
        t.node = Arc::from(node);
        vec![t]
    }

    #[test]
    fn after_a_superstep_its_successor_runs_and_the_pauses_asked_for_apply() {
        let g = chain(false);
        let quiet = PerRun::default();
        let next = next_superstep(
            &g,
            &quiet,
            &Count::default(),
            &finished(&g, "a"),
            &[],
            Vec::new(),
            1,
        )
        .unwrap();
        assert_eq!(next.run.len(), 1);
        assert_eq!(&*next.run[0].node, "b");
        assert_eq!(next.run[0].id, TaskId { step: 1, index: 0 });
        assert!(next.waiting.is_empty());
        assert_eq!(next.pause, None);

        let opts = crate::runtime::run::RunOptions {
            interrupt_before: vec!["b".into()],
            ..Default::default()
        };
        let asks = PerRun::resolve(&g, &opts).unwrap();
        for (graph, per_run) in [(&chain(true), &quiet), (&g, &asks)] {
            let next = next_superstep(
                graph,
                per_run,
                &Count::default(),
                &finished(graph, "a"),
                &[],
                Vec::new(),
                1,
            )
            .unwrap();
            let p = next.pause.expect("b pauses before it runs");
            assert_eq!(p.at, PauseAt::Before);
            assert_eq!(ids(&p), ["before:1.0"]);
        }

        let last = next_superstep(
            &g,
            &asks,
            &Count::default(),
            &finished(&g, "b"),
            &[],
            Vec::new(),
            2,
        )
        .unwrap();
        assert!(last.run.is_empty() && last.pause.is_none());
    }

    #[test]
    fn a_run_starts_by_finishing_pausing_or_running() {
        assert_eq!(at_start(false, true), AtStart::Finish);
        assert_eq!(at_start(true, true), AtStart::Pause);
        assert_eq!(at_start(true, false), AtStart::Run);
    }

    #[test]
    fn a_run_that_failed_ends_failed_unless_cancelled() {
        assert_eq!(end_status(&Ok(RunStatus::Suspended)), RunStatus::Suspended);
        assert_eq!(end_status(&Err(RunError::Cancelled)), RunStatus::Cancelled);
        let e = RunError::Internal("x".into());
        assert_eq!(end_status(&Err(e)), RunStatus::Failed);
    }

    #[test]
    fn a_retry_waits_what_the_failure_said_and_a_lost_cause_fails() {
        let after = Duration::from_millis(30);
        assert_eq!(
            after_result(Effect::Retry, Some(OnFailure::Retry { after })),
            AfterResult::RetryAfter(after)
        );
        assert_eq!(
            after_result(Effect::Fail, Some(OnFailure::Fail)),
            AfterResult::Fail
        );
        assert_eq!(after_result(Effect::Continue, None), AfterResult::Go);
        assert_eq!(after_result(Effect::Ignore, None), AfterResult::Go);
    }

    #[test]
    fn a_node_that_pauses_after_pauses_before_the_next_superstep() {
        let (finished, next) = (tasks(&[0, 1]), tasks(&[2]));
        let p = pause(&finished, &next, |n| n == NodeId(1), |_| true).unwrap();
        assert_eq!(p.at, PauseAt::After);
        assert_eq!(ids(&p), ["after:1.1"]);
    }

    #[test]
    fn nothing_pauses_after_a_superstep_that_ends_the_run() {
        assert_eq!(pause(&tasks(&[0]), &[], |_| true, |_| true), None);
    }

    #[test]
    fn nodes_that_pause_before_pause_in_task_order() {
        let p = pause(
            &tasks(&[0]),
            &tasks(&[3, 1, 3]),
            |_| false,
            |n| n == NodeId(3),
        )
        .unwrap();
        assert_eq!(p.at, PauseAt::Before);
        assert_eq!(ids(&p), ["before:1.0", "before:1.2"]);
    }

    #[test]
    fn a_run_with_nothing_left_finishes_even_on_its_last_step() {
        let at = AtBoundary {
            tasks_left: false,
            steps_run: 5,
            step_limit: 5,
            pause: None,
            draining: true,
        };
        assert_eq!(step_end(at.clone()), StepEnd::Finish);
        let at = AtBoundary {
            tasks_left: true,
            ..at
        };
        assert_eq!(step_end(at), StepEnd::StepLimit);
    }

    #[test]
    fn a_retry_waits_its_backoff_and_the_last_attempt_fails() {
        let policy = RetryPolicy {
            max_attempts: 3,
            initial_backoff: Duration::from_millis(100),
            multiplier: 2.0,
            max_backoff: Duration::from_secs(1),
            jitter: false,
            retry_on: RetryOn::AnyFailure,
        };
        let e = NodeError::Retryable("flaky".into());
        assert_eq!(
            on_failure(&policy, &e, 2, 0.5),
            OnFailure::Retry {
                after: Duration::from_millis(200)
            }
        );
        assert_eq!(on_failure(&policy, &e, 3, 0.5), OnFailure::Fail);
    }

    fn policy() -> impl Strategy<Value = RetryPolicy> {
        (
            1u32..6,
            0u64..500,
            1.0f64..4.0,
            0u64..3000,
            any::<bool>(),
            0u8..3,
        )
            .prop_map(
                |(max_attempts, initial, multiplier, max, jitter, on)| RetryPolicy {
                    max_attempts,
                    initial_backoff: Duration::from_millis(initial),
                    multiplier,
                    max_backoff: Duration::from_millis(max),
                    jitter,
                    retry_on: [
                        RetryOn::AnyFailure,
                        RetryOn::Transient,
                        RetryOn::TimeoutsOnly,
                    ][on as usize],
                },
            )
    }

    fn error() -> impl Strategy<Value = NodeError> {
        prop_oneof![
            Just(NodeError::Retryable("r".into())),
            Just(NodeError::Fatal("f".into())),
            Just(NodeError::Timeout(Duration::from_secs(1))),
            Just(NodeError::Panicked("p".into())),
            Just(NodeError::Cancelled),
            Just(NodeError::Interrupt(serde_json::Value::Null)),
        ]
    }

    fn effect() -> impl Strategy<Value = Effect> {
        prop_oneof![
            Just(Effect::Continue),
            Just(Effect::Retry),
            Just(Effect::Fail),
            Just(Effect::Ignore),
        ]
    }

    proptest! {
        /// The supervisor retries exactly when the machine says so, after the failure's backoff
        /// (none known: at once), and fails exactly when the machine says the task failed for good.
        #[test]
        fn after_a_result_the_supervisor_does_what_the_machine_said(
            effect in effect(),
            failure in proptest::option::of(prop_oneof![
                Just(OnFailure::Fail),
                (0u64..5000).prop_map(|ms| OnFailure::Retry { after: Duration::from_millis(ms) }),
            ]),
        ) {
            let then = after_result(effect, failure);
            prop_assert_eq!(matches!(then, AfterResult::RetryAfter(_)), effect == Effect::Retry);
            prop_assert_eq!(then == AfterResult::Fail, effect == Effect::Fail);
            if let AfterResult::RetryAfter(wait) = then {
                let want = match failure {
                    Some(OnFailure::Retry { after }) => after,
                    _ => Duration::ZERO,
                };
                prop_assert_eq!(wait, want);
            }
        }

        /// The recent nodes are the last eight that ran, oldest first, whatever the supersteps'
        /// sizes.
        #[test]
        fn the_recent_nodes_are_the_last_eight_that_ran(
            steps in prop::collection::vec(prop::collection::vec(0u32..20, 0..5), 0..12),
        ) {
            let mut recent = RecentNodes::default();
            let mut all = Vec::new();
            for nodes in &steps {
                let ts = tasks(nodes);
                recent.ran(&ts);
                all.extend(ts.iter().map(|t| t.node.to_string()));
            }
            let want = all[all.len().saturating_sub(8)..].to_vec();
            prop_assert_eq!(recent.last().map(str::to_string), want.last().cloned());
            prop_assert_eq!(recent.names(), want);
        }

        /// The pause rule: an `interrupt_after` pause names exactly the finished tasks that pause
        /// after, and only when something runs next; otherwise an `interrupt_before` pause names
        /// exactly the next tasks that pause before; no pause means neither applies.
        #[test]
        fn a_pause_names_exactly_the_tasks_its_rule_picks(
            finished in prop::collection::vec(0u32..6, 0..6),
            next in prop::collection::vec(0u32..6, 0..6),
            after_set in 0u8..64,
            before_set in 0u8..64,
        ) {
            let (finished, next) = (tasks(&finished), tasks(&next));
            let after = |n: NodeId| after_set & (1 << n.0) != 0;
            let before = |n: NodeId| before_set & (1 << n.0) != 0;
            let want_after: Vec<String> = finished.iter()
                .filter(|t| after(t.node_id))
                .map(|t| t.static_pause("after").id.0)
                .collect();
            let want_before: Vec<String> = next.iter()
                .filter(|t| before(t.node_id))
                .map(|t| t.static_pause("before").id.0)
                .collect();
            match pause(&finished, &next, after, before) {
                Some(p) if p.at == PauseAt::After => {
                    prop_assert!(!next.is_empty());
                    prop_assert_eq!(ids(&p), want_after);
                }
                Some(p) => {
                    prop_assert!(next.is_empty() || want_after.is_empty());
                    prop_assert_eq!(ids(&p), want_before);
                }
                None => {
                    prop_assert!(next.is_empty() || want_after.is_empty());
                    prop_assert!(want_before.is_empty());
                }
            }
        }

        /// A run goes on only with work left, below its limit, neither pausing nor draining; it
        /// never outruns its step limit, and a run with nothing left always finishes.
        #[test]
        fn a_run_goes_on_only_when_nothing_stops_it(
            tasks_left in any::<bool>(),
            steps_run in 0u64..10,
            step_limit in 1u64..10,
            pausing in any::<bool>(),
            draining in any::<bool>(),
        ) {
            let pause = pausing.then(|| Pause { at: PauseAt::Before, interrupts: Vec::new() });
            let at = AtBoundary { tasks_left, steps_run, step_limit, pause, draining };
            let end = step_end(at);
            prop_assert_eq!(end == StepEnd::Finish, !tasks_left);
            prop_assert_eq!(end == StepEnd::StepLimit, tasks_left && steps_run >= step_limit);
            if end == StepEnd::Next {
                prop_assert!(tasks_left && steps_run < step_limit && !pausing && !draining);
            }
            if end == StepEnd::Suspend {
                prop_assert!(draining && !pausing);
            }
            if matches!(end, StepEnd::Pause(_)) {
                prop_assert!(tasks_left && steps_run < step_limit && pausing);
            }
        }

        /// Retries stop at the policy's attempts, never follow an interrupt or a cancellation,
        /// and wait at most the policy's cap (without jitter: exactly the capped exponential).
        #[test]
        fn a_retry_keeps_to_its_policy(
            policy in policy(),
            error in error(),
            attempt in 1u32..8,
            unit in 0.0f64..1.0,
        ) {
            match on_failure(&policy, &error, attempt, unit) {
                OnFailure::Retry { after } => {
                    prop_assert!(attempt < policy.max_attempts);
                    prop_assert!(!matches!(error, NodeError::Interrupt(_) | NodeError::Cancelled));
                    prop_assert!(after <= policy.max_backoff + Duration::from_nanos(1));
                    if !policy.jitter {
                        let want = (policy.initial_backoff.as_secs_f64()
                            * policy.multiplier.powi(attempt as i32 - 1))
                            .min(policy.max_backoff.as_secs_f64());
                        prop_assert!((after.as_secs_f64() - want).abs() < 1e-6);
                    }
                }
                OnFailure::Fail => prop_assert!(
                    attempt >= policy.max_attempts || !policy.should_retry(&error, attempt)
                ),
            }
        }
    }
}
