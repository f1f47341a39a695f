//! Hand-written SVG plots of the latency percentile curves: one file per thread count, one
//! panel per (mode, cells), one line per engine. x: percentile on the "nines" scale
//! (`-log10(1 - p)`, p50 .. p99.99); y: latency in ns, log scale.

use std::fmt::Write as _;

use crate::sched_report::{curve_nines, Row};
use crate::workloads::sched::ENGINES;

/// Line colours, by engine (in [`ENGINES`] order).
const COLOURS: [&str; 3] = ["#1f77b4", "#d62728", "#2ca02c"];
/// Panel size and margins, px.
const PANEL_W: f64 = 440.0;
/// See [`PANEL_W`].
const PANEL_H: f64 = 300.0;
/// See [`PANEL_W`].
const LEFT: f64 = 60.0;
/// See [`PANEL_W`].
const TOP: f64 = 30.0;
/// See [`PANEL_W`].
const RIGHT: f64 = 15.0;
/// See [`PANEL_W`].
const BOTTOM: f64 = 40.0;

/// The SVG document for the rows of one thread count.
pub fn latency_plot(threads: usize, rows: &[Row]) -> String {
    let mut panels: Vec<(String, Vec<&Row>)> = Vec::new();
    for r in rows.iter().filter(|r| r.config.threads == threads) {
        let title = format!(
            "{} mode, {} cell{}",
            r.config.mode.name(),
            r.config.cells,
            if r.config.cells == 1 { "" } else { "s" }
        );
        match panels.iter_mut().find(|(t, _)| *t == title) {
            Some((_, v)) => v.push(r),
            None => panels.push((title, vec![r])),
        }
    }
    let cols = 2usize;
    let nrows = panels.len().div_ceil(cols).max(1);
    let (w, h) = (PANEL_W * cols as f64, PANEL_H * nrows as f64 + 50.0);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{w}" height="{h}" viewBox="0 0 {w} {h}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="{w}" height="{h}" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="18" text-anchor="middle" font-size="14">enqueue-to-grant latency, {threads} thread{}</text>"#,
        w / 2.0,
        if threads == 1 { "" } else { "s" }
    );
    for (i, e) in ENGINES.iter().enumerate() {
        let x = 20.0 + 130.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{x}" y1="34" x2="{}" y2="34" stroke="{}" stroke-width="2"/><text x="{}" y="38">{e}</text>"#,
            x + 20.0,
            COLOURS[i],
            x + 25.0
        );
    }
    for (k, (title, rows)) in panels.iter().enumerate() {
        let (ox, oy) = (
            PANEL_W * (k % cols) as f64,
            50.0 + PANEL_H * (k / cols) as f64,
        );
        panel(&mut out, ox, oy, title, rows);
    }
    out.push_str("</svg>\n");
    out
}

/// Draws one panel with its origin at (`ox`, `oy`).
fn panel(out: &mut String, ox: f64, oy: f64, title: &str, rows: &[&Row]) {
    let nines = curve_nines();
    let (x0, x1) = (ox + LEFT, ox + PANEL_W - RIGHT);
    let (y0, y1) = (oy + PANEL_H - BOTTOM, oy + TOP);
    let values = rows
        .iter()
        .flat_map(|r| r.curve.iter().copied())
        .filter(|v| *v > 0.0);
    let (lo, hi) = values.fold((f64::INFINITY, 0.0f64), |(lo, hi), v| {
        (lo.min(v), hi.max(v))
    });
    let (dlo, dhi) = if lo.is_finite() {
        (
            lo.log10().floor(),
            hi.log10().ceil().max(lo.log10().floor() + 1.0),
        )
    } else {
        (1.0, 4.0)
    };
    let (nlo, nhi) = (nines[0], nines[nines.len() - 1]);
    let px = |n: f64| x0 + (n - nlo) / (nhi - nlo) * (x1 - x0);
    let py = |ns: f64| y0 - (ns.max(10f64.powf(dlo)).log10() - dlo) / (dhi - dlo) * (y0 - y1);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle" font-size="12">{title}</text>"#,
        (x0 + x1) / 2.0,
        oy + 18.0
    );
    let _ = writeln!(
        out,
        r##"<rect x="{x0}" y="{y1}" width="{}" height="{}" fill="none" stroke="#444"/>"##,
        x1 - x0,
        y0 - y1
    );
    for (n, label) in [
        (nlo, "p50"),
        (1.0, "p90"),
        (2.0, "p99"),
        (3.0, "p99.9"),
        (4.0, "p99.99"),
    ] {
        let x = px(n);
        let _ = writeln!(
            out,
            r##"<line x1="{x}" y1="{y1}" x2="{x}" y2="{y0}" stroke="#ddd"/><text x="{x}" y="{}" text-anchor="middle">{label}</text>"##,
            y0 + 14.0
        );
    }
    let mut d = dlo;
    while d <= dhi {
        let y = py(10f64.powf(d));
        let label = match d as i32 {
            0 => "1 ns".to_owned(),
            1 => "10 ns".to_owned(),
            2 => "100 ns".to_owned(),
            3 => "1 µs".to_owned(),
            4 => "10 µs".to_owned(),
            5 => "100 µs".to_owned(),
            6 => "1 ms".to_owned(),
            7 => "10 ms".to_owned(),
            8 => "100 ms".to_owned(),
            e => format!("1e{e} ns"),
        };
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" y1="{y}" x2="{x1}" y2="{y}" stroke="#ddd"/><text x="{}" y="{}" text-anchor="end">{label}</text>"##,
            x0 - 4.0,
            y + 4.0
        );
        d += 1.0;
    }
    for r in rows {
        let colour = ENGINES
            .iter()
            .position(|e| *e == r.engine)
            .map_or("#000", |i| COLOURS[i]);
        let points: Vec<String> = nines
            .iter()
            .zip(&r.curve)
            .filter(|(_, v)| **v > 0.0)
            .map(|(n, v)| format!("{:.1},{:.1}", px(*n), py(*v)))
            .collect();
        if !points.is_empty() {
            let _ = writeln!(
                out,
                r#"<polyline fill="none" stroke="{colour}" stroke-width="1.5" points="{}"/>"#,
                points.join(" ")
            );
        }
    }
}
