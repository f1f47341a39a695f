//! Differential test of the two graph engines (SPEC Q02 for section D): random single-threaded
//! sequences of submit (random keys, some not produced yet, random gates, cycles possible),
//! all-or-none batches of one to three such jobs (D04, dependencies inside the batch too), pull,
//! discover on a running job, complete with success or failure, and collect, give identical results and occupancy on the
//! lock-free graph and the mutex graph after every operation. Submits of a key whose job is live
//! join it (SPEC D02), submits through a [`DedupeHook`] that names another key's job join that
//! one (D03), and the joiners' outcomes are collected too.
//!
//! Fixed seeds by default; `FAIRWAY_GRAPH_DIFF_CASES` raises the number of cases.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, DedupeHook, Dependency, Gate, Graph, GraphEngine, Identity, JobHandle, JobKey,
    JobOutcome, JobSpec, Occupancy, RunningJob,
};
use fairway::{ClassId, Code, Error, Reason, TenantId};
use std::collections::HashMap;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

#[derive(Debug, Clone)]
enum Op {
    Submit(u64, Vec<(u64, Gate)>),
    Pull,
    Complete(usize, bool),
    Take(u64),
    Discover(usize, Vec<(u64, Gate)>),
    Batch(Vec<(u64, Vec<(u64, Gate)>)>),
    /// Submit key `.0` through a hook that names the job of key `.1`, if one is held.
    Hooked(u64, u64),
    /// Take the outcome of the `.0`-th joiner still held.
    TakeJoiner(usize),
}

/// A hook that names the handle it was given, if any.
struct Alias(Option<JobHandle>);

impl DedupeHook for Alias {
    fn probe(&self, _: &Identity) -> Option<JobHandle> {
        self.0
    }
}

fn random_deps(r: &mut Rng) -> Vec<(u64, Gate)> {
    (0..r.below(4))
        .map(|_| {
            let gate = match r.below(3) {
                0 => Gate::Sequential,
                1 => Gate::OnSuccess,
                _ => Gate::OnAdmission,
            };
            (r.below(12), gate)
        })
        .collect()
}

fn ops(seed: u64, n: usize) -> Vec<Op> {
    let mut r = Rng(seed | 1);
    (0..n)
        .map(|_| match r.below(14) {
            12 => Op::Hooked(r.below(12), r.below(12)),
            13 => Op::TakeJoiner(r.below(4) as usize),
            11 => Op::Batch(
                (0..1 + r.below(3))
                    .map(|_| {
                        let key = r.below(12);
                        (key, random_deps(&mut r))
                    })
                    .collect(),
            ),
            0..=3 => {
                let key = r.below(12);
                let deps = random_deps(&mut r);
                Op::Submit(key, deps)
            }
            10 => {
                let i = r.below(8) as usize;
                Op::Discover(i, random_deps(&mut r))
            }
            4 | 5 => Op::Pull,
            6 | 7 => Op::Complete(r.below(8) as usize, r.below(3) != 0),
            _ => Op::Take(r.below(12)),
        })
        .collect()
}

/// What an operation showed.
#[derive(Debug, Clone, PartialEq)]
enum Seen {
    Submitted(Result<&'static str, Error>),
    Pulled(Option<JobKey>),
    Completed(Option<JobKey>),
    Taken(Option<Result<Option<JobOutcome>, Error>>),
    Discovered(Option<Result<Admission<()>, Error>>),
    Batched(Result<&'static str, Error>),
}

/// What a submit showed; keeps the handle of an admitted job by key and a joiner's handle.
fn submitted(
    r: Result<Admission<JobHandle>, Error>,
    key: u64,
    handles: &mut HashMap<u64, JobHandle>,
    joiners: &mut Vec<JobHandle>,
) -> Seen {
    Seen::Submitted(r.map(|a| match a {
        Admission::Admitted(h) => {
            handles.insert(key, h);
            "admitted"
        }
        Admission::Backpressured => "backpressured",
        Admission::DedupeJoined(h) => {
            joiners.push(h);
            "joined"
        }
    }))
}

fn run<E: GraphEngine>(ops: &[Op]) -> Vec<(Seen, Occupancy)> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1)).unwrap();
    let g = Graph::builder(ledger)
        .class(3)
        .nodes(8)
        .edges(10)
        .keys(16)
        .max_deps(4)
        .build_with::<E>()
        .unwrap();
    let mut handles: HashMap<u64, JobHandle> = HashMap::new();
    let mut running: Vec<RunningJob> = Vec::new();
    let mut joiners: Vec<JobHandle> = Vec::new();
    let mut out = Vec::new();
    for op in ops {
        let seen = match op {
            Op::Submit(key, deps) => {
                let deps: Vec<Dependency> = deps
                    .iter()
                    .map(|&(k, gate)| Dependency {
                        key: JobKey::new(k),
                        gate,
                        pin: None,
                    })
                    .collect();
                let r = g.submit(&JobSpec {
                    key: JobKey::new(*key),
                    tenant: TenantId(0),
                    class: ClassId(0),
                    priority: 0,
                    deps: &deps,
                });
                submitted(r, *key, &mut handles, &mut joiners)
            }
            Op::Hooked(key, alias) => {
                let hook = Alias(handles.get(alias).copied());
                let r = g.submit_with(
                    &JobSpec {
                        key: JobKey::new(*key),
                        tenant: TenantId(0),
                        class: ClassId(0),
                        priority: 0,
                        deps: &[],
                    },
                    &hook,
                );
                submitted(r, *key, &mut handles, &mut joiners)
            }
            Op::TakeJoiner(i) => Seen::Taken(if joiners.is_empty() {
                None
            } else {
                let i = i % joiners.len();
                let r = g.take_outcome(joiners[i]);
                if matches!(r, Ok(Some(_))) {
                    joiners.remove(i);
                }
                Some(r)
            }),
            Op::Pull => {
                let j = g.try_next(ClassId(0));
                let k = j.as_ref().map(|j| j.key());
                running.extend(j);
                Seen::Pulled(k)
            }
            Op::Complete(i, ok) => {
                if running.is_empty() {
                    Seen::Completed(None)
                } else {
                    let j = running.remove(i % running.len());
                    let k = j.key();
                    let outcome = if *ok {
                        JobOutcome::Succeeded
                    } else {
                        JobOutcome::Failed(Error::new(Code::Internal, Reason::Failed))
                    };
                    g.complete(j, outcome).unwrap();
                    Seen::Completed(Some(k))
                }
            }
            Op::Discover(i, deps) => {
                let deps: Vec<Dependency> = deps
                    .iter()
                    .map(|&(k, gate)| Dependency {
                        key: JobKey::new(k),
                        gate,
                        pin: None,
                    })
                    .collect();
                Seen::Discovered(if running.is_empty() {
                    None
                } else {
                    let j = &running[i % running.len()];
                    Some(g.discover(j, &deps))
                })
            }
            Op::Batch(jobs) => {
                let deps: Vec<Vec<Dependency>> = jobs
                    .iter()
                    .map(|(_, d)| {
                        d.iter()
                            .map(|&(k, gate)| Dependency {
                                key: JobKey::new(k),
                                gate,
                                pin: None,
                            })
                            .collect()
                    })
                    .collect();
                let specs: Vec<JobSpec<'_>> = jobs
                    .iter()
                    .zip(&deps)
                    .map(|((key, _), d)| JobSpec {
                        key: JobKey::new(*key),
                        tenant: TenantId(0),
                        class: ClassId(0),
                        priority: 0,
                        deps: d,
                    })
                    .collect();
                Seen::Batched(g.submit_batch_atomic(&specs, None).map(|a| match a {
                    Admission::Admitted(hs) => {
                        for ((key, _), h) in jobs.iter().zip(hs) {
                            handles.insert(*key, h);
                        }
                        "admitted"
                    }
                    Admission::Backpressured => "backpressured",
                    Admission::DedupeJoined(_) => "joined",
                }))
            }
            Op::Take(key) => Seen::Taken(handles.get(key).copied().map(|h| {
                let r = g.take_outcome(h);
                if matches!(r, Ok(Some(_))) {
                    handles.remove(key);
                }
                r
            })),
        };
        out.push((seen, g.occupancy()));
    }
    out
}

#[test]
fn q02_graph_engines_agree_on_random_sequences() {
    let cases: u64 = std::env::var("FAIRWAY_GRAPH_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let mut submitted = 0;
    let mut refused_cycles = 0;
    let mut joined = 0;
    let mut backpressured = 0;
    let mut dependency_failed = 0;
    let mut discovered = 0;
    let (mut batches, mut batches_refused) = (0, 0);
    for case in 0..cases {
        let seed = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(case + 1);
        let ops = ops(seed, 80);
        let a = run::<fairway::oracle::LockFreeGraph>(&ops);
        let b = run::<fairway::oracle::MutexGraph>(&ops);
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(
                x,
                y,
                "case {case} (seed {seed:#x}) differs at op {i} {:?}; ops so far {:?}",
                ops[i],
                &ops[..=i]
            );
            match &x.0 {
                Seen::Submitted(Ok("admitted")) => submitted += 1,
                Seen::Submitted(Ok("backpressured")) => backpressured += 1,
                Seen::Submitted(Ok("joined")) => joined += 1,
                Seen::Submitted(Err(e)) if e.reason() == Reason::Cycle => refused_cycles += 1,
                Seen::Discovered(Some(Ok(Admission::Admitted(())))) => discovered += 1,
                Seen::Batched(Ok("admitted")) => batches += 1,
                Seen::Batched(_) => batches_refused += 1,
                Seen::Taken(Some(Ok(Some(JobOutcome::Failed(e)))))
                    if e.reason() == Reason::DependencyFailed =>
                {
                    dependency_failed += 1
                }
                _ => {}
            }
        }
    }
    eprintln!(
        "{cases} cases: admitted {submitted}, cycles refused {refused_cycles}, \
         backpressured {backpressured}, dependency-failed outcomes {dependency_failed}, \
         discoveries {discovered}, batches admitted {batches}, refused {batches_refused}, \
         joined {joined}"
    );
    assert!(joined > 0);
    // The generator reaches every interesting case.
    assert!(discovered > 0);
    assert!(batches > 0 && batches_refused > 0);
    assert!(
        submitted > 0 && refused_cycles > 0 && backpressured > 0 && dependency_failed > 0,
        "admitted {submitted}, cycles {refused_cycles}, backpressured {backpressured}, \
         dependency-failed {dependency_failed}"
    );
}
