//! The scheduler report: one row per (mode, threads, cells, engine) with medians over
//! repetitions, same-run ratios of the lock-free engine against each baseline, and the PERF.md
//! targets the rows cover, as text or JSON.
//!
//! Every ratio is the median over repetitions of `lock-free / baseline` within one repetition
//! (the engines ran back to back), never a ratio of medians.

use std::fmt::Write as _;

use crate::report::{json_num, json_str, System};
use crate::stats::{median, median_ratio, Latency};
use crate::timer::Timer;
use crate::workloads::sched::{Config, Mode, Sample, ENGINES, LOCK_FREE, PARKING_LOT, STD};

/// Percentiles of the plotted latency curves, on the "nines" scale `-log10(1 - p)`: from p50
/// (0.301) to p99.99 (4) in steps of 0.1.
pub fn curve_nines() -> Vec<f64> {
    let mut v = vec![0.5f64.log10().abs()];
    v.extend((4..=40).map(|i| f64::from(i) / 10.0));
    v
}

/// Lock-free / baseline ratios, medians over repetitions.
#[derive(Debug, Clone, Copy, Default)]
pub struct Ratios {
    /// Throughput.
    pub tput: f64,
    /// Median latency.
    pub p50: f64,
    /// 99th percentile latency.
    pub p99: f64,
    /// 99.9th percentile latency.
    pub p999: f64,
}

/// One line of the scheduler table.
#[derive(Debug, Clone)]
pub struct Row {
    /// What ran.
    pub config: Config,
    /// Engine label.
    pub engine: &'static str,
    /// Repetitions.
    pub reps: usize,
    /// Median grants per second.
    pub tput: f64,
    /// Median p50 / p99 / p99.9 latency, ns.
    pub p50: f64,
    /// See `p50`.
    pub p99: f64,
    /// See `p50`.
    pub p999: f64,
    /// Largest allocations per grant over the repetitions.
    pub allocs_per_op: f64,
    /// Median Jain index over grants per tenant (skewed arrivals: reported as is).
    pub jain: f64,
    /// Median requests withdrawn per repetition.
    pub cancelled: f64,
    /// Ratios against the std-Mutex baseline (lock-free rows only).
    pub vs_std: Option<Ratios>,
    /// Ratios against the parking_lot baseline (lock-free rows only).
    pub vs_pl: Option<Ratios>,
    /// Latency (ns) at each point of [`curve_nines`], over all repetitions merged.
    pub curve: Vec<f64>,
}

/// Builds the rows from `samples`.
pub fn rows(samples: &[Sample], timer: &Timer) -> Vec<Row> {
    let mut configs: Vec<Config> = Vec::new();
    for s in samples {
        if !configs.contains(&s.config) {
            configs.push(s.config);
        }
    }
    let series = |config: Config, engine: &str| -> Vec<&Sample> {
        let mut v: Vec<&Sample> = samples
            .iter()
            .filter(|s| s.config == config && s.engine == engine)
            .collect();
        v.sort_by_key(|s| s.rep);
        v
    };
    let ns = |l: &Latency, q: f64| timer.ns(l.quantile(q) as f64);
    let metric = |v: &[&Sample], f: &dyn Fn(&Sample) -> f64| -> Vec<f64> {
        v.iter().map(|s| f(s)).collect()
    };
    let tput = |s: &Sample| s.grants_per_sec;
    let p50 = |s: &Sample| ns(&s.latency, 0.5);
    let p99 = |s: &Sample| ns(&s.latency, 0.99);
    let p999 = |s: &Sample| ns(&s.latency, 0.999);
    let mut out = Vec::new();
    for config in configs {
        for engine in ENGINES {
            let own = series(config, engine);
            if own.is_empty() {
                continue;
            }
            let ratios = |base: &str| -> Option<Ratios> {
                let base = series(config, base);
                (engine == LOCK_FREE && !base.is_empty()).then(|| Ratios {
                    tput: median_ratio(&metric(&own, &tput), &metric(&base, &tput)),
                    p50: median_ratio(&metric(&own, &p50), &metric(&base, &p50)),
                    p99: median_ratio(&metric(&own, &p99), &metric(&base, &p99)),
                    p999: median_ratio(&metric(&own, &p999), &metric(&base, &p999)),
                })
            };
            let mut merged = Latency::new();
            own.iter().for_each(|s| merged.merge(&s.latency));
            out.push(Row {
                config,
                engine,
                reps: own.len(),
                tput: median(&metric(&own, &tput)),
                p50: median(&metric(&own, &p50)),
                p99: median(&metric(&own, &p99)),
                p999: median(&metric(&own, &p999)),
                allocs_per_op: own.iter().map(|s| s.allocs_per_op).fold(0.0, f64::max),
                jain: median(&metric(&own, &|s| s.jain())),
                cancelled: median(&metric(&own, &|s| s.cancelled as f64)),
                vs_std: ratios(STD),
                vs_pl: ratios(PARKING_LOT),
                curve: curve_nines()
                    .iter()
                    .map(|x| ns(&merged, 1.0 - 10f64.powf(-x)))
                    .collect(),
            });
        }
    }
    out
}

/// The P11 result of one engine.
#[derive(Debug, Clone)]
pub struct Fairness {
    /// Engine label.
    pub engine: &'static str,
    /// Windows measured (over all repetitions).
    pub windows: usize,
    /// Smallest window Jain index.
    pub min: f64,
    /// Median window Jain index.
    pub median: f64,
}

/// Summarises the P11 windows of each engine.
pub fn fairness(windows: &[(&'static str, Vec<f64>)]) -> Vec<Fairness> {
    windows
        .iter()
        .map(|(engine, w)| Fairness {
            engine,
            windows: w.len(),
            min: w.iter().copied().fold(f64::NAN, f64::min),
            median: median(w),
        })
        .collect()
}

/// One PERF.md target checked against a row.
#[derive(Debug, Clone)]
pub struct Target {
    /// `P1`, `P3`, ...
    pub id: &'static str,
    /// What is compared, e.g. `p99 vs std Mutex`.
    pub what: &'static str,
    /// The row (or rows) it is read from.
    pub row: &'static str,
    /// The measured value.
    pub value: f64,
    /// The bound.
    pub bound: f64,
    /// Whether the value must be at least (true) or at most (false) the bound.
    pub at_least: bool,
}

impl Target {
    /// Whether the target is met (a NaN value misses).
    pub fn pass(&self) -> bool {
        if self.at_least {
            self.value >= self.bound
        } else {
            self.value <= self.bound
        }
    }
}

/// The targets the rows cover: P1 (cycle and fast rows, cycle-time ratio = inverse throughput
/// ratio), P3 (pull, 2 threads, 4 cells), P4 (pull and rpc, 2 threads, 4 cells), P5 (pull and
/// rpc, 8 threads, 4 cells), P6 (pull, 8 threads, 4 cells), P10 (every lock-free row), P11 (the
/// fairness run). A target whose row did not run is left out.
pub fn targets(rows: &[Row], fairness: &[Fairness]) -> Vec<Target> {
    let lf = |mode: Mode, threads: usize, cells: u32| {
        rows.iter().find(|r| {
            r.engine == LOCK_FREE
                && r.config
                    == Config {
                        mode,
                        threads,
                        cells,
                    }
        })
    };
    let mut t = Vec::new();
    let mut add = |id, what, row, value: Option<f64>, bound, at_least| {
        if let Some(value) = value {
            t.push(Target {
                id,
                what,
                row,
                value,
                bound,
                at_least,
            });
        }
    };
    for (mode, row) in [
        (Mode::Cycle, "cycle 1 thr 1 cell"),
        (Mode::Fast, "fast 1 thr 1 cell"),
    ] {
        let r = lf(mode, 1, 1);
        add(
            "P1",
            "cycle time vs std Mutex",
            row,
            r.and_then(|r| r.vs_std).map(|x| 1.0 / x.tput),
            0.6,
            false,
        );
        add(
            "P1",
            "cycle time vs parking_lot",
            row,
            r.and_then(|r| r.vs_pl).map(|x| 1.0 / x.tput),
            0.9,
            false,
        );
    }
    let two = lf(Mode::Pull, 2, 4);
    const TWO_ROW: &str = "pull 2 thr 4 cells";
    add(
        "P3",
        "throughput vs std Mutex",
        TWO_ROW,
        two.and_then(|r| r.vs_std).map(|x| x.tput),
        1.5,
        true,
    );
    add(
        "P3",
        "throughput vs parking_lot",
        TWO_ROW,
        two.and_then(|r| r.vs_pl).map(|x| x.tput),
        1.0,
        true,
    );
    // The latency targets on both the saturated pull rows (queueing behind the backlog) and the
    // paced rpc rows (the hand-off itself).
    for (mode, row) in [
        (Mode::Pull, "pull 2 thr 4 cells"),
        (Mode::Rpc, "rpc 2 thr 4 cells"),
    ] {
        add(
            "P4",
            "p99 vs std Mutex",
            row,
            lf(mode, 2, 4).and_then(|r| r.vs_std).map(|x| x.p99),
            0.25,
            false,
        );
    }
    for (mode, row) in [
        (Mode::Pull, "pull 8 thr 4 cells"),
        (Mode::Rpc, "rpc 8 thr 4 cells"),
    ] {
        let r = lf(mode, 8, 4);
        add(
            "P5",
            "p99.9 vs std Mutex",
            row,
            r.and_then(|r| r.vs_std).map(|x| x.p999),
            0.25,
            false,
        );
        add(
            "P5",
            "p99.9 vs parking_lot",
            row,
            r.and_then(|r| r.vs_pl).map(|x| x.p999),
            0.5,
            false,
        );
    }
    let eight = lf(Mode::Pull, 8, 4);
    const EIGHT_ROW: &str = "pull 8 thr 4 cells";
    add(
        "P6",
        "throughput vs std Mutex",
        EIGHT_ROW,
        eight.and_then(|r| r.vs_std).map(|x| x.tput),
        1.0,
        true,
    );
    add(
        "P6",
        "throughput vs parking_lot",
        EIGHT_ROW,
        eight.and_then(|r| r.vs_pl).map(|x| x.tput),
        0.8,
        true,
    );
    let lf_allocs = rows
        .iter()
        .filter(|r| r.engine == LOCK_FREE)
        .map(|r| r.allocs_per_op)
        .reduce(f64::max);
    add(
        "P10",
        "allocations per grant (max)",
        "every lock-free row",
        lf_allocs,
        0.0,
        false,
    );
    let p11 = fairness
        .iter()
        .find(|f| f.engine == LOCK_FREE && f.windows > 0)
        .map(|f| f.min);
    add(
        "P11",
        "min Jain index per 1,000 grants",
        "fairness run",
        p11,
        0.99,
        true,
    );
    t
}

/// Formats a row's target marks, e.g. `P3 PASS, P4 MISS`.
fn marks(row: &Row, targets: &[Target]) -> String {
    if row.engine != LOCK_FREE {
        return String::new();
    }
    let name = row_name(row.config);
    let mut ids: Vec<(&str, bool)> = Vec::new();
    for t in targets.iter().filter(|t| t.row == name) {
        match ids.iter_mut().find(|(id, _)| *id == t.id) {
            Some((_, pass)) => *pass &= t.pass(),
            None => ids.push((t.id, t.pass())),
        }
    }
    ids.iter()
        .map(|(id, pass)| format!("{id} {}", if *pass { "PASS" } else { "MISS" }))
        .collect::<Vec<_>>()
        .join(", ")
}

/// The row name targets refer to, e.g. `pull 2 thr 4 cells`.
fn row_name(c: Config) -> &'static str {
    match (c.mode, c.threads, c.cells) {
        (Mode::Cycle, 1, 1) => "cycle 1 thr 1 cell",
        (Mode::Fast, 1, 1) => "fast 1 thr 1 cell",
        (Mode::Pull, 2, 4) => "pull 2 thr 4 cells",
        (Mode::Pull, 8, 4) => "pull 8 thr 4 cells",
        (Mode::Rpc, 2, 4) => "rpc 2 thr 4 cells",
        (Mode::Rpc, 8, 4) => "rpc 8 thr 4 cells",
        _ => "",
    }
}

/// Formats a ratio cell (`-` when absent).
fn ratio(x: Option<f64>) -> String {
    x.map_or_else(|| "-".to_owned(), |x| format!("{x:.2}"))
}

/// The text report: table, fairness and targets.
pub fn text(rows: &[Row], fairness: &[Fairness], targets: &[Target]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "scheduler, multi-tenant mix (16 Zipf tenants, priorities 0-3, 1/4 with deadline, ~1.6 % cancelled, 100-300 ns hold)"
    );
    let _ = writeln!(
        out,
        "medians over repetitions; /std and /pl: median of same-repetition ratios lock-free / baseline"
    );
    let header = [
        "mode",
        "thr",
        "cells",
        "engine",
        "Mgrant/s",
        "p50 ns",
        "p99 ns",
        "p99.9 ns",
        "alloc/op",
        "jain",
        "tput/std",
        "tput/pl",
        "p99/std",
        "p99/pl",
        "p99.9/std",
        "p99.9/pl",
        "targets",
    ];
    let mut table: Vec<Vec<String>> = vec![header.iter().map(|s| s.to_string()).collect()];
    for r in rows {
        table.push(vec![
            r.config.mode.name().to_owned(),
            r.config.threads.to_string(),
            r.config.cells.to_string(),
            r.engine.to_owned(),
            format!("{:.3}", r.tput / 1e6),
            format!("{:.0}", r.p50),
            format!("{:.0}", r.p99),
            format!("{:.0}", r.p999),
            format!(
                "{:.2}{}",
                r.allocs_per_op,
                if r.allocs_per_op > 0.0 && r.allocs_per_op < 0.005 {
                    "+"
                } else {
                    ""
                }
            ),
            format!("{:.3}", r.jain),
            ratio(r.vs_std.map(|x| x.tput)),
            ratio(r.vs_pl.map(|x| x.tput)),
            ratio(r.vs_std.map(|x| x.p99)),
            ratio(r.vs_pl.map(|x| x.p99)),
            ratio(r.vs_std.map(|x| x.p999)),
            ratio(r.vs_pl.map(|x| x.p999)),
            marks(r, targets),
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| table.iter().map(|l| l[c].len()).max().unwrap_or(0))
        .collect();
    for line in &table {
        let cells: Vec<String> = line
            .iter()
            .zip(&widths)
            .enumerate()
            .map(|(c, (cell, &w))| {
                if c == 0 || c == 3 || c == header.len() - 1 {
                    format!("{cell:<w$}")
                } else {
                    format!("{cell:>w$}")
                }
            })
            .collect();
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    let _ = writeln!(out, "\nP11 fairness: 4 equal-weight saturating tenants, 1 cell; Jain index per 1,000-grant window");
    for f in fairness {
        let _ = writeln!(
            out,
            "  {:<12} windows {:>6}  min {:.4}  median {:.4}",
            f.engine, f.windows, f.min, f.median
        );
    }
    let _ = writeln!(out, "\ntargets (PERF.md), lock-free engine:");
    for t in targets {
        let _ = writeln!(
            out,
            "  {:<4} {:<32} {:<20} {:>8.3} {} {:<5} {}",
            t.id,
            t.what,
            t.row,
            t.value,
            if t.at_least { ">=" } else { "<=" },
            t.bound,
            if t.pass() { "PASS" } else { "MISS" }
        );
    }
    out
}

/// Appends the scheduler part of the JSON document: `"sched":{...}` without a leading comma.
pub fn json(
    out: &mut String,
    rows: &[Row],
    fairness: &[Fairness],
    targets: &[Target],
    plots: &[String],
) {
    out.push_str("\"sched\":{\"rows\":[");
    let nines = curve_nines();
    for (i, r) in rows.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"mode\":");
        json_str(out, r.config.mode.name());
        let _ = write!(
            out,
            ",\"threads\":{},\"cells\":{},\"engine\":",
            r.config.threads, r.config.cells
        );
        json_str(out, r.engine);
        let _ = write!(out, ",\"reps\":{}", r.reps);
        for (name, v) in [
            ("grants_per_sec", r.tput),
            ("p50_ns", r.p50),
            ("p99_ns", r.p99),
            ("p999_ns", r.p999),
            ("allocs_per_op", r.allocs_per_op),
            ("jain", r.jain),
            ("cancelled", r.cancelled),
        ] {
            let _ = write!(out, ",\"{name}\":");
            json_num(out, v);
        }
        for (name, ratios) in [("vs_std", r.vs_std), ("vs_parking_lot", r.vs_pl)] {
            let _ = write!(out, ",\"{name}\":");
            match ratios {
                None => out.push_str("null"),
                Some(x) => {
                    out.push_str("{\"tput\":");
                    json_num(out, x.tput);
                    out.push_str(",\"p50\":");
                    json_num(out, x.p50);
                    out.push_str(",\"p99\":");
                    json_num(out, x.p99);
                    out.push_str(",\"p999\":");
                    json_num(out, x.p999);
                    out.push('}');
                }
            }
        }
        out.push_str(",\"curve\":[");
        for (j, (x, y)) in nines.iter().zip(&r.curve).enumerate() {
            if j > 0 {
                out.push(',');
            }
            out.push_str("{\"nines\":");
            json_num(out, *x);
            out.push_str(",\"ns\":");
            json_num(out, *y);
            out.push('}');
        }
        out.push_str("]}");
    }
    out.push_str("],\"fairness\":[");
    for (i, f) in fairness.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"engine\":");
        json_str(out, f.engine);
        let _ = write!(out, ",\"windows\":{},\"min\":", f.windows);
        json_num(out, f.min);
        out.push_str(",\"median\":");
        json_num(out, f.median);
        out.push('}');
    }
    out.push_str("],\"targets\":[");
    for (i, t) in targets.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str("{\"id\":");
        json_str(out, t.id);
        out.push_str(",\"what\":");
        json_str(out, t.what);
        out.push_str(",\"row\":");
        json_str(out, t.row);
        out.push_str(",\"value\":");
        json_num(out, t.value);
        out.push_str(",\"bound\":");
        json_num(out, t.bound);
        let _ = write!(out, ",\"at_least\":{},\"pass\":{}}}", t.at_least, t.pass());
    }
    out.push_str("],\"plots\":[");
    for (i, p) in plots.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        json_str(out, p);
    }
    out.push_str("]}");
}

/// The header line of a standalone scheduler report.
pub fn header(system: &System) -> String {
    format!(
        "cpu: {} | cores: {} | kernel: {} | timer: {}\n",
        system.cpu, system.cores, system.kernel, system.timer
    )
}
