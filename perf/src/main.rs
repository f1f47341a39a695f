//! `fairway-perf`: fairway's engines side by side with mutex baselines and peer crates, in one
//! process, interleaved, following the method of the project's performance notes (PERF.md).
//!
//! ```text
//! cargo run --release -p fairway-perf [-- --suite default|open-loop|scaling|graph|all|request|versions|tower]
//!     [--json] [--markdown] [--check] [--out FILE] [--reps N] [--ms N] [--quick]
//!     [--threads 1,2,4,8,16] [--plots DIR]
//! fairway-perf --compare A.json B.json
//! fairway-perf --report FILE.json [--markdown] [--check]
//! fairway-perf --instr ROW --ops N          (for perf/callgrind.sh)
//! ```
//!
//! Parse arguments ([`Args`]), run a suite ([`suites`]), evaluate the targets ([`targets`]),
//! report ([`report`], [`plot`]) or compare two reports ([`compare`]).

mod compare;
mod graph_dag;
mod graph_inherit;
mod plot;
mod report;
mod suites;
mod targets;
mod tower;
mod versions;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use fairway::pool::FixedCellPool;
use fairway_bench_support::alloc::Counting;
use fairway_bench_support::latency::Latency;
use fairway_bench_support::pool::OneCell;
use fairway_bench_support::sched::{engines, OwnedFast, UncontendedCas};
use fairway_bench_support::{OpUser, SingleOp};

use fairway::oracle::{LockFreeGraph, MutexGraph};
use fairway_bench_support::graph::{self, Until};
use report::{Report, System};
use suites::Settings;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Usage text for `--help` and argument errors.
const USAGE: &str =
    "usage: fairway-perf [--suite NAME] [--json] [--markdown] [--check] [--out FILE]
                    [--reps N] [--ms N] [--quick] [--threads LIST] [--plots DIR]
       fairway-perf --compare A.json B.json
       fairway-perf --report FILE.json [--markdown] [--check]
       fairway-perf --instr ROW [--ops N]

  --suite NAME     default (one row per PERF.md target), open-loop (50/80/95 % load at 2 and 8
                   threads, with plots), scaling (wait, pull and open-loop rows at --threads),
                   graph (the dependency
                   graph's P8 and P9 rows, a random 10^5-job DAG at 1/2/8 executor threads
                   beside a topological walk, advance and remove, key churn and key
                   compaction, 10^6 submits into an empty and into a warmed graph), all,
                   request (the request path's rows only: P1, P13, P7, P3),
                   versions (P12: the version directory's capture at 250, 3,000, 10^5 keys),
                   tower (P17: the fair tower layer beside firq-tower, a quiet tenant alone
                   and while another floods), inherit (in-place changes beside cancel, and
                   the graph's inheritance: raise and drop through chains of 1, 16 and 256,
                   an urgent job whose dependency waits behind 10^3 jobs), growth (the
                   graph suite's 10^6 submits into an empty and into a warmed graph)
  --json           print the report as JSON (no progress on stderr)
  --markdown       print the targets as the README's Markdown table
  --check          exit with status 1 when a target misses (on the run's median)
  --out FILE       also write the JSON report to FILE
  --reps N         interleaved repetitions (default 7, 3 with --quick)
  --ms N           one threaded run in ms (default 500, 40 with --quick)
  --quick          short runs, for smoke checks
  --threads LIST   thread counts of the scaling suite (default 1,2,4,8,16)
  --plots DIR      where SVG plots go (default target/fairway-perf/)
  --compare A B    each same-run ratio of report A beside report B, flagged where the change
                   exceeds the spread of their repetitions
  --report FILE    print a saved JSON report (text, or --markdown; --check applies)
  --instr ROW      run one single-thread operation --ops times inside `measured` (for callgrind):
                   cycle, fast, pull-cycle, admit-refund, cancel-1, cancel-4096, reorder-1,
                   reorder-4096 (the engine), std-reorder-4096,
                   std-cycle, std-pull-cycle, std-admit-refund, pl-cycle (the mutex twins),
                   owned-fast, cas, pool, tokio, graph-p8-lock-free, graph-p8-std,
                   graph-p9-lock-free, graph-p9-std";

/// What to do.
#[derive(Debug, Clone, PartialEq)]
enum Command {
    /// Run a suite.
    Run(String),
    /// Compare two saved reports.
    Compare(PathBuf, PathBuf),
    /// Print a saved report.
    Report(PathBuf),
    /// Run one single-thread operation for instruction counting.
    Instr(String, u64),
}

/// Command-line options.
#[derive(Debug, Clone, PartialEq)]
struct Args {
    command: Command,
    json: bool,
    markdown: bool,
    check: bool,
    out: Option<PathBuf>,
    settings: Settings,
    threads: Vec<usize>,
    plots: Option<PathBuf>,
}

impl Args {
    /// Parses `args` (without the program name); `Ok(None)` for `--help`.
    fn parse(args: impl IntoIterator<Item = String>) -> Result<Option<Self>, lexopt::Error> {
        use lexopt::prelude::*;
        let mut p = lexopt::Parser::from_args(args);
        let (mut suite, mut compare, mut report, mut instr) = (None, None, None, None);
        let (mut json, mut markdown, mut check, mut quick) = (false, false, false, false);
        let (mut out, mut plots, mut reps, mut ms) = (None, None, None, None);
        let mut ops = 100_000u64;
        let mut threads = vec![1, 2, 4, 8, 16];
        let positive = |s: &str| match s.parse::<u64>() {
            Ok(v) if v > 0 => Ok(v),
            _ => Err(format!("expected a positive integer, got {s:?}")),
        };
        while let Some(arg) = p.next()? {
            match arg {
                Long("suite") => suite = Some(p.value()?.string()?),
                Long("json") => json = true,
                Long("markdown") => markdown = true,
                Long("check") => check = true,
                Long("quick") => quick = true,
                Long("out") => out = Some(PathBuf::from(p.value()?)),
                Long("plots") => plots = Some(PathBuf::from(p.value()?)),
                Long("reps") => reps = Some(p.value()?.parse_with(positive)?),
                Long("ms") => ms = Some(p.value()?.parse_with(positive)?),
                Long("ops") => ops = p.value()?.parse_with(positive)?,
                Long("threads") => {
                    threads = p.value()?.parse_with(|s| {
                        s.split(',')
                            .map(|t| match t.trim().parse::<usize>() {
                                Ok(n) if n > 0 => Ok(n),
                                _ => Err(format!("bad thread count {t:?}")),
                            })
                            .collect::<Result<Vec<_>, _>>()
                    })?;
                }
                Long("compare") => {
                    let a = PathBuf::from(p.value()?);
                    compare = Some((a, PathBuf::from(p.value()?)));
                }
                Long("report") => report = Some(PathBuf::from(p.value()?)),
                Long("instr") => instr = Some(p.value()?.string()?),
                Short('h') | Long("help") => return Ok(None),
                _ => return Err(arg.unexpected()),
            }
        }
        let command = match (suite, compare, report, instr) {
            (s, None, None, None) => Command::Run(s.unwrap_or_else(|| "default".into())),
            (None, Some((a, b)), None, None) => Command::Compare(a, b),
            (None, None, Some(f), None) => Command::Report(f),
            (None, None, None, Some(row)) => Command::Instr(row, ops),
            _ => return Err("--suite, --compare, --report and --instr exclude each other".into()),
        };
        if let Command::Run(s) = &command {
            if !suites::SUITES.contains(&s.as_str()) {
                return Err(format!("unknown suite {s:?}").into());
            }
        }
        let q = |full: u64, short: u64| Duration::from_millis(if quick { short } else { full });
        Ok(Some(Self {
            command,
            json,
            markdown,
            check,
            out,
            settings: Settings {
                reps: reps.map_or(if quick { 3 } else { 7 }, |r| r as usize),
                threaded: ms.map_or(q(500, 40), Duration::from_millis),
                single: q(150, 15),
                fairness: q(300, 40),
                progress: !json,
            },
            threads,
            plots,
        }))
    }
}

/// Runs the suite and builds the report (plots written to `plots`).
fn run_suite(suite: &str, args: &Args) -> Report {
    let start = Instant::now();
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    // The scaling suite runs up to the machine's cores (and at least 1, 2 threads).
    let threads: Vec<usize> = args
        .threads
        .iter()
        .copied()
        .filter(|&t| suite != "scaling" || t <= cores.max(2))
        .collect();
    let jobs = suites::plan(suite, &threads).expect("suite checked by the parser");
    let m = suites::run(&jobs, &args.settings);
    // Plots go to the workspace's target/fairway-perf/ unless --plots says where; the report
    // names them relative to the workspace there.
    let (dir, shown) = match &args.plots {
        Some(d) => (d.clone(), d.clone()),
        None => (
            PathBuf::from(concat!(
                env!("CARGO_MANIFEST_DIR"),
                "/../target/fairway-perf"
            )),
            PathBuf::from("target/fairway-perf"),
        ),
    };
    let plots = write_plots(&dir, &m.rows, &m.latency)
        .into_iter()
        .map(|name| shown.join(name).display().to_string())
        .collect();
    Report {
        system: System::detect(),
        suite: suite.into(),
        reps: args.settings.reps,
        wall_s: start.elapsed().as_secs_f64(),
        targets: targets::evaluate(&m.rows),
        rows: m.rows,
        plots,
    }
}

/// Latency against offered load and the latency percentile curves of the open-loop rows, one
/// file each per thread count, into `dir`; returns the names of the files written.
fn write_plots(dir: &std::path::Path, rows: &[report::Row], lat: &[Latency]) -> Vec<String> {
    // (threads, load, row index) of every open-loop row.
    let open: Vec<(usize, u32, usize)> = rows
        .iter()
        .enumerate()
        .filter_map(|(i, r)| {
            let mut w = r.workload.strip_prefix("open ")?.split(['%', ' ']);
            let load = w.next()?.parse().ok()?;
            let threads = w.nth(1)?.parse().ok()?;
            Some((threads, load, i))
        })
        .collect();
    let mut threads: Vec<usize> = open.iter().map(|o| o.0).collect();
    threads.dedup();
    let mut charts = Vec::new();
    for t in threads {
        let here: Vec<_> = open.iter().filter(|o| o.0 == t).collect();
        let engines: Vec<&str> = engines().iter().map(|e| e.name).collect();
        let mut loads: Vec<u32> = here.iter().map(|o| o.1).collect();
        loads.sort_unstable();
        loads.dedup();
        if loads.len() > 1 {
            let mut series = Vec::new();
            for e in &engines {
                for (label, dash, f) in [
                    (
                        "p50",
                        "2 3",
                        (|r: &report::Rep| r.p50_ns) as fn(&report::Rep) -> f64,
                    ),
                    ("p99", "", |r| r.p99_ns),
                    ("p99.9", "7 3", |r| r.p999_ns),
                ] {
                    let points = here
                        .iter()
                        .filter(|o| rows[o.2].backend == *e)
                        .map(|o| (f64::from(o.1), rows[o.2].median(f)))
                        .collect();
                    series.push(plot::Series {
                        label: format!("{e} {label}"),
                        colour: plot::colour(e),
                        dash,
                        points,
                    });
                }
            }
            let x = plot::XAxis {
                range: (40.0, 100.0),
                label: "offered load, % of the std Mutex baseline's capacity in this run".into(),
                ticks: loads
                    .iter()
                    .map(|&l| (f64::from(l), format!("{l} %")))
                    .collect(),
            };
            let title =
                format!("open-loop latency from scheduled arrival vs load, {t} threads, 4 cells");
            charts.push((
                format!("latency-vs-load-{t}-threads.svg"),
                plot::chart(&title, &x, &series),
            ));
        }
        let nines: Vec<f64> = (3..=40).map(|i| f64::from(i) / 10.0).collect();
        let at = if loads.contains(&80) {
            80
        } else {
            loads[loads.len() - 1]
        };
        let series = here
            .iter()
            .filter(|o| o.1 == at)
            .map(|o| plot::Series {
                label: rows[o.2].backend.clone(),
                colour: plot::colour(&rows[o.2].backend),
                dash: "",
                points: nines
                    .iter()
                    .map(|&n| (n, lat[o.2].quantile(1.0 - 10f64.powf(-n))))
                    .collect(),
            })
            .collect::<Vec<_>>();
        let x = plot::XAxis {
            range: (0.3, 4.0),
            label: "percentile".into(),
            ticks: [
                (0.3, "p50"),
                (1.0, "p90"),
                (2.0, "p99"),
                (3.0, "p99.9"),
                (4.0, "p99.99"),
            ]
            .map(|(v, l)| (v, l.to_owned()))
            .to_vec(),
        };
        let title = format!("open-loop latency percentiles at {at} % load, {t} threads, 4 cells");
        charts.push((
            format!("latency-cdf-{t}-threads.svg"),
            plot::chart(&title, &x, &series),
        ));
    }
    if !charts.is_empty() {
        if let Err(e) = std::fs::create_dir_all(dir) {
            eprintln!("cannot create {}: {e}", dir.display());
            return Vec::new();
        }
    }
    charts
        .into_iter()
        .filter_map(|(name, svg)| {
            let path = dir.join(&name);
            match std::fs::write(&path, svg) {
                Ok(()) => Some(name),
                Err(e) => {
                    eprintln!("cannot write {}: {e}", path.display());
                    None
                }
            }
        })
        .collect()
}

/// Runs `op` `n` times; the function `perf/callgrind.sh` collects instructions in.
#[inline(never)]
fn measured(op: &mut dyn SingleOp, n: u64) {
    op.run(n);
}

/// `--instr`: builds the named operation, warms it, runs it `n` times inside [`measured`].
fn instr(row: &str, n: u64) -> Result<(), String> {
    let mut body = |op: &mut dyn SingleOp| {
        op.run(1000);
        measured(op, n);
    };
    let u: OpUser<'_> = &mut body;
    let [lf, std_mutex, parking_lot] = engines();
    match row {
        "cycle" => (lf.cycle)(u),
        "fast" => (lf.fast)(u),
        "cancel-1" => (lf.cancel)(1, u),
        "cancel-4096" => (lf.cancel)(4096, u),
        "reorder-1" => (lf.reorder)(1, u),
        "reorder-4096" => (lf.reorder)(4096, u),
        "std-reorder-4096" => (std_mutex.reorder)(4096, u),
        "pull-cycle" => (lf.pull_cycle)(u),
        "admit-refund" => (lf.admit_refund)(u),
        "std-cycle" => (std_mutex.cycle)(u),
        "std-pull-cycle" => (std_mutex.pull_cycle)(u),
        "std-admit-refund" => (std_mutex.admit_refund)(u),
        "pl-cycle" => (parking_lot.cycle)(u),
        "owned-fast" => u(&mut OwnedFast::new()),
        "cas" => u(&mut UncontendedCas::default()),
        "pool" => u(&mut OneCell::<FixedCellPool>::new()),
        "tokio" => u(&mut OneCell::<tokio::sync::Semaphore>::new()),
        // The graph rows count their timed regions (`graph::p8_timed`, `graph::p9_timed`).
        "graph-p8-lock-free" => drop(graph::p8_until::<LockFreeGraph>(Until::Ops(n))),
        "graph-p8-std" => drop(graph::p8_until::<MutexGraph>(Until::Ops(n))),
        "graph-p9-lock-free" => drop(graph::p9_until::<LockFreeGraph>(Until::Ops(n))),
        "graph-p9-std" => drop(graph::p9_until::<MutexGraph>(Until::Ops(n))),
        other => return Err(format!("unknown row {other:?}")),
    }
    println!("{row}: {n} operations");
    Ok(())
}

/// Reads a saved report.
fn load(path: &std::path::Path) -> Result<Report, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Prints `r` as asked and applies `--check`.
fn emit(r: &Report, args: &Args) -> Result<ExitCode, String> {
    let json = serde_json::to_string_pretty(r).map_err(|e| e.to_string())?;
    if let Some(out) = &args.out {
        std::fs::write(out, &json).map_err(|e| format!("{}: {e}", out.display()))?;
    }
    if args.json {
        println!("{json}");
    } else if args.markdown {
        print!("{}", targets::markdown(&r.targets));
    } else {
        print!("{}", r.text());
    }
    Ok(if args.check && !targets::all_met(&r.targets) {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(Some(a)) => a,
        Ok(None) => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let result = match &args.command {
        Command::Run(suite) => emit(&run_suite(suite, &args), &args),
        Command::Report(f) => load(f).and_then(|r| emit(&r, &args)),
        Command::Compare(a, b) => load(a).and_then(|a| {
            let b = load(b)?;
            print!("{}", compare::text(&a, &b, &compare::changes(&a, &b)));
            Ok(ExitCode::SUCCESS)
        }),
        Command::Instr(row, n) => instr(row, *n).map(|()| ExitCode::SUCCESS),
    };
    result.unwrap_or_else(|e| {
        eprintln!("{e}");
        ExitCode::from(2)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Option<Args>, lexopt::Error> {
        Args::parse(s.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn defaults_and_flags() {
        let a = parse("").unwrap().unwrap();
        assert_eq!(a.command, Command::Run("default".into()));
        assert_eq!(
            (a.settings.reps, a.settings.threaded),
            (7, Duration::from_millis(500))
        );
        let a = parse("--suite open-loop --json --check --reps 7 --ms 100 --threads 1,4")
            .unwrap()
            .unwrap();
        assert_eq!(a.command, Command::Run("open-loop".into()));
        assert!(a.json && a.check && !a.settings.progress);
        assert_eq!((a.settings.reps, a.threads), (7, vec![1, 4]));
        assert_eq!(parse("--quick").unwrap().unwrap().settings.reps, 3);
        let c = parse("--compare a.json b.json").unwrap().unwrap();
        assert_eq!(
            c.command,
            Command::Compare("a.json".into(), "b.json".into())
        );
        assert!(parse("--help").unwrap().is_none());
    }

    #[test]
    fn bad_input_is_refused() {
        for bad in [
            "--reps 0",
            "--reps",
            "--threads 1,x",
            "--frobnicate",
            "--suite nope",
            "--compare a.json",
            "--suite all --compare a b",
        ] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }

    /// `--check` turns a missed target into exit status 1, on a run or on a saved report
    /// (`--report`); without it the status is 0.
    #[test]
    fn check_exits_non_zero_when_a_target_misses() {
        let row = |backend: &str, tput: f64| report::Row {
            workload: targets::rows::PULL2.into(),
            backend: backend.into(),
            reps: vec![report::Rep {
                ops_per_sec: tput,
                ..report::Rep::default()
            }],
        };
        let report_of = |lf: f64| {
            let rows = vec![row("lock-free", lf), row("std Mutex", 1.0)];
            Report {
                system: System::detect(),
                suite: "default".into(),
                reps: 1,
                wall_s: 0.0,
                targets: targets::evaluate(&rows),
                rows,
                plots: vec![],
            }
        };
        let path =
            std::env::temp_dir().join(format!("fairway-perf-check-{}.json", std::process::id()));
        let mut a = parse(&format!("--report {} --check --markdown", path.display()))
            .unwrap()
            .unwrap();
        // P3 vs std needs ≥ 1.5x: 1.2x misses, 1.6x passes.
        for (lf, status) in [(1.2, ExitCode::FAILURE), (1.6, ExitCode::SUCCESS)] {
            std::fs::write(&path, serde_json::to_string(&report_of(lf)).unwrap()).unwrap();
            let r = load(&path).unwrap();
            assert_eq!(emit(&r, &a).unwrap(), status, "lock-free at {lf}x");
        }
        a.check = false;
        std::fs::write(&path, serde_json::to_string(&report_of(1.2)).unwrap()).unwrap();
        assert_eq!(emit(&load(&path).unwrap(), &a).unwrap(), ExitCode::SUCCESS);
        std::fs::remove_file(&path).unwrap();
    }

    /// A short default run: every target of the default suite is evaluated, the lock-free rows
    /// allocate nothing, and `--check`'s verdict and the JSON follow the targets.
    #[test]
    fn quick_default_run_evaluates_every_target() {
        let mut a = parse("--quick --reps 2 --json").unwrap().unwrap();
        a.settings.threaded = Duration::from_millis(20);
        a.plots = Some(std::env::temp_dir().join("fairway-perf-test"));
        let r = run_suite("default", &a);
        let ids: Vec<&str> = r.targets.iter().map(|v| v.id.as_str()).collect();
        for id in [
            "P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P11", "P13",
        ] {
            assert!(ids.contains(&id), "{id} missing from {ids:?}");
        }
        assert_eq!(r.targets.len(), targets::TARGETS.len());
        for row in &r.rows {
            assert_eq!(row.reps.len(), 2, "{row:?}");
            assert!(row.reps.iter().all(|x| x.ops_per_sec > 0.0), "{row:?}");
        }
        let p10 = r.targets.iter().find(|v| v.id == "P10").unwrap();
        assert_eq!(p10.value, 0.0, "lock-free rows allocated");
        let back: Report = serde_json::from_str(&serde_json::to_string(&r).unwrap()).unwrap();
        assert_eq!(back.targets, r.targets);
        assert_eq!(
            r.plots.len(),
            2,
            "one latency-percentile plot per open-loop thread count"
        );
    }
}
