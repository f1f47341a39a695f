//! Differential test of the two graph engines with key operations (SPEC Q02 for section D,
//! D20–D24): the op mix of `graph_differential.rs` (submit, pull, discover, complete, collect)
//! plus `advance`, `remove`, `reset`, witness checks and the stale completions they cause
//! give identical results, occupancy, key generations and stale counts on the lock-free graph
//! and the mutex graph after every operation. A third of the dependencies pin a version of
//! their key (the current one, or the one before it), the rest follow the key (SPEC D33).
//!
//! A second mix churns keys: a key space four times the key table's size with removals
//! frequent, so the table fills and only removal makes room (D24); both engines must refuse
//! and admit the same submissions. Each case ends with a reset and a drain, after which both
//! engines hold nothing: no key, node or edge in use, nothing waiting, ready or running.
//!
//! Handles are owned (SPEC D31): taking an outcome is dropping the handle once its job ended,
//! and two more operations make demand depart at any time: a handle dropped (before its job
//! ended: withdrawn, the job cancelled if nothing else wants it; a new submission of a
//! cancelled identity advances its key one generation, or meets the generation's bound) or
//! detached (the job runs on with no handle).
//!
//! Fixed seeds by default; `FAIRWAY_GRAPH_KEYS_DIFF_CASES` raises the number of cases.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome, JobSpec,
    Occupancy, RunningJob,
};
use fairway::oracle::GraphOn;
use fairway::{ClassId, Code, Error, Reason, TenantId};
use std::collections::BTreeMap;

/// What a job's id reads (stale once the job was freed).
type IdRead = Result<Option<JobOutcome>, Error>;

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
    Submit(u64, Vec<(u64, Gate, PinTo)>),
    Pull,
    Complete(usize, bool),
    Take(u64),
    Discover(usize, Vec<(u64, Gate, PinTo)>),
    Advance(u64),
    Remove(u64),
    Reset,
    Witness(usize),
    /// Drops the handle of key `.0`'s latest admitted job, ended or not (SPEC D31).
    Drop(u64),
    /// Detaches it: the job runs on with no handle.
    Detach(u64),
}

/// Which version of its key a dependency pins (SPEC D33), decided on each engine from that
/// engine's own version of the key (incarnations differ between engines).
#[derive(Debug, Clone, Copy)]
enum PinTo {
    /// None: the key's current producer.
    Follow,
    /// The key's version at the submit.
    Current,
    /// One generation before it (superseded already), if the key has one.
    Previous,
}

/// The dependencies of `deps` as `g` sees them.
/// `o` with what the engines back left out: each backs its stores in its own steps (SPEC
/// D51), while what is used, the maxima and the jobs by state must agree.
fn comparable(o: fairway::graph::Occupancy) -> fairway::graph::Occupancy {
    fairway::graph::Occupancy {
        nodes_backing: 0,
        edges_backing: 0,
        keys_backing: 0,
        index_cells: 0,
        index_cells_max: 0,
        ..o
    }
}

fn to_deps<E: GraphEngine>(g: &GraphOn<E>, deps: &[(u64, Gate, PinTo)]) -> Vec<Dependency> {
    deps.iter()
        .map(|&(k, gate, to)| {
            let key = JobKey::new(k);
            let pin = match (to, g.version(key)) {
                (PinTo::Follow, _) | (_, None) => None,
                (PinTo::Current, v) => v,
                (PinTo::Previous, Some(mut v)) => {
                    v.generation = v.generation.saturating_sub(1);
                    Some(v)
                }
            };
            Dependency { key, gate, pin }
        })
        .collect()
}

fn random_deps(r: &mut Rng, keys: u64) -> Vec<(u64, Gate, PinTo)> {
    (0..r.below(4))
        .map(|_| {
            let gate = match r.below(3) {
                0 => Gate::Sequential,
                1 => Gate::OnSuccess,
                _ => Gate::OnAdmission,
            };
            let to = match r.below(6) {
                0 => PinTo::Current,
                1 => PinTo::Previous,
                _ => PinTo::Follow,
            };
            (r.below(keys), gate, to)
        })
        .collect()
}

/// The key mix over `keys` keys; `churn` makes removal as frequent as submission.
fn ops(seed: u64, n: usize, keys: u64, churn: bool) -> Vec<Op> {
    let mut r = Rng(seed | 1);
    (0..n)
        .map(|_| match r.below(18) {
            16 => Op::Drop(r.below(keys)),
            17 => Op::Detach(r.below(keys)),
            11 if churn => Op::Remove(r.below(keys)),
            12 if churn => Op::Remove(r.below(keys)),
            11 | 12 => Op::Advance(r.below(keys)),
            13 => Op::Remove(r.below(keys)),
            14 => {
                if r.below(8) == 0 {
                    Op::Reset
                } else {
                    Op::Witness(r.below(8) as usize)
                }
            }
            15 => Op::Advance(r.below(keys)),
            0..=3 => {
                let key = r.below(keys);
                let deps = random_deps(&mut r, keys);
                Op::Submit(key, deps)
            }
            10 => {
                let i = r.below(8) as usize;
                Op::Discover(i, random_deps(&mut r, keys))
            }
            4 | 5 => Op::Pull,
            6 | 7 => Op::Complete(r.below(8) as usize, r.below(3) != 0),
            _ => Op::Take(r.below(keys)),
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
    /// A handle dropped or detached: the outcome it read before, and what its job's id reads
    /// after (stale once the job was freed).
    Departed(Option<(Option<JobOutcome>, IdRead)>),
}

/// Runs `ops` on a graph whose key table holds `table` keys, reading the generations of keys
/// `0..keys` after each; then resets, drains and collects everything (the last step).
fn run<E: GraphEngine>(ops: &[Op], table: u32, keys: u64) -> Vec<Step> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1)).unwrap();
    let g = Graph::builder(ledger)
        .class(3)
        .nodes(8)
        .edges(10)
        .keys(table)
        .max_deps(4)
        // Narrow, so exhaustion (SPEC D22) is reached.
        .max_generation(3)
        .build_with::<E>()
        .unwrap();
    let mut handles: BTreeMap<u64, JobHandle<E>> = BTreeMap::new();
    let mut running: Vec<RunningJob> = Vec::new();
    // Every other handle held, one per claim: joiners, and admitted handles whose key was
    // admitted again (`handles` keeps the latest per key). Held to the end, as a caller that
    // never collects them.
    let mut all: Vec<JobHandle<E>> = Vec::new();
    let mut out = Vec::new();
    for op in ops {
        let seen = match op {
            Op::Submit(key, deps) => {
                let deps = to_deps(&g, deps);
                let r = g.submit(&JobSpec {
                    key: JobKey::new(*key),
                    tenant: TenantId(0),
                    class: ClassId(0),
                    priority: 0,
                    deadline: None,
                    deps: &deps,
                });
                Seen::Submitted(r.map(|a| match a {
                    Admission::Admitted(h) => {
                        all.extend(handles.insert(*key, h));
                        "admitted"
                    }
                    Admission::Backpressured => "backpressured",
                    // One more claim on the live job (SPEC D02), collected at the end.
                    Admission::DedupeJoined(h) => {
                        all.push(h);
                        "joined"
                    }
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
                let deps = to_deps(&g, deps);
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
            // Taking the outcome: reading it, then dropping the handle once the job ended.
            Op::Take(key) => Seen::Taken(handles.get(key).map(|h| g.outcome(h)).inspect(|&r| {
                if matches!(r, Ok(Some(_))) {
                    drop(handles.remove(key));
                }
            })),
            Op::Drop(key) => Seen::Departed(handles.remove(key).map(|h| {
                let (id, before) = (h.id(), h.outcome());
                drop(h);
                (before, g.outcome(id))
            })),
            Op::Detach(key) => Seen::Departed(handles.remove(key).map(|h| {
                let (id, before) = (h.id(), h.outcome());
                h.detach();
                (before, g.outcome(id))
            })),
        };
        let gens: Vec<Option<u32>> = (0..keys)
            .map(|k| g.version(JobKey::new(k)).map(|v| v.generation))
            .collect();
        out.push((seen, comparable(g.occupancy()), gens, g.stale_completions()));
    }
    // Conservation at quiescence: reset, finish what runs, drain, collect every outcome.
    g.reset();
    for j in running {
        // Removed, superseded, or cancelled for want of demand (SPEC D31).
        assert!(g.complete(j, JobOutcome::Succeeded).is_err());
    }
    assert!(g.try_next(ClassId(0)).is_none());
    // Each job still held has ended; dropping its last handle frees it.
    for h in handles.into_values().chain(all) {
        assert!(g.outcome(&h).unwrap().is_some(), "a held job never ended");
        drop(h);
    }
    let o = g.occupancy();
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
        "not quiescent after reset and drain"
    );
    assert!(g.ledger().usage().is_zero());
    out.push((
        Seen::Reset,
        comparable(o),
        Vec::new(),
        g.stale_completions(),
    ));
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
    // Demand departures (SPEC D31): handles dropped before their job ended, and cancelled
    // outcomes collected.
    let (mut departed_live, mut cancelled) = (0, 0);
    for case in 0..cases {
        let seed = 0xD1B5_4A32_D192_ED03u64.wrapping_mul(case + 1);
        let ops = ops(seed, 100, 12, false);
        let a = run::<fairway::oracle::LockFreeGraph>(&ops, 16, 12);
        let b = run::<fairway::oracle::MutexGraph>(&ops, 16, 12);
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
                // A late dependent of a job cancelled for want of demand (SPEC D31).
                Seen::Taken(Some(Ok(Some(JobOutcome::Failed(e)))))
                    if e.reason() == Reason::DependencyCancelled =>
                {
                    cancelled += 1
                }
                // A handle is demand: a job read through a held handle is never withdrawn.
                Seen::Taken(Some(Ok(Some(JobOutcome::Failed(e)))))
                    if e.reason() == Reason::Withdrawn =>
                {
                    panic!(
                        "case {case} op {i}: a held job was withdrawn; ops {:?}",
                        &ops[..=i]
                    )
                }
                Seen::Departed(Some((None, _))) => departed_live += 1,
                _ => {}
            }
        }
    }
    eprintln!(
        "{cases} cases: admitted {submitted}, cycles refused {refused_cycles}, \
         backpressured {backpressured}, dependency-failed outcomes {dependency_failed}, \
         discoveries {discovered}, superseded {superseded}, removed {removed}, \
         stale completions {stale}, witnesses refused {witness_refused}, \
         exhausted generations {exhausted}, unknown keys {exhausted_or_unknown}, \
         handles dropped or detached before their job ended {departed_live}, cancelled \
         dependency-cancelled outcomes collected {cancelled}"
    );
    assert!(departed_live > 0 && cancelled > 0);
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

/// Key churn past the table: 32 keys over a table of 8, removal as frequent as submission. The
/// engines agree after every operation (a submission refused for a full table on one is
/// refused on the other), the table fills and empties again, and both end with every key
/// slot free.
#[test]
fn d24_graph_engines_agree_under_key_churn_past_the_table() {
    let cases: u64 = std::env::var("FAIRWAY_GRAPH_KEYS_DIFF_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(500);
    let (mut full, mut removed, mut admitted_after_full) = (0, 0, 0);
    for case in 0..cases {
        let seed = 0x9E37_79B9_7F4A_7C15u64.wrapping_mul(case + 7);
        let ops = ops(seed, 150, 32, true);
        let a = run::<fairway::oracle::LockFreeGraph>(&ops, 8, 32);
        let b = run::<fairway::oracle::MutexGraph>(&ops, 8, 32);
        let mut was_full = false;
        for (i, (x, y)) in a.iter().zip(&b).enumerate() {
            assert_eq!(
                x,
                y,
                "case {case} (seed {seed:#x}) differs at op {i}; ops so far {:?}",
                &ops[..=i.min(ops.len() - 1)]
            );
            if x.1.keys_used == x.1.keys_total {
                full += 1;
                was_full = true;
            }
            match &x.0 {
                Seen::Removed(Ok(())) => removed += 1,
                Seen::Submitted(Ok("admitted")) if was_full => {
                    admitted_after_full += 1;
                    was_full = false;
                }
                _ => {}
            }
        }
    }
    eprintln!(
        "{cases} cases: steps with a full key table {full}, removals {removed}, \
         admissions after the table was full {admitted_after_full}"
    );
    assert!(full > 0 && removed > 0 && admitted_after_full > 0);
}
