//! The suites: which workloads a run measures, and the loop that measures them.
//!
//! A suite is a list of [`Job`]s; a job is a workload run on several backends (its arms),
//! interleaved (A B C, A B C, ...) for every repetition after one discarded warm-up round.

use std::time::{Duration, Instant};

use fairway::pool::FixedCellPool;
use fairway_bench_support::alloc::thread_allocs;
use fairway_bench_support::latency::Latency;
use fairway_bench_support::pool::OneCell;
use fairway_bench_support::sched::{engines, AdmitRefund, Mode, UncontendedCas};
use fairway_bench_support::{Measured, OpUser, SingleOp};

use crate::graph_dag;
use crate::graph_inherit;
use crate::report::{Rep, Row};
use crate::targets::rows;
use fairway::oracle::{LockFreeGraph, MutexGraph};
use fairway_bench_support::graph;

/// The named suites (`--suite`).
pub const SUITES: [&str; 10] = [
    "default",
    "open-loop",
    "scaling",
    "graph",
    "all",
    "request",
    "versions",
    "tower",
    "inherit",
    "growth",
];

/// Offered loads of the open-loop suite, % of the std baseline's capacity.
const LOADS: [u32; 3] = [50, 80, 95];

/// One workload and the backends it runs on.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Job {
    /// P1: the cycle through the policy, every engine.
    Cycle,
    /// P1: the fast path, every engine.
    Fast,
    /// P2, P13: pool, tokio, admit→refund and CAS.
    Single,
    /// P7: cancel at depth 4096 and 1, fairway's engine.
    Cancel,
    /// A closed-loop run: mode, threads, cells.
    Closed(Mode, usize, u32),
    /// An open-loop run: load (% of std capacity), threads, cells.
    Open(u32, usize, u32),
    /// P11.
    Fairness,
    /// P8 (8) or P9 (9): the dependency graph, lock-free and mutex graph.
    Graph(u8),
    /// The whole random DAG (10^5 jobs) run by this many executor threads, both graph engines
    /// and the single-threaded topological walk.
    GraphDag(usize),
    /// `advance` of a key whose sweep ends this many jobs, both graph engines.
    GraphAdvance(usize),
    /// `remove` of a key with this many waiters, both graph engines.
    GraphRemove(usize),
    /// A new key per job, removed after it: the key table recycled, both graph engines.
    GraphKeyChurn,
    /// The `remove` that compacts a full key table's index, both graph engines.
    GraphKeyCompaction,
    /// SPEC D51: 10^6 chained submits into an empty graph and into a warmed one, both graph
    /// engines.
    GraphGrowth,
    /// P12: the version directory's capture at 250, 3,000 and 10^5 keys.
    Versions,
    /// P17: the fair tower layer and firq-tower, the quiet tenant alone and under a flood.
    Tower,
    /// SPEC D30: a raise and a drop through a chain of this many jobs, both graph engines.
    GraphRaise(usize),
    /// SPEC D30: an urgent job whose dependency is queued behind 10^3 jobs of its tenant, with
    /// an urgent and an equal-priority dependent, both graph engines.
    GraphUrgent,
}

/// How long each kind of run lasts, and how many repetitions.
#[derive(Clone, Debug, PartialEq)]
pub struct Settings {
    /// Interleaved repetitions.
    pub reps: usize,
    /// One threaded scheduler run.
    pub threaded: Duration,
    /// One batch of a single-thread operation.
    pub single: Duration,
    /// One P11 run.
    pub fairness: Duration,
    /// Print progress on stderr.
    pub progress: bool,
}

impl Job {
    /// The workload label of the job's rows (the cancel job's first).
    pub fn name(&self) -> String {
        let cells = |c: u32| {
            if c == 1 {
                "1 cell".into()
            } else {
                format!("{c} cells")
            }
        };
        match *self {
            Job::Cycle => rows::CYCLE.into(),
            Job::Fast => rows::FAST.into(),
            Job::Single => rows::SINGLE.into(),
            Job::Cancel => rows::CANCEL_DEEP.into(),
            Job::Closed(Mode::Wait, t, c) => format!("wait {t} thr {}", cells(c)),
            Job::Closed(Mode::Pull, t, c) => format!("pull {t} thr {}", cells(c)),
            Job::Open(load, t, c) => format!("open {load}% {t} thr {}", cells(c)),
            Job::Fairness => rows::FAIRNESS.into(),
            Job::Graph(8) => rows::GRAPH_P8.into(),
            Job::Graph(_) => rows::GRAPH_P9.into(),
            Job::GraphDag(t) => format!("graph DAG 10^5 jobs {t} thr"),
            Job::GraphAdvance(n) => format!("graph advance, {n} jobs superseded"),
            Job::GraphRemove(n) => format!("graph remove, {n} waiters"),
            Job::GraphKeyChurn => "graph key churn (submit, run, remove)".into(),
            Job::GraphKeyCompaction => "graph key compaction, 2^17 cells".into(),
            Job::GraphGrowth => "graph growth, 10^6 chained submits".into(),
            Job::Versions => crate::versions::workload(crate::versions::KEYS[0]),
            Job::Tower => crate::tower::FLOOD.into(),
            Job::GraphRaise(n) => format!("graph raise+drop, chain {n}"),
            Job::GraphUrgent => "graph grant behind 10^3".into(),
        }
    }

    /// Length of one run of one arm.
    fn run_for(&self, s: &Settings) -> Duration {
        match self {
            Job::Cycle
            | Job::Fast
            | Job::Single
            | Job::Cancel
            | Job::Graph(_)
            | Job::GraphAdvance(_)
            | Job::GraphRemove(_)
            | Job::GraphKeyChurn
            | Job::GraphKeyCompaction
            | Job::GraphGrowth
            | Job::GraphRaise(_)
            | Job::GraphUrgent
            | Job::Versions => s.single,
            Job::Closed(..) | Job::Open(..) | Job::GraphDag(_) => s.threaded,
            Job::Fairness => s.fairness,
            // Long enough for a p99 of a few hundred quiet requests.
            Job::Tower => s.threaded.max(Duration::from_millis(400)),
        }
    }

    /// Estimated seconds for the whole job (warm-up round included).
    fn estimate(&self, s: &Settings) -> f64 {
        let arms = match self {
            Job::Single | Job::Cancel => 4.0,
            Job::Graph(_)
            | Job::GraphAdvance(_)
            | Job::GraphRemove(_)
            | Job::GraphKeyChurn
            | Job::GraphKeyCompaction
            | Job::GraphRaise(_) => 2.0,
            Job::GraphUrgent | Job::GraphGrowth => 4.0,
            Job::GraphDag(_) | Job::Versions => 3.0,
            Job::Tower => 4.0,
            // Every scheduler engine.
            _ => engines().len() as f64,
        };
        arms * (s.reps as f64 + 0.25) * self.run_for(s).as_secs_f64()
    }

    /// The arms: (workload, backend, one timed run of `run_for`). An open-loop job reads its
    /// rate from the std baseline's pull row of the same threads and cells in `done`.
    fn arms(&self, done: &[Row]) -> Vec<Arm> {
        let name = self.name();
        let arm = |workload: &str, backend: &str, run: Box<dyn Fn(Duration) -> Measured>| Arm {
            workload: workload.to_owned(),
            backend: backend.to_owned(),
            run,
        };
        let single = |f: fn(OpUser<'_>)| -> Box<dyn Fn(Duration) -> Measured> {
            Box::new(move |d| time_single(f, d))
        };
        match *self {
            Job::Cycle | Job::Fast => engines()
                .into_iter()
                .map(|e| {
                    let f = if *self == Job::Cycle { e.cycle } else { e.fast };
                    arm(&name, e.name, single(f))
                })
                .collect(),
            Job::Single => vec![
                arm(
                    &name,
                    "fairway FixedCellPool",
                    single(|u| u(&mut OneCell::<FixedCellPool>::new())),
                ),
                arm(
                    &name,
                    "tokio Semaphore",
                    single(|u| u(&mut OneCell::<tokio::sync::Semaphore>::new())),
                ),
                arm(
                    &name,
                    "admit→refund",
                    single(|u| u(&mut AdmitRefund::<fairway::oracle::Ring>::new())),
                ),
                arm(
                    &name,
                    "uncontended CAS",
                    single(|u| u(&mut UncontendedCas::default())),
                ),
            ],
            // The engine with a P7 target: fairway's (first).
            // The engine with a P7 target: fairway's (first); beside it the in-place change
            // (F36) at the same depth, on the engine and on the std twin.
            Job::Cancel => {
                let all = engines();
                let (backend, f, reorder) = (all[0].name, all[0].cancel, all[0].reorder);
                let (twin, twin_reorder) = (all[1].name, all[1].reorder);
                vec![
                    arm(
                        rows::CANCEL_DEEP,
                        backend,
                        Box::new(move |d| time_single_at(f, 4096, d)),
                    ),
                    arm(
                        rows::CANCEL_SHALLOW,
                        backend,
                        Box::new(move |d| time_single_at(f, 1, d)),
                    ),
                    arm(
                        rows::REORDER_DEEP,
                        backend,
                        Box::new(move |d| time_single_at(reorder, 4096, d)),
                    ),
                    arm(
                        rows::REORDER_DEEP,
                        twin,
                        Box::new(move |d| time_single_at(twin_reorder, 4096, d)),
                    ),
                ]
            }
            Job::Closed(mode, t, c) => engines()
                .into_iter()
                .map(|e| arm(&name, e.name, Box::new(move |d| (e.closed)(mode, t, c, d))))
                .collect(),
            Job::Open(load, t, c) => {
                let pull = Job::Closed(Mode::Pull, t, c).name();
                let capacity = done
                    .iter()
                    .find(|r| r.workload == pull && r.backend == "std Mutex")
                    .map(|r| r.median(|x| x.ops_per_sec))
                    .expect("the plan runs the pull row before its open-loop rows");
                let rate = capacity * f64::from(load) / 100.0;
                engines()
                    .into_iter()
                    .map(|e| arm(&name, e.name, Box::new(move |d| (e.open)(t, c, rate, d))))
                    .collect()
            }
            Job::Fairness => engines()
                .into_iter()
                .map(|e| arm(&name, e.name, Box::new(move |d| (e.fairness)(d))))
                .collect(),
            Job::Graph(p) => {
                type Run = fn(Duration) -> Measured;
                let (lf, std): (Run, Run) = if p == 8 {
                    (graph::p8::<LockFreeGraph>, graph::p8::<MutexGraph>)
                } else {
                    (graph::p9::<LockFreeGraph>, graph::p9::<MutexGraph>)
                };
                vec![
                    arm(&name, "lock-free", Box::new(lf)),
                    arm(&name, "std Mutex", Box::new(std)),
                ]
            }
            Job::GraphDag(t) => {
                let dag = std::sync::Arc::new(graph_dag::Dag::new());
                let (a, b, c) = (dag.clone(), dag.clone(), dag);
                vec![
                    arm(
                        &name,
                        "lock-free",
                        Box::new(move |d| graph_dag::whole_dag::<LockFreeGraph>(&a, t, d)),
                    ),
                    arm(
                        &name,
                        "std Mutex",
                        Box::new(move |d| graph_dag::whole_dag::<MutexGraph>(&b, t, d)),
                    ),
                    arm(
                        &name,
                        "topological walk, 1 thr",
                        Box::new(move |d| graph_dag::topo_walk(&c, d)),
                    ),
                ]
            }
            Job::GraphRaise(n) => vec![
                arm(
                    &name,
                    "lock-free",
                    Box::new(move |d| graph_inherit::raise_chain::<LockFreeGraph>(n, d)),
                ),
                arm(
                    &name,
                    "std Mutex",
                    Box::new(move |d| graph_inherit::raise_chain::<MutexGraph>(n, d)),
                ),
            ],
            Job::GraphUrgent => [
                (true, "urgent, inherited"),
                (false, "equal, none inherited"),
            ]
            .into_iter()
            .flat_map(|(urgent, what)| {
                [
                    arm(
                        &name,
                        &format!("lock-free, {what}"),
                        Box::new(move |d| graph_inherit::urgent_behind::<LockFreeGraph>(urgent, d)),
                    ),
                    arm(
                        &name,
                        &format!("std Mutex, {what}"),
                        Box::new(move |d| graph_inherit::urgent_behind::<MutexGraph>(urgent, d)),
                    ),
                ]
            })
            .collect(),
            Job::GraphAdvance(n) => vec![
                arm(
                    &name,
                    "lock-free",
                    Box::new(move |d| graph_dag::advance::<LockFreeGraph>(n, d)),
                ),
                arm(
                    &name,
                    "std Mutex",
                    Box::new(move |d| graph_dag::advance::<MutexGraph>(n, d)),
                ),
            ],
            Job::GraphRemove(n) => vec![
                arm(
                    &name,
                    "lock-free",
                    Box::new(move |d| graph_dag::remove::<LockFreeGraph>(n, d)),
                ),
                arm(
                    &name,
                    "std Mutex",
                    Box::new(move |d| graph_dag::remove::<MutexGraph>(n, d)),
                ),
            ],
            Job::GraphKeyChurn => vec![
                arm(
                    &name,
                    "lock-free",
                    Box::new(graph_dag::key_churn::<LockFreeGraph>),
                ),
                arm(
                    &name,
                    "std Mutex",
                    Box::new(graph_dag::key_churn::<MutexGraph>),
                ),
            ],
            Job::GraphKeyCompaction => vec![
                arm(
                    &name,
                    "lock-free",
                    Box::new(|d| graph_dag::key_compaction::<LockFreeGraph>(true, d)),
                ),
                arm(
                    &name,
                    "std Mutex",
                    Box::new(|d| graph_dag::key_compaction::<MutexGraph>(false, d)),
                ),
            ],
            Job::GraphGrowth => [(false, "empty"), (true, "warmed")]
                .into_iter()
                .flat_map(|(warm, what)| {
                    [
                        arm(
                            &name,
                            &format!("lock-free, {what}"),
                            Box::new(move |d| graph_dag::growth::<LockFreeGraph>(warm, d)),
                        ),
                        arm(
                            &name,
                            &format!("std Mutex, {what}"),
                            Box::new(move |d| graph_dag::growth::<MutexGraph>(warm, d)),
                        ),
                    ]
                })
                .collect(),
            Job::Tower => {
                use crate::tower::{run, Which, ALONE, FAIRWAY, FIRQ, FLOOD};
                [(ALONE, false), (FLOOD, true)]
                    .into_iter()
                    .flat_map(|(workload, flood)| {
                        [(FAIRWAY, Which::Fairway), (FIRQ, Which::Firq)].map(|(backend, which)| {
                            arm(workload, backend, Box::new(move |d| run(which, flood, d)))
                        })
                    })
                    .collect()
            }
            Job::Versions => crate::versions::KEYS
                .iter()
                .map(|&keys| {
                    let run =
                        move |d| time_with(&mut |u| crate::versions::with_capture(keys, u), d);
                    arm(
                        &crate::versions::workload(keys),
                        crate::versions::BACKEND,
                        Box::new(run),
                    )
                })
                .collect(),
        }
    }
}

/// One backend of a job.
struct Arm {
    workload: String,
    backend: String,
    run: Box<dyn Fn(Duration) -> Measured>,
}

/// [`time_single`] of an operation built at a queue depth (P7's cancel).
fn time_single_at(with: fn(usize, OpUser<'_>), depth: usize, run_for: Duration) -> Measured {
    time_with(&mut |u| with(depth, u), run_for)
}

/// Times the operation `with` builds: a warm-up, then batches of 256 for `run_for`.
fn time_single(with: fn(OpUser<'_>), run_for: Duration) -> Measured {
    time_with(&mut |u| with(u), run_for)
}

/// See [`time_single`].
fn time_with(with: &mut dyn FnMut(OpUser<'_>), run_for: Duration) -> Measured {
    let mut m = Measured::default();
    with(&mut |op: &mut dyn SingleOp| {
        op.run(1000);
        let (start, before) = (Instant::now(), thread_allocs());
        let mut done = 0u64;
        while start.elapsed() < run_for {
            op.run(256);
            done += 256;
        }
        m.ops_per_sec = done as f64 / start.elapsed().as_secs_f64();
        m.allocs_per_op = (thread_allocs() - before) as f64 / done as f64;
    });
    m
}

/// The jobs of `suite`; `threads` are the scaling suite's thread counts.
pub fn plan(suite: &str, threads: &[usize]) -> Result<Vec<Job>, String> {
    let pull = |t| Job::Closed(Mode::Pull, t, 4);
    let jobs: Vec<Job> = match suite {
        "default" => vec![
            Job::Cycle,
            Job::Fast,
            Job::Single,
            Job::Cancel,
            pull(2),
            pull(8),
            Job::Open(80, 2, 4),
            Job::Open(80, 8, 4),
            Job::Fairness,
            Job::Graph(8),
            Job::Graph(9),
            Job::Versions,
            Job::Tower,
        ],
        "open-loop" => [2, 8]
            .into_iter()
            .flat_map(|t| LOADS.map(|l| Job::Open(l, t, 4)))
            .collect(),
        "scaling" => threads
            .iter()
            .flat_map(|&t| {
                let mut v = vec![Job::Closed(Mode::Wait, t, 4), pull(t)];
                if t >= 2 {
                    v.push(Job::Open(80, t, 4));
                }
                v
            })
            .collect(),
        "graph" => vec![
            Job::Graph(8),
            Job::Graph(9),
            Job::GraphDag(1),
            Job::GraphDag(2),
            Job::GraphDag(8),
            Job::GraphAdvance(0),
            Job::GraphAdvance(10),
            Job::GraphAdvance(1000),
            Job::GraphRemove(1000),
            Job::GraphKeyChurn,
            Job::GraphKeyCompaction,
            Job::GraphGrowth,
            Job::GraphRaise(1),
            Job::GraphRaise(16),
            Job::GraphRaise(256),
            Job::GraphUrgent,
        ],
        // The request path's rows (P1, P13, P7, P3): the before/after check of a change to it.
        "request" => vec![Job::Cycle, Job::Fast, Job::Single, Job::Cancel, pull(2)],
        "versions" => vec![Job::Versions],
        // SPEC D51: the growth row alone (it is also in "graph").
        "growth" => vec![Job::GraphGrowth],
        "tower" => vec![Job::Tower],
        // In-place changes and inheritance (SPEC F36, D30): cancel beside change in place, the
        // graph's raise through chains, an urgent job behind a backlog.
        "inherit" => vec![
            Job::Cancel,
            Job::GraphRaise(1),
            Job::GraphRaise(16),
            Job::GraphRaise(256),
            Job::GraphUrgent,
        ],
        "all" => {
            let mut v = Vec::new();
            // "request" is a subset of "default".
            for s in &SUITES[..4] {
                v.extend(plan(s, threads)?);
            }
            v
        }
        other => {
            return Err(format!(
                "unknown suite {other:?} (one of {})",
                SUITES.join(", ")
            ))
        }
    };
    // Each job once; an open-loop job after the pull row it takes its rate from.
    let mut out: Vec<Job> = Vec::new();
    for j in jobs {
        if let Job::Open(_, t, c) = j {
            if !out.contains(&Job::Closed(Mode::Pull, t, c)) {
                out.push(Job::Closed(Mode::Pull, t, c));
            }
        }
        if !out.contains(&j) {
            out.push(j);
        }
    }
    Ok(out)
}

/// What a suite measured: rows, and each row's latency merged over repetitions (for plots).
pub struct Measurements {
    /// One per (workload, backend), in run order.
    pub rows: Vec<Row>,
    /// Merged latency, parallel to `rows`.
    pub latency: Vec<Latency>,
}

/// Runs `jobs`.
pub fn run(jobs: &[Job], s: &Settings) -> Measurements {
    let total: f64 = jobs.iter().map(|j| j.estimate(s)).sum();
    let (start, mut done_est) = (Instant::now(), 0.0);
    let mut m = Measurements {
        rows: Vec::new(),
        latency: Vec::new(),
    };
    for (k, job) in jobs.iter().enumerate() {
        let arms = job.arms(&m.rows);
        let first = m.rows.len();
        for a in &arms {
            m.rows.push(Row {
                workload: a.workload.clone(),
                backend: a.backend.clone(),
                reps: Vec::with_capacity(s.reps),
            });
            m.latency.push(Latency::new());
        }
        let d = job.run_for(s);
        let per_rep = job.estimate(s) / (s.reps as f64 + 0.25);
        for rep in 0..=s.reps {
            if s.progress {
                let elapsed = start.elapsed().as_secs_f64();
                let eta = if done_est > 0.0 {
                    (total - done_est) * elapsed / done_est
                } else {
                    total - done_est
                };
                eprintln!(
                    "[{}/{}] {}: {}, about {:.0} s left",
                    k + 1,
                    jobs.len(),
                    job.name(),
                    if rep == 0 {
                        "warm-up".to_owned()
                    } else {
                        format!("rep {rep}/{}", s.reps)
                    },
                    eta
                );
            }
            for (i, a) in arms.iter().enumerate() {
                if rep == 0 {
                    (a.run)(d / 4);
                    continue;
                }
                let r = (a.run)(d);
                let q = |p: f64| r.latency.quantile(p);
                m.rows[first + i].reps.push(Rep {
                    ops_per_sec: r.ops_per_sec,
                    p50_ns: q(0.5),
                    p99_ns: q(0.99),
                    p999_ns: q(0.999),
                    allocs_per_op: r.allocs_per_op,
                    score: r.score,
                });
                m.latency[first + i].merge(&r.latency);
            }
            done_est += if rep == 0 { per_rep / 4.0 } else { per_rep };
        }
    }
    m
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_plan_has_every_target_row_once() {
        let p = plan("default", &[]).unwrap();
        assert_eq!(p.len(), 13);
        let all = plan("all", &[1, 2, 8]).unwrap();
        for j in &p {
            assert_eq!(all.iter().filter(|x| *x == j).count(), 1, "{j:?}");
        }
        assert!(plan("frobnicate", &[]).is_err());
        for j in plan("request", &[]).unwrap() {
            assert!(p.contains(&j), "{j:?}");
        }
    }

    /// The engine jobs run fairway's engine first, then its mutex twins; P7's cancel job runs
    /// the engine at both depths.
    #[test]
    fn engine_jobs_run_the_engine_first() {
        let backends = |j: Job| -> Vec<(String, String)> {
            j.arms(&[])
                .iter()
                .map(|a| (a.workload.clone(), a.backend.clone()))
                .collect()
        };
        let names: Vec<String> = backends(Job::Cycle).into_iter().map(|x| x.1).collect();
        assert_eq!(names, ["lock-free", "std Mutex", "parking_lot"]);
        let names: Vec<String> = backends(Job::Closed(Mode::Pull, 8, 4))
            .into_iter()
            .map(|x| x.1)
            .collect();
        assert_eq!(names, ["lock-free", "std Mutex", "parking_lot"]);
        let (deep, shallow) = (rows::CANCEL_DEEP, rows::CANCEL_SHALLOW);
        let reorder = rows::REORDER_DEEP;
        let want: Vec<(String, String)> = [
            (deep, "lock-free"),
            (shallow, "lock-free"),
            (reorder, "lock-free"),
            (reorder, "std Mutex"),
        ]
        .iter()
        .map(|&(w, b)| (w.to_owned(), b.to_owned()))
        .collect();
        assert_eq!(backends(Job::Cancel), want);
    }

    #[test]
    fn open_loop_jobs_follow_their_pull_row() {
        for suite in SUITES {
            let p = plan(suite, &[1, 2, 4]).unwrap();
            for (i, j) in p.iter().enumerate() {
                if let Job::Open(_, t, c) = *j {
                    assert!(
                        p[..i].contains(&Job::Closed(Mode::Pull, t, c)),
                        "{suite} {j:?}"
                    );
                }
            }
        }
    }
}
