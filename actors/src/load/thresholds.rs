//! Thresholds: `--threshold 'conversation_p99<5s'`, `'failed<0.1%'`,
//! `'node:execute_step:queue_p99<200ms'` — a pass/fail a CI job can gate on. A crossed threshold
//! makes the run exit 1; the report lists each with its value.
//!
//! Metrics: `conversation_{p50,p90,p99,max,mean}` and `lateness_{p50,p99,max}` (durations),
//! `failed`, `abandoned`, `late`, `cut_off`, `dropped` (counts, or shares with `%`: of conversations
//! ended, of arrivals for `late` and `dropped`), `conversations_per_sec`, `node_execs_per_sec` (rates),
//! `node:NAME:{p50,p90,p99,max,queue_p50,queue_p99,queue_max}` (durations), `memory_slope`
//! (KiB per minute; `MiB/min` accepted), `peak_rss` (`KiB`, `MiB`, `GiB`; a bare number is KiB),
//! `makespan_p50`, `makespan_p99` (durations of the execute phase), and over HTTP each run's
//! streaming latencies `{ttfe,ttft,itl,event_gap,run,conversation_ttfe,conversation_ttft}_{p50,p90,
//! p99,max,mean}` (durations: time to first event, to first token, between tokens, between events,
//! a run end to end, a conversation's first event and first token). `memory_slope` is the larger of
//! this process's and the server's slope.

use super::dist::parse_duration;
use super::report::LoadReport;
pub use super::report::ThresholdResult;
use serde::Serialize;

/// A comparison.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Op {
    /// `<`
    #[serde(rename = "<")]
    Lt,
    /// `<=`
    #[serde(rename = "<=")]
    Le,
    /// `>`
    #[serde(rename = ">")]
    Gt,
    /// `>=`
    #[serde(rename = ">=")]
    Ge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Unit {
    Duration,
    Count,
    Rate,
    Kib,
    KibPerMin,
}

/// A parsed threshold.
#[derive(Clone, Debug, PartialEq)]
pub struct Threshold {
    /// As written.
    pub text: String,
    /// The metric's name.
    pub metric: String,
    /// The comparison that must hold.
    pub op: Op,
    /// The bound, in the metric's unit (ms for durations; a fraction for shares).
    pub bound: f64,
    /// The bound is a share of conversations (`%`).
    pub share: bool,
    unit: Unit,
}

/// The streaming figures a threshold can name: `ttft_p99` → the runs' time to first token.
const STREAM_FIGURES: [&str; 7] = [
    "conversation_ttfe",
    "conversation_ttft",
    "ttfe",
    "ttft",
    "itl",
    "event_gap",
    "run",
];

/// `ttft_p99` → `("ttft", "p99")` when it names a streaming figure and a statistic.
fn stream_metric(metric: &str) -> Option<(&'static str, &str)> {
    let (figure, stat) = metric.rsplit_once('_')?;
    let figure = STREAM_FIGURES.iter().find(|f| **f == figure)?;
    matches!(stat, "p50" | "p90" | "p99" | "max" | "mean").then_some((figure, stat))
}

fn unit_of(metric: &str) -> Option<Unit> {
    if stream_metric(metric).is_some() {
        return Some(Unit::Duration);
    }
    if let Some(rest) = metric.strip_prefix("node:") {
        let (name, stat) = rest.rsplit_once(':')?;
        let known = [
            "p50",
            "p90",
            "p99",
            "max",
            "queue_p50",
            "queue_p90",
            "queue_p99",
            "queue_max",
        ];
        return (!name.is_empty() && known.contains(&stat)).then_some(Unit::Duration);
    }
    Some(match metric {
        "conversation_p50" | "conversation_p90" | "conversation_p99" | "conversation_max"
        | "conversation_mean" | "lateness_p50" | "lateness_p99" | "lateness_max"
        | "makespan_p50" | "makespan_p99" => Unit::Duration,
        "failed" | "abandoned" | "late" | "cut_off" | "dropped" => Unit::Count,
        "conversations_per_sec" | "node_execs_per_sec" => Unit::Rate,
        "peak_rss" => Unit::Kib,
        "memory_slope" => Unit::KibPerMin,
        _ => return None,
    })
}

impl std::str::FromStr for Threshold {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let text = s.trim();
        let pos = text
            .find(['<', '>'])
            .ok_or_else(|| format!("threshold `{s}`: expected METRIC<VALUE or METRIC>VALUE"))?;
        let metric = text[..pos].trim().to_string();
        let rest = &text[pos..];
        let (op, value) = if let Some(v) = rest.strip_prefix("<=") {
            (Op::Le, v)
        } else if let Some(v) = rest.strip_prefix(">=") {
            (Op::Ge, v)
        } else if let Some(v) = rest.strip_prefix('<') {
            (Op::Lt, v)
        } else {
            (Op::Gt, &rest[1..])
        };
        let unit = unit_of(&metric).ok_or_else(|| {
            format!("threshold `{s}`: unknown metric `{metric}` (see docs/load.md#thresholds)")
        })?;
        let value = value.trim();
        let bad = |what: &str| format!("threshold `{s}`: `{value}` is not {what}");
        let number = |v: &str| -> Result<f64, String> {
            v.trim()
                .parse::<f64>()
                .ok()
                .filter(|x| x.is_finite())
                .ok_or_else(|| bad("a number"))
        };
        let (bound, share) = match unit {
            Unit::Duration => (
                parse_duration(value)
                    .map_err(|_| bad("a duration like 200ms or 5s"))?
                    .as_secs_f64()
                    * 1000.0,
                false,
            ),
            Unit::Count => match value.strip_suffix('%') {
                Some(p) => (number(p)? / 100.0, true),
                None => (number(value)?, false),
            },
            Unit::Rate => (number(value.trim_end_matches("/s"))?, false),
            Unit::Kib => {
                let (n, mult) = split_memory(value);
                (number(n)? * mult, false)
            }
            Unit::KibPerMin => {
                let v = value.trim_end_matches("/min");
                let (n, mult) = split_memory(v);
                (number(n)? * mult, false)
            }
        };
        Ok(Threshold {
            text: text.to_string(),
            metric,
            op,
            bound,
            share,
            unit,
        })
    }
}

fn split_memory(v: &str) -> (&str, f64) {
    for (suffix, mult) in [
        ("GiB", 1024.0 * 1024.0),
        ("MiB", 1024.0),
        ("KiB", 1.0),
        ("GB", 1e9 / 1024.0),
        ("MB", 1e6 / 1024.0),
        ("KB", 1000.0 / 1024.0),
    ] {
        if let Some(n) = v.strip_suffix(suffix) {
            return (n, mult);
        }
    }
    (v, 1.0)
}

impl Threshold {
    /// True when the metric can be judged before the run ends (the memory slope needs the whole
    /// series).
    pub fn judged_live(&self) -> bool {
        self.unit != Unit::KibPerMin
    }

    /// The metric's value in `r` (a fraction for shares), `None` when not measured.
    pub fn value(&self, r: &LoadReport) -> Option<f64> {
        let m = self.metric.as_str();
        if let Some(rest) = m.strip_prefix("node:") {
            let (name, stat) = rest.rsplit_once(':')?;
            let n = r.nodes.get(name)?;
            return Some(match stat {
                "p50" => n.work.p50,
                "p90" => n.work.p90,
                "p99" => n.work.p99,
                "max" => n.work.max,
                "queue_p50" => n.queue.p50,
                "queue_p90" => n.queue.p90,
                "queue_p99" => n.queue.p99,
                _ => n.queue.max,
            });
        }
        if let Some((figure, stat)) = stream_metric(m) {
            let s = r.stream.as_ref()?;
            let d = match figure {
                "conversation_ttfe" => &s.conversation_ttfe_ms,
                "conversation_ttft" => &s.conversation_ttft_ms,
                "ttfe" => &s.ttfe_ms,
                "ttft" => &s.ttft_ms,
                "itl" => &s.itl_ms,
                "event_gap" => &s.event_gap_ms,
                _ => &s.run_ms,
            };
            if d.count == 0 {
                return None;
            }
            return Some(match stat {
                "p50" => d.p50,
                "p90" => d.p90,
                "p99" => d.p99,
                "max" => d.max,
                _ => d.mean,
            });
        }
        let c = &r.conversation_latency_ms;
        let ended = (r.completed + r.failed + r.abandoned + r.interrupted_left + r.cut_off) as f64;
        let count = |n: usize, of: f64| {
            if self.share {
                if of > 0.0 {
                    n as f64 / of
                } else {
                    0.0
                }
            } else {
                n as f64
            }
        };
        Some(match m {
            "conversation_p50" => c.p50,
            "conversation_p90" => c.p90,
            "conversation_p99" => c.p99,
            "conversation_max" => c.max,
            "conversation_mean" => c.mean,
            "lateness_p50" => r.lateness.lateness_ms.p50,
            "lateness_p99" => r.lateness.lateness_ms.p99,
            "lateness_max" => r.lateness.lateness_ms.max,
            "makespan_p50" => r.steps.as_ref()?.makespan_ms.p50,
            "makespan_p99" => r.steps.as_ref()?.makespan_ms.p99,
            "failed" => count(r.failed, ended),
            "abandoned" => count(r.abandoned, ended),
            "cut_off" => count(r.cut_off, ended),
            "late" => count(r.lateness.late, r.started as f64),
            "dropped" => count(r.dropped, (r.started + r.dropped) as f64),
            "conversations_per_sec" => r.conversations_per_sec,
            "node_execs_per_sec" => r.node_execs_per_sec,
            "peak_rss" => r.peak_rss_kb as f64,
            "memory_slope" => {
                let m = r.memory.as_ref()?;
                m.server_slope_kib_per_min
                    .map_or(m.slope_kib_per_min, |s| s.max(m.slope_kib_per_min))
            }
            _ => return None,
        })
    }

    /// Judges the threshold against `r`.
    pub fn judge(&self, r: &LoadReport) -> ThresholdResult {
        let value = self.value(r);
        let passed = value.is_some_and(|v| match self.op {
            Op::Lt => v < self.bound,
            Op::Le => v <= self.bound,
            Op::Gt => v > self.bound,
            Op::Ge => v >= self.bound,
        });
        let scale = if self.share { 100.0 } else { 1.0 };
        ThresholdResult {
            threshold: self.text.clone(),
            value: value.map(|v| v * scale),
            bound: self.bound * scale,
            passed,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::load::report::{Distribution, NodeFigures};

    #[test]
    fn thresholds_parse_and_judge() {
        let mut r = LoadReport {
            started: 1000,
            completed: 998,
            failed: 2,
            conversation_latency_ms: Distribution {
                p99: 4200.0,
                ..Distribution::default()
            },
            ..LoadReport::default()
        };
        r.nodes.insert(
            "execute_step".into(),
            NodeFigures {
                queue: Distribution {
                    p99: 250.0,
                    ..Distribution::default()
                },
                ..NodeFigures::default()
            },
        );
        let judge = |t: &str| t.parse::<Threshold>().unwrap().judge(&r);
        let p99 = judge("conversation_p99<5s");
        assert!(p99.passed);
        assert_eq!(p99.value, Some(4200.0));
        assert_eq!(p99.bound, 5000.0);
        let failed = judge("failed<0.1%");
        assert!(!failed.passed, "0.2% failed");
        assert!((failed.value.unwrap() - 0.2).abs() < 1e-9);
        assert!(judge("failed<=2").passed);
        assert!(!judge("node:execute_step:queue_p99<200ms").passed);
        assert!(judge("node:execute_step:queue_p99<1s").passed);
        let missing = judge("node:nope:p99<1s");
        assert!(!missing.passed && missing.value.is_none());
        assert!(judge("conversations_per_sec>=0").passed);
        assert_eq!(
            "peak_rss<2GiB".parse::<Threshold>().unwrap().bound,
            2.0 * 1024.0 * 1024.0
        );
        assert_eq!(
            "memory_slope<1MiB/min".parse::<Threshold>().unwrap().bound,
            1024.0
        );
        let mut r = r.clone();
        r.memory = Some(crate::load::report::Memory {
            slope_kib_per_min: 10.0,
            server_slope_kib_per_min: Some(500.0),
            ..Default::default()
        });
        let slope = "memory_slope<256KiB/min"
            .parse::<Threshold>()
            .unwrap()
            .judge(&r);
        assert!(!slope.passed, "the server's slope counts");
        assert_eq!(slope.value, Some(500.0));
        let mut streamed = r.clone();
        streamed.stream = Some(crate::load::report::StreamReport {
            ttft_ms: Distribution {
                count: 10,
                p99: 700.0,
                ..Distribution::default()
            },
            itl_ms: Distribution {
                count: 90,
                p50: 0.4,
                ..Distribution::default()
            },
            ..Default::default()
        });
        let judge_streamed = |t: &str| t.parse::<Threshold>().unwrap().judge(&streamed);
        assert!(judge_streamed("ttft_p99<800ms").passed);
        assert!(!judge_streamed("ttft_p99<1us").passed);
        assert!(judge_streamed("itl_p50<1ms").passed);
        let unmeasured = judge_streamed("conversation_ttft_p50<1s");
        assert!(
            !unmeasured.passed && unmeasured.value.is_none(),
            "no sample: not measured"
        );
        assert!(
            !judge("ttft_p99<800ms").passed,
            "a run that did not stream fails it"
        );
        for bad in [
            "ttft_p98<1s",
            "tokens_p99<1s",
            "conversation_p99",
            "latency<5s",
            "conversation_p99<fast",
            "failed<lots",
            "node:x:p98<1s",
            "node::p99<1s",
        ] {
            assert!(bad.parse::<Threshold>().is_err(), "{bad}");
        }
    }
}
