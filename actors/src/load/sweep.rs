//! `load sweep`: the knee of the curve. The same run (graph or assistant, target, people,
//! thresholds) is held at a constant arrival rate for a step, then at the next rate, until a step
//! does not hold: a threshold crossed, a conversation failed or was cut off, or an arrival was
//! dropped. Each step ends cleanly — arrivals stop, the conversations in flight get `--grace`,
//! then are cut off — and every step drops the arrivals that find `--max-in-flight` conversations
//! running (k6's `dropped_iterations`) rather than starting them late, so a rate the system cannot
//! take shows as dropped arrivals, not as a queue in the load generator. The report gives the
//! highest rate that held and every step's figures, and its HTML page draws latency against
//! rate.

use super::report::{Distribution, LoadReport, ThresholdResult};
use super::{LoadArgs, LoadError};
use serde::Serialize;
use std::fmt::Write;
use std::path::PathBuf;
use tokio::sync::watch;

/// `load sweep` arguments: the rates, how long each is held, and the run's flags.
#[derive(clap::Args, Debug, Clone, Default)]
pub struct SweepArgs {
    /// The rates to step through, in order (conversations per second): `1,2,4,8`.
    #[arg(long)]
    pub rates: Option<String>,
    /// The first rate (with `--to` and `--step` or `--factor`).
    #[arg(long)]
    pub from: Option<f64>,
    /// The last rate.
    #[arg(long)]
    pub to: Option<f64>,
    /// Each rate is the last plus this.
    #[arg(long)]
    pub step: Option<f64>,
    /// Each rate is the last times this (> 1).
    #[arg(long)]
    pub factor: Option<f64>,
    /// How long each rate is held (`10s`, the default).
    #[arg(long, default_value = "10s")]
    pub step_duration: String,
    /// The run's flags (`--target`, `--graph`/`--assistant`, `--threshold`, `--report`, …; not
    /// `--rate`, `--duration`, `--stages`, `--kind` or `--conversations`: the sweep sets those).
    #[command(flatten)]
    pub run: LoadArgs,
}

/// A `--from`/`--to` sweep tries at most this many rates.
pub const MAX_STEPS: usize = 100;

/// The rates `args` asks for.
pub fn rates(args: &SweepArgs) -> Result<Vec<f64>, LoadError> {
    let usage = |m: &str| LoadError::Usage(format!("load sweep: {m}"));
    let out: Vec<f64> = match (&args.rates, args.from, args.to) {
        (Some(list), None, None) => list
            .split(',')
            .map(str::trim)
            .filter(|r| !r.is_empty())
            .map(|r| {
                r.trim_end_matches("/s")
                    .parse::<f64>()
                    .map_err(|_| usage(&format!("`{r}` is not a rate")))
            })
            .collect::<Result<_, _>>()?,
        (None, Some(from), Some(to)) => {
            let mut out = vec![from];
            let next = |r: f64| match (args.step, args.factor) {
                (Some(s), None) if s > 0.0 => Ok(r + s),
                (None, Some(f)) if f > 1.0 => Ok(r * f),
                _ => Err(usage("give --step (> 0) or --factor (> 1), one of them")),
            };
            let mut r = next(from)?;
            while r <= to * (1.0 + 1e-9) && out.len() < MAX_STEPS {
                out.push(r);
                r = next(r)?;
            }
            out
        }
        _ => {
            return Err(usage(
                "give --rates R,R,… or --from R --to R with --step or --factor",
            ))
        }
    };
    if out.is_empty() {
        return Err(usage("no rate to try"));
    }
    if out.iter().any(|r| !(r.is_finite() && *r > 0.0)) {
        return Err(usage("every rate must be above 0"));
    }
    if out.windows(2).any(|w| w[1] <= w[0]) {
        return Err(usage("the rates must rise"));
    }
    Ok(out)
}

/// One rate of a sweep.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SweepStep {
    /// Conversations per second asked for.
    pub rate: f64,
    /// Whether the step held: thresholds passed, nothing failed, was cut off or dropped.
    pub held: bool,
    /// Why it did not hold.
    pub broke: Option<String>,
    /// Arrivals the step planned.
    pub planned: usize,
    /// Started.
    pub started: usize,
    /// Completed.
    pub completed: usize,
    /// Failed.
    pub failed: usize,
    /// Cut off at the step's end.
    pub cut_off: usize,
    /// Dropped: `--max-in-flight` conversations were running.
    pub dropped: usize,
    /// Started more than 10 ms after they were due.
    pub late: usize,
    /// Conversations ended per second.
    pub conversations_per_sec: f64,
    /// Conversation latency from the due time, ms.
    pub latency_ms: Distribution,
    /// Per run: time to first token, ms (streamed runs with tokens).
    pub ttft_ms: Option<Distribution>,
    /// Each threshold with its value.
    pub thresholds: Vec<ThresholdResult>,
}

impl SweepStep {
    /// A step's figures from its run's report.
    pub fn of(rate: f64, r: &LoadReport) -> Self {
        let mut broke = Vec::new();
        if let Some(t) = r.thresholds.iter().find(|t| !t.passed) {
            broke.push(format!(
                "threshold `{}` crossed (value {})",
                t.threshold,
                t.value.map_or("not measured".into(), |v| format!("{v:.3}"))
            ));
        }
        for (n, what) in [
            (r.failed, "failed"),
            (r.cut_off, "cut off"),
            (r.dropped, "dropped"),
        ] {
            if n > 0 {
                broke.push(format!("{n} {what}"));
            }
        }
        if r.interrupted {
            broke.push("interrupted (Ctrl-C)".into());
        }
        SweepStep {
            rate,
            held: broke.is_empty(),
            broke: (!broke.is_empty()).then(|| broke.join("; ")),
            planned: r.conversations,
            started: r.started,
            completed: r.completed,
            failed: r.failed,
            cut_off: r.cut_off,
            dropped: r.dropped,
            late: r.lateness.late,
            conversations_per_sec: r.conversations_per_sec,
            latency_ms: r.conversation_latency_ms.clone(),
            ttft_ms: r
                .stream
                .as_ref()
                .map(|s| s.ttft_ms.clone())
                .filter(|d| d.count > 0),
            thresholds: r.thresholds.clone(),
        }
    }
}

/// What a sweep found.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct SweepReport {
    /// What ran (the graph or assistant and target).
    pub graph: String,
    /// How long each rate was held, s.
    pub step_duration_s: f64,
    /// The highest rate that held (`None`: not even the first).
    pub highest_rate_held: Option<f64>,
    /// Dropped arrivals over every step.
    pub dropped: usize,
    /// Why the sweep stopped.
    pub stopped: String,
    /// Every step run, in order.
    pub steps: Vec<SweepStep>,
    /// The sweep was stopped by Ctrl-C.
    pub interrupted: bool,
}

impl SweepReport {
    /// A readable summary: the verdict, then a line per step.
    pub fn to_text(&self) -> String {
        let mut t = String::new();
        let _ = writeln!(
            t,
            "{}: sweep of {} rates held {:.0} s each; highest rate that held: {}; {} arrivals dropped; {}",
            self.graph,
            self.steps.len(),
            self.step_duration_s,
            self.highest_rate_held
                .map_or("none".into(), |r| format!("{r}/s")),
            self.dropped,
            self.stopped
        );
        let _ = writeln!(
            t,
            "  {:>8} {:>7} {:>9} {:>7} {:>7} {:>7} {:>10} {:>10} {:>10}  verdict",
            "rate/s",
            "started",
            "completed",
            "failed",
            "dropped",
            "late",
            "p50 ms",
            "p99 ms",
            "ttft p99"
        );
        for s in &self.steps {
            let _ = writeln!(
                t,
                "  {:>8} {:>7} {:>9} {:>7} {:>7} {:>7} {:>10.1} {:>10.1} {:>10}  {}",
                s.rate,
                s.started,
                s.completed,
                s.failed,
                s.dropped,
                s.late,
                s.latency_ms.p50,
                s.latency_ms.p99,
                s.ttft_ms
                    .as_ref()
                    .map_or("—".into(), |d| format!("{:.1}", d.p99)),
                s.broke.as_deref().unwrap_or("held")
            );
        }
        t
    }
}

/// Runs the sweep: each rate in turn as a constant-rate run of `args.run`, until one does not
/// hold. `interrupt` becoming true stops the step in flight (as Ctrl-C stops a run) and the sweep.
pub async fn run(
    args: &SweepArgs,
    interrupt: Option<watch::Receiver<bool>>,
) -> Result<SweepReport, LoadError> {
    let a = &args.run;
    for (given, flag) in [
        (a.rate.is_some(), "--rate"),
        (a.duration.is_some(), "--duration"),
        (a.stages.is_some(), "--stages"),
        (a.kind.is_some(), "--kind"),
        (a.conversations.is_some(), "--conversations"),
        (a.out.is_some(), "--out"),
    ] {
        if given {
            return Err(LoadError::Usage(format!(
                "load sweep sets the rate and duration of each step; leave out {flag}"
            )));
        }
    }
    let duration = super::dist::parse_duration(&args.step_duration)
        .map_err(|e| LoadError::Usage(format!("--step-duration: {e}")))?;
    let rates = rates(args)?;
    let report_path: Option<PathBuf> = a.report.clone();
    super::check_report_path(report_path.as_deref())?;
    let mut sweep = SweepReport {
        step_duration_s: duration.as_secs_f64(),
        ..SweepReport::default()
    };
    for rate in rates.iter().copied() {
        let step_args = LoadArgs {
            kind: Some("constant".into()),
            rate: Some(rate),
            duration: Some(args.step_duration.clone()),
            report: None,
            drop_when_full: true,
            quiet: true,
            ..a.clone()
        };
        let r = super::measure(&step_args, interrupt.clone()).await?;
        if sweep.graph.is_empty() {
            sweep.graph = r.graph.clone();
        }
        let step = SweepStep::of(rate, &r);
        sweep.dropped += step.dropped;
        let held = step.held;
        if held {
            sweep.highest_rate_held = Some(rate);
        }
        let why = step.broke.clone();
        sweep.steps.push(step);
        if r.interrupted {
            sweep.interrupted = true;
            sweep.stopped = format!("interrupted (Ctrl-C) at {rate}/s");
            break;
        }
        if !held {
            sweep.stopped = format!("{rate}/s did not hold: {}", why.unwrap_or_default());
            break;
        }
    }
    if sweep.stopped.is_empty() {
        sweep.stopped = format!(
            "every rate held, up to {}/s",
            rates.last().copied().unwrap_or(0.0)
        );
    }
    Ok(sweep)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(f: impl FnOnce(&mut SweepArgs)) -> SweepArgs {
        let mut a = SweepArgs::default();
        f(&mut a);
        a
    }

    #[test]
    fn rates_from_a_list_or_steps() {
        assert_eq!(
            rates(&args(|a| a.rates = Some("1, 2,4/s".into()))).unwrap(),
            [1.0, 2.0, 4.0]
        );
        let stepped = args(|a| {
            (a.from, a.to, a.step) = (Some(2.0), Some(8.0), Some(2.0));
        });
        assert_eq!(rates(&stepped).unwrap(), [2.0, 4.0, 6.0, 8.0]);
        let doubled = args(|a| {
            (a.from, a.to, a.factor) = (Some(1.0), Some(10.0), Some(2.0));
        });
        assert_eq!(rates(&doubled).unwrap(), [1.0, 2.0, 4.0, 8.0]);
        for bad in [
            args(|_| {}),
            args(|a| a.rates = Some("4,2".into())),
            args(|a| a.rates = Some("0".into())),
            args(|a| a.rates = Some("fast".into())),
            args(|a| (a.from, a.to) = (Some(1.0), Some(4.0))),
            args(|a| (a.from, a.to, a.factor) = (Some(1.0), Some(4.0), Some(1.0))),
        ] {
            assert!(rates(&bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_step_holds_only_without_crossed_thresholds_failures_cut_offs_or_drops() {
        let ok = LoadReport {
            conversations: 10,
            started: 10,
            completed: 10,
            ..LoadReport::default()
        };
        assert!(SweepStep::of(5.0, &ok).held);
        let dropped = LoadReport {
            dropped: 3,
            started: 7,
            ..ok.clone()
        };
        let s = SweepStep::of(5.0, &dropped);
        assert!(!s.held);
        assert_eq!(s.broke.as_deref(), Some("3 dropped"));
        let crossed = LoadReport {
            thresholds: vec![ThresholdResult {
                threshold: "conversation_p99<1ms".into(),
                value: Some(4.0),
                bound: 1.0,
                passed: false,
            }],
            failed: 1,
            ..ok
        };
        let s = SweepStep::of(5.0, &crossed);
        assert!(!s.held);
        assert!(s
            .broke
            .unwrap()
            .contains("conversation_p99<1ms` crossed (value 4.000); 1 failed"));
    }
}
