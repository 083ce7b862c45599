//! The run over time: one [`Sample`] per second (throughput, latency percentiles of the
//! conversations that ended in it, errors, in-flight conversations, mailbox depths, the process's
//! RSS and CPU, and the server's when there is one), and the memory slope fitted to them.

use serde::Serialize;
use std::collections::BTreeMap;

/// Memory over the run: the slope of RSS against time, fitted by least squares over the samples
/// after the first fifth (warm-up).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Memory {
    /// This process's RSS slope, KiB per minute.
    pub slope_kib_per_min: f64,
    /// The server's RSS slope (from `--server-pid` or its `/metrics`), KiB per minute.
    pub server_slope_kib_per_min: Option<f64>,
    /// The limit (`--memory-slope-limit`), KiB per minute.
    pub limit_kib_per_min: f64,
    /// A slope above the limit.
    pub flagged: bool,
    /// Too few samples, or too short a span, for the slope to mean anything (see
    /// `series::MIN_SLOPE_SAMPLES` and `series::MIN_SLOPE_SPAN_S`): it is printed as "too short
    /// to judge", never flagged, and `load compare` does not compare it.
    pub too_short: bool,
    /// Samples the fit used.
    pub samples: usize,
    /// Seconds between the first and the last sample the fit used.
    pub span_s: f64,
    /// RSS at the first and last sample used, KiB (this process; the server's when measured).
    pub rss_first_last_kb: (u64, u64),
    /// The server's RSS at the first and last sample used, KiB.
    pub server_rss_first_last_kb: Option<(u64, u64)>,
}

/// One second of the run.
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct Sample {
    /// Seconds since the start (the end of the sampled second).
    pub t_s: f64,
    /// Conversations started in this second.
    pub started: u64,
    /// Conversations that ended in this second (any outcome).
    pub ended: u64,
    /// Of those, failed.
    pub failed: u64,
    /// Of those, abandoned.
    pub abandoned: u64,
    /// Arrivals in this second that started late.
    pub late: u64,
    /// Conversations ended per second.
    pub conversations_per_sec: f64,
    /// Node executions per second (the server's with `--target`).
    pub node_execs_per_sec: f64,
    /// Latency of the conversations that ended in this second, ms.
    pub p50_ms: f64,
    /// 90th percentile, ms.
    pub p90_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Conversations in flight at the sample.
    pub in_flight: u64,
    /// Tasks waiting in all node mailboxes at the sample (the server's with `--target`).
    pub mailbox_depth: u64,
    /// Non-empty mailboxes by node.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub mailboxes: BTreeMap<String, u64>,
    /// This process's resident memory, KiB.
    pub rss_kb: u64,
    /// This process's CPU over the second, % of one core.
    pub cpu_pct: f64,
    /// The server's resident memory, KiB (`--server-pid`, or `process_resident_memory_bytes` in
    /// its `/metrics`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_rss_kb: Option<u64>,
    /// The server's CPU over the second, % of one core.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_cpu_pct: Option<f64>,
}

/// Least-squares slope of `points` (x seconds, y KiB), in KiB per minute; 0 with fewer than two.
pub fn slope_per_min(points: &[(f64, f64)]) -> f64 {
    let n = points.len() as f64;
    if points.len() < 2 {
        return 0.0;
    }
    let mx = points.iter().map(|p| p.0).sum::<f64>() / n;
    let my = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mx).powi(2)).sum();
    if sxx == 0.0 {
        return 0.0;
    }
    let sxy: f64 = points.iter().map(|p| (p.0 - mx) * (p.1 - my)).sum();
    sxy / sxx * 60.0
}

/// A slope is judged only over at least this many samples (one a second): a few seconds of a
/// short run measure warm-up, not a leak.
pub const MIN_SLOPE_SAMPLES: usize = 30;

/// A slope is judged only when the samples it uses span at least this many seconds: a slope in
/// KiB per minute fitted to less than a minute extrapolates noise.
pub const MIN_SLOPE_SPAN_S: f64 = 60.0;

/// The memory figures of a series: slopes over the samples after the warm-up (`warmup_s`
/// seconds; by default the first fifth of the samples). Below [`MIN_SLOPE_SAMPLES`] samples or
/// [`MIN_SLOPE_SPAN_S`] seconds the slope is `too_short` to judge; otherwise it is flagged when
/// either slope is above the limit.
pub fn memory(series: &[Sample], limit_kib_per_min: f64, warmup_s: Option<f64>) -> Memory {
    let skip = match warmup_s {
        Some(w) => series.iter().take_while(|s| s.t_s < w).count(),
        None => series.len() / 5,
    };
    let used = &series[skip..];
    let own: Vec<(f64, f64)> = used.iter().map(|s| (s.t_s, s.rss_kb as f64)).collect();
    let server: Vec<(f64, u64)> = used
        .iter()
        .filter_map(|s| s.server_rss_kb.map(|r| (s.t_s, r)))
        .collect();
    let slope = slope_per_min(&own);
    let server_slope = (server.len() >= 2).then(|| {
        slope_per_min(
            &server
                .iter()
                .map(|(t, r)| (*t, *r as f64))
                .collect::<Vec<_>>(),
        )
    });
    let first_last = |v: &[u64]| {
        (
            v.first().copied().unwrap_or(0),
            v.last().copied().unwrap_or(0),
        )
    };
    let span_s = match (used.first(), used.last()) {
        (Some(a), Some(b)) => b.t_s - a.t_s,
        _ => 0.0,
    };
    let too_short = used.len() < MIN_SLOPE_SAMPLES || span_s < MIN_SLOPE_SPAN_S;
    Memory {
        slope_kib_per_min: slope,
        server_slope_kib_per_min: server_slope,
        limit_kib_per_min,
        flagged: !too_short
            && (slope > limit_kib_per_min || server_slope.is_some_and(|s| s > limit_kib_per_min)),
        too_short,
        samples: used.len(),
        span_s,
        rss_first_last_kb: first_last(&used.iter().map(|s| s.rss_kb).collect::<Vec<_>>()),
        server_rss_first_last_kb: (!server.is_empty())
            .then(|| first_last(&server.iter().map(|(_, r)| *r).collect::<Vec<_>>())),
    }
}

/// Resident memory (KiB) and CPU time (µs) of process `pid` from `/proc` (`None` off Linux or
/// when it is gone).
pub fn proc_usage(pid: u32) -> Option<(u64, u64)> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let rss = status
        .lines()
        .find(|l| l.starts_with("VmRSS:"))?
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()?;
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let fields: Vec<&str> = stat.rsplit_once(')')?.1.split_whitespace().collect();
    let ticks: u64 = fields.get(11)?.parse::<u64>().ok()? + fields.get(12)?.parse::<u64>().ok()?;
    Some((rss, ticks * 10_000))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample(t: f64, rss: u64) -> Sample {
        Sample {
            t_s: t,
            rss_kb: rss,
            ..Sample::default()
        }
    }

    #[test]
    fn a_leak_shows_as_a_slope_and_flat_memory_does_not() {
        // 100 KiB per second after a warm-up jump: 6000 KiB per minute.
        let leak: Vec<Sample> = (1..=100)
            .map(|t| sample(t as f64, if t <= 10 { 50_000 } else { 80_000 + t * 100 }))
            .collect();
        let m = memory(&leak, 1024.0, None);
        assert!(
            (m.slope_kib_per_min - 6000.0).abs() < 1e-6,
            "{}",
            m.slope_kib_per_min
        );
        assert!(m.flagged);
        assert_eq!(m.samples, 80);
        let flat: Vec<Sample> = (1..=100)
            .map(|t| sample(t as f64, 80_000 + (t % 3) * 10))
            .collect();
        let m = memory(&flat, 1024.0, None);
        assert!(m.slope_kib_per_min.abs() < 5.0 && !m.flagged);
        assert_eq!(slope_per_min(&[(1.0, 5.0)]), 0.0);
        let short = memory(&leak[..20], 1024.0, None);
        assert!(
            short.slope_kib_per_min > 1024.0 && !short.flagged && short.too_short,
            "too few samples to judge"
        );
        assert!(!m.too_short);
    }

    #[test]
    fn a_slope_over_less_than_a_minute_is_too_short_to_judge() {
        // 40 samples, one every half second: enough samples, 20 s of run.
        let fast: Vec<Sample> = (1..=40)
            .map(|t| sample(t as f64 * 0.5, 50_000 + t * 1000))
            .collect();
        let m = memory(&fast, 1024.0, Some(0.0));
        assert!(m.too_short && !m.flagged, "{m:?}");
        assert_eq!(m.samples, 40);
        // 4 samples of a short run: the slope the issue saw, now not judged.
        let four: Vec<Sample> = (1..=4)
            .map(|t| sample(t as f64, 50_000 + t * 9_000))
            .collect();
        let m = memory(&four, 1024.0, Some(0.0));
        assert!(m.too_short && !m.flagged);
        let text = crate::load::LoadReport {
            memory: Some(m),
            ..Default::default()
        }
        .to_text();
        assert!(
            text.contains("memory slope: too short to judge (4 samples over 3 s"),
            "{text}"
        );
        assert!(!text.contains("KiB/min"), "{text}");
    }

    #[test]
    fn this_process_is_readable_in_proc() {
        let (rss, _) = proc_usage(std::process::id()).expect("linux /proc");
        assert!(rss > 0);
        assert!(proc_usage(u32::MAX).is_none());
    }
}
