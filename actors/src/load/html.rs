//! The self-contained HTML pages (inline SVG, no scripts, no CDN): a run's report — summary,
//! thresholds, the time series, per-node and execute-phase charts — and a comparison of two runs.

use super::compare::Comparison;
use super::report::LoadReport;
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

/// A line chart of one or more series sharing an axis.
pub fn line_chart(title: &str, lines: &[(&str, Vec<(f64, f64)>)]) -> String {
    let (w, h, left, bottom) = (520.0, 180.0, 50.0, 20.0);
    let max_x = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.0))
        .fold(1e-9f64, f64::max);
    let max_y = lines
        .iter()
        .flat_map(|(_, p)| p.iter().map(|q| q.1))
        .fold(1e-9f64, f64::max);
    let mut svg = format!(
        "<figure><svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{}\" height=\"{}\">\
         <line x1=\"{left}\" y1=\"0\" x2=\"{left}\" y2=\"{h}\" stroke=\"#999\"/>\
         <line x1=\"{left}\" y1=\"{h}\" x2=\"{}\" y2=\"{h}\" stroke=\"#999\"/>\
         <text x=\"0\" y=\"12\" font-size=\"11\">{}</text><text x=\"0\" y=\"{h}\" font-size=\"11\">0</text>\
         <text x=\"{}\" y=\"{}\" font-size=\"11\">{:.0} s</text>",
        w + left + 10.0,
        h + bottom,
        left + w,
        short(max_y),
        left + w - 40.0,
        h + 15.0,
        max_x
    );
    for (i, (label, points)) in lines.iter().enumerate() {
        let color = COLORS[i % COLORS.len()];
        let pts: Vec<String> = points
            .iter()
            .map(|(x, y)| {
                format!(
                    "{:.1},{:.1}",
                    left + x / max_x * w,
                    h - y / max_y * (h - 5.0)
                )
            })
            .collect();
        let _ = write!(
            svg,
            "<polyline fill=\"none\" stroke=\"{color}\" stroke-width=\"1.5\" points=\"{}\"/>\
             <text x=\"{}\" y=\"12\" font-size=\"11\" fill=\"{color}\">{}</text>",
            pts.join(" "),
            left + 10.0 + i as f64 * 110.0,
            escape(label)
        );
    }
    let _ = write!(
        svg,
        "</svg><figcaption>{}</figcaption></figure>",
        escape(title)
    );
    svg
}

fn short(v: f64) -> String {
    if v >= 10_000.0 {
        format!("{:.0}k", v / 1000.0)
    } else if v >= 10.0 {
        format!("{v:.0}")
    } else {
        format!("{v:.2}")
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
             <rect x=\"{left}\" y=\"{y}\" width=\"{pa:.1}\" height=\"13\" fill=\"#4a7\"/>\
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
    let mut b = format!("<pre>{}</pre>", escape(&r.to_text()));
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
    let s = &r.series;
    let pick = |f: &dyn Fn(&super::series::Sample) -> f64| -> Vec<(f64, f64)> {
        s.iter().map(|x| (x.t_s, f(x))).collect()
    };
    b.push_str("<h2>Over time (one sample per second)</h2>");
    b.push_str(&line_chart(
        "conversations ended per second",
        &[
            ("conversations/s", pick(&|x| x.conversations_per_sec)),
            ("started/s", pick(&|x| x.started as f64)),
        ],
    ));
    b.push_str(&line_chart(
        "node executions per second",
        &[("node executions/s", pick(&|x| x.node_execs_per_sec))],
    ));
    b.push_str(&line_chart(
        "latency of the conversations that ended in each second, ms",
        &[("p50", pick(&|x| x.p50_ms)), ("p99", pick(&|x| x.p99_ms))],
    ));
    b.push_str(&line_chart(
        "in flight and waiting in mailboxes",
        &[
            ("in flight", pick(&|x| x.in_flight as f64)),
            ("mailboxes", pick(&|x| x.mailbox_depth as f64)),
        ],
    ));
    b.push_str(&line_chart(
        "failed, abandoned and late per second",
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
    b.push_str(&line_chart("resident memory, KiB", &mem));
    let mut cpu = vec![("load CPU %", pick(&|x| x.cpu_pct))];
    if s.iter().any(|x| x.server_cpu_pct.is_some()) {
        cpu.push(("server CPU %", pick(&|x| x.server_cpu_pct.unwrap_or(0.0))));
    }
    b.push_str(&line_chart("CPU, % of one core", &cpu));
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
