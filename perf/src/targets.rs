//! The PERF.md targets as data: one table ([`TARGETS`]) drives the text report, the JSON, the
//! README table (`--markdown`) and `--check`.
//!
//! A target compares a row (workload, backend) with a comparator row repetition by repetition
//! (the two ran back to back) and takes the median of those same-run ratios; a target without a
//! comparator is an absolute figure. A target whose rows did not run is left out.

use std::fmt::Write as _;

use serde::{Deserialize, Serialize};

use crate::report::{median, range, Rep, Row};

/// What a target reads from a repetition.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Time per operation (the inverse of throughput).
    Time,
    /// Operations per second.
    Throughput,
    /// 99th percentile latency.
    P99,
    /// 99.9th percentile latency.
    P999,
    /// Allocations per operation: the largest over every matching row and repetition.
    Allocs,
    /// The workload's score (P11: smallest window Jain index).
    Score,
}

impl Metric {
    fn of(self, r: &Rep) -> f64 {
        match self {
            Metric::Time => 1.0 / r.ops_per_sec,
            Metric::Throughput => r.ops_per_sec,
            Metric::P99 => r.p99_ns,
            Metric::P999 => r.p999_ns,
            Metric::Allocs => r.allocs_per_op,
            Metric::Score => r.score.unwrap_or(f64::NAN),
        }
    }
}

/// One PERF.md target.
#[derive(Clone, Copy, Debug)]
pub struct Target {
    /// `P1`, `P2`, ...
    pub id: &'static str,
    /// What is compared.
    pub what: &'static str,
    /// The measured row: (workload, backend); workload `*` means every row of the backend.
    pub row: (&'static str, &'static str),
    /// The comparator row, for a ratio.
    pub vs: Option<(&'static str, &'static str)>,
    /// What is read.
    pub metric: Metric,
    /// The bound.
    pub bound: f64,
    /// Whether the value must be at least (true) or at most (false) the bound.
    pub at_least: bool,
}

/// Labels of the engines in the rows: fairway's engine (the tenant ring) ...
const LF: &str = "lock-free";
/// See [`LF`].
const STD: &str = "std Mutex";
/// See [`LF`].
const PL: &str = "parking_lot";
/// The version directory's rows (P12).
const VD: &str = "version directory";

/// Workload labels the targets read (the suites produce them).
pub mod rows {
    /// P1, through the policy.
    pub const CYCLE: &str = "cycle 1 thr 1 cell";
    /// P1, nothing queued.
    pub const FAST: &str = "fast 1 thr 1 cell";
    /// P2 and P13: single operations of one thread.
    pub const SINGLE: &str = "single op 1 thr";
    /// P7.
    pub const CANCEL_DEEP: &str = "cancel depth 4096";
    /// P7's comparator.
    pub const CANCEL_SHALLOW: &str = "cancel depth 1";
    /// F36 beside P7: a priority changed in place at queue depth 4096.
    pub const REORDER_DEEP: &str = "change in place depth 4096";
    /// P3.
    pub const PULL2: &str = "pull 2 thr 4 cells";
    /// P6.
    pub const PULL8: &str = "pull 8 thr 4 cells";
    /// P4.
    pub const OPEN2: &str = "open 80% 2 thr 4 cells";
    /// P5.
    pub const OPEN8: &str = "open 80% 8 thr 4 cells";
    /// P11.
    pub const FAIRNESS: &str = "fairness 4 tenants 1 cell";
    /// P8: the dependency graph.
    pub const GRAPH_P8: &str = "graph complete fan-out 4 + drain";
    /// P9: the dependency graph.
    pub const GRAPH_P9: &str = "graph submit 4 edges";
    /// P12: the version directory's capture (its backend label is `version directory`).
    pub const VERSIONS_250: &str = "versions capture, 250 keys";
    /// P12.
    pub const VERSIONS_3K: &str = "versions capture, 3000 keys";
    /// P12.
    pub const VERSIONS_100K: &str = "versions capture, 100000 keys";
}

use rows::*;

/// P17's rows (the backends are the layers).
use crate::tower::{ALONE as TOWER_ALONE, FAIRWAY as FAIR_LAYER, FIRQ, FLOOD as TOWER_FLOOD};

/// Every PERF.md target `fairway-perf` measures, in PERF.md order.
pub const TARGETS: &[Target] = &[
    t(
        "P1",
        "cycle time vs std",
        (CYCLE, LF),
        Some((CYCLE, STD)),
        Metric::Time,
        0.6,
        false,
    ),
    t(
        "P1",
        "cycle time vs pl",
        (CYCLE, LF),
        Some((CYCLE, PL)),
        Metric::Time,
        0.9,
        false,
    ),
    t(
        "P1",
        "fast-path time vs std",
        (FAST, LF),
        Some((FAST, STD)),
        Metric::Time,
        0.6,
        false,
    ),
    t(
        "P1",
        "fast-path time vs pl",
        (FAST, LF),
        Some((FAST, PL)),
        Metric::Time,
        0.9,
        false,
    ),
    t(
        "P2",
        "acquire+release vs tokio",
        (SINGLE, "fairway FixedCellPool"),
        Some((SINGLE, "tokio Semaphore")),
        Metric::Time,
        0.6,
        false,
    ),
    t(
        "P3",
        "throughput vs std",
        (PULL2, LF),
        Some((PULL2, STD)),
        Metric::Throughput,
        1.5,
        true,
    ),
    t(
        "P3",
        "throughput vs pl",
        (PULL2, LF),
        Some((PULL2, PL)),
        Metric::Throughput,
        1.0,
        true,
    ),
    t(
        "P4",
        "open-loop p99 vs std",
        (OPEN2, LF),
        Some((OPEN2, STD)),
        Metric::P99,
        0.25,
        false,
    ),
    t(
        "P5",
        "open-loop p99.9 vs std",
        (OPEN8, LF),
        Some((OPEN8, STD)),
        Metric::P999,
        0.25,
        false,
    ),
    t(
        "P5",
        "open-loop p99.9 vs pl",
        (OPEN8, LF),
        Some((OPEN8, PL)),
        Metric::P999,
        0.5,
        false,
    ),
    t(
        "P6",
        "throughput vs std",
        (PULL8, LF),
        Some((PULL8, STD)),
        Metric::Throughput,
        1.5,
        true,
    ),
    t(
        "P6",
        "throughput vs pl",
        (PULL8, LF),
        Some((PULL8, PL)),
        Metric::Throughput,
        1.2,
        true,
    ),
    t(
        "P7",
        "cancel time, depth 4096 vs 1",
        (CANCEL_DEEP, LF),
        Some((CANCEL_SHALLOW, LF)),
        Metric::Time,
        1.2,
        false,
    ),
    t(
        "P8",
        "graph: complete fan-out 4 + drain vs std",
        (GRAPH_P8, LF),
        Some((GRAPH_P8, STD)),
        Metric::Time,
        0.67,
        false,
    ),
    t(
        "P9",
        "graph: submit with 4 edges vs std",
        (GRAPH_P9, LF),
        Some((GRAPH_P9, STD)),
        Metric::Time,
        0.5,
        false,
    ),
    t(
        "P10",
        "allocations per op, max",
        ("*", LF),
        None,
        Metric::Allocs,
        0.0,
        false,
    ),
    t(
        "P11",
        "min Jain index, 1,000 grants",
        (FAIRNESS, LF),
        None,
        Metric::Score,
        0.99,
        true,
    ),
    // P12: "equal within 10 %" as two bounds on each same-run ratio against 250 keys.
    t(
        "P12",
        "capture time, 3,000 vs 250 keys",
        (VERSIONS_3K, VD),
        Some((VERSIONS_250, VD)),
        Metric::Time,
        1.1,
        false,
    ),
    t(
        "P12",
        "capture time, 3,000 vs 250 keys, low side",
        (VERSIONS_3K, VD),
        Some((VERSIONS_250, VD)),
        Metric::Time,
        0.9,
        true,
    ),
    t(
        "P12",
        "capture time, 10^5 vs 250 keys",
        (VERSIONS_100K, VD),
        Some((VERSIONS_250, VD)),
        Metric::Time,
        1.1,
        false,
    ),
    t(
        "P12",
        "capture time, 10^5 vs 250 keys, low side",
        (VERSIONS_100K, VD),
        Some((VERSIONS_250, VD)),
        Metric::Time,
        0.9,
        true,
    ),
    t(
        "P13",
        "admit→refund vs uncontended CAS",
        (SINGLE, "admit→refund"),
        Some((SINGLE, "uncontended CAS")),
        Metric::Time,
        12.0,
        false,
    ),
    t(
        "P13",
        "admit→refund vs tokio",
        (SINGLE, "admit→refund"),
        Some((SINGLE, "tokio Semaphore")),
        Metric::Time,
        3.0,
        false,
    ),
    t(
        "P17",
        "quiet p99 flooded vs alone",
        (TOWER_FLOOD, FAIR_LAYER),
        Some((TOWER_ALONE, FAIR_LAYER)),
        Metric::P99,
        2.0,
        false,
    ),
    t(
        "P17",
        "quiet p99 flooded vs firq-tower",
        (TOWER_FLOOD, FAIR_LAYER),
        Some((TOWER_FLOOD, FIRQ)),
        Metric::P99,
        1.0,
        false,
    ),
];

/// A table entry (keeps [`TARGETS`] one line per target where it fits).
const fn t(
    id: &'static str,
    what: &'static str,
    row: (&'static str, &'static str),
    vs: Option<(&'static str, &'static str)>,
    metric: Metric,
    bound: f64,
    at_least: bool,
) -> Target {
    Target {
        id,
        what,
        row,
        vs,
        metric,
        bound,
        at_least,
    }
}

/// A target evaluated on one run.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Verdict {
    /// Target id.
    pub id: String,
    /// What is compared.
    pub what: String,
    /// The row, `workload / backend`.
    pub row: String,
    /// The value per repetition (a same-run ratio, or the absolute figure).
    pub values: Vec<f64>,
    /// The median of `values` (for allocations: the largest).
    pub value: f64,
    /// The bound.
    pub bound: f64,
    /// Whether the value must be at least the bound.
    pub at_least: bool,
    /// Whether the target is met (a NaN misses).
    pub pass: bool,
}

/// Evaluates every target of [`TARGETS`] whose rows are in `rows`.
pub fn evaluate(rows: &[Row]) -> Vec<Verdict> {
    TARGETS.iter().filter_map(|t| verdict(t, rows)).collect()
}

/// Evaluates `t` on `rows`; `None` when its rows did not run.
pub fn verdict(t: &Target, rows: &[Row]) -> Option<Verdict> {
    let find = |(w, b): (&str, &str)| rows.iter().find(|r| r.workload == w && r.backend == b);
    let values: Vec<f64> = if t.row.0 == "*" {
        let own: Vec<&Row> = rows.iter().filter(|r| r.backend == t.row.1).collect();
        let reps = own.iter().map(|r| r.reps.len()).max()?;
        (0..reps)
            .map(|i| {
                own.iter()
                    .filter_map(|r| r.reps.get(i))
                    .map(|x| t.metric.of(x))
                    .fold(0.0, f64::max)
            })
            .collect()
    } else {
        let own = find(t.row)?;
        match t.vs {
            None => own.reps.iter().map(|x| t.metric.of(x)).collect(),
            Some(vs) => {
                let base = find(vs)?;
                own.reps
                    .iter()
                    .zip(&base.reps)
                    .map(|(a, b)| t.metric.of(a) / t.metric.of(b))
                    .collect()
            }
        }
    };
    // A repetition without a figure (a fairness run that reached no full window) is not judged.
    let values: Vec<f64> = values.into_iter().filter(|v| !v.is_nan()).collect();
    if values.is_empty() {
        return None;
    }
    let value = if t.metric == Metric::Allocs {
        range(&values).1
    } else {
        median(&values)
    };
    let pass = if t.at_least {
        value >= t.bound
    } else {
        value <= t.bound
    };
    let row = match t.vs {
        Some(vs) if vs.0 == t.row.0 => format!("{} / {} vs {}", t.row.0, t.row.1, vs.1),
        Some(vs) => format!("{} vs {} / {}", t.row.0, vs.0, t.row.1),
        None if t.row.0 == "*" => format!("every {} row", t.row.1),
        None => format!("{} / {}", t.row.0, t.row.1),
    };
    Some(Verdict {
        id: t.id.into(),
        what: t.what.into(),
        row,
        values,
        value,
        bound: t.bound,
        at_least: t.at_least,
        pass,
    })
}

impl Verdict {
    fn bound_text(&self) -> String {
        format!("{} {}", if self.at_least { "≥" } else { "≤" }, self.bound)
    }

    fn range_text(&self) -> String {
        let (lo, hi) = range(&self.values);
        format!("{lo:.3}–{hi:.3}")
    }
}

/// The targets as an aligned text table.
pub fn text(verdicts: &[Verdict]) -> String {
    let mut out = String::from(
        "targets (PERF.md): median of same-repetition values, [range over repetitions]\n",
    );
    for v in verdicts {
        let _ = writeln!(
            out,
            "{:<10} {:<32} {:<56} {:>8.3} [{:>13}] {:>7}  {}",
            v.id,
            v.what,
            v.row,
            v.value,
            v.range_text(),
            v.bound_text(),
            if v.pass { "pass" } else { "MISS" }
        );
    }
    out
}

/// The targets as the README's Markdown table.
pub fn markdown(verdicts: &[Verdict]) -> String {
    let mut out = String::from(
        "| target | row | value (median) | range | bound | verdict |\n|---|---|---|---|---|---|\n",
    );
    for v in verdicts {
        let _ = writeln!(
            out,
            "| {} {} | {} | {:.3} | {} | {} | {} |",
            v.id,
            v.what,
            v.row,
            v.value,
            v.range_text(),
            v.bound_text(),
            if v.pass { "pass" } else { "miss" }
        );
    }
    out
}

/// Whether every target in `verdicts` is met (`--check`).
pub fn all_met(verdicts: &[Verdict]) -> bool {
    verdicts.iter().all(|v| v.pass)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(workload: &str, backend: &str, tputs: &[f64]) -> Row {
        Row {
            workload: workload.into(),
            backend: backend.into(),
            reps: tputs
                .iter()
                .map(|&t| Rep {
                    ops_per_sec: t,
                    ..Rep::default()
                })
                .collect(),
        }
    }

    #[test]
    fn ratio_is_the_median_of_same_repetition_ratios() {
        // Ratios 2, 0.5, 4: median 2 (a ratio of medians would give 1).
        let rows = [
            row(PULL2, LF, &[2.0, 1.0, 8.0]),
            row(PULL2, STD, &[1.0, 2.0, 2.0]),
        ];
        let v = verdict(&TARGETS[5], &rows).unwrap();
        assert_eq!((v.id.as_str(), v.value, v.pass), ("P3", 2.0, true));
        assert_eq!(v.values, vec![2.0, 0.5, 4.0]);
    }

    #[test]
    fn check_fails_on_a_missed_target_and_skips_absent_rows() {
        // Time ratio (1/2) / (1/1) = 0.5 ≤ 0.6: P1 vs std passes; P1 vs pl has no pl row and
        // is left out; P10 reads every lock-free row.
        let rows = [row(CYCLE, LF, &[2.0, 2.0]), row(CYCLE, STD, &[1.0, 1.0])];
        let v = evaluate(&rows);
        assert_eq!(
            v.iter().map(|v| v.id.as_str()).collect::<Vec<_>>(),
            ["P1", "P10"]
        );
        assert!((v[0].value - 0.5).abs() < 1e-12 && v[0].pass, "{v:?}");
        assert!(all_met(&v));
        let rows = [row(CYCLE, LF, &[1.0, 1.0]), row(CYCLE, STD, &[1.0, 1.0])];
        assert!(!all_met(&evaluate(&rows)));
    }

    #[test]
    fn allocations_take_the_largest_of_every_row() {
        let mut a = row(PULL2, LF, &[1.0, 1.0, 1.0]);
        a.reps[1].allocs_per_op = 0.001;
        let rows = [a, row(PULL8, LF, &[1.0, 1.0, 1.0])];
        let p10 = TARGETS.iter().find(|t| t.id == "P10").unwrap();
        let v = verdict(p10, &rows).unwrap();
        assert_eq!(v.value, 0.001);
        assert!(!v.pass);
    }

    #[test]
    fn markdown_has_one_line_per_verdict() {
        let rows = [
            row(FAST, LF, &[1.0]),
            row(FAST, STD, &[1.0]),
            row(FAST, PL, &[1.0]),
        ];
        let md = markdown(&evaluate(&rows));
        // Header, rule, P1 vs std, P1 vs pl, P10.
        assert_eq!(md.lines().count(), 2 + 3);
        assert!(md.contains(
            "| P1 fast-path time vs pl | fast 1 thr 1 cell / lock-free vs parking_lot | 1.000 |"
        ));
    }
}
