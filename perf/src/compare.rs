//! `--compare A.json B.json`: each same-run ratio of run A beside run B, with the spread over
//! repetitions measured in each (interquartile range / median), and a flag where the change is
//! larger than that spread.
//!
//! The ratios compared are the targets' values and, per workload, the throughput of its first
//! backend (fairway's) over each other backend's. Absolute figures are not compared: they move
//! up to 2x between runs on shared machines.

use std::fmt::Write as _;

use crate::report::{median, Report};

/// One compared ratio: its label and its per-repetition values.
type Series = (String, Vec<f64>);

/// The same-run ratios of `r`.
pub fn ratios(r: &Report) -> Vec<Series> {
    let mut out: Vec<Series> = r
        .targets
        .iter()
        .map(|v| (format!("{} {} ({})", v.id, v.what, v.row), v.values.clone()))
        .collect();
    let mut workloads: Vec<&str> = Vec::new();
    for row in &r.rows {
        if !workloads.contains(&row.workload.as_str()) {
            workloads.push(&row.workload);
        }
    }
    for w in workloads {
        let rows: Vec<_> = r.rows.iter().filter(|x| x.workload == w).collect();
        let Some((first, others)) = rows.split_first() else {
            continue;
        };
        for o in others {
            let values = first
                .reps
                .iter()
                .zip(&o.reps)
                .map(|(a, b)| a.ops_per_sec / b.ops_per_sec)
                .collect();
            out.push((
                format!("{w}: {} / {} throughput", first.backend, o.backend),
                values,
            ));
        }
    }
    out
}

/// The relative spread of `values`: their interquartile range over their median (the middle
/// half of the repetitions; the extremes on a shared VM are the host's, not the code's).
pub fn spread(values: &[f64]) -> f64 {
    let mut v: Vec<f64> = values.iter().copied().filter(|x| !x.is_nan()).collect();
    v.sort_by(f64::total_cmp);
    let q = |p: f64| {
        // Linear interpolation between the closest ranks.
        let x = p * (v.len() - 1) as f64;
        let (i, f) = (x.floor() as usize, x.fract());
        v[i] + (v[(i + 1).min(v.len() - 1)] - v[i]) * f
    };
    if v.is_empty() {
        return f64::NAN;
    }
    (q(0.75) - q(0.25)) / median(&v)
}

/// One comparison line.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// What.
    pub label: String,
    /// Median in A and in B.
    pub a: f64,
    /// See `a`.
    pub b: f64,
    /// `b / a`.
    pub change: f64,
    /// The larger relative spread ([`spread`]) of A's and B's repetitions.
    pub spread: f64,
    /// Whether `|change − 1|` exceeds `spread`.
    pub flagged: bool,
}

/// Every ratio present in both runs, in A's order.
pub fn changes(a: &Report, b: &Report) -> Vec<Change> {
    let bs = ratios(b);
    ratios(a)
        .into_iter()
        .filter_map(|(label, va)| {
            let (_, vb) = bs.iter().find(|(l, _)| *l == label)?;
            let (ma, mb) = (median(&va), median(vb));
            // Equal medians (an allocation count of 0 in both) are no change.
            let change = if ma == mb { 1.0 } else { mb / ma };
            let spread = spread(&va).max(spread(vb));
            let spread = if spread.is_nan() { 0.0 } else { spread };
            Some(Change {
                label,
                a: ma,
                b: mb,
                change,
                spread,
                flagged: (change - 1.0).abs() > spread,
            })
        })
        .collect()
}

/// The comparison as text.
pub fn text(a: &Report, b: &Report, changes: &[Change]) -> String {
    let mut out = format!(
        "A: suite {}, {} reps, {} | B: suite {}, {} reps, {}\n\
         ratio medians in A and B, B/A, and the larger spread (interquartile range / median) of \
         A's and B's repetitions; ! marks a change beyond that spread\n",
        a.suite, a.reps, a.system.cpu, b.suite, b.reps, b.system.cpu
    );
    for c in changes {
        let _ = writeln!(
            out,
            "{} {:<90} {:>8.3} {:>8.3}  x{:<6.3} spread {:>5.1} %",
            if c.flagged { "!" } else { " " },
            c.label,
            c.a,
            c.b,
            c.change,
            c.spread * 100.0
        );
    }
    let flagged = changes.iter().filter(|c| c.flagged).count();
    let _ = writeln!(
        out,
        "{flagged} of {} ratios changed beyond their spread",
        changes.len()
    );
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{Rep, Row, System};
    use crate::targets::evaluate;

    fn report(lf: &[f64], std: &[f64]) -> Report {
        let row = |backend: &str, t: &[f64]| Row {
            workload: "pull 2 thr 4 cells".into(),
            backend: backend.into(),
            reps: t
                .iter()
                .map(|&ops_per_sec| Rep {
                    ops_per_sec,
                    ..Rep::default()
                })
                .collect(),
        };
        let rows = vec![row("lock-free", lf), row("std Mutex", std)];
        Report {
            system: System {
                cpu: "test".into(),
                cores: 2,
                kernel: "test".into(),
                load: String::new(),
            },
            suite: "default".into(),
            reps: lf.len(),
            wall_s: 1.0,
            targets: evaluate(&rows),
            rows,
            plots: vec![],
        }
    }

    #[test]
    fn a_change_beyond_the_spread_is_flagged() {
        // A: ratios 1.0, 1.1, 1.2 (spread 0.1 / 1.1 = 9 %); B: 2.0, 2.1, 2.2 (x1.91).
        let a = report(&[1.0, 1.1, 1.2], &[1.0, 1.0, 1.0]);
        let b = report(&[2.0, 2.1, 2.2], &[1.0, 1.0, 1.0]);
        let c = changes(&a, &b);
        // The P3 vs std target, P10 (0 allocations in both: no change) and the row's
        // throughput ratio.
        assert_eq!(c.len(), 3, "{c:?}");
        assert_eq!(
            c.iter().map(|c| c.flagged).collect::<Vec<_>>(),
            [true, false, true]
        );
        assert!((c[0].change - 2.1 / 1.1).abs() < 1e-9);
        assert!(text(&a, &b, &c).contains("2 of 3 ratios changed"));
    }

    #[test]
    fn spread_is_the_interquartile_range_over_the_median() {
        assert!((spread(&[1.0, 2.0, 3.0, 4.0, 5.0]) - 2.0 / 3.0).abs() < 1e-12);
        assert_eq!(spread(&[2.0, 2.0, 2.0]), 0.0);
    }

    #[test]
    fn a_change_within_the_spread_is_not_flagged() {
        let a = report(&[1.0, 1.3, 1.6], &[1.0, 1.0, 1.0]);
        let b = report(&[1.1, 1.4, 1.5], &[1.0, 1.0, 1.0]);
        let c = changes(&a, &b);
        assert!(c.iter().all(|c| !c.flagged), "{c:?}");
    }

    #[test]
    fn reports_round_trip_through_json() {
        let a = report(&[1.0, 1.1], &[1.0, 0.9]);
        let json = serde_json::to_string(&a).unwrap();
        assert_eq!(serde_json::from_str::<Report>(&json).unwrap(), a);
    }
}
