//! The graph's operation sequences and their interpreter, shared by the graph differential test
//! (`tests/graph_differential.rs`, which generates them from a seed) and the graph fuzz target
//! (`fuzz/fuzz_targets/graph.rs`, which decodes them from libFuzzer's bytes): a run returns what
//! every operation showed, the occupancy after it, the key versions, the signal of every running
//! job, and the outcome and effective urgency (SPEC D30) of every job still held, and the
//! lock-free graph and the mutex graph must return the same. The graph runs on a manual clock,
//! so deadlines stamp the same values on both.
//!
//! Handles are owned (SPEC D31): each run keeps its engine's handles in its own vectors, and
//! demand arrives (a submit, a join of a live identity) and departs (a handle dropped, detached
//! or cancelled, before or after its job ended). A run ends at quiescence: every handle is
//! dropped, what runs is completed and what is queued is drained, every key is reset and
//! drained again; then no node, edge, key, waiting, ready or running job is left and the ledger
//! holds nothing (asserted here, for each engine on its own).
#![allow(dead_code)]

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, DedupeHook, Dependency, Gate, Graph, GraphEngine, Identity, JobHandle, JobId,
    JobKey, JobOutcome, JobSpec, Occupancy, RunningJob,
};
use fairway::{ClassId, Clock, Code, Error, ManualClock, Priority, Reason, TenantId};
use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::Duration;

/// One step of a sequence; keys and indices are taken as they are (indices modulo the number of
/// jobs held).
#[derive(Debug, Clone)]
pub enum Op {
    Submit(u64, Vec<(u64, Gate)>),
    Pull,
    Complete(usize, bool),
    /// Drops the handle of key `.0`'s admitted job once that job has ended (what taking its
    /// outcome was): the slot is freed with the job's last handle.
    Take(u64),
    Discover(usize, Vec<(u64, Gate)>),
    Batch(Vec<(u64, Vec<(u64, Gate)>)>),
    /// Submit key `.0` through a hook that names the job of key `.1`, if one is held.
    Hooked(u64, u64),
    /// Drops the `.0`-th joiner still held once its job has ended.
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
    /// Drops the `.0`-th handle held (in [`Step::urgency`]'s order), whether or not its job
    /// ended (SPEC D31): a demand departs; a job left with no demand is cancelled.
    DropHandle(usize),
    /// Detaches the `.0`-th handle held: the job runs on with no handle, freed at its end.
    Detach(usize),
    /// Cancels the `.0`-th handle held: its demand departs now; the bool each engine returns
    /// (whether that cancelled the job) is compared.
    Cancel(usize),
    /// Submits the identity (key) of the `.0`-th handle held again, with no dependencies, at
    /// priority `.1`: on a live job a dedupe join (a new handle, a demand arrival); on a
    /// cancelled one a new job at the key's next generation.
    Join(usize, Priority),
}

/// A hook that names the job it was given, if any.
pub struct Alias(Option<JobId>);

impl DedupeHook for Alias {
    fn probe(&self, _: &Identity) -> Option<JobId> {
        self.0
    }
}

/// What a job's id reads (stale once the job was freed).
pub type IdRead = Result<Option<JobOutcome>, Error>;

/// What an operation showed.
#[derive(Debug, Clone, PartialEq)]
pub enum Seen {
    Submitted(Result<&'static str, Error>),
    Pulled(Option<JobKey>),
    Completed(Option<(JobKey, Result<(), Error>)>),
    /// The outcome the handle read (`Ok`: a held handle is never stale); the handle was
    /// dropped if it was `Some`.
    Taken(Option<Result<Option<JobOutcome>, Error>>),
    Discovered(Option<Result<Admission<()>, Error>>),
    Batched(Result<&'static str, Error>),
    Advanced(Result<u32, Error>),
    Removed(Result<(), Error>),
    Ticked,
    /// A handle dropped or detached: its key, the outcome it read just before, and what the
    /// job's id reads just after (stale once the job was freed).
    Departed(Option<(u64, Option<JobOutcome>, IdRead)>),
    /// A handle cancelled: its key, whether that cancelled the job, and what the id reads after.
    Cancelled(Option<(u64, bool, Result<Option<JobOutcome>, Error>)>),
    /// The end of the run: every handle dropped (`.0`: the completions of what still ran and
    /// what was drained then), then a reset and a drain (`.1`).
    Quiesced(
        Vec<(JobKey, Result<(), Error>)>,
        Vec<(JobKey, Result<(), Error>)>,
    ),
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
    /// Its outcome, read through the held handle (SPEC D31: never stale while held).
    pub outcome: Option<JobOutcome>,
}

/// One operation's record: what it showed, the occupancy after it, every held job's urgency
/// and outcome (admitted handles in key order, then joiners in order, then handles whose key
/// was admitted again since, in order), the generation of every key of the table, and whether
/// each running job is told to stop (SPEC D31).
#[derive(Debug, Clone, PartialEq)]
pub struct Step {
    pub seen: Seen,
    pub occupancy: Occupancy,
    pub urgency: Vec<Urge>,
    pub versions: Vec<Option<u32>>,
    pub running: Vec<(JobKey, bool)>,
}

/// The dependencies `(key, gate)` name, unpinned.
/// `o` with what the engines back left out: each backs its stores in its own steps (SPEC
/// D51), while what is used, the maxima and the jobs by state must agree.
pub fn comparable(o: Occupancy) -> Occupancy {
    Occupancy {
        nodes_backing: 0,
        edges_backing: 0,
        keys_backing: 0,
        index_cells: 0,
        index_cells_max: 0,
        ..o
    }
}

fn dependencies(deps: &[(u64, Gate)]) -> Vec<Dependency> {
    deps.iter()
        .map(|&(k, gate)| Dependency {
            key: JobKey::new(k),
            gate,
            pin: None,
        })
        .collect()
}

/// What a submit showed; keeps the handle of an admitted job by key and a joiner's handle
/// (with the key of the job it joined, `joins`).
fn submitted<E: GraphEngine>(
    r: Result<Admission<JobHandle<E>>, Error>,
    key: u64,
    joins: u64,
    held: &mut Held<E>,
) -> Seen {
    Seen::Submitted(r.map(|a| match a {
        Admission::Admitted(h) => {
            held.admit(key, h);
            "admitted"
        }
        Admission::Backpressured => "backpressured",
        Admission::DedupeJoined(h) => {
            held.joiners.push((joins, h));
            "joined"
        }
    }))
}

/// The handles a run holds (this engine's: every handle is one claim), and what it knows of
/// each job.
struct Held<E: GraphEngine> {
    /// The handle of each key's latest admitted job.
    handles: BTreeMap<u64, JobHandle<E>>,
    /// Joiners' handles, with their jobs' keys.
    joiners: Vec<(u64, JobHandle<E>)>,
    /// Handles of jobs whose key was admitted again since (superseded, removed or cancelled
    /// before): still held, so still demanding their jobs.
    older: Vec<(u64, JobHandle<E>)>,
    /// Own urgency and whether it was submitted without dependencies, by job.
    own: HashMap<JobId, ((Priority, Option<u64>), bool)>,
}

impl<E: GraphEngine> Held<E> {
    fn new() -> Self {
        Self {
            handles: BTreeMap::new(),
            joiners: Vec::new(),
            older: Vec::new(),
            own: HashMap::new(),
        }
    }

    /// Keeps `h` as `key`'s handle; one held for the key already is kept on.
    fn admit(&mut self, key: u64, h: JobHandle<E>) {
        if let Some(old) = self.handles.insert(key, h) {
            self.older.push((key, old));
        }
    }

    fn len(&self) -> usize {
        self.handles.len() + self.joiners.len() + self.older.len()
    }

    /// Every handle held, with its key, in the urgency log's order.
    fn all(&self) -> impl Iterator<Item = (u64, &JobHandle<E>)> {
        self.handles
            .iter()
            .map(|(k, h)| (*k, h))
            .chain(self.joiners.iter().map(|(_, h)| (u64::MAX, h)))
            .chain(self.older.iter().map(|(_, h)| (u64::MAX, h)))
    }

    /// Every handle held with its job's key, in the urgency log's order.
    fn keyed(&self) -> impl Iterator<Item = (u64, &JobHandle<E>)> {
        self.handles
            .iter()
            .map(|(k, h)| (*k, h))
            .chain(self.joiners.iter().map(|(k, h)| (*k, h)))
            .chain(self.older.iter().map(|(k, h)| (*k, h)))
    }

    /// The key of the `i`-th handle held (modulo), if any is held.
    fn key_at(&self, i: usize) -> Option<JobKey> {
        if self.len() == 0 {
            return None;
        }
        let i = i % self.len();
        Some(JobKey::new(self.keyed().nth(i).expect("in range").0))
    }

    /// Takes the `i`-th handle held (modulo) out, with its job's key.
    fn take_at(&mut self, i: usize) -> Option<(u64, JobHandle<E>)> {
        if self.len() == 0 {
            return None;
        }
        let mut i = i % self.len();
        if i < self.handles.len() {
            let k = *self.handles.keys().nth(i).expect("in range");
            return self.handles.remove(&k).map(|h| (k, h));
        }
        i -= self.handles.len();
        if i < self.joiners.len() {
            return Some(self.joiners.remove(i));
        }
        i -= self.joiners.len();
        Some(self.older.remove(i))
    }
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

/// Pulls and completes (successfully) every job the graph hands out, at most `bound` of them.
fn drain<E: GraphEngine>(
    g: &fairway::oracle::GraphOn<E>,
    out: &mut Vec<(JobKey, Result<(), Error>)>,
    bound: u32,
) {
    for _ in 0..bound {
        let Some(j) = g.try_next(ClassId(0)) else {
            return;
        };
        let k = j.key();
        out.push((k, g.complete(j, JobOutcome::Succeeded)));
    }
    panic!(
        "{}: the graph handed out more than {bound} jobs in a drain: {:?}",
        std::any::type_name::<E>(),
        g.occupancy()
    );
}

/// Runs `ops` on a graph of engine `E` and `sizes` (which must build); returns what each
/// operation showed, the occupancy after it and the urgency of every job held, and a last step
/// for the run's end at quiescence (every handle dropped, a drain, a reset, a drain), after
/// which the graph holds nothing.
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
    let mut held = Held::<E>::new();
    let mut running: Vec<RunningJob> = Vec::new();
    let mut out = Vec::new();
    let plain = |key: JobKey, priority: Priority| JobSpec {
        key,
        tenant: TenantId(0),
        class: ClassId(0),
        priority,
        deadline: None,
        deps: &[],
    };
    for op in ops {
        // What an admission adds to `held.own`: own urgency, no dependencies.
        let mut own = ((0, None), false);
        // The key a submitting operation admits a job on.
        let mut admits_on = None;
        let seen = match op {
            Op::Submit(key, deps) => {
                own.1 = deps.is_empty();
                admits_on = Some(*key);
                let deps = dependencies(deps);
                let r = g.submit(&JobSpec {
                    key: JobKey::new(*key),
                    tenant: TenantId(0),
                    class: ClassId(0),
                    priority: 0,
                    deadline: None,
                    deps: &deps,
                });
                submitted(r, *key, *key, &mut held)
            }
            Op::Urgent(key, priority, deadline, deps) => {
                own = (
                    (
                        *priority,
                        deadline.map(|s| clock.now() + Duration::from_secs(s).as_nanos() as u64),
                    ),
                    deps.is_empty(),
                );
                admits_on = Some(*key);
                let deps = dependencies(deps);
                let r = g.submit(&JobSpec {
                    key: JobKey::new(*key),
                    tenant: TenantId(0),
                    class: ClassId(0),
                    priority: *priority,
                    deadline: deadline.map(Duration::from_secs),
                    deps: &deps,
                });
                submitted(r, *key, *key, &mut held)
            }
            Op::Advance(key) => Seen::Advanced(g.advance(JobKey::new(*key)).map(|v| v.generation)),
            Op::Remove(key) => Seen::Removed(g.remove(JobKey::new(*key))),
            Op::Tick(s) => {
                clock.advance(Duration::from_secs(*s));
                Seen::Ticked
            }
            Op::Hooked(key, alias) => {
                own.1 = true;
                admits_on = Some(*key);
                let hook = Alias(held.handles.get(alias).map(JobHandle::id));
                // The hook's job is joined when it names one; a live job of the key otherwise.
                let joins = if hook.0.is_some() { *alias } else { *key };
                let r = g.submit_with(&plain(JobKey::new(*key), 0), &hook);
                submitted(r, *key, joins, &mut held)
            }
            Op::Join(i, priority) => match held.key_at(*i) {
                None => Seen::Submitted(Err(Error::new(Code::NotFound, Reason::StaleHandle))),
                Some(key) => {
                    own = ((*priority, None), true);
                    admits_on = Some(key.key.0);
                    let r = g.submit(&plain(key, *priority));
                    submitted(r, key.key.0, key.key.0, &mut held)
                }
            },
            Op::TakeJoiner(i) => Seen::Taken(if held.joiners.is_empty() {
                None
            } else {
                let i = i % held.joiners.len();
                let r = g.outcome(&held.joiners[i].1);
                if matches!(r, Ok(Some(_))) {
                    drop(held.joiners.remove(i));
                }
                Some(r)
            }),
            Op::Take(key) => {
                let r = held.handles.get(key).map(|h| g.outcome(h));
                if matches!(r, Some(Ok(Some(_)))) {
                    drop(held.handles.remove(key));
                }
                Seen::Taken(r)
            }
            Op::DropHandle(i) => Seen::Departed(held.take_at(*i).map(|(k, h)| {
                let (id, before) = (h.id(), h.outcome());
                drop(h);
                (k, before, g.outcome(id))
            })),
            Op::Detach(i) => Seen::Departed(held.take_at(*i).map(|(k, h)| {
                let (id, before) = (h.id(), h.outcome());
                h.detach();
                (k, before, g.outcome(id))
            })),
            Op::Cancel(i) => Seen::Cancelled(held.take_at(*i).map(|(k, h)| {
                let id = h.id();
                let cancelled = h.cancel();
                (k, cancelled, g.outcome(id))
            })),
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
                    // A stale completion (superseded or removed meanwhile) is refused (D21),
                    // and so is one of a job cancelled for want of demand (D31).
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
                        for ((key, d), h) in jobs.iter().zip(hs.into_handles()) {
                            held.own.insert(h.id(), ((0, None), d.is_empty()));
                            held.admit(*key, h);
                        }
                        "admitted"
                    }
                    Admission::Backpressured => "backpressured",
                    Admission::DedupeJoined(_) => "joined",
                }))
            }
        };
        if let Seen::Submitted(Ok("admitted")) = seen {
            if let Some(h) = admits_on.and_then(|k| held.handles.get(&k)) {
                held.own.insert(h.id(), own);
            }
        }
        out.push(step(&g, &held, &running, sizes, seen));
    }
    // Quiescence: every demand departs, what runs is completed (cancelled now unless detached)
    // and what is queued drained; a reset fails what waits on keys nobody produces, and a last
    // drain runs what that released.
    drop(std::mem::replace(&mut held, Held::new()));
    let mut first = Vec::new();
    for j in running.drain(..) {
        let k = j.key();
        first.push((k, g.complete(j, JobOutcome::Succeeded)));
    }
    drain(&g, &mut first, 4 * sizes.nodes + 4);
    g.reset();
    let mut second = Vec::new();
    drain(&g, &mut second, 4 * sizes.nodes + 4);
    let last = step(&g, &held, &running, sizes, Seen::Quiesced(first, second));
    let o = last.occupancy;
    assert_eq!(
        (
            o.keys_used,
            o.nodes_used,
            o.edges_used,
            o.waiting,
            o.ready,
            o.running
        ),
        (0, 0, 0, 0, 0, 0),
        "{}: not quiescent once every handle was dropped, after a drain, a reset and a drain \
         ({:?}); ops {ops:?}",
        std::any::type_name::<E>(),
        last.seen
    );
    assert!(
        g.ledger().usage().is_zero(),
        "{}: the ledger holds something at quiescence; ops {ops:?}",
        std::any::type_name::<E>()
    );
    out.push(last);
    out
}

/// The record of one step: `seen`, then what the graph shows after it.
fn step<E: GraphEngine>(
    g: &fairway::oracle::GraphOn<E>,
    held: &Held<E>,
    running: &[RunningJob],
    sizes: Sizes,
    seen: Seen,
) -> Step {
    let urgency = held
        .all()
        .map(|(key, h)| {
            let (own, no_deps) = held.own.get(&h.id()).copied().unwrap_or(((0, None), false));
            let outcome = h.outcome();
            let ended = outcome.is_some();
            let is_running = running.iter().any(|j| j.id() == h.id());
            Urge {
                key,
                own,
                effective: g.effective(h),
                queued: no_deps && !ended && !is_running,
                ended,
                running: is_running,
                outcome,
            }
        })
        .collect();
    Step {
        seen,
        occupancy: comparable(g.occupancy()),
        urgency,
        versions: (0..u64::from(sizes.keys))
            .map(|k| g.version(JobKey::new(k)).map(|v| v.generation))
            .collect(),
        running: running
            .iter()
            .map(|j| (j.key(), j.is_cancelled()))
            .collect(),
    }
}
