//! `load compare BASELINE.json CURRENT.json`: the differences between two reports, per figure
//! and per node, with the significant ones marked. A difference is significant when it is at
//! least `--significance` percent of the baseline *and* above the figure's noise floor (1 ms for
//! latencies, 0.1 ms per node, 1 MiB for peak memory, …), so a 40 % change of a 0.02 ms node is
//! not news. Reports are read as JSON, so reports of older versions compare on what they share.

use serde_json::Value;
use std::fmt::Write;
use std::path::PathBuf;

/// `load compare` arguments.
#[derive(clap::Args, Debug, Clone)]
pub struct CompareArgs {
    /// The baseline report (JSON from `--report`).
    pub baseline: PathBuf,
    /// The report to compare with it.
    pub current: PathBuf,
    /// A change smaller than this percentage of the baseline is not significant.
    #[arg(long, default_value_t = 10.0)]
    pub significance: f64,
    /// Also write the comparison as a self-contained HTML page here.
    #[arg(long)]
    pub html: Option<PathBuf>,
    /// Exit 1 when a figure got significantly worse.
    #[arg(long)]
    pub fail_on_regression: bool,
}

/// One compared figure.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The figure (`conversation_latency_ms.p99`, `node execute_step queue p99`).
    pub figure: String,
    /// Its baseline value.
    pub baseline: f64,
    /// Its current value.
    pub current: f64,
    /// The change in percent of the baseline (`None` when the baseline is 0).
    pub change_pct: Option<f64>,
    /// Whether the change is significant.
    pub significant: bool,
    /// Significant, and in the bad direction.
    pub worse: bool,
    /// False when either report says the figure cannot be judged (a memory slope over too short
    /// a run): never significant, never worse.
    pub comparable: bool,
}

impl Row {
    /// `worse`, `better` or empty.
    pub fn verdict(&self) -> &'static str {
        if !self.comparable {
            return "too short to judge";
        }
        match (self.significant, self.worse) {
            (true, true) => "WORSE",
            (true, false) => "better",
            _ => "",
        }
    }
}

/// Two reports compared.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Comparison {
    /// The baseline's graph and scenario.
    pub baseline: String,
    /// The current run's.
    pub current: String,
    /// The figures.
    pub rows: Vec<Row>,
    /// Two sweeps (`load sweep --report`): each one's conversation latency p99 (ms) against the
    /// arrival rate, labelled, for one chart with both curves.
    pub curves: Vec<(String, Vec<(f64, f64)>)>,
}

/// Whether a report is a `load sweep` report.
pub fn is_sweep(v: &Value) -> bool {
    v["steps"].is_array() && v.get("highest_rate_held").is_some()
}

/// Compares two sweep reports: the highest rate that held (higher is better), and at each rate
/// both ran, the latency p50/p99 and dropped arrivals; `curves` has each sweep's p99 against rate.
pub fn compare_sweeps(baseline: &Value, current: &Value, significance_pct: f64) -> Comparison {
    let steps = |v: &Value| -> Vec<Value> { v["steps"].as_array().cloned().unwrap_or_default() };
    let mut rows = Vec::new();
    let held = |v: &Value| v["highest_rate_held"].as_f64().unwrap_or(0.0);
    rows.push(row(
        "highest rate that held /s".into(),
        held(baseline),
        held(current),
        false,
        0.01,
        significance_pct,
    ));
    for b in steps(baseline) {
        let rate = b["rate"].as_f64().unwrap_or(0.0);
        let Some(c) = steps(current)
            .into_iter()
            .find(|c| c["rate"].as_f64() == Some(rate))
        else {
            continue;
        };
        for (name, path, floor) in [
            ("latency p50 ms", "latency_ms.p50", 1.0),
            ("latency p99 ms", "latency_ms.p99", 1.0),
            ("dropped", "dropped", 1.0),
        ] {
            if let (Some(x), Some(y)) = (at(&b, path), at(&c, path)) {
                rows.push(row(
                    format!("at {rate}/s: {name}"),
                    x,
                    y,
                    true,
                    floor,
                    significance_pct,
                ));
            }
        }
    }
    let curve = |v: &Value| -> (String, Vec<(f64, f64)>) {
        (
            format!("{} p99", v["graph"].as_str().unwrap_or("?")),
            steps(v)
                .iter()
                .filter_map(|s| Some((s["rate"].as_f64()?, at(s, "latency_ms.p99")?)))
                .collect(),
        )
    };
    let label = |v: &Value| {
        format!(
            "{} (sweep), highest rate that held {}",
            v["graph"].as_str().unwrap_or("?"),
            v["highest_rate_held"]
                .as_f64()
                .map_or("none".into(), |r| format!("{r}/s"))
        )
    };
    Comparison {
        baseline: label(baseline),
        current: label(current),
        rows,
        curves: vec![curve(baseline), curve(current)],
    }
}

impl Comparison {
    /// True when a figure got significantly worse.
    pub fn regressed(&self) -> bool {
        self.rows.iter().any(|r| r.worse)
    }

    /// A readable table.
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(t, "baseline: {}\ncurrent:  {}", self.baseline, self.current);
        let _ = writeln!(
            t,
            "  {:<44} {:>14} {:>14} {:>9}",
            "figure", "baseline", "current", "change"
        );
        for r in &self.rows {
            let _ = writeln!(
                t,
                "  {:<44} {:>14.3} {:>14.3} {:>9} {}",
                r.figure,
                r.baseline,
                r.current,
                r.change_pct.map_or("—".into(), |p| format!("{p:+.1}%")),
                r.verdict()
            );
        }
        let (worse, better) = (
            self.rows.iter().filter(|r| r.worse).count(),
            self.rows
                .iter()
                .filter(|r| r.significant && !r.worse)
                .count(),
        );
        let _ = writeln!(
            t,
            "{worse} significantly worse, {better} significantly better"
        );
        t
    }
}

fn at(v: &Value, path: &str) -> Option<f64> {
    path.split('.').try_fold(v, |v, k| v.get(k))?.as_f64()
}

/// What a report measured, in one line; a run stopped by Ctrl-C says so, since its figures cover
/// only the time until then.
fn label(v: &Value) -> String {
    let kind = v["scenario"]["kind"].as_str().unwrap_or("closed");
    format!(
        "{} ({kind}), {} conversations, {:.1} s{}",
        v["graph"].as_str().unwrap_or("?"),
        v["started"]
            .as_u64()
            .or(v["conversations"].as_u64())
            .unwrap_or(0),
        v["wall_ms"].as_f64().unwrap_or(0.0) / 1000.0,
        if v["interrupted"] == true {
            ", INTERRUPTED (Ctrl-C)"
        } else {
            ""
        }
    )
}

/// Compares `current` with `baseline` (two report JSON values).
pub fn compare(baseline: &Value, current: &Value, significance_pct: f64) -> Comparison {
    // (figure, path, lower is better, noise floor)
    let mut figures: Vec<(String, String, bool, f64)> = [
        ("conversations_per_sec", false, 0.01),
        ("node_execs_per_sec", false, 1.0),
        ("conversation_latency_ms.p50", true, 1.0),
        ("conversation_latency_ms.p90", true, 1.0),
        ("conversation_latency_ms.p99", true, 1.0),
        ("conversation_latency_ms.max", true, 1.0),
        ("lateness.lateness_ms.p99", true, 1.0),
        ("lateness.late", true, 1.0),
        ("overhead_us_per_node", true, 1.0),
        ("non_model_wall_us_per_node", true, 1.0),
        ("peak_rss_kb", true, 1024.0),
        ("memory.slope_kib_per_min", true, 64.0),
        ("steps.makespan_ms.p50", true, 1.0),
        ("steps.makespan_ms.p99", true, 1.0),
        ("steps.critical_path_ms.p50", true, 1.0),
        ("checkpoint_bytes", true, 1024.0),
        ("stream.ttfe_ms.p50", true, 1.0),
        ("stream.ttfe_ms.p99", true, 1.0),
        ("stream.ttft_ms.p50", true, 1.0),
        ("stream.ttft_ms.p99", true, 1.0),
        ("stream.itl_ms.p50", true, 0.1),
        ("stream.itl_ms.p99", true, 0.1),
        ("stream.event_gap_ms.p99", true, 1.0),
        ("stream.run_ms.p50", true, 1.0),
        ("stream.run_ms.p99", true, 1.0),
        ("stream.conversation_ttft_ms.p99", true, 1.0),
    ]
    .into_iter()
    .map(|(p, lower, floor)| (p.to_string(), p.to_string(), lower, floor))
    .collect();
    let graphs: std::collections::BTreeSet<String> = [baseline, current]
        .iter()
        .filter_map(|v| v["graphs"].as_object())
        .flat_map(|m| m.keys().cloned())
        .collect();
    for g in graphs {
        for p in ["p50", "p99"] {
            figures.push((
                format!("graph {g} latency {p} ms"),
                format!("graphs.{g}.conversation_latency_ms.{p}"),
                true,
                1.0,
            ));
        }
    }
    let nodes: std::collections::BTreeSet<String> = [baseline, current]
        .iter()
        .filter_map(|v| v["nodes"].as_object())
        .flat_map(|m| m.keys().cloned())
        .collect();
    for n in nodes {
        for (stat, path) in [
            ("work p50", "work.p50"),
            ("work p99", "work.p99"),
            ("queue p99", "queue.p99"),
        ] {
            figures.push((
                format!("node {n} {stat} ms"),
                format!("nodes.{n}.{path}"),
                true,
                0.1,
            ));
        }
    }
    let mut rows = Vec::new();
    let failed_share = |v: &Value| {
        let started = v["started"].as_f64().or(v["conversations"].as_f64())?;
        (started > 0.0).then(|| v["failed"].as_f64().unwrap_or(0.0) / started * 100.0)
    };
    if let (Some(b), Some(c)) = (failed_share(baseline), failed_share(current)) {
        rows.push(row("failed %".into(), b, c, true, 0.1, significance_pct));
    }
    // A streaming figure with no sample (a run without tokens has no time to first token) is
    // not a 0 ms figure.
    let sampled = |v: &Value, path: &str| {
        !path.starts_with("stream.")
            || path
                .rsplit_once('.')
                .and_then(|(d, _)| at(v, &format!("{d}.count")))
                .is_some_and(|n| n > 0.0)
    };
    for (figure, path, lower, floor) in figures {
        if !(sampled(baseline, &path) && sampled(current, &path)) {
            continue;
        }
        if let (Some(b), Some(c)) = (at(baseline, &path), at(current, &path)) {
            let mut r = row(figure, b, c, lower, floor, significance_pct);
            if path.starts_with("memory.")
                && (slope_too_short(baseline) || slope_too_short(current))
            {
                r.comparable = false;
                r.significant = false;
                r.worse = false;
            }
            rows.push(r);
        }
    }
    Comparison {
        baseline: label(baseline),
        current: label(current),
        rows,
        curves: Vec::new(),
    }
}

/// Whether a report's memory slope is too short to judge: its `too_short`, or for reports that
/// predate it, fewer samples than a slope needs.
fn slope_too_short(v: &Value) -> bool {
    let m = &v["memory"];
    m["too_short"].as_bool().unwrap_or_else(|| {
        m["samples"]
            .as_u64()
            .is_some_and(|n| (n as usize) < super::series::MIN_SLOPE_SAMPLES)
    })
}

fn row(figure: String, b: f64, c: f64, lower_better: bool, floor: f64, pct: f64) -> Row {
    let change_pct = (b != 0.0).then(|| (c - b) / b.abs() * 100.0);
    let significant = (c - b).abs() >= floor && change_pct.is_none_or(|p| p.abs() >= pct);
    let worse = significant && if lower_better { c > b } else { c < b };
    Row {
        figure,
        baseline: b,
        current: c,
        change_pct,
        significant,
        worse,
        comparable: true,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn two_sweeps_compare_their_knees_and_draw_both_curves() {
        let step = |rate: f64, p99: f64, dropped: u64| json!({"rate": rate, "latency_ms": {"p50": p99 / 2.0, "p99": p99}, "dropped": dropped});
        let a = json!({"graph": "chat @ a", "highest_rate_held": 4.0,
            "steps": [step(2.0, 100.0, 0), step(4.0, 200.0, 0), step(8.0, 900.0, 5)]});
        let b = json!({"graph": "research @ b", "highest_rate_held": 8.0,
            "steps": [step(2.0, 40.0, 0), step(4.0, 45.0, 0), step(8.0, 60.0, 0), step(16.0, 90.0, 0)]});
        assert!(is_sweep(&a) && !is_sweep(&json!({"conversation_latency_ms": {}})));
        let c = compare_sweeps(&a, &b, 10.0);
        let knee = &c.rows[0];
        assert_eq!((knee.baseline, knee.current), (4.0, 8.0));
        assert_eq!(knee.verdict(), "better", "a higher rate held");
        assert!(c
            .rows
            .iter()
            .any(|r| r.figure == "at 8/s: dropped" && r.verdict() == "better"));
        assert!(
            !c.rows.iter().any(|r| r.figure.starts_with("at 16/s")),
            "only rates both ran"
        );
        assert_eq!(c.curves.len(), 2);
        assert_eq!(c.curves[1].1.len(), 4);
        assert_eq!(c.curves[0].0, "chat @ a p99");
        assert!(c.baseline.contains("highest rate that held 4/s"));
    }

    #[test]
    fn an_interrupted_report_is_labelled_so() {
        let base = json!({"graph": "research", "started": 50, "wall_ms": 800.0});
        let mut cur = base.clone();
        cur["interrupted"] = json!(true);
        let c = compare(&base, &cur, 10.0);
        assert_eq!(c.baseline, "research (closed), 50 conversations, 0.8 s");
        assert_eq!(
            c.current,
            "research (closed), 50 conversations, 0.8 s, INTERRUPTED (Ctrl-C)"
        );
    }

    #[test]
    fn significant_changes_are_marked_by_direction() {
        let base = json!({
            "graph": "research", "started": 1000, "failed": 1, "wall_ms": 10000.0,
            "conversations_per_sec": 100.0,
            "conversation_latency_ms": {"p50": 100.0, "p99": 400.0},
            "nodes": {"execute_step": {"work": {"p50": 0.02, "p99": 5.0}, "queue": {"p99": 2.0}}},
            "graphs": {"research": {"conversation_latency_ms": {"p50": 100.0, "p99": 400.0}}}
        });
        let cur = json!({
            "graph": "research", "started": 1000, "failed": 1, "wall_ms": 10000.0,
            "conversations_per_sec": 120.0,
            "conversation_latency_ms": {"p50": 104.0, "p99": 600.0},
            "nodes": {"execute_step": {"work": {"p50": 0.03, "p99": 5.1}, "queue": {"p99": 20.0}},
                      "replan": {"work": {"p50": 1.0}}},
            "graphs": {"research": {"conversation_latency_ms": {"p50": 100.0, "p99": 300.0}}}
        });
        let c = compare(&base, &cur, 10.0);
        let get = |f: &str| c.rows.iter().find(|r| r.figure == f).unwrap().clone();
        let p99 = get("conversation_latency_ms.p99");
        assert!(p99.significant && p99.worse);
        assert_eq!(p99.change_pct, Some(50.0));
        let rate = get("conversations_per_sec");
        assert!(
            rate.significant && !rate.worse,
            "higher throughput is better"
        );
        assert!(
            !get("conversation_latency_ms.p50").significant,
            "4% is noise"
        );
        assert!(
            !get("node execute_step work p50 ms").significant,
            "below the floor"
        );
        assert!(get("node execute_step queue p99 ms").worse);
        assert!(!get("failed %").significant);
        assert!(
            c.rows.iter().all(|r| !r.figure.contains("replan")),
            "only in one report"
        );
        assert!(
            !get("graph research latency p99 ms").worse,
            "per entry of the mix"
        );
        assert!(get("graph research latency p99 ms").significant);
        assert!(c.regressed());
        let text = c.to_text();
        assert!(text.contains("WORSE") && text.contains("better"));
    }

    #[test]
    fn a_memory_slope_too_short_to_judge_is_not_compared() {
        let report = |slope: f64, samples: u64, too_short: Option<bool>| {
            let mut m = json!({"slope_kib_per_min": slope, "samples": samples});
            if let Some(t) = too_short {
                m["too_short"] = json!(t);
            }
            json!({"graph": "loop", "conversation_latency_ms": {"p50": 1.0}, "memory": m})
        };
        let slope = |c: &Comparison| {
            c.rows
                .iter()
                .find(|r| r.figure == "memory.slope_kib_per_min")
                .unwrap()
                .clone()
        };
        // A long baseline against a 4-sample run whose slope looks alarming.
        let c = compare(
            &report(10.0, 300, Some(false)),
            &report(557_833.3, 4, Some(true)),
            10.0,
        );
        let r = slope(&c);
        assert!(!r.comparable && !r.worse && !r.significant, "{r:?}");
        assert!(!c.regressed());
        assert!(
            c.to_text().contains("too short to judge"),
            "{}",
            c.to_text()
        );
        // A report without `too_short`: judged by its sample count.
        let c = compare(&report(10.0, 300, None), &report(557_833.3, 4, None), 10.0);
        assert!(!slope(&c).comparable && !c.regressed());
        // Two long runs still compare.
        let c = compare(
            &report(10.0, 300, Some(false)),
            &report(5_000.0, 300, Some(false)),
            10.0,
        );
        assert!(slope(&c).worse && c.regressed());
    }
}
