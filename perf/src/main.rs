//! `fairway-perf`: side-by-side performance comparison of fairway against mutex baselines and
//! peer crates, following the method of the project's performance notes.
//!
//! ```text
//! cargo run --release -p fairway-perf [-- --quick] [--json] [--reps N] [--threads 1,2,8]
//! ```
//!
//! Backends run in the same process, interleaved (A B C D, A B C D, ...), for several
//! repetitions; the report shows medians and, for each metric, the median of the per-repetition
//! ratios against fairway's structure. Only those same-run ratios are comparable across runs and
//! machines; absolute figures move with the host.
//!
//! Layout: `timer` (cheap timestamps), `stats` (histograms, medians, ratios), `report` (text and
//! JSON), and one module per workload under `workloads`.

mod alloc_count;
mod report;
mod sched_report;
mod stats;
mod svg;
mod timer;
mod workloads;

#[global_allocator]
static GLOBAL: alloc_count::Counting = alloc_count::Counting;

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

/// Command-line options.
#[derive(Debug, Clone, PartialEq)]
struct Args {
    /// A short run (seconds) for smoke checks.
    quick: bool,
    /// Print one JSON document instead of the table.
    json: bool,
    /// Repetitions per backend and thread count.
    reps: usize,
    /// Thread counts to run.
    threads: Vec<usize>,
    /// Skip the ring section.
    no_ring: bool,
    /// Length of one measured scheduler run, overriding the default of the mode.
    ms: Option<u64>,
    /// Where the plots go (default `target/fairway-perf/` of the workspace).
    plots: Option<PathBuf>,
    /// Run only the scheduler rows of this mode (for profiling); skips the ring and P11 runs.
    only: Option<String>,
}

/// Usage text for `--help` and argument errors.
const USAGE: &str =
    "usage: fairway-perf [--quick] [--json] [--reps N] [--threads 1,2,8] [--no-ring] [--ms N]
                    [--plots DIR] [--only MODE]

  --quick          short runs (seconds in all)
  --no-ring        skip the ring section, run only the scheduler comparison
  --json           print one JSON document instead of the table
  --reps N         interleaved repetitions per backend (default 5, 3 with --quick)
  --threads LIST   comma-separated thread counts (default 1,2,8)
  --ms N           length of one measured scheduler run in ms (default 400, 40 with --quick)
  --plots DIR      where the SVG plots go (default target/fairway-perf/)
  --only MODE      only the scheduler rows of MODE (cycle, fast, wait, pull, rpc), no ring and
                   no fairness run: for profiling one workload";

impl Args {
    /// Parses `args` (without the program name).
    fn parse(args: impl IntoIterator<Item = String>) -> Result<Self, String> {
        let mut quick = false;
        let mut json = false;
        let mut reps = None;
        let mut threads = vec![1, 2, 8];
        let mut no_ring = false;
        let mut ms = None;
        let mut plots = None;
        let mut only = None;
        let mut it = args.into_iter();
        while let Some(arg) = it.next() {
            let mut value = |name: &str| it.next().ok_or_else(|| format!("{name} needs a value"));
            match arg.as_str() {
                "--quick" => quick = true,
                "--json" => json = true,
                "--no-ring" => no_ring = true,
                "--reps" => {
                    let v = value("--reps")?;
                    reps = Some(match v.parse() {
                        Ok(n) if n > 0 => n,
                        _ => return Err(format!("--reps: expected a positive integer, got {v:?}")),
                    });
                }
                "--threads" => {
                    let v = value("--threads")?;
                    threads = v
                        .split(',')
                        .map(|t| match t.trim().parse() {
                            Ok(n) if n > 0 => Ok(n),
                            _ => Err(format!("--threads: bad thread count {t:?}")),
                        })
                        .collect::<Result<_, _>>()?;
                }
                "--ms" => {
                    let v = value("--ms")?;
                    ms = Some(match v.parse() {
                        Ok(n) if n > 0 => n,
                        _ => return Err(format!("--ms: expected a positive integer, got {v:?}")),
                    });
                }
                "--plots" => plots = Some(PathBuf::from(value("--plots")?)),
                "--only" => {
                    let v = value("--only")?;
                    if !["cycle", "fast", "wait", "pull", "rpc"].contains(&v.as_str()) {
                        return Err(format!("--only: unknown mode {v:?}"));
                    }
                    only = Some(v);
                }
                "-h" | "--help" => return Err(String::new()),
                other => return Err(format!("unknown argument {other:?}")),
            }
        }
        Ok(Self {
            quick,
            json,
            reps: reps.unwrap_or(if quick { 3 } else { 5 }),
            threads,
            no_ring,
            ms,
            plots,
            only,
        })
    }

    /// Wall time of one measured ring run.
    fn ring_for(&self) -> Duration {
        Duration::from_millis(if self.quick { 10 } else { 50 })
    }

    /// Wall time of one measured scheduler run.
    fn sched_for(&self) -> Duration {
        Duration::from_millis(self.ms.unwrap_or(if self.quick { 40 } else { 400 }))
    }

    /// Wall time of one measured batch of a single-operation target (P2, P7).
    fn micro_for(&self) -> Duration {
        Duration::from_millis(if self.quick { 20 } else { 150 })
    }

    /// Wall time of one P11 fairness run.
    fn fairness_for(&self) -> Duration {
        Duration::from_millis(if self.quick { 40 } else { 300 })
    }
}

/// Where the plots go: `target/fairway-perf/` of the workspace.
fn plot_dir() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../target/fairway-perf"
    ))
}

/// Everything one invocation measured.
struct Results {
    ring: Vec<report::Row>,
    sched: Vec<sched_report::Row>,
    fairness: Vec<sched_report::Fairness>,
    /// P2 and P7 (absent with `--only`).
    micro: Option<Micro>,
    targets: Vec<sched_report::Target>,
}

/// The single-operation targets.
#[derive(Debug, Clone, Copy)]
struct Micro {
    /// P2: `FixedCellPool` / tokio `Semaphore`.
    pool: workloads::micro::Pair,
    /// P7: cancel at depth 4096 / depth 1.
    cancel: workloads::micro::Pair,
}

impl Micro {
    /// The P2 and P7 targets.
    fn targets(&self) -> [sched_report::Target; 2] {
        [
            sched_report::Target {
                id: "P2",
                what: "acquire+release vs tokio",
                row: "pool 1 thr 1 cell",
                value: self.pool.ratio,
                bound: 0.6,
                at_least: false,
            },
            sched_report::Target {
                id: "P7",
                what: "cancel at depth 4096 vs 1",
                row: "cancel, 1 cell held",
                value: self.cancel.ratio,
                bound: 1.2,
                at_least: false,
            },
        ]
    }

    fn text(&self, reps: usize) -> String {
        format!(
            "single operations (median ns/op of {reps} interleaved repetitions; ratio: median of same-repetition ratios)\n  \
             P2  FixedCellPool acquire+release {:>8.1} ns   tokio Semaphore try_acquire+drop {:>8.1} ns   ratio {:.3}\n  \
             P7  lock-free cancel+replace, depth 4096 {:>8.1} ns   depth 1 {:>8.1} ns   ratio {:.3}\n",
            self.pool.ns, self.pool.base_ns, self.pool.ratio, self.cancel.ns, self.cancel.base_ns, self.cancel.ratio
        )
    }

    fn json(&self, out: &mut String) {
        for (i, (name, p)) in [
            ("p2_pool_vs_tokio", self.pool),
            ("p7_cancel_4096_vs_1", self.cancel),
        ]
        .into_iter()
        .enumerate()
        {
            if i > 0 {
                out.push(',');
            }
            report::json_str(out, name);
            out.push_str(":{\"ns\":");
            report::json_num(out, p.ns);
            out.push_str(",\"base_ns\":");
            report::json_num(out, p.base_ns);
            out.push_str(",\"ratio\":");
            report::json_num(out, p.ratio);
            out.push('}');
        }
    }
}

/// Runs the ring section (unless skipped), the scheduler comparison and the P11 run.
fn measure(args: &Args, timer: &timer::Timer) -> Results {
    let progress = |s: String| {
        if !args.json {
            eprintln!("{s}");
        }
    };
    let ring = if args.no_ring || args.only.is_some() {
        Vec::new()
    } else {
        progress(format!(
            "ring: 4 backends x threads {:?} x {} reps, {} ms each...",
            args.threads,
            args.reps,
            args.ring_for().as_millis()
        ));
        let samples = workloads::ring::run(timer, &args.threads, args.reps, args.ring_for());
        report::rows("ring", &samples, workloads::ring::FAIRWAY, timer)
    };
    let hold100 = workloads::sched::calibrate_hold();
    let mut configs = workloads::sched::configs(&args.threads);
    if let Some(mode) = &args.only {
        configs.retain(|c| c.mode.name() == mode);
    }
    progress(format!(
        "scheduler: 3 engines x {} configurations x {} reps, {} ms each...",
        configs.len(),
        args.reps,
        args.sched_for().as_millis()
    ));
    let samples = workloads::sched::run(timer, &configs, args.reps, args.sched_for(), hold100);
    let sched = sched_report::rows(&samples, timer);
    let fairness = if args.only.is_some() {
        Vec::new()
    } else {
        progress(format!(
            "fairness (P11): 3 engines x {} reps, {} ms each...",
            args.reps,
            args.fairness_for().as_millis()
        ));
        let windows = workloads::sched::fairness(timer, args.reps, args.fairness_for());
        sched_report::fairness(&windows)
    };
    let micro = args.only.is_none().then(|| {
        progress(format!(
            "single operations (P2, P7): {} reps, {} ms each...",
            args.reps,
            args.micro_for().as_millis()
        ));
        Micro {
            pool: workloads::micro::pool(args.reps, args.micro_for()),
            cancel: workloads::micro::cancel(args.reps, args.micro_for()),
        }
    });
    let mut targets = sched_report::targets(&sched, &fairness);
    if let Some(m) = &micro {
        targets.extend(m.targets());
        // In PERF.md order: P1, P2, ..., P11.
        targets.sort_by_key(|t| t.id[1..].parse::<u32>().unwrap_or(u32::MAX));
    }
    Results {
        ring,
        sched,
        fairness,
        micro,
        targets,
    }
}

/// Writes one latency plot per thread count; returns the paths written.
fn write_plots(args: &Args, rows: &[sched_report::Row]) -> Vec<String> {
    let dir = args.plots.clone().unwrap_or_else(plot_dir);
    if let Err(e) = std::fs::create_dir_all(&dir) {
        eprintln!("cannot create {}: {e}", dir.display());
        return Vec::new();
    }
    let mut written = Vec::new();
    for &t in &args.threads {
        let path = dir.join(format!("latency-{t}-threads.svg"));
        match std::fs::write(&path, svg::latency_plot(t, rows)) {
            Ok(()) => written.push(path.display().to_string()),
            Err(e) => eprintln!("cannot write {}: {e}", path.display()),
        }
    }
    written
}

/// The whole report as one JSON document.
fn json_document(system: &report::System, r: &Results, plots: &[String]) -> String {
    let mut doc = report::json(system, workloads::ring::FAIRWAY, &r.ring);
    // `report::json` closes the document with its last `}`: reopen it for the scheduler part.
    doc.pop();
    doc.push(',');
    sched_report::json(&mut doc, &r.sched, &r.fairness, &r.targets, plots);
    doc.push_str(",\"micro\":");
    match &r.micro {
        None => doc.push_str("null"),
        Some(m) => {
            doc.push('{');
            m.json(&mut doc);
            doc.push('}');
        }
    }
    doc.push('}');
    doc
}

fn main() -> ExitCode {
    let args = match Args::parse(std::env::args().skip(1)) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("{e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    let timer = timer::Timer::calibrate();
    let system = report::System::detect(&timer);
    let results = measure(&args, &timer);
    let plots = write_plots(&args, &results.sched);
    if args.json {
        println!("{}", json_document(&system, &results, &plots));
    } else {
        if results.ring.is_empty() {
            print!("{}", sched_report::header(&system));
        } else {
            print!(
                "{}",
                report::text(&system, workloads::ring::FAIRWAY, &results.ring)
            );
        }
        println!();
        if let Some(m) = &results.micro {
            println!("{}", m.text(args.reps));
        }
        print!(
            "{}",
            sched_report::text(&results.sched, &results.fairness, &results.targets)
        );
        for p in &plots {
            println!("plot: {p}");
        }
    }
    ExitCode::SUCCESS
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Result<Args, String> {
        Args::parse(s.split_whitespace().map(str::to_owned))
    }

    #[test]
    fn defaults() {
        let a = parse("").unwrap();
        assert_eq!(
            (a.quick, a.json, a.reps, a.threads),
            (false, false, 5, vec![1, 2, 8])
        );
    }

    #[test]
    fn all_flags() {
        let a = parse("--quick --json --reps 7 --threads 1,4").unwrap();
        assert_eq!(
            (a.quick, a.json, a.reps, a.threads),
            (true, true, 7, vec![1, 4])
        );
        assert_eq!(parse("--quick").unwrap().reps, 3);
    }

    #[test]
    fn bad_input_is_refused() {
        assert!(parse("--reps 0").is_err());
        assert!(parse("--reps").is_err());
        assert!(parse("--threads 1,x").is_err());
        assert!(parse("--frobnicate").is_err());
        assert!(parse("--ms 0").is_err());
        assert!(parse("--plots").is_err());
        assert!(parse("--only frobnicate").is_err());
        assert_eq!(parse("--only rpc").unwrap().only.as_deref(), Some("rpc"));
    }

    #[test]
    fn quick_ring_run_reports_every_backend() {
        let timer = timer::Timer::calibrate();
        let samples = workloads::ring::run(&timer, &[1, 2], 2, Duration::from_millis(5));
        let rows = report::rows("ring", &samples, workloads::ring::FAIRWAY, &timer);
        assert_eq!(rows.len(), 8);
        for r in &rows {
            assert!(r.median.mops > 0.0, "{r:?}");
            assert_eq!(r.reps, 2);
        }
        assert!(rows
            .iter()
            .filter(|r| r.backend == workloads::ring::FAIRWAY)
            .all(|r| r.ratio.mops == 1.0));
    }

    #[test]
    fn ms_and_plots_flags() {
        let a = parse("--ms 250 --plots out").unwrap();
        assert_eq!(a.sched_for(), Duration::from_millis(250));
        assert_eq!(a.plots, Some(PathBuf::from("out")));
        assert_eq!(
            parse("--quick").unwrap().sched_for(),
            Duration::from_millis(40)
        );
    }

    #[test]
    fn no_ring_flag() {
        assert!(parse("--no-ring").unwrap().no_ring);
        assert!(!parse("").unwrap().no_ring);
    }

    /// A short full run (1 and 2 threads, 2 repetitions, a few ms each): every engine reports
    /// every configuration, the lock-free engine allocates nothing, the targets it covers are
    /// present, the plots are valid-looking SVG, and the JSON document parses.
    #[test]
    fn short_full_run_reports_everything_and_json_parses() {
        let args = Args {
            quick: true,
            json: true,
            reps: 2,
            threads: vec![1, 2],
            no_ring: false,
            ms: None,
            plots: None,
            only: None,
        };
        let timer = timer::Timer::calibrate();
        let results = measure(&args, &timer);
        // cycle + fast + (wait, pull) x (1, 2 threads) x (1, 4 cells) + rpc x 2 threads x (1, 4
        // cells) configurations, 3 engines each.
        assert_eq!(results.sched.len(), 12 * 3);
        for r in &results.sched {
            assert!(r.tput > 0.0, "{r:?}");
            assert_eq!(r.reps, 2);
            assert_eq!(
                r.vs_std.is_some(),
                r.engine == workloads::sched::LOCK_FREE,
                "{r:?}"
            );
            if r.engine == workloads::sched::LOCK_FREE {
                assert_eq!(r.allocs_per_op, 0.0, "{r:?}");
            }
        }
        let ids: Vec<&str> = results.targets.iter().map(|t| t.id).collect();
        for id in ["P1", "P2", "P3", "P4", "P7", "P10", "P11"] {
            assert!(ids.contains(&id), "{id} missing from {ids:?}");
        }
        assert_eq!(results.fairness.len(), 3);
        let svg = svg::latency_plot(2, &results.sched);
        assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
        // (wait, pull, rpc) x (1, 4 cells) panels, one line per engine.
        assert_eq!(svg.matches("<polyline").count(), 6 * 3);
        let system = report::System::detect(&timer);
        let doc = json_document(&system, &results, &["a.svg".to_owned()]);
        let v: serde_json::Value = serde_json::from_str(&doc).expect("valid JSON");
        assert_eq!(v["sched"]["rows"].as_array().unwrap().len(), 36);
        assert_eq!(v["rows"].as_array().unwrap().len(), 8);
        assert!(v["sched"]["targets"][0]["pass"].is_boolean());
        assert!(v["micro"]["p2_pool_vs_tokio"]["ratio"].as_f64().unwrap() > 0.0);
        assert!(v["micro"]["p7_cancel_4096_vs_1"]["ratio"].as_f64().unwrap() > 0.0);
        assert_eq!(v["sched"]["plots"][0], "a.svg");
    }
}
