//! Differential test of the two graph engines with key operations (SPEC Q02 for section D,
//! D20–D24): the op mix of `graph_differential.rs` (submit, pull, discover, complete, collect)
//! plus `advance`, `remove`, `reset`, witness checks and the stale completions they cause
//! give identical results, occupancy, key generations and stale counts on the lock-free graph
//! and the mutex graph after every operation.
//!
//! Fixed seeds by default; `FAIRWAY_GRAPH_KEYS_DIFF_CASES` raises the number of cases.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome, JobSpec,
    Occupancy, RunningJob,
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
    Advance(u64),
    Remove(u64),
    Reset,
    Witness(usize),
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
        .map(|_| match r.below(16) {
            11 | 12 => Op::Advance(r.below(12)),
            13 => Op::Remove(r.below(12)),
            14 => {
                if r.below(8) == 0 {
                    Op::Reset
                } else {
                    Op::Witness(r.below(8) as usize)
                }
            }
            15 => Op::Advance(r.below(12)),
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
    Completed(Option<(JobKey, Result<(), Error>)>),
    Advanced(Result<u32, Error>),
    Removed(Result<(), Error>),
    Reset,
    Witnessed(Option<Result<(), Error>>),
    Taken(Option<Result<Option<JobOutcome>, Error>>),
    Discovered(Option<Result<Admission<()>, Error>>),
}

fn run<E: GraphEngine>(ops: &[Op]) -> Vec<Step> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1)).unwrap();
    let g = Graph::builder(ledger)
        .class(3)
        .nodes(8)
        .edges(10)
        .keys(16)
        .max_deps(4)
        // Narrow, so exhaustion (SPEC D22) is reached.
        .max_generation(3)
        .build_with::<E>()
        .unwrap();
    let mut handles: HashMap<u64, JobHandle> = HashMap::new();
    let mut running: Vec<RunningJob> = Vec::new();
    let mut out = Vec::new();
    for op in ops {
        let seen = match op {
            Op::Submit(key, deps) => {
                let deps: Vec<Dependency> = deps
                    .iter()
                    .map(|&(k, gate)| Dependency {
                        key: JobKey::new(k),
                        gate,
                    })
                    .collect();
                let r = g.submit(&JobSpec {
                    key: JobKey::new(*key),
                    tenant: TenantId(0),
                    class: ClassId(0),
                    priority: 0,
                    deps: &deps,
                });
                Seen::Submitted(r.map(|a| match a {
                    Admission::Admitted(h) => {
                        handles.insert(*key, h);
                        "admitted"
                    }
                    Admission::Backpressured => "backpressured",
                    Admission::DedupeJoined(_) => "joined",
                }))
            }
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
                    Seen::Completed(Some((k, g.complete(j, outcome))))
                }
            }
            Op::Discover(i, deps) => {
                let deps: Vec<Dependency> = deps
                    .iter()
                    .map(|&(k, gate)| Dependency {
                        key: JobKey::new(k),
                        gate,
                    })
                    .collect();
                Seen::Discovered(if running.is_empty() {
                    None
                } else {
                    let j = &running[i % running.len()];
                    Some(g.discover(j, &deps))
                })
            }
            Op::Advance(key) => Seen::Advanced(g.advance(JobKey::new(*key)).map(|v| v.generation)),
            Op::Remove(key) => Seen::Removed(g.remove(JobKey::new(*key))),
            Op::Reset => {
                g.reset();
                Seen::Reset
            }
            Op::Witness(i) => Seen::Witnessed(if running.is_empty() {
                None
            } else {
                let w = g.witness(&running[i % running.len()]);
                Some(g.check_witness(&w))
            }),
            Op::Take(key) => Seen::Taken(handles.get(key).copied().map(|h| {
                let r = g.take_outcome(h);
                if matches!(r, Ok(Some(_))) {
                    handles.remove(key);
                }
                r
            })),
        };
        let gens: Vec<Option<u32>> = (0..12)
            .map(|k| g.version(JobKey::new(k)).map(|v| v.generation))
            .collect();
        out.push((seen, g.occupancy(), gens, g.stale_completions()));
    }
    out
}

type Step = (Seen, Occupancy, Vec<Option<u32>>, u64);

#[test]
fn d20_d24_graph_engines_agree_on_random_key_operations() {
    let cases: u64 = std::env::var("FAIRWAY_GRAPH_KEYS_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let mut submitted = 0;
    let mut refused_cycles = 0;
    let mut backpressured = 0;
    let mut dependency_failed = 0;
    let mut discovered = 0;
    let (mut superseded, mut removed, mut stale, mut witness_refused) = (0, 0, 0, 0);
    let (mut exhausted, mut exhausted_or_unknown) = (0, 0);
    for case in 0..cases {
        let seed = 0xD1B5_4A32_D192_ED03u64.wrapping_mul(case + 1);
        let ops = ops(seed, 100);
        let a = run::<fairway::LockFreeGraph>(&ops);
        let b = run::<fairway::MutexGraph>(&ops);
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
                Seen::Submitted(Err(e)) if e.reason() == Reason::Cycle => refused_cycles += 1,
                Seen::Discovered(Some(Ok(Admission::Admitted(())))) => discovered += 1,
                Seen::Completed(Some((_, Err(_)))) => stale += 1,
                Seen::Witnessed(Some(Err(_))) => witness_refused += 1,
                Seen::Advanced(Err(e)) if e.reason() == Reason::GenerationExhausted => {
                    exhausted += 1
                }
                Seen::Advanced(Err(_)) | Seen::Removed(Err(_)) => exhausted_or_unknown += 1,
                Seen::Taken(Some(Ok(Some(JobOutcome::Failed(e)))))
                    if e.reason() == Reason::Superseded =>
                {
                    superseded += 1
                }
                Seen::Taken(Some(Ok(Some(JobOutcome::Failed(e)))))
                    if e.reason() == Reason::Removed =>
                {
                    removed += 1
                }
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
         discoveries {discovered}, superseded {superseded}, removed {removed}, \
         stale completions {stale}, witnesses refused {witness_refused}, \
         exhausted generations {exhausted}, unknown keys {exhausted_or_unknown}"
    );
    assert!(superseded > 0 && removed > 0 && stale > 0 && witness_refused > 0);
    assert!(exhausted > 0 && exhausted_or_unknown > 0);
    // The generator reaches every interesting case.
    assert!(discovered > 0);
    assert!(
        submitted > 0 && refused_cycles > 0 && backpressured > 0 && dependency_failed > 0,
        "admitted {submitted}, cycles {refused_cycles}, backpressured {backpressured}, \
         dependency-failed {dependency_failed}"
    );
}
