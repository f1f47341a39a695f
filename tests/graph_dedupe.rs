//! SPEC D02 (`DedupeJoined`), D03 (the caller's `DedupeHook`), D32 (join notices outside
//! every lock) and D31 (owned handles) on both graph engines: a submission of a live identity
//! joins its job, every handle of a job sees its one outcome and the job's slot is freed when
//! the last one is dropped, racing submissions of one identity admit exactly one job, a hook's
//! notices may call back into the graph, a joiner's handle keeps the job wanted, and an
//! identity whose job was withdrawn starts a new job.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, DedupeHook, Gate, Graph, GraphEngine, Identity, JobHandle, JobId, JobKey,
    JobOutcome, JobSpec, NoDedupeHook,
};
use fairway::oracle::GraphOn;
use fairway::{Code, Error, Reason, TenantId};
use std::cell::{Cell, RefCell};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc, Barrier};
use std::time::Duration;

#[macro_use]
#[path = "common/graph.rs"]
mod graph_common;
use graph_common::*;

both_graphs!(
    d02_second_submit_of_a_live_identity_joins_it,
    d02_every_handle_sees_the_one_outcome_and_the_last_drop_frees_the_slot,
    d02_joins_a_job_waiting_ready_or_running,
    d02_identity_is_key_stage_and_generation,
    d02_after_the_job_ended_its_generation_is_taken_and_advance_makes_a_new_job,
    d02_joiner_of_a_superseded_job_sees_superseded,
    d02_racing_submits_of_one_identity_admit_exactly_one,
    d02_submits_racing_the_end_of_the_job_join_or_are_refused,
    d02_ten_thousand_jobs_each_joined_conserve_every_slot,
    d02_wait_batch_reads_every_handle_and_the_drops_free_the_slots,
    d03_hook_some_skips_submission,
    d03_no_dedupe_hook_never_dedupes,
    d03_hook_with_a_stale_or_foreign_handle_is_a_typed_error,
    d03_bad_input_is_refused_before_the_probe,
    d32_join_notice_fires_outside_the_lock,
    d31_joiner_keeps_a_live_job_after_the_submitter_drops,
    d31_last_demander_gone_then_same_identity_starts_a_new_job,
    d31_hook_join_on_a_withdrawn_job_is_stale,
);

fn graph<E: GraphEngine>(nodes: u32) -> GraphOn<E> {
    sized(nodes, 4 * nodes, 4 * nodes)
}

/// A graph of one class of four cells with these stores.
fn sized<E: GraphEngine>(nodes: u32, edges: u32, keys: u32) -> GraphOn<E> {
    // Four tenants: a joiner of another (valid) tenant is ignored, an out-of-range one refused.
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap();
    Graph::builder(ledger)
        .class(4)
        .nodes(nodes)
        .edges(edges)
        .keys(keys)
        .build_with::<E>()
        .unwrap()
}

fn joined<E: GraphEngine>(g: &GraphOn<E>, spec: &JobSpec<'_>) -> JobHandle<E> {
    match g.submit(spec).unwrap() {
        Admission::DedupeJoined(h) => h,
        other => panic!("{:?} not joined: {other:?}", spec.key),
    }
}

/// Runs every ready job; `fail`: whether a key's body fails. Returns the keys that ran.
fn run_all<E: GraphEngine>(g: &GraphOn<E>, fail: impl Fn(JobKey) -> bool) -> Vec<JobKey> {
    let mut ran = Vec::new();
    while let Some(job) = g.try_next(CPU) {
        ran.push(job.key());
        let outcome = if fail(job.key()) {
            JobOutcome::Failed(Error::new(Code::Internal, Reason::Failed))
        } else {
            JobOutcome::Succeeded
        };
        g.complete(job, outcome).unwrap();
    }
    ran
}

/// `id` names no job any more: it ended and its last handle was dropped.
fn assert_stale<E: GraphEngine>(g: &GraphOn<E>, id: JobId) {
    let e = g.outcome(id).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::NotFound, Reason::StaleHandle)
    );
}

fn d02_second_submit_of_a_live_identity_joins_it<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    let before = g.occupancy();
    // Another tenant, priority and dependency list: ignored, the joined job is unchanged.
    let deps = [dep(2, Gate::OnSuccess)];
    let other = JobSpec {
        tenant: TenantId(3),
        priority: 7,
        deadline: None,
        ..spec(1, &deps)
    };
    let j1 = joined(&g, &other);
    assert_eq!(j1, a);
    let j2 = joined(&g, &spec(1, &[]));
    assert_eq!(j2, a);
    // Nothing was submitted: no node, no edge, no key for the ignored dependency.
    assert_eq!(g.occupancy(), before);
    assert_eq!(g.version(JobKey::new(2)), None);
    // The job runs once; each of its three handles sees the outcome.
    assert_eq!(run_all(&g, |_| false), vec![JobKey::new(1)]);
    let handles = [a, j1, j2];
    for h in &handles {
        assert_eq!(g.outcome(h).unwrap(), Some(JobOutcome::Succeeded));
    }
    // Three claims: the slot is freed with the last handle.
    let [a, j1, j2] = handles;
    drop(a);
    drop(j1);
    assert_eq!(g.occupancy().nodes_used, 1);
    drop(j2);
    assert_eq!(g.occupancy().nodes_used, 0);
}

fn d02_every_handle_sees_the_one_outcome_and_the_last_drop_frees_the_slot<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    let j = joined(&g, &spec(1, &[]));
    let (a_id, j_id) = (a.id(), j.id());
    assert_eq!(a_id, j_id, "handles of one job name one job");
    assert_eq!(g.outcome(&j).unwrap(), None);
    run_all(&g, |_| true);
    let failed = Some(JobOutcome::Failed(Error::new(
        Code::Internal,
        Reason::Failed,
    )));
    // Read by either handle (or its id), as often as wanted, while a handle is held.
    for _ in 0..2 {
        assert_eq!(g.outcome(&a).unwrap(), failed);
        assert_eq!(g.outcome(&j).unwrap(), failed);
        assert_eq!(a.outcome(), failed);
        assert_eq!(g.outcome(j_id).unwrap(), failed);
    }
    // The joiner goes first: the original's claim keeps the slot.
    drop(j);
    assert_eq!(g.occupancy().nodes_used, 1);
    assert_eq!(g.outcome(&a).unwrap(), failed);
    assert_eq!(
        g.outcome(j_id).unwrap(),
        failed,
        "the id reads while a handle holds"
    );
    drop(a);
    assert_eq!(g.occupancy().nodes_used, 0);
    // Every handle dropped: the ids are stale, and the slot serves a new job.
    assert_stale(&g, a_id);
    assert_stale(&g, j_id);
    let b = admit(&g, 2, &[]);
    assert_stale(&g, a_id);
    assert_eq!(g.outcome(&b).unwrap(), None);
}

fn d02_joins_a_job_waiting_ready_or_running<E: GraphEngine>() {
    let g = graph::<E>(8);
    // Waiting on key 9, which has no producer yet.
    let waiting = admit(&g, 1, &[dep(9, Gate::OnSuccess)]);
    let waiting_joiner = joined(&g, &spec(1, &[]));
    assert_eq!(waiting_joiner, waiting);
    let ready = admit(&g, 2, &[]);
    let ready_joiner = joined(&g, &spec(2, &[]));
    assert_eq!(ready_joiner, ready);
    let running = g.try_next(CPU).expect("job 2");
    assert_eq!(running.id(), ready.id());
    let running_joiner = joined(&g, &spec(2, &[]));
    assert_eq!(running_joiner, ready);
    assert!(!running.is_cancelled());
    g.complete(running, JobOutcome::Succeeded).unwrap();
    let producer = admit(&g, 9, &[]);
    run_all(&g, |_| false);
    assert_eq!(g.occupancy().waiting, 0);
    let handles = [
        waiting,
        waiting_joiner,
        ready,
        ready_joiner,
        running_joiner,
        producer,
    ];
    for h in &handles {
        assert_eq!(h.outcome(), Some(JobOutcome::Succeeded));
    }
    assert_eq!(g.occupancy().nodes_used, 3);
    drop(handles);
    assert_eq!(g.occupancy().nodes_used, 0);
}

fn d02_identity_is_key_stage_and_generation<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    // Another stage of the same work key is another identity.
    let staged = JobSpec {
        key: JobKey::staged(1, 1),
        ..spec(1, &[])
    };
    let Admission::Admitted(s) = g.submit(&staged).unwrap() else {
        panic!("stage 1 is a job of its own")
    };
    assert_ne!(s, a);
    let s_joiner = joined(&g, &staged);
    assert_eq!(s_joiner, s);
    // Another generation of the key is another identity: the old job is superseded.
    g.advance(JobKey::new(1)).unwrap();
    let b = admit(&g, 1, &[]);
    assert_ne!(b, a);
    let b_joiner = joined(&g, &spec(1, &[]));
    assert_eq!(b_joiner, b);
}

fn d02_after_the_job_ended_its_generation_is_taken_and_advance_makes_a_new_job<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    run_all(&g, |_| false);
    // Ended (a handle still holds it): the generation had its job.
    let e = g.submit(&spec(1, &[])).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::AlreadyExists, Reason::DuplicateKey)
    );
    assert_eq!(g.outcome(&a).unwrap(), Some(JobOutcome::Succeeded));
    // Freed: the generation still had its job.
    drop(a);
    assert_eq!(g.occupancy().nodes_used, 0);
    assert_eq!(
        g.submit(&spec(1, &[])).unwrap_err().reason(),
        Reason::DuplicateKey
    );
    // A new generation: a new job, not a join.
    g.advance(JobKey::new(1)).unwrap();
    let b = admit(&g, 1, &[]);
    let b_joiner = joined(&g, &spec(1, &[]));
    assert_eq!(b_joiner, b);
    // Removed and named again: a new job too.
    run_all(&g, |_| false);
    g.remove(JobKey::new(1)).unwrap();
    let c = admit(&g, 1, &[]);
    assert_ne!(c, b);
}

fn d02_joiner_of_a_superseded_job_sees_superseded<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    let j = joined(&g, &spec(1, &[]));
    g.advance(JobKey::new(1)).unwrap();
    for h in [&a, &j] {
        let Some(JobOutcome::Failed(e)) = g.outcome(h).unwrap() else {
            panic!("not ended")
        };
        assert_eq!(e.reason(), Reason::Superseded);
    }
    assert!(g.try_next(CPU).is_none());
    drop((a, j));
    assert_eq!(g.occupancy().nodes_used, 0);
}

/// Several threads submit one identity at once, round after round: exactly one submission is
/// admitted, every other joins that job, and every handle sees its one outcome. Half the
/// rounds' jobs list dependencies, so on the lock-free graph losers can also meet the winner
/// after they reserved and linked (the publication race), not only on the first look.
fn d02_racing_submits_of_one_identity_admit_exactly_one<E: GraphEngine>() {
    const THREADS: usize = 4;
    let rounds: u64 = if cfg!(miri) { 4 } else { 200 };
    let g = graph::<E>(2 * rounds as u32 + 2);
    let base = admit(&g, 1 << 20, &[]);
    let barrier = Arc::new(Barrier::new(THREADS));
    let submitters: Vec<_> = (0..THREADS)
        .map(|_| {
            let (g, barrier) = (g.clone(), barrier.clone());
            std::thread::spawn(move || {
                let mut got = Vec::new();
                for r in 0..rounds {
                    let deps = [
                        dep(1 << 20, Gate::Sequential),
                        dep(1 << 21, Gate::OnSuccess),
                    ];
                    let deps = if r % 2 == 0 { &deps[..] } else { &[] };
                    barrier.wait();
                    got.push(g.submit(&spec(r, deps)).unwrap());
                }
                got
            })
        })
        .collect();
    let per_thread: Vec<Vec<Admission<JobHandle<E>>>> =
        submitters.into_iter().map(|s| s.join().unwrap()).collect();
    // The shared dependencies end, and with them every round's job.
    let shared = admit(&g, 1 << 21, &[]);
    run_all(&g, |_| false);
    for r in 0..rounds as usize {
        let results: Vec<&Admission<JobHandle<E>>> = per_thread.iter().map(|t| &t[r]).collect();
        let admitted: Vec<&JobHandle<E>> = results
            .iter()
            .filter_map(|a| match a {
                Admission::Admitted(h) => Some(h),
                _ => None,
            })
            .collect();
        assert_eq!(admitted.len(), 1, "round {r}: {results:?}");
        for a in &results {
            let (Admission::Admitted(h) | Admission::DedupeJoined(h)) = a else {
                panic!("round {r}: {results:?}")
            };
            assert_eq!(h, admitted[0], "round {r}: joined another job");
            assert_eq!(g.outcome(h).unwrap(), Some(JobOutcome::Succeeded));
        }
    }
    // Every round's handles go: each round's job is freed with its last one.
    drop(per_thread);
    drop(base);
    let o = g.occupancy();
    // Only the producer of `1 << 21` is left.
    assert_eq!((o.nodes_used, o.edges_used, o.waiting), (1, 0, 0), "{o:?}");
    drop(shared);
    assert_eq!(g.occupancy().nodes_used, 0);
}

/// An executor ends jobs while another thread submits each job's identity again: each such
/// submission either joins the job (and then sees its outcome) or, once the job ended, is
/// refused `duplicate-key`; never a second job. Every slot is freed at the end.
fn d02_submits_racing_the_end_of_the_job_join_or_are_refused<E: GraphEngine>() {
    let jobs: u64 = if cfg!(miri) { 20 } else { 2000 };
    // A key per job: the key table holds them all.
    let g = sized::<E>(16, 64, jobs as u32);
    let done = Arc::new(AtomicBool::new(false));
    let executor = {
        let (g, done) = (g.clone(), done.clone());
        std::thread::spawn(move || {
            let mut ran = 0u64;
            loop {
                match g.try_next(CPU) {
                    Some(job) => {
                        g.complete(job, JobOutcome::Succeeded).unwrap();
                        ran += 1;
                    }
                    None if done.load(Ordering::Acquire) => return ran,
                    None => std::thread::yield_now(),
                }
            }
        })
    };
    let (mut joins, mut refused) = (0u64, 0u64);
    for k in 0..jobs {
        let h = loop {
            match g.submit(&spec(k, &[])).unwrap() {
                Admission::Admitted(h) => break h,
                Admission::Backpressured => std::thread::yield_now(),
                Admission::DedupeJoined(h) => panic!("job {k} is new: {h:?}"),
            }
        };
        let mut joiners = Vec::new();
        for i in 0..3 {
            // Spread the submissions over the job's life: before, around and after its end.
            for _ in 0..(k * 31 + i * 17) % 64 * 40 {
                std::hint::spin_loop();
            }
            match g.submit(&spec(k, &[])) {
                Ok(Admission::DedupeJoined(j)) => {
                    assert_eq!(j, h);
                    joiners.push(j);
                    joins += 1;
                }
                Err(e) if e.reason() == Reason::DuplicateKey => refused += 1,
                other => panic!("job {k}: {other:?}"),
            }
        }
        // Once the job ended, every handle sees its outcome: the original's and each joiner's.
        while g.outcome(&h).unwrap().is_none() {
            std::thread::yield_now();
        }
        for j in joiners.iter().chain([&h]) {
            assert_eq!(j.outcome(), Some(JobOutcome::Succeeded));
        }
        // The last handle dropped frees the job.
        let id = h.id();
        drop(joiners);
        drop(h);
        assert_stale(&g, id);
    }
    done.store(true, Ordering::Release);
    assert_eq!(executor.join().unwrap(), jobs, "one run per job");
    eprintln!("{joins} joins, {refused} refused after the end");
    assert_eq!(joins + refused, 3 * jobs);
    assert!(joins > 0);
    assert_eq!(g.occupancy().nodes_used, 0);
}

/// Past toy sizes: 10^4 jobs through a graph of 256 node slots, each submitted twice (the
/// second joins), each with a dependency on the job before it; both handles of every job read
/// its outcome and are dropped.
fn d02_ten_thousand_jobs_each_joined_conserve_every_slot<E: GraphEngine>() {
    let jobs: u64 = if cfg!(miri) { 100 } else { 10_000 };
    let g = sized::<E>(256, 256, jobs as u32);
    let mut held: Vec<(JobHandle<E>, JobHandle<E>)> = Vec::new();
    let collect = |held: &mut Vec<(JobHandle<E>, JobHandle<E>)>| {
        for (h, j) in held.drain(..) {
            assert_eq!(h.outcome(), Some(JobOutcome::Succeeded));
            assert_eq!(j.outcome(), Some(JobOutcome::Succeeded));
        }
    };
    for k in 0..jobs {
        let deps = [dep(k.wrapping_sub(1), Gate::OnSuccess)];
        let deps = if k % 128 == 0 { &[][..] } else { &deps[..] };
        let h = admit(&g, k, deps);
        let j = joined(&g, &spec(k, deps));
        assert_eq!(j, h);
        held.push((h, j));
        if held.len() == 128 {
            assert_eq!(run_all(&g, |_| false).len(), 128);
            collect(&mut held);
        }
    }
    run_all(&g, |_| false);
    collect(&mut held);
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.edges_used, o.waiting), (0, 0, 0), "{o:?}");
}

/// `wait_batch` reads every handle's outcome in input order, two handles of one job included,
/// and leaves them valid: the slots are freed only when the handles are dropped.
fn d02_wait_batch_reads_every_handle_and_the_drops_free_the_slots<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    let j = joined(&g, &spec(1, &[]));
    let b = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    run_all(&g, |_| false);
    let handles = [a, b, j];
    assert_eq!(g.wait_batch(&handles).unwrap(), [JobOutcome::Succeeded; 3]);
    // Read again: nothing was taken.
    assert_eq!(g.wait_batch(&handles).unwrap(), [JobOutcome::Succeeded; 3]);
    assert_eq!(g.occupancy().nodes_used, 2);
    let [a, b, j] = handles;
    drop((a, b));
    assert_eq!(g.occupancy().nodes_used, 1, "the joiner keeps job 1");
    drop(j);
    assert_eq!(g.occupancy().nodes_used, 0);
}

/// A hook that names one job and records its notices.
#[derive(Default)]
struct Recorder {
    name: Cell<Option<JobId>>,
    probes: Cell<u32>,
    admitted: RefCell<Vec<(Identity, JobId)>>,
    joined: RefCell<Vec<(Identity, JobId)>>,
}

impl DedupeHook for Recorder {
    fn probe(&self, _: &Identity) -> Option<JobId> {
        self.probes.set(self.probes.get() + 1);
        self.name.get()
    }
    fn admitted(&self, identity: &Identity, job: JobId) {
        self.admitted.borrow_mut().push((*identity, job));
    }
    fn joined(&self, identity: &Identity, job: JobId) {
        self.joined.borrow_mut().push((*identity, job));
    }
}

fn d03_hook_some_skips_submission<E: GraphEngine>() {
    let g = graph::<E>(8);
    let hook = Recorder::default();
    let Admission::Admitted(a) = g.submit_with(&spec(1, &[]), &hook).unwrap() else {
        panic!("admitted")
    };
    let v1 = g.version(JobKey::new(1));
    assert!(v1.is_some());
    assert_eq!(
        *hook.admitted.borrow(),
        [(
            Identity {
                key: JobKey::new(1),
                version: v1
            },
            a.id()
        )]
    );
    // The hook names job 1 for key 5: nothing is submitted, key 5 is never named.
    hook.name.set(Some(a.id()));
    let before = g.occupancy();
    let Admission::DedupeJoined(j) = g
        .submit_with(&spec(5, &[dep(6, Gate::Sequential)]), &hook)
        .unwrap()
    else {
        panic!("joined job 1")
    };
    assert_eq!(j, a);
    assert_eq!(g.occupancy(), before);
    assert_eq!(g.version(JobKey::new(5)), None);
    assert_eq!(g.version(JobKey::new(6)), None);
    assert_eq!(hook.probes.get(), 2);
    assert_eq!(hook.joined.borrow().len(), 1);
    assert_eq!(hook.joined.borrow()[0].1, a.id());
    // The hook's join holds a claim: job 1's outcome is seen through both handles, and the
    // slot outlives the first one dropped.
    assert_eq!(run_all(&g, |_| false), [JobKey::new(1)]);
    assert_eq!(g.outcome(&a).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.outcome(&j).unwrap(), Some(JobOutcome::Succeeded));
    drop(a);
    assert_eq!(g.occupancy().nodes_used, 1);
    assert_eq!(j.outcome(), Some(JobOutcome::Succeeded));
    drop(j);
    assert_eq!(g.occupancy().nodes_used, 0);
}

fn d03_no_dedupe_hook_never_dedupes<E: GraphEngine>() {
    let g = graph::<E>(8);
    let none = NoDedupeHook;
    let mut held = Vec::new();
    for k in 0..4u64 {
        assert_eq!(
            none.probe(&Identity {
                key: JobKey::new(k),
                version: g.version(JobKey::new(k)),
            }),
            None
        );
        let Admission::Admitted(h) = g.submit_with(&spec(k, &[]), &none).unwrap() else {
            panic!("job {k} admitted")
        };
        held.push(h);
    }
    // Through `NoDedupeHook`, a submission is exactly `submit`: the graph's own join of a live
    // identity (D02) still applies, and an ended one is a duplicate.
    let Admission::DedupeJoined(j) = g.submit_with(&spec(0, &[]), &none).unwrap() else {
        panic!("the live job of key 0")
    };
    assert_eq!(j, held[0]);
    assert_eq!(g.occupancy().nodes_used, 4);
    run_all(&g, |_| false);
    assert_eq!(
        g.submit_with(&spec(0, &[]), &none).unwrap_err().reason(),
        Reason::DuplicateKey
    );
    assert_eq!(j.outcome(), Some(JobOutcome::Succeeded));
}

fn d03_hook_with_a_stale_or_foreign_handle_is_a_typed_error<E: GraphEngine>() {
    let g = graph::<E>(8);
    let other = graph::<E>(8);
    let foreign = admit(&other, 1, &[]);
    let hook = Recorder::default();
    hook.name.set(Some(foreign.id()));
    let before = g.occupancy();
    let e = g.submit_with(&spec(1, &[]), &hook).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::PermissionDenied, Reason::ForeignHandle)
    );
    assert_eq!(g.occupancy(), before);
    // The id of a job that ended and whose every handle was dropped.
    let a = admit(&g, 2, &[]);
    run_all(&g, |_| false);
    let a_id = a.id();
    drop(a);
    let before_stale = g.occupancy();
    hook.name.set(Some(a_id));
    let e = g.submit_with(&spec(1, &[]), &hook).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::NotFound, Reason::StaleHandle)
    );
    assert_eq!(g.occupancy(), before_stale);
    assert_eq!(g.version(JobKey::new(1)), None, "nothing submitted");
    assert!(hook.joined.borrow().is_empty() && hook.admitted.borrow().is_empty());
    drop(foreign);
}

fn d03_bad_input_is_refused_before_the_probe<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    let hook = Recorder::default();
    hook.name.set(Some(a.id()));
    let e = g
        .submit_with(&spec(3, &[dep(3, Gate::Sequential)]), &hook)
        .unwrap_err();
    assert_eq!(e.reason(), Reason::Cycle);
    let many: Vec<_> = (10..40).map(|k| dep(k, Gate::Sequential)).collect();
    let e = g.submit_with(&spec(3, &many), &hook).unwrap_err();
    assert_eq!(e.reason(), Reason::TooManyDependencies);
    g.shutdown();
    let e = g.submit_with(&spec(3, &[]), &hook).unwrap_err();
    assert_eq!(e.reason(), Reason::Shutdown);
    assert_eq!(hook.probes.get(), 0);
    drop(a);
}

/// A hook whose notices re-enter the graph with operations that take the lock-free graph's
/// topology lock (a dependency on a key with no producer, an `advance`) or the mutex graph's
/// one lock, and check that the graph is consistent (the id names the held job).
struct ReEnter<E: GraphEngine> {
    graph: GraphOn<E>,
    name: Option<JobId>,
    seen: mpsc::Sender<(bool, Option<JobOutcome>)>,
}

impl<E: GraphEngine> ReEnter<E> {
    fn notice(&self, identity: &Identity, job: JobId) {
        let g = &self.graph;
        let consistent = g.outcome(job).is_ok()
            && g.version(identity.key) == identity.version
            && g.occupancy().nodes_used >= 1;
        // Key 99 has no producer: the lock-free graph parks the dependency under its topology
        // lock, and `advance` takes it too; the mutex graph takes its one lock for both. The
        // parked job is detached: it stays parked, as nothing here waits for it.
        let parked = match g.submit(&spec(
            50 + u64::from(consistent),
            &[dep(99, Gate::OnSuccess)],
        )) {
            Ok(Admission::Admitted(h) | Admission::DedupeJoined(h)) => {
                h.detach();
                true
            }
            _ => false,
        };
        // Key 98 is a dependency's key only: it exists, with no producer.
        let advanced = g.advance(JobKey::new(98)).is_ok();
        let _ = self
            .seen
            .send((consistent && parked && advanced, g.outcome(job).unwrap()));
    }
}

impl<E: GraphEngine> DedupeHook for ReEnter<E> {
    fn probe(&self, _: &Identity) -> Option<JobId> {
        self.name
    }
    fn admitted(&self, identity: &Identity, job: JobId) {
        self.notice(identity, job);
    }
    fn joined(&self, identity: &Identity, job: JobId) {
        self.notice(identity, job);
    }
}

fn d32_join_notice_fires_outside_the_lock<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[dep(98, Gate::Sequential)]);
    let a_id = a.id();
    let (tx, rx) = mpsc::channel();
    let submitter = {
        let g = g.clone();
        std::thread::spawn(move || {
            // The graph's own join (D02), a join named by the hook (D03), an admission.
            let own = ReEnter {
                graph: g.clone(),
                name: None,
                seen: tx.clone(),
            };
            let r1 = g.submit_with(&spec(1, &[]), &own).unwrap();
            let named = ReEnter {
                graph: g.clone(),
                name: Some(a_id),
                seen: tx.clone(),
            };
            let r2 = g.submit_with(&spec(7, &[]), &named).unwrap();
            let r3 = g.submit_with(&spec(8, &[]), &own).unwrap();
            (r1, r2, r3)
        })
    };
    for what in ["graph join", "hook join", "admission"] {
        // A notice under a lock would deadlock on re-entry: fail instead of hanging.
        let (ok, outcome) = rx
            .recv_timeout(Duration::from_secs(20))
            .unwrap_or_else(|_| panic!("the {what} notice ran under a lock (deadlock)"));
        assert!(ok, "{what}: graph inconsistent or re-entry refused");
        assert_eq!(outcome, None, "{what}: the job has not run");
    }
    let (r1, r2, r3) = submitter.join().unwrap();
    assert!(
        matches!(&r1, Admission::DedupeJoined(h) if *h == a),
        "{r1:?}"
    );
    assert!(
        matches!(&r2, Admission::DedupeJoined(h) if *h == a),
        "{r2:?}"
    );
    assert!(matches!(r3, Admission::Admitted(_)));
}

/// SPEC D31: a joiner's handle is a demand of its own. The submitter dropping its handle does
/// not cancel the job while the joiner holds one: it runs, is not told to stop, and the joiner
/// sees its success.
fn d31_joiner_keeps_a_live_job_after_the_submitter_drops<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    let j = joined(&g, &spec(1, &[]));
    let id = a.id();
    drop(a);
    assert_eq!(j.outcome(), None, "not cancelled: the joiner wants it");
    assert_eq!(g.outcome(id).unwrap(), None);
    assert_eq!(g.occupancy().nodes_used, 1);
    let running = g.try_next(CPU).expect("job 1 still queued");
    assert_eq!(running.id(), id);
    assert!(!running.is_cancelled());
    g.complete(running, JobOutcome::Succeeded).unwrap();
    assert_eq!(j.outcome(), Some(JobOutcome::Succeeded));
    assert_eq!(j.wait(), JobOutcome::Succeeded);
    // The same with the job already running when the submitter goes, and through `cancel`.
    let b = admit(&g, 2, &[]);
    let running = g.try_next(CPU).expect("job 2");
    let jb = joined(&g, &spec(2, &[]));
    assert!(!b.cancel(), "the joiner still wants job 2");
    assert!(!running.is_cancelled());
    g.complete(running, JobOutcome::Succeeded).unwrap();
    assert_eq!(jb.outcome(), Some(JobOutcome::Succeeded));
    assert_eq!(g.stale_completions(), 0);
    drop((j, jb));
    assert_eq!(g.occupancy().nodes_used, 0);
}

/// SPEC D31: when the last handle of a job that has not ended goes, the job is withdrawn (and,
/// having ended with no handle, freed); a submission of its identity then is a new job at the
/// key's next generation, not a join of the withdrawn one and not a duplicate. Queued, waiting
/// and running jobs alike (a running one is told, ends `withdrawn` at its completion, and its
/// identity is free at once).
fn d31_last_demander_gone_then_same_identity_starts_a_new_job<E: GraphEngine>() {
    let g = graph::<E>(8);
    let usage_zero = |g: &GraphOn<E>| g.ledger().usage().is_zero();
    // Queued: admitted, in the scheduler.
    let a = admit(&g, 1, &[]);
    let v0 = g.version(JobKey::new(1)).unwrap();
    let a_id = a.id();
    drop(a);
    assert_stale(&g, a_id);
    assert_eq!(g.occupancy().nodes_used, 0);
    // Its request was cancelled in the scheduler: no executor gets it, and its permit is
    // back once the executor's pull passed it (SPEC F31).
    assert!(g.try_next(CPU).is_none(), "withdrawn from the scheduler");
    assert!(usage_zero(&g), "the withdrawn request gave its permit back");
    let Admission::Admitted(b) = g.submit(&spec(1, &[])).unwrap() else {
        panic!("a new job, not a join of the withdrawn one")
    };
    let v1 = g.version(JobKey::new(1)).unwrap();
    assert_eq!(
        (v1.incarnation, v1.generation),
        (v0.incarnation, v0.generation + 1)
    );
    assert_eq!(run_all(&g, |_| false), [JobKey::new(1)]);
    assert_eq!(b.outcome(), Some(JobOutcome::Succeeded));
    drop(b);

    // Waiting: on key 9, which has no producer.
    let w = admit(&g, 2, &[dep(9, Gate::OnSuccess)]);
    let v0 = g.version(JobKey::new(2)).unwrap();
    drop(w);
    assert_eq!(g.occupancy().nodes_used, 0);
    let Admission::Admitted(w) = g.submit(&spec(2, &[])).unwrap() else {
        panic!("a new job, not a join of the withdrawn one")
    };
    assert_eq!(
        g.version(JobKey::new(2)).unwrap().generation,
        v0.generation + 1
    );
    assert_eq!(run_all(&g, |_| false), [JobKey::new(2)]);
    assert_eq!(w.outcome(), Some(JobOutcome::Succeeded));
    drop(w);

    // Running: told to stop; its identity starts a new job while it still runs.
    let r = admit(&g, 3, &[]);
    let v0 = g.version(JobKey::new(3)).unwrap();
    let running = g.try_next(CPU).expect("job 3");
    assert!(!running.is_cancelled());
    drop(r);
    assert!(running.is_cancelled());
    let Admission::Admitted(again) = g.submit(&spec(3, &[])).unwrap() else {
        panic!("a new job, not a join of the withdrawn one")
    };
    assert_ne!(again.id(), running.id());
    assert_eq!(
        g.version(JobKey::new(3)).unwrap().generation,
        v0.generation + 1
    );
    let e = g.complete(running, JobOutcome::Succeeded).unwrap_err();
    assert_eq!((e.code(), e.reason()), (Code::Cancelled, Reason::Withdrawn));
    assert_eq!(
        g.stale_completions(),
        0,
        "a withdrawn completion is not a stale one"
    );
    assert_eq!(run_all(&g, |_| false), [JobKey::new(3)]);
    assert_eq!(again.outcome(), Some(JobOutcome::Succeeded));
    drop(again);
    assert_eq!(g.occupancy().nodes_used, 0);
    assert!(usage_zero(&g));
}

/// SPEC D31, D03: a hook that names a withdrawn job gets `not-found / stale-handle` and nothing
/// is submitted: whether the job was freed at once (it was queued) or still runs, told to stop.
fn d31_hook_join_on_a_withdrawn_job_is_stale<E: GraphEngine>() {
    let g = graph::<E>(8);
    let hook = Recorder::default();
    let stale = |hook: &Recorder| {
        let before = g.occupancy();
        let e = g.submit_with(&spec(5, &[]), hook).unwrap_err();
        assert_eq!(
            (e.code(), e.reason()),
            (Code::NotFound, Reason::StaleHandle)
        );
        assert_eq!(g.occupancy(), before);
        assert_eq!(g.version(JobKey::new(5)), None, "nothing submitted");
        assert!(hook.joined.borrow().is_empty() && hook.admitted.borrow().is_empty());
    };
    // Queued, then withdrawn: ended with no handle, so freed at once.
    let a = admit(&g, 1, &[]);
    hook.name.set(Some(a.id()));
    assert!(a.cancel(), "nothing else wanted job 1");
    stale(&hook);
    // Running, then withdrawn: not ended yet, but a cancelled job is never joined.
    let b = admit(&g, 2, &[]);
    let running = g.try_next(CPU).expect("job 2");
    hook.name.set(Some(b.id()));
    drop(b);
    assert!(running.is_cancelled());
    assert_eq!(
        g.occupancy().nodes_used,
        1,
        "the running job keeps its slot"
    );
    stale(&hook);
    let e = g.complete(running, JobOutcome::Succeeded).unwrap_err();
    assert_eq!(e.reason(), Reason::Withdrawn);
    assert_eq!(g.occupancy().nodes_used, 0);
    stale(&hook);
    assert_eq!(hook.probes.get(), 3);
}
