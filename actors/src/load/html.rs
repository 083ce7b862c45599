//! The self-contained HTML pages (inline SVG, no scripts, no CDN): a run's report — summary,
//! thresholds, the time series, per-node and execute-phase charts — and a comparison of two runs.

use super::compare::Comparison;
use super::report::LoadReport;
use super::sweep::SweepReport;
use std::fmt::Write;

const COLORS: [&str; 4] = ["#36c", "#c33", "#393", "#a6a"];

/// Escapes text for HTML.
pub fn escape(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
}

fn page(title: &str, body: &str) -> String {
    format!(
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>{t}</title>\
         <style>body{{font-family:sans-serif;margin:2em;max-width:75em}}table{{border-collapse:collapse}}\
         td,th{{border:1px solid #ccc;padding:.2em .6em;text-align:right}}th:first-child,td:first-child{{text-align:left}}\
         .bad{{color:#b00;font-weight:bold}}.good{{color:#070}}figure{{display:inline-block;margin:.5em}}\
         figcaption{{font-size:90%}}</style></head><body><h1>{t}</h1>{body}</body></html>",
        t = escape(title)
    )
}

/// Up to this many points of a series carry a hover value (a long soak keeps the page light).
const MAX_HOVER_POINTS: usize = 400;

/// Round tick positions from 0 to at least `max`: steps of 1, 2 or 5 times a power of ten, about
/// `want` of them.
pub fn ticks(max: f64, want: usize) -> Vec<f64> {
    let max = if max.is_finite() && max > 0.0 {
        max
    } else {
        1.0
    };
    let raw = max / want.max(1) as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .into_iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(10.0 * mag);
    let n = (max / step).ceil() as usize;
    (0..=n.max(1)).map(|i| i as f64 * step).collect()
}

/// A line chart of one or more series sharing an axis: axes with round ticks and gridlines, the
/// unit on the value axis, seconds on the time axis, a legend above the plot, and each point's
/// value on hover (an SVG `<title>`).
pub fn line_chart(title: &str, unit: &str, lines: &[(&str, Vec<(f64, f64)>)]) -> String {
    xy_chart(title, unit, ("time since the start, s", "s"), lines)
}

/// A line chart as [`line_chart`] draws it, over any horizontal axis: `x` is its label and the
/// unit a hover names (`("arrival rate, conversations per second", "/s")`).
pub fn xy_chart(
    title: &str,
    unit: &str,
    x: (&str, &str),
    lines: &[(&str, Vec<(f64, f64)>)],
) -> String {
    let (x_label, x_unit) = x;
    let (w, h, left, top, bottom) = (520.0, 170.0, 64.0, 26.0, 34.0);
    let max_x = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .fold(0.0f64, f64::max);
    let max_y = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(0.0f64, f64::max);
    let yt = ticks(max_y, 5);
    let xt = ticks(max_x, 6);
    let (y_top, x_end) = (
        yt.last().copied().unwrap_or(1.0),
        xt.last().copied().unwrap_or(1.0),
    );
    let px = |x: f64| left + x / x_end * w;
    let py = |y: f64| top + h - y / y_top * h;
    let mut svg = format!(
        "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\" font-family=\"sans-serif\">",
        left + w + 16.0,
        top + h + bottom
    );
    for y in &yt {
        let _ = write!(
            svg,
            "<line x1=\"{left}\" x2=\"{x2}\" y1=\"{yy:.1}\" y2=\"{yy:.1}\" stroke=\"#e3e3e3\"/>\
             <text x=\"{tx}\" y=\"{ty:.1}\" font-size=\"10\" text-anchor=\"end\">{label}</text>",
            x2 = left + w,
            yy = py(*y),
            tx = left - 5.0,
            ty = py(*y) + 3.5,
            label = short(*y)
        );
    }
    for x in &xt {
        let _ = write!(
            svg,
            "<line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{top}\" y2=\"{y2}\" stroke=\"#f0f0f0\"/>\
             <line x1=\"{xx:.1}\" x2=\"{xx:.1}\" y1=\"{y2}\" y2=\"{y3}\" stroke=\"#666\"/>\
             <text x=\"{xx:.1}\" y=\"{ty}\" font-size=\"10\" text-anchor=\"middle\">{label}</text>",
            xx = px(*x),
            y2 = top + h,
            y3 = top + h + 4.0,
            ty = top + h + 15.0,
            label = short(*x)
        );
    }
    let _ = write!(
        svg,
        "<line x1=\"{left}\" y1=\"{top}\" x2=\"{left}\" y2=\"{b}\" stroke=\"#666\"/>\
         <line x1=\"{left}\" y1=\"{b}\" x2=\"{r}\" y2=\"{b}\" stroke=\"#666\"/>\
         <text x=\"{mx}\" y=\"{ly}\" font-size=\"10\" text-anchor=\"middle\">{x_label}</text>\
         <text x=\"12\" y=\"{my}\" font-size=\"10\" text-anchor=\"middle\" transform=\"rotate(-90 12 {my})\">{unit}</text>",
        b = top + h,
        r = left + w,
        mx = left + w / 2.0,
        ly = top + h + 29.0,
        my = top + h / 2.0,
        unit = escape(unit),
        x_label = escape(x_label)
    );
    let mut legend_x = left;
    for (i, (label, points)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<String> = points
            .iter()
            .map(|(x, y)| format!("{:.1},{:.1}", px(*x), py(*y)))
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\
             <rect x=\"{legend_x}\" y=\"6\" width=\"14\" height=\"4\" fill=\"{color}\"/>\
             <text x=\"{tx}\" y=\"12\" font-size=\"11\">{}</text>",
            pts.join(" "),
            escape(label),
            tx = legend_x + 18.0
        );
        legend_x += 30.0 + 6.5 * label.chars().count() as f64;
        let every = points.len().div_ceil(MAX_HOVER_POINTS).max(1);
        for (x, y) in points.iter().step_by(every) {
            let _ = write!(
                svg,
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"3\" fill=\"{color}\" fill-opacity=\"0.01\"><title>{}: {} {} at {} {}</title></circle>",
                px(*x),
                py(*y),
                escape(label),
                number(*y),
                escape(unit),
                if x_unit == "s" { format!("{x:.0}") } else { number(*x) },
                escape(x_unit)
            );
        }
    }
    let _ = write!(
        svg,
        "</svg><figcaption>{}</figcaption></figure>",
        escape(title)
    );
    svg
}

/// A value in a hover: whole from 100 up, else up to two decimals.
fn number(v: f64) -> String {
    if v.abs() >= 100.0 {
        format!("{v:.0}")
    } else {
        let t = format!("{v:.2}");
        t.trim_end_matches('0').trim_end_matches('.').to_string()
    }
}

/// A tick label: `250`, `1.5`, `12k`, `1.2M`.
fn short(v: f64) -> String {
    let a = v.abs();
    let trim = |t: String| {
        if t.contains('.') {
            t.trim_end_matches('0').trim_end_matches('.').to_string()
        } else {
            t
        }
    };
    if a >= 1e6 {
        format!("{}M", trim(format!("{:.1}", v / 1e6)))
    } else if a >= 1e4 {
        format!("{}k", trim(format!("{:.1}", v / 1e3)))
    } else if a >= 10.0 || a == 0.0 {
        format!("{v:.0}")
    } else {
        trim(format!("{v:.2}"))
    }
}

/// Horizontal bars: a bar to the first value, a whisker to the second.
pub fn bar_chart(title: &str, rows: &[(String, f64, f64)]) -> String {
    let max = rows.iter().map(|r| r.2.max(r.1)).fold(1e-9f64, f64::max);
    let (w, row_h, left) = (560.0, 20.0, 190.0);
    let mut svg = format!(
        "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">",
        w + left + 120.0,
        row_h * rows.len() as f64 + 6.0
    );
    for (i, (name, a, b)) in rows.iter().enumerate() {
        let y = i as f64 * row_h + 3.0;
        let _ = write!(
            svg,
            "<text x=\"0\" y=\"{ty}\" font-size=\"12\">{name}</text>\
             <rect x=\"{left}\" y=\"{y}\" width=\"{pa:.1}\" height=\"13\" fill=\"#4a7\"><title>{name}: {a:.2} / {b:.2}</title></rect>\
             <line x1=\"{xa:.1}\" x2=\"{xb:.1}\" y1=\"{m}\" y2=\"{m}\" stroke=\"#333\"/>\
             <text x=\"{t:.1}\" y=\"{ty}\" font-size=\"11\">{a:.2} / {b:.2}</text>",
            ty = y + 11.0,
            name = escape(name),
            pa = a / max * w,
            xa = left + a / max * w,
            xb = left + b / max * w,
            m = y + 6.5,
            t = left + 5.0 + b.max(*a) / max * w,
        );
    }
    let _ = write!(
        svg,
        "</svg><figcaption>{}</figcaption></figure>",
        escape(title)
    );
    svg
}

/// The report page.
pub fn report(r: &LoadReport) -> String {
    let mut b = String::new();
    if r.interrupted {
        b.push_str(
            "<p class=\"bad\">Interrupted (Ctrl-C): these figures cover the run until then.</p>",
        );
    }
    let _ = write!(b, "<pre>{}</pre>", escape(&r.to_text()));
    if !r.thresholds.is_empty() {
        b.push_str("<h2>Thresholds</h2><table><tr><th>threshold</th><th>value</th><th>bound</th><th></th></tr>");
        for t in &r.thresholds {
            let _ = write!(
                b,
                "<tr><td>{}</td><td>{}</td><td>{:.3}</td><td class=\"{}\">{}</td></tr>",
                escape(&t.threshold),
                t.value.map_or("—".into(), |v| format!("{v:.3}")),
                t.bound,
                if t.passed { "good" } else { "bad" },
                if t.passed { "passed" } else { "crossed" }
            );
        }
        b.push_str("</table>");
    }
    if let Some(st) = &r.stream {
        let _ = write!(
            b,
            "<h2>Runs as the client saw them</h2><p>{} runs ({} streamed; {} events, {} tokens); ms from each run's due time</p>\
             <table><tr><th>figure</th><th>count</th><th>p50</th><th>p90</th><th>p99</th><th>max</th></tr>",
            st.runs, st.streamed_runs, st.events, st.tokens
        );
        for (name, d) in [
            ("time to first event (ttfe)", &st.ttfe_ms),
            ("time to first token (ttft)", &st.ttft_ms),
            ("inter-token latency (itl)", &st.itl_ms),
            ("between events (event_gap)", &st.event_gap_ms),
            ("run end to end (run)", &st.run_ms),
            (
                "conversation first event (conversation_ttfe)",
                &st.conversation_ttfe_ms,
            ),
            (
                "conversation first token (conversation_ttft)",
                &st.conversation_ttft_ms,
            ),
        ] {
            let _ = write!(
                b,
                "<tr><td>{name}</td><td>{}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td><td>{:.2}</td></tr>",
                d.count, d.p50, d.p90, d.p99, d.max
            );
        }
        b.push_str("</table>");
    }
    let s = &r.series;
    let pick = |f: &dyn Fn(&super::series::Sample) -> f64| -> Vec<(f64, f64)> {
        s.iter().map(|x| (x.t_s, f(x))).collect()
    };
    b.push_str("<h2>Over time (one sample per second)</h2>");
    b.push_str(&line_chart(
        "conversations ended per second",
        "conversations per second",
        &[
            ("conversations/s", pick(&|x| x.conversations_per_sec)),
            ("started/s", pick(&|x| x.started as f64)),
        ],
    ));
    b.push_str(&line_chart(
        "node executions per second",
        "node executions per second",
        &[("node executions/s", pick(&|x| x.node_execs_per_sec))],
    ));
    b.push_str(&line_chart(
        "latency of the conversations that ended in each second, ms",
        "ms",
        &[("p50", pick(&|x| x.p50_ms)), ("p99", pick(&|x| x.p99_ms))],
    ));
    b.push_str(&line_chart(
        "in flight and waiting in mailboxes",
        "conversations / tasks",
        &[
            ("in flight", pick(&|x| x.in_flight as f64)),
            ("mailboxes", pick(&|x| x.mailbox_depth as f64)),
        ],
    ));
    b.push_str(&line_chart(
        "failed, abandoned and late per second",
        "conversations per second",
        &[
            ("failed", pick(&|x| x.failed as f64)),
            ("abandoned", pick(&|x| x.abandoned as f64)),
            ("late", pick(&|x| x.late as f64)),
        ],
    ));
    let mut mem = vec![("load RSS KiB", pick(&|x| x.rss_kb as f64))];
    if s.iter().any(|x| x.server_rss_kb.is_some()) {
        mem.push((
            "server RSS KiB",
            pick(&|x| x.server_rss_kb.unwrap_or(0) as f64),
        ));
    }
    b.push_str(&line_chart("resident memory, KiB", "KiB", &mem));
    let mut cpu = vec![("load CPU %", pick(&|x| x.cpu_pct))];
    if s.iter().any(|x| x.server_cpu_pct.is_some()) {
        cpu.push(("server CPU %", pick(&|x| x.server_cpu_pct.unwrap_or(0.0))));
    }
    b.push_str(&line_chart("CPU, % of one core", "% of one core", &cpu));
    if !r.nodes.is_empty() {
        b.push_str("<h2>Per node</h2>");
        let work: Vec<(String, f64, f64)> = r
            .nodes
            .iter()
            .map(|(n, f)| (n.clone(), f.work.p50, f.work.p99))
            .collect();
        b.push_str(&bar_chart("work time, ms (bar p50, whisker p99)", &work));
        let queue: Vec<(String, f64, f64)> = r
            .nodes
            .iter()
            .map(|(n, f)| (n.clone(), f.queue.p50, f.queue.p99))
            .collect();
        b.push_str(&bar_chart(
            "mailbox wait, ms (bar p50, whisker p99)",
            &queue,
        ));
    }
    if let Some(st) = &r.steps {
        b.push_str("<h2>Execute phase</h2>");
        let rows = vec![
            (
                "makespan".to_string(),
                st.makespan_ms.p50,
                st.makespan_ms.p99,
            ),
            (
                "critical path".to_string(),
                st.critical_path_ms.p50,
                st.critical_path_ms.p99,
            ),
            (
                "waves (supersteps)".to_string(),
                st.waves_ms.p50,
                st.waves_ms.p99,
            ),
            ("sum of steps".to_string(), st.sum_ms.p50, st.sum_ms.p99),
        ];
        b.push_str(&bar_chart(
            "per conversation, ms (bar p50, whisker p99)",
            &rows,
        ));
    }
    let json = serde_json::to_string_pretty(r).unwrap_or_default();
    let _ = write!(
        b,
        "<h2>Raw figures</h2><details><summary>JSON</summary><pre>{}</pre></details>",
        escape(&json)
    );
    page(&format!("Planwright load report: {}", r.graph), &b)
}

/// The comparison page.
pub fn comparison(c: &Comparison) -> String {
    let mut b = format!("<pre>{}</pre>", escape(&c.to_text()));
    if !c.curves.is_empty() {
        let lines: Vec<(&str, Vec<(f64, f64)>)> = c
            .curves
            .iter()
            .map(|(label, points)| (label.as_str(), points.clone()))
            .collect();
        b.push_str(&xy_chart(
            "conversation latency p99 from the due time against the arrival rate, ms",
            "ms",
            ("arrival rate, conversations per second", "/s"),
            &lines,
        ));
    }
    let rows: Vec<(String, f64, f64)> = c
        .rows
        .iter()
        .filter(|r| r.significant)
        .map(|r| (r.figure.clone(), r.baseline, r.current))
        .collect();
    if !rows.is_empty() {
        b.push_str("<h2>Significant differences (bar baseline, whisker current)</h2>");
        b.push_str(&bar_chart("baseline → current", &rows));
    }
    b.push_str("<h2>All figures</h2><table><tr><th>figure</th><th>baseline</th><th>current</th><th>change</th><th></th></tr>");
    for r in &c.rows {
        let _ = write!(
            b,
            "<tr><td>{}</td><td>{:.3}</td><td>{:.3}</td><td>{}</td><td class=\"{}\">{}</td></tr>",
            escape(&r.figure),
            r.baseline,
            r.current,
            r.change_pct.map_or("—".into(), |p| format!("{p:+.1}%")),
            if r.worse { "bad" } else { "good" },
            r.verdict()
        );
    }
    b.push_str("</table>");
    page("Planwright load comparison", &b)
}

/// A sweep's page: the verdict, latency (and time to first token) against arrival rate, the
/// throughput and dropped arrivals per step, and a table of the steps.
pub fn sweep(r: &SweepReport) -> String {
    let mut b = String::new();
    let _ = write!(
        b,
        "<p>Highest rate that held: <b>{}</b>. {} arrivals dropped. {}</p>",
        r.highest_rate_held
            .map_or("none".into(), |x| format!("{x} conversations/s")),
        r.dropped,
        escape(&r.stopped)
    );
    let pick = |f: &dyn Fn(&super::sweep::SweepStep) -> f64| -> Vec<(f64, f64)> {
        r.steps.iter().map(|s| (s.rate, f(s))).collect()
    };
    let x = ("arrival rate, conversations per second", "/s");
    let mut latency = vec![
        ("p50", pick(&|s| s.latency_ms.p50)),
        ("p99", pick(&|s| s.latency_ms.p99)),
    ];
    if r.steps.iter().any(|s| s.ttft_ms.is_some()) {
        latency.push((
            "ttft p99",
            pick(&|s| s.ttft_ms.as_ref().map_or(0.0, |d| d.p99)),
        ));
    }
    b.push_str(&xy_chart(
        "conversation latency from the due time against the arrival rate, ms",
        "ms",
        x,
        &latency,
    ));
    b.push_str(&xy_chart(
        "throughput and dropped arrivals against the arrival rate",
        "conversations",
        x,
        &[
            ("ended per second", pick(&|s| s.conversations_per_sec)),
            ("dropped", pick(&|s| s.dropped as f64)),
            ("failed", pick(&|s| s.failed as f64)),
        ],
    ));
    let _ = write!(b, "<pre>{}</pre>", escape(&r.to_text()));
    page(&format!("load sweep: {}", r.graph), &b)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ticks_are_round_and_reach_the_maximum() {
        assert_eq!(ticks(18.0, 5), vec![0.0, 5.0, 10.0, 15.0, 20.0]);
        assert_eq!(ticks(557_833.3, 5), vec![0.0, 2e5, 4e5, 6e5]);
        assert_eq!(
            ticks(0.0, 5),
            vec![0.0, 0.2, 0.4, 0.6000000000000001, 0.8, 1.0]
        );
        assert_eq!(ticks(f64::NAN, 5).last(), Some(&1.0));
    }

    #[test]
    fn a_line_chart_has_axes_gridlines_units_a_legend_and_hover_values() {
        let svg = line_chart(
            "latency",
            "ms",
            &[
                ("p50", vec![(1.0, 100.0), (2.0, 140.0)]),
                ("p99", vec![(1.0, 250.0), (2.0, 580.0)]),
            ],
        );
        // Every tick labelled, not only 0 and the maximum; a gridline per tick.
        for label in [">0<", ">200<", ">400<", ">600<"] {
            assert!(svg.contains(label), "{label} in {svg}");
        }
        assert_eq!(svg.matches("stroke=\"#e3e3e3\"").count(), 4, "gridlines");
        assert!(svg.contains(">ms</text>") && svg.contains("time since the start, s"));
        // The legend sits above the plot (y 12), each entry after the one before.
        assert!(
            svg.contains("<text x=\"82\" y=\"12\" font-size=\"11\">p50</text>"),
            "{svg}"
        );
        assert!(svg.contains("y=\"12\" font-size=\"11\">p99</text>"));
        assert!(svg.contains("<title>p99: 580 ms at 2 s</title>"), "{svg}");
        assert!(svg.contains("<title>p50: 100 ms at 1 s</title>"));
    }

    #[test]
    fn an_interrupted_run_says_so_on_its_page() {
        let r = LoadReport {
            interrupted: true,
            ..LoadReport::default()
        };
        assert!(report(&r).contains("Interrupted (Ctrl-C)"));
        assert!(!report(&LoadReport::default()).contains("Interrupted (Ctrl-C)"));
    }
}
