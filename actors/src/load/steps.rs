//! What parallel plan steps buy, per conversation: the execute phase's makespan (first step start
//! to last step end, per batch), its critical path (the longest dependency chain of the steps'
//! own times), the sum of all step times (what running them one by one would take), and what
//! supersteps would take with the same step times (steps grouped in waves by dependency depth,
//! each wave waiting for its slowest step, as a barrier makes it).

use serde::Serialize;
use std::collections::{BTreeMap, HashMap};
use std::time::Duration;

/// One executed step.
#[derive(Clone, Debug, PartialEq)]
pub struct StepRun {
    /// Its id in the plan.
    pub id: String,
    /// The batch (one per selection of runnable steps).
    pub batch: usize,
    /// When it started, from the conversation's start.
    pub start: Duration,
    /// Its own time.
    pub time: Duration,
}

/// A conversation's execute-phase figures, summed over its batches.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StepFigures {
    /// Steps executed.
    pub steps: usize,
    /// First start to last end, per batch, ms.
    pub makespan_ms: f64,
    /// Longest dependency chain of step times, per batch, ms.
    pub critical_path_ms: f64,
    /// All step times added, ms.
    pub sum_ms: f64,
    /// Superstep waves with the same step times (each wave its slowest step), ms.
    pub waves_ms: f64,
}

/// The figures of `runs`, with `deps` the plan's dependencies by step id (a dependency outside
/// a step's batch was done before the batch started and costs it nothing).
pub fn analyse(runs: &[StepRun], deps: &BTreeMap<String, Vec<String>>) -> StepFigures {
    let mut batches: BTreeMap<usize, Vec<&StepRun>> = BTreeMap::new();
    for r in runs {
        batches.entry(r.batch).or_default().push(r);
    }
    let mut f = StepFigures::default();
    for steps in batches.values() {
        let by_id: HashMap<&str, &StepRun> = steps.iter().map(|r| (r.id.as_str(), *r)).collect();
        let start = steps.iter().map(|r| r.start).min().unwrap_or_default();
        let end = steps
            .iter()
            .map(|r| r.start + r.time)
            .max()
            .unwrap_or_default();
        // Depth (for waves) and finish along the longest chain (for the critical path).
        let mut memo: HashMap<&str, (usize, Duration)> = HashMap::new();
        for r in steps {
            chain(&r.id, &by_id, deps, &mut memo, 0);
        }
        let mut waves: BTreeMap<usize, Duration> = BTreeMap::new();
        for (id, (depth, _)) in &memo {
            let t = by_id[id].time;
            let w = waves.entry(*depth).or_default();
            *w = (*w).max(t);
        }
        f.steps += steps.len();
        f.makespan_ms += ms(end.saturating_sub(start));
        f.critical_path_ms += ms(memo.values().map(|(_, c)| *c).max().unwrap_or_default());
        f.sum_ms += ms(steps.iter().map(|r| r.time).sum());
        f.waves_ms += ms(waves.values().sum());
    }
    f
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// (depth, longest chain ending with this step) of step `id`; a cycle (which a valid plan does
/// not have) is cut.
fn chain<'a>(
    id: &'a str,
    by_id: &HashMap<&'a str, &'a StepRun>,
    deps: &'a BTreeMap<String, Vec<String>>,
    memo: &mut HashMap<&'a str, (usize, Duration)>,
    guard: usize,
) -> (usize, Duration) {
    if let Some(v) = memo.get(id) {
        return *v;
    }
    let own = by_id[id].time;
    let mut best = (0usize, Duration::ZERO);
    if guard <= by_id.len() {
        for d in deps.get(id).into_iter().flatten() {
            if let Some((key, _)) = by_id.get_key_value(d.as_str()) {
                let (depth, c) = chain(key, by_id, deps, memo, guard + 1);
                best = (best.0.max(depth + 1), best.1.max(c));
            }
        }
    }
    let v = (best.0, best.1 + own);
    memo.insert(id, v);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(id: &str, batch: usize, start_ms: u64, time_ms: u64) -> StepRun {
        StepRun {
            id: id.into(),
            batch,
            start: Duration::from_millis(start_ms),
            time: Duration::from_millis(time_ms),
        }
    }

    #[test]
    fn makespan_critical_path_sum_and_waves() {
        // a (400) and b (100) in parallel; c (300) after b; d (50) after a and c.
        // Dependency-driven: c starts when b ends (100), d when c ends (400): makespan 450.
        let runs = vec![
            run("a", 0, 0, 400),
            run("b", 0, 0, 100),
            run("c", 0, 100, 300),
            run("d", 0, 400, 50),
        ];
        let deps = BTreeMap::from([
            ("c".to_string(), vec!["b".to_string()]),
            ("d".to_string(), vec!["a".to_string(), "c".to_string()]),
        ]);
        let f = analyse(&runs, &deps);
        assert_eq!(f.steps, 4);
        assert_eq!(f.makespan_ms, 450.0);
        assert_eq!(f.critical_path_ms, 450.0, "a→d is 450, b→c→d is 450");
        assert_eq!(f.sum_ms, 850.0);
        // Waves: {a, b} 400, {c} 300, {d} 50.
        assert_eq!(f.waves_ms, 750.0);
    }

    #[test]
    fn batches_add_up_and_outside_dependencies_are_free() {
        let runs = vec![run("a", 0, 0, 100), run("b", 1, 500, 200)];
        let deps = BTreeMap::from([("b".to_string(), vec!["a".to_string()])]);
        let f = analyse(&runs, &deps);
        assert_eq!(f.makespan_ms, 300.0);
        assert_eq!(f.critical_path_ms, 300.0);
        assert_eq!(f.waves_ms, 300.0);
        assert_eq!(analyse(&[], &deps), StepFigures::default());
        // A cycle does not hang.
        let cyc = BTreeMap::from([
            ("a".to_string(), vec!["b".to_string()]),
            ("b".to_string(), vec!["a".to_string()]),
        ]);
        let two = vec![run("a", 0, 0, 10), run("b", 0, 0, 10)];
        assert!(analyse(&two, &cyc).critical_path_ms >= 10.0);
    }
}
