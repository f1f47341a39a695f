//! SPEC D02 (`DedupeJoined`), D03 (the caller's `DedupeHook`) and D32 (join notices outside
//! every lock) on both graph engines: a submission of a live identity joins its job, every
//! handle of a job sees its one outcome and the job's slot is freed by the last one taken,
//! racing submissions of one identity admit exactly one job, and a hook's notices may call back
//! into the graph.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, DedupeHook, Gate, Graph, GraphEngine, Identity, JobHandle, JobKey, JobOutcome,
    JobSpec, NoDedupeHook,
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
    d02_every_handle_sees_the_one_outcome_and_the_last_take_frees_the_slot,
    d02_joins_a_job_waiting_ready_or_running,
    d02_identity_is_key_stage_and_generation,
    d02_after_the_job_ended_its_generation_is_taken_and_advance_makes_a_new_job,
    d02_joiner_of_a_superseded_job_sees_superseded,
    d02_racing_submits_of_one_identity_admit_exactly_one,
    d02_submits_racing_the_end_of_the_job_join_or_are_refused,
    d02_ten_thousand_jobs_each_joined_conserve_every_slot,
    d02_wait_batch_takes_one_claim_per_handle,
    d03_hook_some_skips_submission,
    d03_no_dedupe_hook_never_dedupes,
    d03_hook_with_a_stale_or_foreign_handle_is_a_typed_error,
    d03_bad_input_is_refused_before_the_probe,
    d32_join_notice_fires_outside_the_lock,
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

fn joined<E: GraphEngine>(g: &GraphOn<E>, spec: &JobSpec<'_>) -> JobHandle {
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
    assert_eq!(joined(&g, &other), a);
    assert_eq!(joined(&g, &spec(1, &[])), a);
    // Nothing was submitted: no node, no edge, no key for the ignored dependency.
    assert_eq!(g.occupancy(), before);
    assert_eq!(g.version(JobKey::new(2)), None);
    // The job runs once.
    assert_eq!(run_all(&g, |_| false), vec![JobKey::new(1)]);
    for _ in 0..3 {
        assert_eq!(g.take_outcome(a).unwrap(), Some(JobOutcome::Succeeded));
    }
    assert_eq!(g.occupancy().nodes_used, 0);
}

fn d02_every_handle_sees_the_one_outcome_and_the_last_take_frees_the_slot<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    let j = joined(&g, &spec(1, &[]));
    assert_eq!(g.outcome(j).unwrap(), None);
    run_all(&g, |_| true);
    let failed = Some(JobOutcome::Failed(Error::new(
        Code::Internal,
        Reason::Failed,
    )));
    // Read by either handle, as often as wanted, while a claim is held.
    assert_eq!(g.outcome(a).unwrap(), failed);
    assert_eq!(g.outcome(j).unwrap(), failed);
    // The joiner takes first: the original's claim keeps the slot.
    assert_eq!(g.take_outcome(j).unwrap(), failed);
    assert_eq!(g.occupancy().nodes_used, 1);
    assert_eq!(g.outcome(a).unwrap(), failed);
    assert_eq!(g.take_outcome(a).unwrap(), failed);
    assert_eq!(g.occupancy().nodes_used, 0);
    // Every claim taken: the handles are stale, and the slot serves a new job.
    assert_eq!(g.take_outcome(a).unwrap_err().reason(), Reason::StaleHandle);
    assert_eq!(g.outcome(j).unwrap_err().reason(), Reason::StaleHandle);
    let b = admit(&g, 2, &[]);
    assert_eq!(g.outcome(a).unwrap_err().reason(), Reason::StaleHandle);
    assert_eq!(g.outcome(b).unwrap(), None);
}

fn d02_joins_a_job_waiting_ready_or_running<E: GraphEngine>() {
    let g = graph::<E>(8);
    // Waiting on key 9, which has no producer yet.
    let waiting = admit(&g, 1, &[dep(9, Gate::OnSuccess)]);
    assert_eq!(joined(&g, &spec(1, &[])), waiting);
    let ready = admit(&g, 2, &[]);
    assert_eq!(joined(&g, &spec(2, &[])), ready);
    let running = g.try_next(CPU).expect("job 2");
    assert_eq!(running.handle(), ready);
    assert_eq!(joined(&g, &spec(2, &[])), ready);
    g.complete(running, JobOutcome::Succeeded).unwrap();
    let producer = admit(&g, 9, &[]);
    run_all(&g, |_| false);
    assert_eq!(g.occupancy().waiting, 0);
    for (h, claims) in [(waiting, 2), (ready, 3), (producer, 1)] {
        for _ in 0..claims {
            assert_eq!(g.take_outcome(h).unwrap(), Some(JobOutcome::Succeeded));
        }
    }
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
    assert_eq!(joined(&g, &staged), s);
    // Another generation of the key is another identity: the old job is superseded.
    g.advance(JobKey::new(1)).unwrap();
    let b = admit(&g, 1, &[]);
    assert_ne!(b, a);
    assert_eq!(joined(&g, &spec(1, &[])), b);
}

fn d02_after_the_job_ended_its_generation_is_taken_and_advance_makes_a_new_job<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    run_all(&g, |_| false);
    // Ended (not yet collected): the generation had its job.
    let e = g.submit(&spec(1, &[])).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::AlreadyExists, Reason::DuplicateKey)
    );
    assert_eq!(g.take_outcome(a).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(
        g.submit(&spec(1, &[])).unwrap_err().reason(),
        Reason::DuplicateKey
    );
    // A new generation: a new job, not a join.
    g.advance(JobKey::new(1)).unwrap();
    let b = admit(&g, 1, &[]);
    assert_eq!(joined(&g, &spec(1, &[])), b);
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
    for h in [a, j] {
        let Some(JobOutcome::Failed(e)) = g.take_outcome(h).unwrap() else {
            panic!("not ended")
        };
        assert_eq!(e.reason(), Reason::Superseded);
    }
    assert!(g.try_next(CPU).is_none());
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
    let per_thread: Vec<Vec<Admission<JobHandle>>> =
        submitters.into_iter().map(|s| s.join().unwrap()).collect();
    // The shared dependencies end, and with them every round's job.
    admit(&g, 1 << 21, &[]);
    run_all(&g, |_| false);
    for r in 0..rounds as usize {
        let results: Vec<_> = per_thread.iter().map(|t| t[r]).collect();
        let admitted: Vec<JobHandle> = results
            .iter()
            .filter_map(|a| match a {
                Admission::Admitted(h) => Some(*h),
                _ => None,
            })
            .collect();
        assert_eq!(admitted.len(), 1, "round {r}: {results:?}");
        for a in &results {
            let (Admission::Admitted(h) | Admission::DedupeJoined(h)) = a else {
                panic!("round {r}: {results:?}")
            };
            assert_eq!(*h, admitted[0], "round {r}: joined another job");
            assert_eq!(g.take_outcome(*h).unwrap(), Some(JobOutcome::Succeeded));
        }
    }
    g.take_outcome(base).unwrap();
    let o = g.occupancy();
    // Only the producer of `1 << 21` is left.
    assert_eq!((o.nodes_used, o.edges_used, o.waiting), (1, 0, 0), "{o:?}");
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
        for i in 0..3 {
            // Spread the submissions over the job's life: before, around and after its end.
            for _ in 0..(k * 31 + i * 17) % 64 * 40 {
                std::hint::spin_loop();
            }
            match g.submit(&spec(k, &[])) {
                Ok(Admission::DedupeJoined(j)) => {
                    assert_eq!(j, h);
                    joins += 1;
                }
                Err(e) if e.reason() == Reason::DuplicateKey => refused += 1,
                other => panic!("job {k}: {other:?}"),
            }
        }
        // Take every claim once the job ended: the original's and each joiner's.
        while g.outcome(h).unwrap().is_none() {
            std::thread::yield_now();
        }
        loop {
            match g.take_outcome(h) {
                Ok(o) => assert_eq!(o, Some(JobOutcome::Succeeded)),
                Err(e) => {
                    assert_eq!(e.reason(), Reason::StaleHandle);
                    break;
                }
            }
        }
    }
    done.store(true, Ordering::Release);
    assert_eq!(executor.join().unwrap(), jobs, "one run per job");
    eprintln!("{joins} joins, {refused} refused after the end");
    assert_eq!(joins + refused, 3 * jobs);
    assert!(joins > 0);
    assert_eq!(g.occupancy().nodes_used, 0);
}

/// Past toy sizes: 10^4 jobs through a graph of 256 node slots, each submitted twice (the
/// second joins), each with a dependency on the job before it; both claims of every job taken.
fn d02_ten_thousand_jobs_each_joined_conserve_every_slot<E: GraphEngine>() {
    let jobs: u64 = if cfg!(miri) { 100 } else { 10_000 };
    let g = sized::<E>(256, 256, jobs as u32);
    let mut held: Vec<JobHandle> = Vec::new();
    let collect = |held: &mut Vec<JobHandle>| {
        for h in held.drain(..) {
            for _ in 0..2 {
                assert_eq!(g.take_outcome(h).unwrap(), Some(JobOutcome::Succeeded));
            }
        }
    };
    for k in 0..jobs {
        let deps = [dep(k.wrapping_sub(1), Gate::OnSuccess)];
        let deps = if k % 128 == 0 { &[][..] } else { &deps[..] };
        let h = admit(&g, k, deps);
        assert_eq!(joined(&g, &spec(k, deps)), h);
        held.push(h);
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

fn d02_wait_batch_takes_one_claim_per_handle<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    let j = joined(&g, &spec(1, &[]));
    let b = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    run_all(&g, |_| false);
    assert_eq!(
        g.wait_batch(&[a, b, j]).unwrap(),
        [JobOutcome::Succeeded; 3]
    );
    assert_eq!(g.occupancy().nodes_used, 0);
}

/// A hook that names one handle and records its notices.
#[derive(Default)]
struct Recorder {
    name: Cell<Option<JobHandle>>,
    probes: Cell<u32>,
    admitted: RefCell<Vec<(Identity, JobHandle)>>,
    joined: RefCell<Vec<(Identity, JobHandle)>>,
}

impl DedupeHook for Recorder {
    fn probe(&self, _: &Identity) -> Option<JobHandle> {
        self.probes.set(self.probes.get() + 1);
        self.name.get()
    }
    fn admitted(&self, identity: &Identity, handle: JobHandle) {
        self.admitted.borrow_mut().push((*identity, handle));
    }
    fn joined(&self, identity: &Identity, handle: JobHandle) {
        self.joined.borrow_mut().push((*identity, handle));
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
            a
        )]
    );
    // The hook names job 1 for key 5: nothing is submitted, key 5 is never named.
    hook.name.set(Some(a));
    let before = g.occupancy();
    assert_eq!(
        g.submit_with(&spec(5, &[dep(6, Gate::Sequential)]), &hook)
            .unwrap(),
        Admission::DedupeJoined(a)
    );
    assert_eq!(g.occupancy(), before);
    assert_eq!(g.version(JobKey::new(5)), None);
    assert_eq!(g.version(JobKey::new(6)), None);
    assert_eq!(hook.probes.get(), 2);
    assert_eq!(hook.joined.borrow().len(), 1);
    assert_eq!(hook.joined.borrow()[0].1, a);
    // The hook's join holds a claim: job 1's outcome is seen twice.
    assert_eq!(run_all(&g, |_| false), [JobKey::new(1)]);
    assert_eq!(g.take_outcome(a).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.take_outcome(a).unwrap(), Some(JobOutcome::Succeeded));
    assert_eq!(g.occupancy().nodes_used, 0);
}

fn d03_no_dedupe_hook_never_dedupes<E: GraphEngine>() {
    let g = graph::<E>(8);
    let none = NoDedupeHook;
    for k in 0..4u64 {
        assert_eq!(
            none.probe(&Identity {
                key: JobKey::new(k),
                version: g.version(JobKey::new(k)),
            }),
            None
        );
        assert!(matches!(
            g.submit_with(&spec(k, &[]), &none).unwrap(),
            Admission::Admitted(_)
        ));
    }
    // Through `NoDedupeHook`, a submission is exactly `submit`: the graph's own join of a live
    // identity (D02) still applies, and an ended one is a duplicate.
    let Admission::DedupeJoined(j) = g.submit_with(&spec(0, &[]), &none).unwrap() else {
        panic!("the live job of key 0")
    };
    assert_eq!(g.occupancy().nodes_used, 4);
    run_all(&g, |_| false);
    assert_eq!(
        g.submit_with(&spec(0, &[]), &none).unwrap_err().reason(),
        Reason::DuplicateKey
    );
    g.take_outcome(j).unwrap();
}

fn d03_hook_with_a_stale_or_foreign_handle_is_a_typed_error<E: GraphEngine>() {
    let g = graph::<E>(8);
    let other = graph::<E>(8);
    let foreign = admit(&other, 1, &[]);
    let hook = Recorder::default();
    hook.name.set(Some(foreign));
    let before = g.occupancy();
    let e = g.submit_with(&spec(1, &[]), &hook).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::PermissionDenied, Reason::ForeignHandle)
    );
    assert_eq!(g.occupancy(), before);
    // A handle whose every claim was taken.
    let a = admit(&g, 2, &[]);
    run_all(&g, |_| false);
    g.take_outcome(a).unwrap();
    let before_stale = g.occupancy();
    hook.name.set(Some(a));
    let e = g.submit_with(&spec(1, &[]), &hook).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::NotFound, Reason::StaleHandle)
    );
    assert_eq!(g.occupancy(), before_stale);
    assert_eq!(g.version(JobKey::new(1)), None, "nothing submitted");
    assert!(hook.joined.borrow().is_empty() && hook.admitted.borrow().is_empty());
}

fn d03_bad_input_is_refused_before_the_probe<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[]);
    let hook = Recorder::default();
    hook.name.set(Some(a));
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
}

/// A hook whose notices re-enter the graph with operations that take the lock-free graph's
/// topology lock (a dependency on a key with no producer, an `advance`) or the mutex graph's
/// one lock, and check that the graph is consistent (the handle names the held job).
struct ReEnter<E: GraphEngine> {
    graph: GraphOn<E>,
    name: Option<JobHandle>,
    seen: mpsc::Sender<(bool, Option<JobOutcome>)>,
}

impl<E: GraphEngine> ReEnter<E> {
    fn notice(&self, identity: &Identity, handle: JobHandle) {
        let g = &self.graph;
        let consistent = g.outcome(handle).is_ok()
            && g.version(identity.key) == identity.version
            && g.occupancy().nodes_used >= 1;
        // Key 99 has no producer: the lock-free graph parks the dependency under its topology
        // lock, and `advance` takes it too; the mutex graph takes its one lock for both.
        let parked = g
            .submit(&spec(
                50 + u64::from(consistent),
                &[dep(99, Gate::OnSuccess)],
            ))
            .is_ok();
        // Key 98 is a dependency's key only: it exists, with no producer.
        let advanced = g.advance(JobKey::new(98)).is_ok();
        let _ = self
            .seen
            .send((consistent && parked && advanced, g.outcome(handle).unwrap()));
    }
}

impl<E: GraphEngine> DedupeHook for ReEnter<E> {
    fn probe(&self, _: &Identity) -> Option<JobHandle> {
        self.name
    }
    fn admitted(&self, identity: &Identity, handle: JobHandle) {
        self.notice(identity, handle);
    }
    fn joined(&self, identity: &Identity, handle: JobHandle) {
        self.notice(identity, handle);
    }
}

fn d32_join_notice_fires_outside_the_lock<E: GraphEngine>() {
    let g = graph::<E>(8);
    let a = admit(&g, 1, &[dep(98, Gate::Sequential)]);
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
                name: Some(a),
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
    assert_eq!(r1, Admission::DedupeJoined(a));
    assert_eq!(r2, Admission::DedupeJoined(a));
    assert!(matches!(r3, Admission::Admitted(_)));
}
