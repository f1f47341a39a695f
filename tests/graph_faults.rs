//! The graph's waiting, shutdown and abandonment paths (SPEC D02, D04, D05, D33, D42), each run
//! on both graph engines: a waiting submitter sleeps until room frees, a submit that races a
//! shutdown is refused, `wait_batch` reads outcomes without taking them (the handles free their
//! slots when dropped, SPEC D31), and a dropped running job ends with a typed failure its
//! dependents see.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{Admission, Gate, Graph, GraphEngine, JobHandle, JobOutcome};
use fairway::{Code, Reason};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

#[macro_use]
#[path = "common/graph.rs"]
mod graph_common;
use graph_common::*;

both_graphs!(
    d05_a_waiting_submitter_on_a_full_graph_sleeps_until_room_frees,
    d42_two_waiting_submitters_on_a_full_graph_do_not_wake_each_other,
    d05_two_waiting_submits_of_one_task_are_each_woken_when_room_frees,
    d02_a_submit_racing_shutdown_is_refused,
    d04_wait_batch_takes_nothing_and_the_handles_free_the_slots_when_dropped,
    d04_wait_batch_reads_both_handles_of_a_joined_job_in_short_and_long_lists,
    d33_a_dropped_running_job_ends_abandoned_and_its_dependents_follow_their_gates,
    d33_a_running_job_dropped_by_a_panic_ends_abandoned,
);

fn ledger() -> Ledger {
    Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4)).unwrap()
}

/// Counts the wakes it receives.
#[derive(Default)]
struct CountingWaker(AtomicU32);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// The spin of D05's waiting form: one waiting submit on a full graph with nothing else
/// running must not wake itself. After each poll that returns `Pending` no wake may have
/// arrived (one would make any executor poll it again at once); when room frees, exactly the
/// freeing operation wakes it and the next poll admits it.
pub(crate) fn d05_a_waiting_submitter_on_a_full_graph_sleeps_until_room_frees<E: GraphEngine>() {
    let g = Graph::builder(ledger())
        .class(1)
        .nodes(1)
        .edges(4)
        .keys(8)
        .build_with::<E>()
        .unwrap();
    let first = admit(&g, 1, &[]);
    let counter = Arc::new(CountingWaker::default());
    let waker = Waker::from(counter.clone());
    let mut cx = Context::from_waker(&waker);
    let second = spec(2, &[]);
    let mut fut = pin!(g.submit_waiting(&second));
    for poll in 0..3 {
        assert!(
            fut.as_mut().poll(&mut cx).is_pending(),
            "poll {poll}: the graph is full"
        );
        assert_eq!(
            counter.0.load(Ordering::SeqCst),
            0,
            "poll {poll}: a waiting submitter on a full graph woke itself (it would be polled \
             again at once: a spin)"
        );
    }
    // Free the one node: run the first job, read its outcome and drop its handle.
    let running = g.try_next(CPU).expect("the first job is ready");
    g.complete(running, JobOutcome::Succeeded).unwrap();
    assert_eq!(g.outcome(&first).unwrap(), Some(JobOutcome::Succeeded));
    drop(first);
    assert!(
        counter.0.load(Ordering::SeqCst) >= 1,
        "room freed but the waiting submitter was not woken"
    );
    let Poll::Ready(Ok(h)) = fut.as_mut().poll(&mut cx) else {
        panic!("woken with room free, but not admitted");
    };
    let running = g.try_next(CPU).expect("the second job is ready");
    assert_eq!(running.id(), h.id());
    g.complete(running, JobOutcome::Succeeded).unwrap();
    assert_eq!(h.outcome(), Some(JobOutcome::Succeeded));
}

/// Two waiting submitters on a full graph: neither one's retry wakes the other, so an idle
/// full graph costs no polls; both are admitted once room frees for them.
pub(crate) fn d42_two_waiting_submitters_on_a_full_graph_do_not_wake_each_other<E: GraphEngine>() {
    let g = Graph::builder(ledger())
        .class(1)
        .nodes(1)
        .edges(4)
        .keys(8)
        .build_with::<E>()
        .unwrap();
    let first = admit(&g, 1, &[]);
    let (ca, cb) = (
        Arc::new(CountingWaker::default()),
        Arc::new(CountingWaker::default()),
    );
    let (wa, wb) = (Waker::from(ca.clone()), Waker::from(cb.clone()));
    let (sa, sb) = (spec(2, &[]), spec(3, &[]));
    let mut fa = pin!(g.submit_waiting(&sa));
    let mut fb = pin!(g.submit_waiting(&sb));
    for round in 0..4 {
        assert!(fa.as_mut().poll(&mut Context::from_waker(&wa)).is_pending());
        assert!(fb.as_mut().poll(&mut Context::from_waker(&wb)).is_pending());
        assert_eq!(
            (ca.0.load(Ordering::SeqCst), cb.0.load(Ordering::SeqCst)),
            (0, 0),
            "round {round}: waiting submitters woke each other on a full graph"
        );
    }
    let running = g.try_next(CPU).unwrap();
    g.complete(running, JobOutcome::Succeeded).unwrap();
    assert_eq!(first.outcome(), Some(JobOutcome::Succeeded));
    drop(first);
    assert!(ca.0.load(Ordering::SeqCst) >= 1 && cb.0.load(Ordering::SeqCst) >= 1);
    let a = fa.as_mut().poll(&mut Context::from_waker(&wa));
    let b = fb.as_mut().poll(&mut Context::from_waker(&wb));
    // One node: one of them is admitted, the other waits again.
    let admitted = [&a, &b]
        .iter()
        .filter(|p| matches!(p, Poll::Ready(Ok(_))))
        .count();
    assert_eq!(admitted, 1, "{a:?} {b:?}");
}

/// Two waiting submits polled by one task share its waker: when one is admitted (or dropped),
/// the other stays registered and is woken when room frees again.
pub(crate) fn d05_two_waiting_submits_of_one_task_are_each_woken_when_room_frees<E: GraphEngine>() {
    let g = Graph::builder(ledger())
        .class(1)
        .nodes(1)
        .edges(4)
        .keys(8)
        .build_with::<E>()
        .unwrap();
    let first = admit(&g, 1, &[]);
    let counter = Arc::new(CountingWaker::default());
    let waker = Waker::from(counter.clone());
    let mut cx = Context::from_waker(&waker);
    let (sa, sb) = (spec(2, &[]), spec(3, &[]));
    let mut fa = pin!(g.submit_waiting(&sa));
    let mut fb = pin!(g.submit_waiting(&sb));
    assert!(fa.as_mut().poll(&mut cx).is_pending());
    assert!(fb.as_mut().poll(&mut cx).is_pending());
    // Runs the job of `h` and drops `h`, which frees its node.
    let free = |h: JobHandle<E>| {
        let r = g.try_next(CPU).expect("a job is ready");
        assert_eq!(r.id(), h.id());
        g.complete(r, JobOutcome::Succeeded).unwrap();
        assert_eq!(h.outcome(), Some(JobOutcome::Succeeded));
        drop(h);
    };
    let wakes = || counter.0.load(Ordering::SeqCst);
    free(first);
    assert!(wakes() >= 1, "room freed, but no waiting submit was woken");
    let Poll::Ready(Ok(a)) = fa.as_mut().poll(&mut cx) else {
        panic!("a not admitted")
    };
    assert!(fb.as_mut().poll(&mut cx).is_pending(), "one node: b waits");
    let before = wakes();
    free(a);
    assert!(
        wakes() > before,
        "room freed again, but b (sharing the task's waker with a) was not woken"
    );
    let Poll::Ready(Ok(b)) = fb.as_mut().poll(&mut cx) else {
        panic!("b not admitted")
    };
    free(b);
    // A dropped waiting submit leaves no entry behind: its drop takes it out.
    let c_spec = spec(4, &[]);
    let d = admit(&g, 5, &[]);
    {
        let mut fc = pin!(g.submit_waiting(&c_spec));
        assert!(fc.as_mut().poll(&mut cx).is_pending());
    }
    let before = wakes();
    free(d);
    assert_eq!(wakes(), before, "a dropped submit's waker was woken");
}

/// A submit that passed the shutdown check just before a shutdown must not take a node that
/// the shutdown's ending of a job freed: one node, held by a queued job; a submitter loops on
/// the full graph while another thread shuts the graph down and a third waits for the queued
/// job's outcome and drops its handle (freeing the node only after the shutdown ended it). Any `Admitted` the submitter
/// sees used that node: a job admitted after shutdown.
pub(crate) fn d02_a_submit_racing_shutdown_is_refused<E: GraphEngine>() {
    let rounds = if cfg!(debug_assertions) { 100 } else { 300 };
    let mut admitted_after = 0;
    for _ in 0..rounds {
        let g = Graph::builder(ledger())
            .class(1)
            .nodes(1)
            .edges(1)
            .keys(8)
            .build_with::<E>()
            .unwrap();
        let queued = admit(&g, 1, &[]);
        let go = Arc::new(AtomicBool::new(false));
        let submitter = {
            let (g, go) = (g.clone(), go.clone());
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(10);
                let mut started = false;
                loop {
                    assert!(
                        Instant::now() < deadline,
                        "the submitter saw no shutdown in 10 s"
                    );
                    match g.submit(&spec(2, &[])) {
                        Ok(Admission::Backpressured) => {
                            if !started {
                                started = true;
                                go.store(true, Ordering::SeqCst);
                            }
                        }
                        Ok(Admission::Admitted(_)) => return true,
                        Ok(other) => panic!("{other:?}"),
                        Err(e) => {
                            assert_eq!(e.reason(), Reason::Shutdown);
                            return false;
                        }
                    }
                }
            })
        };
        let taker = {
            let g = g.clone();
            std::thread::spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(10);
                while g.outcome(&queued).unwrap().is_none() {
                    assert!(Instant::now() < deadline, "the queued job never ended");
                    std::hint::spin_loop();
                }
                drop(queued);
            })
        };
        while !go.load(Ordering::SeqCst) {
            std::hint::spin_loop();
        }
        g.shutdown();
        taker.join().unwrap();
        if submitter.join().unwrap() {
            admitted_after += 1;
        }
    }
    assert_eq!(
        admitted_after, 0,
        "a job was admitted after shutdown in {admitted_after} of {rounds} rounds"
    );
}

/// `wait_batch` takes nothing (SPEC D31): after it, every outcome is still there, a second
/// call returns the same, and each job's node is freed only when its handle is dropped.
pub(crate) fn d04_wait_batch_takes_nothing_and_the_handles_free_the_slots_when_dropped<
    E: GraphEngine,
>() {
    let g = Graph::builder(ledger())
        .class(1)
        .nodes(4)
        .edges(4)
        .keys(8)
        .build_with::<E>()
        .unwrap();
    let a = admit(&g, 1, &[]);
    let b = admit(&g, 2, &[]);
    while let Some(r) = g.try_next(CPU) {
        g.complete(r, JobOutcome::Succeeded).unwrap();
    }
    let handles = [a, b];
    assert_eq!(g.wait_batch(&handles).unwrap(), [JobOutcome::Succeeded; 2]);
    for (h, what) in handles.iter().zip(["a", "b"]) {
        assert_eq!(
            g.outcome(h).unwrap(),
            Some(JobOutcome::Succeeded),
            "{what}'s outcome was taken"
        );
    }
    assert_eq!(g.wait_batch(&handles).unwrap(), [JobOutcome::Succeeded; 2]);
    assert_eq!(g.occupancy().nodes_used, 2, "wait_batch freed a node");
    let [a, b] = handles;
    let a_id = a.id();
    drop(a);
    assert_eq!(g.occupancy().nodes_used, 1);
    assert_eq!(g.outcome(a_id).unwrap_err().reason(), Reason::StaleHandle);
    assert_eq!(b.outcome(), Some(JobOutcome::Succeeded));
    drop(b);
    assert_eq!(g.occupancy().nodes_used, 0);
}

/// A job joined once has two handles: both may appear in one `wait_batch`, each reading the
/// one outcome, in a short list and in one past 32 handles alike; the job's node is freed
/// only when both handles are dropped.
pub(crate) fn d04_wait_batch_reads_both_handles_of_a_joined_job_in_short_and_long_lists<
    E: GraphEngine,
>() {
    let g = Graph::builder(ledger())
        .class(1)
        .nodes(64)
        .edges(4)
        .keys(128)
        .build_with::<E>()
        .unwrap();
    let a = admit(&g, 1, &[]);
    let Admission::DedupeJoined(j) = g.submit(&spec(1, &[])).unwrap() else {
        panic!("not joined");
    };
    assert_eq!(a, j, "a joiner's handle names the same job");
    let mut long: Vec<JobHandle<E>> = (10..50).map(|k| admit(&g, k, &[])).collect();
    while let Some(r) = g.try_next(CPU) {
        g.complete(r, JobOutcome::Succeeded).unwrap();
    }
    let short = [a, j];
    assert_eq!(g.wait_batch(&short).unwrap(), [JobOutcome::Succeeded; 2]);
    long.extend(short);
    let out = g.wait_batch(&long).unwrap();
    assert_eq!(out.len(), 42);
    assert!(out.iter().all(|o| *o == JobOutcome::Succeeded), "{out:?}");
    assert_eq!(g.occupancy().nodes_used, 41, "nothing taken");
    // Job 1's handles are the last two: the first dropped keeps the node.
    let j = long.pop().expect("the joiner");
    let a = long.pop().expect("the submitter");
    drop(a);
    assert_eq!(g.occupancy().nodes_used, 41);
    assert_eq!(j.outcome(), Some(JobOutcome::Succeeded));
    drop(j);
    assert_eq!(g.occupancy().nodes_used, 40);
    drop(long);
    assert_eq!(g.occupancy().nodes_used, 0);
}

fn abandoned(o: &JobOutcome) -> bool {
    matches!(o, JobOutcome::Failed(e) if e.code() == Code::Internal && e.reason() == Reason::Abandoned)
}

/// A `RunningJob` dropped without `complete` ends its job `internal / abandoned`; an
/// `OnSuccess` dependent fails `dependency-failed`, a `Sequential` one runs; `wait_batch`
/// returns the failure; the cell goes back per the class's drop policy (the default
/// quarantines it: it is not available until restored).
pub(crate) fn d33_a_dropped_running_job_ends_abandoned_and_its_dependents_follow_their_gates<
    E: GraphEngine,
>() {
    let g = Graph::builder(ledger())
        .class(2)
        .nodes(8)
        .edges(8)
        .keys(8)
        .build_with::<E>()
        .unwrap();
    let a = admit(&g, 1, &[]);
    let on_success = admit(&g, 2, &[dep(1, Gate::OnSuccess)]);
    let sequential = admit(&g, 3, &[dep(1, Gate::Sequential)]);
    let running = g.try_next(CPU).expect("a is ready");
    assert_eq!(running.id(), a.id());
    let cell = running.assignment().cell();
    assert_eq!(g.scheduler().available_cells(CPU).unwrap(), 1);
    drop(running);
    let deadline = Instant::now() + Duration::from_secs(5);
    while g.outcome(&a).unwrap().is_none() {
        assert!(Instant::now() < deadline, "the dropped job never ended");
        std::thread::yield_now();
    }
    assert!(
        abandoned(&g.outcome(&a).unwrap().unwrap()),
        "{:?}",
        g.outcome(&a)
    );
    // Quarantined, per the default drop policy: only a quarantined cell can be restored.
    g.scheduler()
        .restore_cell(CPU, cell)
        .expect("the dropped job's cell was quarantined");
    let r = g
        .try_next(CPU)
        .expect("the sequential dependent runs after the failure");
    assert_eq!(r.id(), sequential.id());
    g.complete(r, JobOutcome::Succeeded).unwrap();
    let handles = [a, on_success, sequential];
    let out = g.wait_batch(&handles).unwrap();
    assert!(abandoned(&out[0]), "{out:?}");
    assert!(
        matches!(out[1], JobOutcome::Failed(e) if e.reason() == Reason::DependencyFailed),
        "{out:?}"
    );
    assert_eq!(out[2], JobOutcome::Succeeded);
    drop(handles);
    assert_eq!(g.occupancy().nodes_used, 0);
    assert!(g.ledger().usage().is_zero());
}

/// An executor whose body panics unwinds past its `RunningJob`: the job ends abandoned and a
/// thread blocked in `wait_batch` on it returns.
pub(crate) fn d33_a_running_job_dropped_by_a_panic_ends_abandoned<E: GraphEngine>() {
    let g = Graph::builder(ledger())
        .class(1)
        .nodes(4)
        .edges(4)
        .keys(8)
        .build_with::<E>()
        .unwrap();
    let a = admit(&g, 1, &[]);
    let a_id = a.id();
    let waiter = {
        let g = g.clone();
        std::thread::spawn(move || g.wait_batch(&[a]))
    };
    let executor = {
        let g = g.clone();
        std::thread::spawn(move || {
            let running = g.try_next(CPU).expect("a is ready");
            running.run(|| panic!("the body fails"));
        })
    };
    assert!(executor.join().is_err(), "the body panicked");
    let deadline = Instant::now() + Duration::from_secs(5);
    while !waiter.is_finished() {
        assert!(
            Instant::now() < deadline,
            "wait_batch still blocked 5 s after the executor panicked (outcome {:?})",
            g.outcome(a_id)
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    let out = waiter.join().unwrap().unwrap();
    assert!(abandoned(&out[0]), "{out:?}");
}
