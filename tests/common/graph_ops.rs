//! The graph's operation sequences and their interpreter, shared by the graph differential test
//! (`tests/graph_differential.rs`, which generates them from a seed) and the graph fuzz target
//! (`fuzz/fuzz_targets/graph.rs`, which decodes them from libFuzzer's bytes): a run returns what
//! every operation showed and the occupancy after it, and the lock-free graph and the mutex graph
//! must return the same.
#![allow(dead_code)]

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, DedupeHook, Dependency, Gate, Graph, GraphEngine, Identity, JobHandle, JobKey,
    JobOutcome, JobSpec, Occupancy, RunningJob,
};
use fairway::{ClassId, Code, Error, Reason, TenantId};
use std::collections::HashMap;

/// One step of a sequence; keys and indices are taken as they are (indices modulo the number of
/// jobs held).
#[derive(Debug, Clone)]
pub enum Op {
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
pub struct Alias(Option<JobHandle>);

impl DedupeHook for Alias {
    fn probe(&self, _: &Identity) -> Option<JobHandle> {
        self.0
    }
}

/// What an operation showed.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    Submitted(Result<&'static str, Error>),
    Pulled(Option<JobKey>),
    Completed(Option<JobKey>),
    Taken(Option<Result<Option<JobOutcome>, Error>>),
    Discovered(Option<Result<Admission<()>, Error>>),
    Batched(Result<&'static str, Error>),
}

/// The dependencies `(key, gate)` name, unpinned.
fn dependencies(deps: &[(u64, Gate)]) -> Vec<Dependency> {
    deps.iter()
        .map(|&(k, gate)| Dependency {
            key: JobKey::new(k),
            gate,
            pin: None,
        })
        .collect()
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

pub fn run<E: GraphEngine>(ops: &[Op]) -> Vec<(Seen, Occupancy)> {
    run_sized::<E>(Sizes::DIFFERENTIAL, ops)
}

/// The sizes of the graph a sequence runs on.
#[derive(Debug, Clone, Copy)]
pub struct Sizes {
    pub cells: u32,
    pub nodes: u32,
    pub edges: u32,
    pub keys: u32,
    pub max_deps: u32,
}

impl Sizes {
    /// The differential test's graph.
    pub const DIFFERENTIAL: Sizes = Sizes {
        cells: 3,
        nodes: 8,
        edges: 10,
        keys: 16,
        max_deps: 4,
    };
}

/// Runs `ops` on a graph of engine `E` and `sizes` (which must build); returns what each
/// operation showed and the occupancy after it.
pub fn run_sized<E: GraphEngine>(sizes: Sizes, ops: &[Op]) -> Vec<(Seen, Occupancy)> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1)).unwrap();
    let g = Graph::builder(ledger)
        .class(sizes.cells)
        .nodes(sizes.nodes)
        .edges(sizes.edges)
        .keys(sizes.keys)
        .max_deps(sizes.max_deps)
        .build_with::<E>()
        .unwrap();
    let mut handles: HashMap<u64, JobHandle> = HashMap::new();
    let mut running: Vec<RunningJob> = Vec::new();
    let mut joiners: Vec<JobHandle> = Vec::new();
    let mut out = Vec::new();
    for op in ops {
        let seen = match op {
            Op::Submit(key, deps) => {
                let deps = dependencies(deps);
                let r = g.submit(&JobSpec {
                    key: JobKey::new(*key),
                    tenant: TenantId(0),
                    class: ClassId(0),
                    priority: 0,
                    deadline: None,
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
                        deadline: None,
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
                let deps = dependencies(deps);
                Seen::Discovered(if running.is_empty() {
                    None
                } else {
                    let j = &running[i % running.len()];
                    Some(g.discover(j, &deps))
                })
            }
            Op::Batch(jobs) => {
                let deps: Vec<Vec<Dependency>> =
                    jobs.iter().map(|(_, d)| dependencies(d)).collect();
                let specs: Vec<JobSpec<'_>> = jobs
                    .iter()
                    .zip(&deps)
                    .map(|((key, _), d)| JobSpec {
                        key: JobKey::new(*key),
                        tenant: TenantId(0),
                        class: ClassId(0),
                        priority: 0,
                        deadline: None,
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
