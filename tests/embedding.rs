//! Embedding fairway in a host the way hosts embed tokio's `Semaphore` (SPEC F44, F47, X01,
//! X02): dropped assignments, restoring cleaned cells, owned futures, graceful drain, payloads
//! given back on shutdown, cheap observers and typed errors for misuse. Each generic test runs
//! on both engines.
//!
//! The binary installs a thread-local counting global allocator, so the observer tests count
//! only their own thread's allocations.

#[macro_use]
mod common;

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
use fairway::oracle::{Mechanism, SchedulerOn};
use fairway::{
    AdmittedRequest, Assignment, CancellationToken, ClassConfig, ClassId, Code, DropPolicy, Reason,
    RequestId, Scheduler, TenantId,
};
use fairway_bench_support::alloc::{thread_allocs, Counting};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Allocations made by `f` on this thread.
fn allocations_of<R>(f: impl FnOnce() -> R) -> (u64, R) {
    let before = thread_allocs();
    let r = f();
    (thread_allocs() - before, r)
}

/// A ledger, a scheduler with `u64` pull-mode payloads, and fresh request ids.
struct Env<M: Mechanism> {
    ledger: Ledger,
    sched: SchedulerOn<u64, M>,
    next_id: AtomicU64,
}

impl<M: Mechanism> Env<M> {
    fn new(classes: &[ClassConfig]) -> Self {
        const NAMES: [&str; 3] = ["c0", "c1", "c2"];
        let ledger = Ledger::new(LedgerConfig::new(
            (0..classes.len())
                .map(|i| ClassSpec::new(NAMES[i]))
                .collect(),
            8,
        ))
        .unwrap();
        let sched = classes
            .iter()
            .fold(
                Scheduler::builder(ledger.clone()).payload::<u64>(),
                |b, &c| b.class_config(c),
            )
            .build_with::<M>()
            .unwrap();
        Self {
            ledger,
            sched,
            next_id: AtomicU64::new(1),
        }
    }

    /// Admits a request of `tenant` for `class`.
    fn admit_in(&self, class: u16, tenant: u32) -> AdmittedRequest {
        let id = RequestId(self.next_id.fetch_add(1, Ordering::Relaxed));
        let permit = self
            .ledger
            .admit(AdmissionRequest::new(id, TenantId(tenant)).class(ClassId(class)))
            .unwrap();
        AdmittedRequest::new(permit, CancellationToken::new(id))
    }

    fn admit(&self, tenant: u32) -> AdmittedRequest {
        self.admit_in(0, tenant)
    }

    /// Takes a free cell of class 0 at once.
    fn occupy(&self) -> Assignment {
        self.sched
            .try_enqueue(self.admit(0))
            .expect("a free cell in class 0")
    }

    fn snapshot(&self) -> fairway::ClassSnapshot {
        self.sched.snapshot(ClassId(0)).unwrap()
    }
}

fn poll_once<F: Future>(f: std::pin::Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

#[track_caller]
fn assert_error(e: &fairway::Error, code: Code, reason: Reason) {
    assert_eq!((e.code(), e.reason()), (code, reason), "{e}");
}

both_engines!(
    f44_dropped_assignment_quarantines_by_default,
    f44_dropped_assignment_releases_when_configured,
    f44_restored_cell_lets_a_waiting_request_be_granted,
    f44_restore_of_a_cell_not_quarantined_is_refused,
    f22_a_restore_after_every_cell_was_quarantined_reopens_the_class,
    f22_executors_wait_through_a_dead_class_and_pull_after_a_restore,
    f22_quarantined_cells_are_listed_past_one_word_without_allocating,
    f23_pull_from_an_unknown_class_is_invalid_argument,
    x01_owned_future_aborted_refunds_everything,
    x01_owned_pull_future_runs_in_a_spawned_task,
    f47_drain_delivers_every_queued_job_in_pull_mode,
    f47_drain_delivers_every_queued_request_in_future_mode,
    f47_drain_waits_for_withdrawn_and_cancelled_requests_to_settle,
    f47_shutdown_gives_undelivered_payloads_back,
    f47_drain_after_shutdown_needs_no_executor,
    f47_ledger_admits_after_shutdown_and_the_scheduler_refunds,
    f60_observers_allocate_nothing,
);

fn f44_dropped_assignment_quarantines_by_default<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(2, 8)]);
    let a = env.occupy();
    drop(a); // as a panic, a timeout or an abort around the job would
    let s = env.snapshot();
    assert_eq!((s.cells_available, s.cells_quarantined), (1, 1));
    // The quota is refunded all the same.
    assert!(env.ledger.usage().is_zero());
    let b = env.occupy();
    drop(b);
    // Two drops close a 2-cell class under the default policy.
    let e = env.sched.try_enqueue(env.admit(0)).unwrap_err().error;
    assert_error(&e, Code::Unavailable, Reason::AllCellsQuarantined);
    assert!(env.ledger.usage().is_zero());
}

fn f44_dropped_assignment_releases_when_configured<M: Mechanism>() {
    let env = Env::<M>::new(&[
        ClassConfig::new(2, 8).on_drop(DropPolicy::Release),
        ClassConfig::new(1, 8),
    ]);
    for _ in 0..5 {
        let (a, b) = (env.occupy(), env.occupy());
        drop(a);
        drop(b);
        let s = env.snapshot();
        assert_eq!((s.cells_available, s.cells_quarantined), (2, 0));
        assert!(env.ledger.usage().is_zero());
    }
    // A waiter is granted the cell a dropped assignment gives back.
    let (a, b) = (env.occupy(), env.occupy());
    let mut waiting = pin!(env.sched.enqueue(env.admit(1)));
    assert!(poll_once(waiting.as_mut()).is_pending());
    drop(a);
    let granted = match poll_once(waiting.as_mut()) {
        Poll::Ready(Ok(g)) => g,
        other => panic!("expected the freed cell, got {other:?}"),
    };
    granted.release();
    b.release();
    // The policy is per class: class 1 keeps the default.
    let c = env.sched.try_enqueue(env.admit_in(1, 0)).unwrap();
    drop(c);
    let s1 = env.sched.snapshot(ClassId(1)).unwrap();
    assert_eq!(s1.cells_quarantined, 1);
    assert_eq!(env.snapshot().cells_available, 2);
    assert!(env.ledger.usage().is_zero());
}

fn f44_restored_cell_lets_a_waiting_request_be_granted<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(2, 8)]);
    let held = env.occupy();
    let dropped = env.occupy();
    let cell = dropped.cell();
    drop(dropped); // quarantined (the default policy)
    let mut waiting = pin!(env.sched.enqueue(env.admit(1)));
    assert!(poll_once(waiting.as_mut()).is_pending());
    assert_eq!(env.sched.queue_depth(ClassId(0)).unwrap(), 1);
    // The host cleans the cell and gives it back: the waiter is granted it.
    env.sched.restore_cell(ClassId(0), cell).unwrap();
    let granted = match poll_once(waiting.as_mut()) {
        Poll::Ready(Ok(g)) => g,
        other => panic!("expected the restored cell, got {other:?}"),
    };
    assert_eq!(granted.cell(), cell);
    let s = env.snapshot();
    assert_eq!(
        (s.cells_quarantined, s.cells_leased, s.queue_depth),
        (0, 2, 0)
    );
    granted.release();
    held.release();
    assert_eq!(env.sched.available_cells(ClassId(0)).unwrap(), 2);
    assert!(env.ledger.usage().is_zero());
}

fn f44_restore_of_a_cell_not_quarantined_is_refused<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(2, 8), ClassConfig::new(1, 8)]);
    let c0 = ClassId(0);
    let refused = |class, cell| {
        env.sched
            .restore_cell(class, fairway::CellId(cell))
            .unwrap_err()
    };
    // Free cells, a cell out of range.
    assert_error(
        &refused(c0, 0),
        Code::InvalidArgument,
        Reason::CellNotQuarantined,
    );
    // Past the class: a range error, not "not quarantined".
    assert_error(&refused(c0, 2), Code::InvalidArgument, Reason::CellRange);
    // A leased cell.
    let a = env.occupy();
    assert_error(
        &refused(c0, a.cell().0),
        Code::InvalidArgument,
        Reason::CellNotQuarantined,
    );
    // Restored once; the second restore of the same cell is refused.
    let cell = a.cell();
    a.quarantine("guest state unknown");
    env.sched.restore_cell(c0, cell).unwrap();
    assert_error(
        &refused(c0, cell.0),
        Code::InvalidArgument,
        Reason::CellNotQuarantined,
    );
    // An unknown class.
    assert_error(
        &refused(ClassId(7), 0),
        Code::InvalidArgument,
        Reason::Class,
    );
    // Refusals change nothing.
    let s = env.snapshot();
    assert_eq!((s.cells_available, s.cells_quarantined), (2, 0));
    assert!(env.ledger.usage().is_zero());
}

fn f23_pull_from_an_unknown_class_is_invalid_argument<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(1, 8)]);
    let unknown = ClassId(3);
    assert_error(
        &env.sched.try_next(unknown).unwrap_err(),
        Code::InvalidArgument,
        Reason::Class,
    );
    assert_error(
        &env.sched.next_blocking(unknown).unwrap_err(),
        Code::InvalidArgument,
        Reason::Class,
    );
    match poll_once(pin!(env.sched.next(unknown))) {
        Poll::Ready(Err(e)) => assert_error(&e, Code::InvalidArgument, Reason::Class),
        other => panic!("expected invalid-argument / class, got {other:?}"),
    }
    // Shutdown is not an error: `Ok(None)` once nothing is left.
    env.sched.shutdown();
    assert!(env.sched.next_blocking(ClassId(0)).unwrap().is_none());
    assert!(env.sched.try_next(ClassId(0)).unwrap().is_none());
}

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap()
}

/// Gives the runtime's workers time to poll what was just spawned.
fn settle(rt: &tokio::runtime::Runtime) {
    rt.block_on(async { tokio::time::sleep(Duration::from_millis(20)).await });
}

fn x01_owned_future_aborted_refunds_everything<M: Mechanism>() {
    let rt = runtime();
    let env = Env::<M>::new(&[ClassConfig::new(1, 8)]);
    let held = env.occupy();
    // `enqueue_owned` is `'static`: it can be handed to `spawn` as it is.
    let task = rt.spawn(env.sched.enqueue_owned(env.admit(1)));
    let other = rt.spawn(env.sched.clone().enqueue_owned(env.admit(2)));
    settle(&rt);
    assert!(!task.is_finished() && !other.is_finished(), "both wait");
    assert_eq!(env.snapshot().queue_depth, 2);
    task.abort();
    let aborted = rt.block_on(task).unwrap_err();
    assert!(aborted.is_cancelled());
    assert_eq!(env.snapshot().queue_depth, 1);
    // The other waiter is untouched and gets the cell.
    held.release();
    let granted = rt.block_on(other).unwrap().unwrap();
    assert_eq!(granted.tenant(), TenantId(2));
    granted.release();
    // Everything is refunded: no quota in use, every cell free, nothing queued.
    assert!(env.ledger.usage().is_zero());
    let s = env.snapshot();
    assert_eq!(
        (s.cells_available, s.queue_depth, s.cancellations),
        (1, 0, 1)
    );
}

fn x01_owned_pull_future_runs_in_a_spawned_task<M: Mechanism>() {
    let rt = runtime();
    let env = Env::<M>::new(&[ClassConfig::new(2, 8)]);
    let executor = rt.spawn(env.sched.next_owned(ClassId(0)));
    settle(&rt);
    env.sched.submit(env.admit(0), 41).unwrap();
    let job = rt.block_on(executor).unwrap().unwrap().expect("a job");
    assert_eq!(job.payload, 41);
    job.assignment.release();
    assert!(env.ledger.usage().is_zero());
}

/// With the `tokio` feature, a blocking enqueue inside a current-thread runtime panics instead
/// of hanging (run with `cargo test --features tokio --test embedding`).
#[cfg(feature = "tokio")]
#[test]
fn x02_enqueue_blocking_in_a_current_thread_runtime_panics() {
    let env = Env::<fairway::oracle::Ring>::new(&[ClassConfig::new(1, 8)]);
    let rt = tokio::runtime::Builder::new_current_thread()
        .build()
        .unwrap();
    let request = env.admit(0);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async { env.sched.enqueue_blocking(request) })
    }));
    let payload = outcome.expect_err("enqueue_blocking must panic in a current-thread runtime");
    let message = payload
        .downcast_ref::<String>()
        .map(String::as_str)
        .unwrap_or_default();
    assert!(
        message.contains("current-thread tokio runtime"),
        "{message}"
    );
    // Nothing was queued or reserved: the request was refunded as the panic unwound.
    assert!(env.ledger.usage().is_zero());
    // The blocking pull form is caught the same way.
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(async { env.sched.next_blocking(ClassId(0)) })
    }));
    assert!(outcome.is_err(), "next_blocking must panic there too");
    // Outside a runtime the same call works.
    env.sched.enqueue_blocking(env.admit(0)).unwrap().release();
}

fn f47_drain_delivers_every_queued_job_in_pull_mode<M: Mechanism>() {
    const JOBS: u64 = 40;
    let env = Env::<M>::new(&[ClassConfig::new(2, 64)]);
    for n in 0..JOBS {
        env.sched.submit(env.admit((n % 4) as u32), n).unwrap();
    }
    let executors: Vec<_> = (0..2)
        .map(|_| {
            let sched = env.sched.clone();
            std::thread::spawn(move || {
                let mut ran = Vec::new();
                while let Some(job) = sched.next_blocking(ClassId(0)).unwrap() {
                    ran.push(job.payload);
                    std::thread::yield_now();
                    job.assignment.release();
                }
                ran
            })
        })
        .collect();
    env.sched.drain_blocking();
    assert!(env.sched.is_shutdown());
    // Drained: nothing queued, every cell back, every quota refunded.
    assert_eq!(env.sched.queue_depth(ClassId(0)).unwrap(), 0);
    assert_eq!(env.sched.available_cells(ClassId(0)).unwrap(), 2);
    assert!(env.ledger.usage().is_zero());
    let mut ran: Vec<u64> = executors
        .into_iter()
        .flat_map(|e| e.join().unwrap())
        .collect();
    ran.sort_unstable();
    assert_eq!(
        ran,
        (0..JOBS).collect::<Vec<_>>(),
        "every queued job ran once"
    );
    // Closed: new work is refused, its permit and payload given back.
    let e = env.sched.submit(env.admit(0), 99).unwrap_err();
    assert_error(&e.error, Code::Unavailable, Reason::Shutdown);
    let (permit, payload) = e.returned.expect("the permit and payload come back");
    assert_eq!(payload, 99);
    drop(permit);
    assert!(env.ledger.usage().is_zero());
    assert!(env.sched.take_undelivered().is_empty());
}

fn f47_drain_delivers_every_queued_request_in_future_mode<M: Mechanism>() {
    const REQUESTS: usize = 12;
    let rt = runtime();
    let env = Env::<M>::new(&[ClassConfig::new(1, 64)]);
    let held = env.occupy();
    let tasks: Vec<_> = (0..REQUESTS)
        .map(|i| {
            let request = env.sched.enqueue_owned(env.admit((i % 3) as u32));
            rt.spawn(async move {
                let a = request.await?;
                tokio::task::yield_now().await;
                let tenant = a.tenant();
                a.release();
                Ok::<_, fairway::Error>(tenant)
            })
        })
        .collect();
    settle(&rt);
    assert_eq!(env.sched.queue_depth(ClassId(0)).unwrap(), REQUESTS as u32);
    let drain = {
        let sched = env.sched.clone();
        rt.spawn(async move { sched.drain().await })
    };
    settle(&rt);
    // Closed at once, but not drained while work is queued and a cell is held.
    assert!(env.sched.is_shutdown() && !drain.is_finished());
    let late = env.sched.try_enqueue(env.admit(0)).unwrap_err();
    assert_error(&late.error, Code::Unavailable, Reason::Shutdown);
    held.release();
    rt.block_on(drain).unwrap();
    for t in tasks {
        rt.block_on(t)
            .unwrap()
            .expect("every queued request is granted");
    }
    assert!(env.ledger.usage().is_zero());
    let s = env.snapshot();
    assert_eq!((s.queue_depth, s.cells_available, s.rejections), (0, 1, 0));
}

fn f47_drain_waits_for_withdrawn_and_cancelled_requests_to_settle<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(1, 8), ClassConfig::new(1, 8)]);
    let held = env.occupy();
    let mut waiting = Box::pin(env.sched.enqueue(env.admit(1)));
    assert!(poll_once(waiting.as_mut()).is_pending());
    let handle = env.sched.submit(env.admit(2), 7).unwrap();
    let other_class = env.sched.submit(env.admit_in(1, 3), 8).unwrap();
    let mut drain = pin!(env.sched.drain());
    assert!(poll_once(drain.as_mut()).is_pending());
    drop(waiting); // withdrawn while queued
    assert!(
        poll_once(drain.as_mut()).is_pending(),
        "a pull job is queued, a cell held"
    );
    env.sched.cancel(handle).unwrap();
    assert!(
        poll_once(drain.as_mut()).is_pending(),
        "the cell is still held"
    );
    held.release();
    // Class 0 is empty now; class 1 still has its job granted but not taken.
    assert!(poll_once(drain.as_mut()).is_pending());
    assert_eq!(env.sched.queue_depth(ClassId(0)).unwrap(), 0);
    let job = env
        .sched
        .try_next(ClassId(1))
        .unwrap()
        .expect("class 1's job");
    assert_eq!(job.payload, 8);
    assert!(
        poll_once(drain.as_mut()).is_pending(),
        "its assignment runs"
    );
    job.assignment.release();
    assert!(poll_once(drain.as_mut()).is_ready());
    // Every quota was refunded by the time the drain resolved.
    assert!(env.ledger.usage().is_zero());
    let _ = other_class;
    let s = env.snapshot();
    assert_eq!((s.cancellations, s.cells_available), (2, 1));
}

fn f47_shutdown_gives_undelivered_payloads_back<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(2, 16)]);
    for n in 1..=6 {
        env.sched.submit(env.admit(n % 2), u64::from(n)).unwrap();
    }
    // Job 1 runs; job 2 is granted the other cell but no executor has taken it; 3..6 wait.
    let running = env.sched.try_next(ClassId(0)).unwrap().expect("job 1");
    assert_eq!(env.sched.available_cells(ClassId(0)).unwrap(), 0);
    assert_eq!(env.sched.queue_depth(ClassId(0)).unwrap(), 4);
    env.sched.shutdown();
    let mut back = env.sched.take_undelivered();
    back.sort_unstable();
    assert_eq!(
        back,
        [2, 3, 4, 5, 6],
        "the payloads of every undelivered job"
    );
    assert!(
        env.sched.take_undelivered().is_empty(),
        "each is handed out once"
    );
    // Their cells and quotas are settled; the running job keeps its own until released.
    assert_eq!(env.sched.available_cells(ClassId(0)).unwrap(), 1);
    assert!(!env.ledger.usage().is_zero());
    assert!(env.sched.next_blocking(ClassId(0)).unwrap().is_none());
    running.assignment.release();
    assert!(env.ledger.usage().is_zero());
    env.sched.drain_blocking();
}

fn f47_drain_after_shutdown_needs_no_executor<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(2, 16)]);
    for n in 1..=4 {
        env.sched.submit(env.admit(0), n).unwrap();
    }
    // Jobs 1 and 2 are granted and wait for an executor that never comes; 3 and 4 are queued.
    env.sched.shutdown();
    env.sched.drain_blocking();
    assert_eq!(env.sched.available_cells(ClassId(0)).unwrap(), 2);
    assert!(env.ledger.usage().is_zero());
    let mut back = env.sched.take_undelivered();
    back.sort_unstable();
    assert_eq!(back, [1, 2, 3, 4]);
}

fn f47_ledger_admits_after_shutdown_and_the_scheduler_refunds<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(1, 8)]);
    env.sched.shutdown();
    // The ledger is not closed with the scheduler (it may serve others): admission succeeds...
    let request = env.admit(0);
    assert!(!env.ledger.usage().is_zero());
    // ...and the scheduler refuses the request and refunds its permit.
    let e = env.sched.try_enqueue(request).unwrap_err();
    assert_error(&e.error, Code::Unavailable, Reason::Shutdown);
    let e = env.sched.enqueue_blocking(env.admit(0)).unwrap_err();
    assert_error(&e, Code::Unavailable, Reason::Shutdown);
    assert!(env.ledger.usage().is_zero());
}

fn f60_observers_allocate_nothing<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(2, 64)]);
    // Some history: grants after waits, so the histogram has several buckets.
    let held = env.occupy();
    for n in 0..8 {
        env.sched.submit(env.admit(n % 3), u64::from(n)).unwrap();
    }
    while let Some(job) = env.sched.try_next(ClassId(0)).unwrap() {
        job.assignment.release();
    }
    let mut snapshot = env.snapshot();
    let class = ClassId(0);
    let (n, (depth, free, shut)) = allocations_of(|| {
        (
            env.sched.queue_depth(class).unwrap(),
            env.sched.available_cells(class).unwrap(),
            env.sched.is_shutdown(),
        )
    });
    assert_eq!(
        n, 0,
        "queue_depth, available_cells and is_shutdown allocate nothing"
    );
    assert_eq!((depth, free, shut), (0, 1, false));
    let (n, r) = allocations_of(|| env.sched.snapshot_into(class, &mut snapshot));
    r.unwrap();
    assert_eq!(n, 0, "snapshot_into reuses the caller's histogram");
    assert_eq!(snapshot.grants, 9);
    assert_eq!(snapshot.wait_histogram.len(), 9);
    assert_eq!((snapshot.cells_leased, snapshot.queue_depth), (1, 0));
    // The counter does count: a plain snapshot builds a histogram.
    let (n, _) = allocations_of(|| env.snapshot());
    assert!(n > 0);
    held.release();
}

/// Every cell of a 2-cell class is quarantined: a queued request and a new one fail
/// `all-cells-quarantined` (SPEC F22). The state is not final: restoring one cell reopens the
/// class, and the next request is granted that cell.
fn f22_a_restore_after_every_cell_was_quarantined_reopens_the_class<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(2, 8)]);
    let (a, b) = (env.occupy(), env.occupy());
    let mut queued = std::pin::pin!(env.sched.enqueue(env.admit(1)));
    assert!(poll_once(queued.as_mut()).is_pending());
    let (ca, cb) = (a.cell(), b.cell());
    a.quarantine("timed out");
    b.quarantine("timed out");
    match poll_once(queued.as_mut()) {
        Poll::Ready(Err(e)) => assert_error(&e, Code::Unavailable, Reason::AllCellsQuarantined),
        other => panic!("the queued request did not fail: {other:?}"),
    }
    let e = env.sched.try_enqueue(env.admit(2)).unwrap_err().error;
    assert_error(&e, Code::Unavailable, Reason::AllCellsQuarantined);
    let mut listed: Vec<_> = env.sched.quarantined_cells(ClassId(0)).unwrap().collect();
    listed.sort();
    let mut want = vec![ca, cb];
    want.sort();
    assert_eq!(listed, want);
    env.sched
        .restore_cell(ClassId(0), cb)
        .expect("a restore reopens a class whose every cell was quarantined");
    assert_eq!(
        env.sched
            .quarantined_cells(ClassId(0))
            .unwrap()
            .collect::<Vec<_>>(),
        vec![ca]
    );
    let granted = env
        .sched
        .try_enqueue(env.admit(3))
        .expect("the reopened class grants the restored cell");
    assert_eq!(granted.cell(), cb);
    // A waiting request is granted too once the cell comes back.
    let mut waiting = std::pin::pin!(env.sched.enqueue(env.admit(4)));
    assert!(poll_once(waiting.as_mut()).is_pending());
    granted.release();
    match poll_once(waiting.as_mut()) {
        Poll::Ready(Ok(g)) => g.release(),
        other => panic!("expected the released cell, got {other:?}"),
    }
    env.sched.restore_cell(ClassId(0), ca).unwrap();
    assert_eq!(env.sched.available_cells(ClassId(0)).unwrap(), 2);
    assert!(env.ledger.usage().is_zero());
}

/// Pull mode: an executor waiting on a class whose every cell is then quarantined keeps
/// waiting (the class is not finished: a restore reopens it), and receives the job submitted
/// after the restore. A shutdown ends its wait.
fn f22_executors_wait_through_a_dead_class_and_pull_after_a_restore<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(1, 8)]);
    let a = env.occupy();
    let cell = a.cell();
    let mut next = std::pin::pin!(env.sched.next(ClassId(0)));
    assert!(poll_once(next.as_mut()).is_pending());
    a.quarantine("lost");
    assert!(
        poll_once(next.as_mut()).is_pending(),
        "the executor's wait ended on a dead class"
    );
    env.sched.restore_cell(ClassId(0), cell).unwrap();
    env.sched.submit(env.admit(0), 7).unwrap();
    match poll_once(next.as_mut()) {
        Poll::Ready(Ok(Some(job))) => {
            assert_eq!(job.payload, 7);
            job.assignment.release();
        }
        other => panic!("expected the job after the restore, got {other:?}"),
    }
    let mut after = std::pin::pin!(env.sched.next(ClassId(0)));
    assert!(poll_once(after.as_mut()).is_pending());
    env.sched.shutdown();
    assert!(matches!(poll_once(after.as_mut()), Poll::Ready(Ok(None))));
    assert!(env.ledger.usage().is_zero());
}

/// The quarantined cells of a 100-cell class (past one 64-bit word), listed in id order and
/// without allocating (SPEC F22).
fn f22_quarantined_cells_are_listed_past_one_word_without_allocating<M: Mechanism>() {
    let env = Env::<M>::new(&[ClassConfig::new(100, 128)]);
    let held: Vec<Assignment> = (0..100).map(|_| env.occupy()).collect();
    let mut want = Vec::new();
    for a in held {
        if matches!(a.cell().0, 3 | 63 | 64 | 99) {
            want.push(a.cell());
            a.quarantine("test");
        } else {
            a.release();
        }
    }
    want.sort();
    let mut seen = [fairway::CellId(0); 8];
    let (allocs, n) = allocations_of(|| {
        let mut n = 0;
        for c in env.sched.quarantined_cells(ClassId(0)).unwrap() {
            seen[n] = c;
            n += 1;
        }
        n
    });
    assert_eq!(allocs, 0, "listing the quarantined cells allocated");
    assert_eq!(&seen[..n], &want[..]);
    assert_eq!(env.snapshot().cells_quarantined, 4);
}
