//! The graph's operation sequences and their interpreter, shared by the graph differential test
//! (`tests/graph_differential.rs`, which generates them from a seed) and the graph fuzz target
//! (`fuzz/fuzz_targets/graph.rs`, which decodes them from libFuzzer's bytes): a run returns what
//! every operation showed, the occupancy after it and the effective urgency (SPEC D30) of every
//! job still held, and the lock-free graph and the mutex graph must return the same. The graph
//! runs on a manual clock, so deadlines stamp the same values on both.
#![allow(dead_code)]

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, DedupeHook, Dependency, Gate, Graph, GraphEngine, Identity, JobHandle, JobKey,
    JobOutcome, JobSpec, Occupancy, RunningJob,
};
use fairway::{ClassId, Clock, Code, Error, ManualClock, Priority, Reason, TenantId};
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

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
    /// Submit key `.0` with priority `.1` and, if given, a deadline `.2` seconds on (SPEC D30);
    /// on a live key, a joiner of that urgency.
    Urgent(u64, Priority, Option<u64>, Vec<(u64, Gate)>),
    /// `advance(key)`: supersedes the key's job (SPEC D20), a departure of a demander.
    Advance(u64),
    /// `remove(key)` (SPEC D24), a departure of a demander.
    Remove(u64),
    /// Moves the clock on by `.0` seconds (queued requests past their deadline expire, F46).
    Tick(u64),
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
    Completed(Option<(JobKey, Result<(), Error>)>),
    Taken(Option<Result<Option<JobOutcome>, Error>>),
    Discovered(Option<Result<Admission<()>, Error>>),
    Batched(Result<&'static str, Error>),
    Advanced(Result<u32, Error>),
    Removed(Result<(), Error>),
    Ticked,
}

/// What one job showed after an operation (SPEC D30): its key, its own priority and deadline
/// (absolute, as the graph stamps them), and what [`Graph::effective`] read.
#[derive(Debug, Clone, PartialEq)]
pub struct Urge {
    pub key: u64,
    pub own: (Priority, Option<u64>),
    pub effective: Result<(Priority, Option<u64>), Error>,
    /// Admitted with no dependencies and not pulled: queued in the scheduler unless it ended.
    pub queued: bool,
    /// Its outcome is known.
    pub ended: bool,
    /// Pulled and not completed.
    pub running: bool,
}

/// One operation's record: what it showed, the occupancy after it, and every held job's
/// urgency (admitted handles in key order, then joiners in order).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub seen: Seen,
    pub occupancy: Occupancy,
    pub urgency: Vec<Urge>,
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
fn submitted(r: Result<Admission<JobHandle>, Error>, key: u64, held: &mut Held) -> Seen {
    Seen::Submitted(r.map(|a| match a {
        Admission::Admitted(h) => {
            held.handles.insert(key, h);
            "admitted"
        }
        Admission::Backpressured => "backpressured",
        Admission::DedupeJoined(h) => {
            held.joiners.push(h);
            "joined"
        }
    }))
}

/// The handles a run holds, and what it knows of each job.
#[derive(Default)]
struct Held {
    handles: HashMap<u64, JobHandle>,
    joiners: Vec<JobHandle>,
    /// Own urgency and whether it was submitted without dependencies, by handle.
    own: HashMap<JobHandle, ((Priority, Option<u64>), bool)>,
}

pub fn run<E: GraphEngine>(ops: &[Op]) -> Vec<Step> {
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
/// operation showed, the occupancy after it and the urgency of every job held.
pub fn run_sized<E: GraphEngine>(sizes: Sizes, ops: &[Op]) -> Vec<Step> {
    let clock = Arc::new(ManualClock::new());
    let ledger = Ledger::with_clock(
        LedgerConfig::new(vec![ClassSpec::new("cpu")], 1),
        clock.clone(),
    )
    .unwrap();
    let g = Graph::builder(ledger)
        .class(sizes.cells)
        .nodes(sizes.nodes)
        .edges(sizes.edges)
        .keys(sizes.keys)
        .max_deps(sizes.max_deps)
        .build_with::<E>()
        .unwrap();
    let mut held = Held::default();
    let mut running: Vec<RunningJob> = Vec::new();
    let mut out = Vec::new();
    for op in ops {
        // What an admission adds to `held.own`: own urgency, no dependencies.
        let mut own = ((0, None), false);
        let seen = match op {
            Op::Submit(key, deps) => {
                own.1 = deps.is_empty();
                let deps = dependencies(deps);
                let r = g.submit(&JobSpec {
                    key: JobKey::new(*key),
                    tenant: TenantId(0),
                    class: ClassId(0),
                    priority: 0,
                    deadline: None,
                    deps: &deps,
                });
                submitted(r, *key, &mut held)
            }
            Op::Urgent(key, priority, deadline, deps) => {
                own = (
                    (
                        *priority,
                        deadline.map(|s| clock.now() + Duration::from_secs(s).as_nanos() as u64),
                    ),
                    deps.is_empty(),
                );
                let deps = dependencies(deps);
                let r = g.submit(&JobSpec {
                    key: JobKey::new(*key),
                    tenant: TenantId(0),
                    class: ClassId(0),
                    priority: *priority,
                    deadline: deadline.map(Duration::from_secs),
                    deps: &deps,
                });
                submitted(r, *key, &mut held)
            }
            Op::Advance(key) => Seen::Advanced(g.advance(JobKey::new(*key)).map(|v| v.generation)),
            Op::Remove(key) => Seen::Removed(g.remove(JobKey::new(*key))),
            Op::Tick(s) => {
                clock.advance(Duration::from_secs(*s));
                Seen::Ticked
            }
            Op::Hooked(key, alias) => {
                own.1 = true;
                let hook = Alias(held.handles.get(alias).copied());
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
                submitted(r, *key, &mut held)
            }
            Op::TakeJoiner(i) => Seen::Taken(if held.joiners.is_empty() {
                None
            } else {
                let i = i % held.joiners.len();
                let r = g.take_outcome(held.joiners[i]);
                if matches!(r, Ok(Some(_))) {
                    held.joiners.remove(i);
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
                    // A stale completion (superseded or removed meanwhile) is refused (D21).
                    Seen::Completed(Some((k, g.complete(j, outcome))))
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
                        for ((key, d), h) in jobs.iter().zip(hs) {
                            held.handles.insert(*key, h);
                            held.own.insert(h, ((0, None), d.is_empty()));
                        }
                        "admitted"
                    }
                    Admission::Backpressured => "backpressured",
                    Admission::DedupeJoined(_) => "joined",
                }))
            }
            Op::Take(key) => Seen::Taken(held.handles.get(key).copied().map(|h| {
                let r = g.take_outcome(h);
                if matches!(r, Ok(Some(_))) {
                    held.handles.remove(key);
                    held.own.remove(&h);
                }
                r
            })),
        };
        if let Seen::Submitted(Ok("admitted")) = seen {
            if let Some(h) = op_key(op).and_then(|k| held.handles.get(&k)) {
                held.own.insert(*h, own);
            }
        }
        let mut keys: Vec<u64> = held.handles.keys().copied().collect();
        keys.sort_unstable();
        let urgency = keys
            .iter()
            .map(|k| (*k, held.handles[k]))
            .chain(held.joiners.iter().map(|h| (u64::MAX, *h)))
            .map(|(key, h)| {
                let (own, no_deps) = held.own.get(&h).copied().unwrap_or(((0, None), false));
                let ended = !matches!(g.outcome(h), Ok(None));
                let is_running = running.iter().any(|j| j.handle() == h);
                Urge {
                    key,
                    own,
                    effective: g.effective(h),
                    queued: no_deps && !ended && !is_running,
                    ended,
                    running: is_running,
                }
            })
            .collect();
        out.push(Step {
            seen,
            occupancy: g.occupancy(),
            urgency,
        });
    }
    out
}

/// The key a submitting operation admits a job on.
fn op_key(op: &Op) -> Option<u64> {
    match op {
        Op::Submit(k, _) | Op::Urgent(k, ..) | Op::Hooked(k, _) => Some(*k),
        _ => None,
    }
}
