//! Two line charts, written as SVG by hand: latency against offered load (open-loop suite) and
//! latency percentile curves ("CDF" on the nines scale). Both are one panel of lines on a log
//! latency axis; a plotting crate would bring a font stack and dozens of dependencies for that,
//! so a small writer it is.

use std::fmt::Write as _;

/// One line.
pub struct Series {
    /// Legend text.
    pub label: String,
    /// Stroke colour.
    pub colour: &'static str,
    /// `stroke-dasharray` ("" for solid).
    pub dash: &'static str,
    /// (x, latency ns) points.
    pub points: Vec<(f64, f64)>,
}

/// The x axis: range, label and labelled ticks.
pub struct XAxis {
    /// Smallest and largest x.
    pub range: (f64, f64),
    /// Axis title.
    pub label: String,
    /// (x, text) ticks.
    pub ticks: Vec<(f64, String)>,
}

/// Colour of an engine's lines.
pub fn colour(engine: &str) -> &'static str {
    match engine {
        "lock-free" => "#1f77b4",
        "std Mutex" => "#d62728",
        "ring" => "#ff7f0e",
        _ => "#2ca02c",
    }
}

const W: f64 = 720.0;
const H: f64 = 440.0;
const L: f64 = 70.0;
const R: f64 = 200.0;
const T: f64 = 40.0;
const B: f64 = 50.0;

/// Text of a decade of nanoseconds.
fn decade(d: i32) -> String {
    match d {
        0..=2 => format!("{} ns", 10u64.pow(d as u32)),
        3..=5 => format!("{} µs", 10u64.pow(d as u32 - 3)),
        6..=8 => format!("{} ms", 10u64.pow(d as u32 - 6)),
        _ => format!("{} s", 10u64.pow((d - 9).max(0) as u32)),
    }
}

/// An SVG document: `series` against `x`, latency on a log axis.
pub fn chart(title: &str, x: &XAxis, series: &[Series]) -> String {
    let ys = series
        .iter()
        .flat_map(|s| s.points.iter().map(|p| p.1))
        .filter(|y| *y > 0.0);
    let (lo, hi) = ys.fold((f64::INFINITY, 0.0f64), |(lo, hi), y| {
        (lo.min(y), hi.max(y))
    });
    let (dlo, dhi) = if lo.is_finite() {
        let dlo = lo.log10().floor();
        (dlo, hi.log10().ceil().max(dlo + 1.0))
    } else {
        (1.0, 4.0)
    };
    let (x0, x1, y0, y1) = (L, W - R, H - B, T);
    let px = |v: f64| x0 + (v - x.range.0) / (x.range.1 - x.range.0) * (x1 - x0);
    let py = |ns: f64| y0 - (ns.max(10f64.powf(dlo)).log10() - dlo) / (dhi - dlo) * (y0 - y1);
    let mut out = String::new();
    let _ = writeln!(
        out,
        r#"<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" font-family="sans-serif" font-size="11">"#
    );
    let _ = writeln!(out, r#"<rect width="{W}" height="{H}" fill="white"/>"#);
    let _ = writeln!(
        out,
        r#"<text x="{}" y="22" text-anchor="middle" font-size="14">{title}</text>"#,
        (x0 + x1) / 2.0
    );
    let _ = writeln!(
        out,
        r##"<rect x="{x0}" y="{y1}" width="{}" height="{}" fill="none" stroke="#444"/>"##,
        x1 - x0,
        y0 - y1
    );
    for (v, label) in &x.ticks {
        let xv = px(*v);
        let _ = writeln!(
            out,
            r##"<line x1="{xv:.1}" y1="{y1}" x2="{xv:.1}" y2="{y0}" stroke="#ddd"/><text x="{xv:.1}" y="{}" text-anchor="middle">{label}</text>"##,
            y0 + 15.0
        );
    }
    let _ = writeln!(
        out,
        r#"<text x="{}" y="{}" text-anchor="middle">{}</text>"#,
        (x0 + x1) / 2.0,
        H - 12.0,
        x.label
    );
    for d in dlo as i32..=dhi as i32 {
        let y = py(10f64.powi(d));
        let _ = writeln!(
            out,
            r##"<line x1="{x0}" y1="{y:.1}" x2="{x1}" y2="{y:.1}" stroke="#ddd"/><text x="{}" y="{:.1}" text-anchor="end">{}</text>"##,
            x0 - 4.0,
            y + 4.0,
            decade(d)
        );
    }
    for (i, s) in series.iter().enumerate() {
        let points: Vec<String> = s
            .points
            .iter()
            .filter(|p| p.1 > 0.0)
            .map(|&(xv, yv)| format!("{:.1},{:.1}", px(xv), py(yv)))
            .collect();
        let _ = writeln!(
            out,
            r#"<polyline fill="none" stroke="{}" stroke-dasharray="{}" stroke-width="1.5" points="{}"/>"#,
            s.colour,
            s.dash,
            points.join(" ")
        );
        let ly = T + 10.0 + 16.0 * i as f64;
        let _ = writeln!(
            out,
            r#"<line x1="{}" y1="{ly}" x2="{}" y2="{ly}" stroke="{}" stroke-dasharray="{}" stroke-width="2"/><text x="{}" y="{}">{}</text>"#,
            x1 + 10.0,
            x1 + 35.0,
            s.colour,
            s.dash,
            x1 + 40.0,
            ly + 4.0,
            s.label
        );
    }
    out.push_str("</svg>\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chart_draws_every_series_with_a_legend() {
        let x = XAxis {
            range: (50.0, 95.0),
            label: "offered load, % of std capacity".into(),
            ticks: vec![(50.0, "50".into()), (95.0, "95".into())],
        };
        let s = |label: &str| Series {
            label: label.into(),
            colour: colour(label),
            dash: "",
            points: vec![(50.0, 200.0), (80.0, 900.0), (95.0, 40_000.0)],
        };
        let svg = chart("t", &x, &[s("lock-free"), s("std Mutex")]);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        assert_eq!(svg.matches("<polyline").count(), 2);
        assert!(svg.contains(">100 ns<") && svg.contains(">100 µs<"));
    }
}
