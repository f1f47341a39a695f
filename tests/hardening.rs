//! Black-box tests of defects found in review: each failed on the tree before its fix. Every
//! generic test runs on both engines.

#[macro_use]
mod common;

use common::*;
use fairway::admission::{AdmissionRequest, Ledger};
use fairway::oracle::{Mechanism, SchedulerOn};
use fairway::{
    AdmittedRequest, Assignment, CancellationToken, ClassId, ClassSnapshot, Code, Reason,
    Scheduler, TenantId,
};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

both_engines!(
    f11_fast_path_grant_is_the_emptied_tenants_turn,
    f11_fast_try_enqueue_grant_is_the_emptied_tenants_turn,
    f11_fast_grant_after_withdrawal_is_the_emptied_tenants_turn,
    f11_fast_grant_retires_emptied_tenants_33_cells,
    f11_fast_grant_retires_emptied_tenants_1000_cells,
    f23_forgotten_executor_waiter_is_not_woken,
    f30_handle_from_another_scheduler_is_refused,
    f30_reused_slot_does_not_wake_the_previous_owner,
    f32_cancelled_pull_job_is_not_delivered,
    f32_pull_job_cancelled_after_its_grant_is_not_delivered,
    f32_request_without_token_is_cancelled_by_handle,
    f45_queue_slot_is_returned_at_grant_not_at_acceptance,
    f45_pull_job_returns_its_queue_slot_at_grant,
    f45_queue_slots_return_at_grant_33_cells,
    f45_queue_slots_return_at_grant_1000_cells,
    f46_deadline_applies_without_a_token,
    f60_request_refused_at_enqueue_for_a_past_deadline_is_counted,
    f34_second_live_request_with_the_same_id_is_refused,
    f34_duplicate_ids_refused_in_every_mode_at_1000_cells,
    f45_cancels_while_no_cell_is_free_never_refuse_below_capacity,
);

/// Tenants of the tests at size.
const MANY_TENANTS: u32 = 10_000;

/// Polls `f` once with the given counting waker.
fn poll_with<F: Future + Unpin>(f: &mut F, w: &Arc<CountingWaker>) -> Poll<F::Output> {
    let waker = Waker::from(w.clone());
    Pin::new(f).poll(&mut Context::from_waker(&waker))
}

/// How many times `w` was woken.
fn wakes(w: &CountingWaker) -> usize {
    w.0.load(Ordering::SeqCst)
}

/// Admits a request of `tenant` in class 0 and returns it with a clone of its token.
fn admit_with_token<M: Mechanism>(
    h: &Harness<M>,
    tenant: u32,
) -> (AdmittedRequest, CancellationToken) {
    let id = h.fresh_id();
    let permit = h
        .ledger
        .admit(AdmissionRequest::new(id, TenantId(tenant)).class(ClassId(0)))
        .unwrap();
    let token = CancellationToken::new(id);
    (AdmittedRequest::new(permit, token.clone()), token)
}

/// Every request a class has seen, by how it ended (SPEC F60).
fn outcomes(s: &ClassSnapshot) -> u64 {
    s.grants + s.rejections + s.cancellations + s.expirations
}

/// Queue slots held in class 0.
fn queue_slots<M: Mechanism>(h: &Harness<M>) -> u64 {
    h.ledger.usage().classes[0].queue_slots
}

/// Concurrency held in class 0.
fn concurrency<M: Mechanism>(h: &Harness<M>) -> u64 {
    h.ledger.usage().classes[0].concurrency
}

/// Polls `f` once, expecting `code`.
#[track_caller]
fn fails_with<F: Future<Output = Result<Assignment, fairway::Error>> + Unpin>(
    f: &mut F,
    code: Code,
) {
    match poll_once(f) {
        Poll::Ready(Err(e)) => assert_eq!(e.code(), code, "{e}"),
        Poll::Ready(Ok(a)) => panic!("expected {code:?}, got a grant on {:?}", a.cell()),
        Poll::Pending => panic!("expected {code:?}, still pending"),
    }
}

/// A pull-mode payload that counts its drops.
struct Tracked(Arc<AtomicUsize>);

impl Drop for Tracked {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

/// A one-class scheduler whose payloads count their drops.
fn tracked_world<M: Mechanism>(cells: u32) -> (Ledger, SchedulerOn<Tracked, M>) {
    let ledger = Ledger::new(ledger_config(1, 4)).unwrap();
    let sched = Scheduler::builder(ledger.clone())
        .payload::<Tracked>()
        .class(cells, 8)
        .build_with::<M>()
        .unwrap();
    (ledger, sched)
}

/// Admits a request of `tenant` for `ledger`'s class 0, with its token.
fn admit_for(ledger: &Ledger, id: u64, tenant: u32) -> (AdmittedRequest, CancellationToken) {
    let id = fairway::RequestId(id);
    let permit = ledger
        .admit(AdmissionRequest::new(id, TenantId(tenant)))
        .unwrap();
    let token = CancellationToken::new(id);
    (AdmittedRequest::new(permit, token.clone()), token)
}

// ---- F30: handles ---------------------------------------------------------------------------

/// Two schedulers built alike hand out the same slot for the same history; a handle of one must
/// not act on the other.
fn f30_handle_from_another_scheduler_is_refused<M: Mechanism>() {
    let a = Harness::<M>::new(&[(1, 8)], 2);
    let b = Harness::<M>::new(&[(1, 8)], 2);
    let held_a = a.occupy(1).pop().unwrap();
    let held_b = b.occupy(1).pop().unwrap();
    let (mut fa, _) = queue(&a, a.admit(1));
    let (mut fb, _) = queue(&b, b.admit(1));
    let from_a = fa.handle().unwrap();

    let e = b.sched.cancel(from_a).unwrap_err();
    assert_eq!(
        (e.code(), e.reason()),
        (Code::PermissionDenied, Reason::ForeignHandle)
    );
    assert_eq!(e.reason().as_str(), "foreign-handle");
    let s = b.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(
        (s.queue_depth, s.cancellations),
        (1, 0),
        "B's request untouched"
    );
    assert!(poll_once(&mut fb).is_pending());
    held_b.release();
    granted(&mut fb).release();
    assert!(b.ledger.usage().is_zero());

    // The handle still works on the scheduler that minted it.
    a.sched.cancel(from_a).unwrap();
    fails_with(&mut fa, Code::Cancelled);
    held_a.release();
    assert!(a.ledger.usage().is_zero());
}

/// A withdrawn request's slot is reused; granting the new owner before its first poll must not
/// wake the previous owner's task.
fn f30_reused_slot_does_not_wake_the_previous_owner<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 4);
    let held = h.occupy(1).pop().unwrap();
    let wa = Arc::new(CountingWaker::default());
    let mut a = Box::pin(h.sched.enqueue(h.admit(1)));
    assert!(poll_with(&mut a, &wa).is_pending());
    drop(a); // withdrawn while queued; its slot is free again
             // The baseline may wake the withdrawing owner during its own drop (harmless); count from here.
    let before = wakes(&wa);
    let mut b = Box::pin(h.sched.enqueue(h.admit(2)));
    held.release(); // the pass grants B, which has never been polled
    assert_eq!(wakes(&wa), before, "B's grant woke the previous owner");
    assert_eq!(Arc::strong_count(&wa), 1, "the reused slot kept A's waker");
    granted(&mut b).release();
    assert_eq!(wakes(&wa), before);
    assert!(h.ledger.usage().is_zero());
}

// ---- F23: executors -------------------------------------------------------------------------

/// A dropped `next` future must not stay registered as an idle executor: the scheduler lets go
/// of its waker (a waker left in the freed executor slot is woken when the slot's next claimer
/// is between its claim and its registration, a window one thread cannot reach; that it is kept
/// at all is what a test can see).
fn f23_forgotten_executor_waiter_is_not_woken<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let w = Arc::new(CountingWaker::default());
    let mut next = Box::pin(h.sched.next(ClassId(0)));
    assert!(poll_with(&mut next, &w).is_pending());
    assert!(Arc::strong_count(&w) > 1, "registered while waiting");
    drop(next);
    assert_eq!(
        Arc::strong_count(&w),
        1,
        "the scheduler kept the forgotten executor's waker"
    );
    h.sched.submit(h.admit(1), 7).unwrap();
    assert_eq!(wakes(&w), 0, "a forgotten executor waiter was woken");
    let job = h
        .sched
        .try_next(ClassId(0))
        .unwrap()
        .expect("the submitted job");
    assert_eq!(job.payload, 7);
    job.assignment.release();
    assert!(h.ledger.usage().is_zero());
}

// ---- F60: counters --------------------------------------------------------------------------

/// Refusals at enqueue count: a deadline already passed is an expiration, a full queue a
/// rejection, and every request seen ends in exactly one counter.
fn f60_request_refused_at_enqueue_for_a_past_deadline_is_counted<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 1)], 2);
    let snap = || h.sched.snapshot(ClassId(0)).unwrap();
    let late = || {
        let r = h.admit_with(1, |r| r.deadline(Duration::from_millis(10)));
        h.advance(Duration::from_millis(20));
        r
    };
    let mut seen = 0;

    let mut f = Box::pin(h.sched.enqueue(late()));
    seen += 1;
    fails_with(&mut f, Code::DeadlineExceeded);
    let s = snap();
    assert_eq!(s.expirations, 1);
    assert_eq!(outcomes(&s), seen);

    let e = h.sched.try_enqueue(late()).unwrap_err().error;
    seen += 1;
    assert_eq!(e.code(), Code::DeadlineExceeded);
    let e = h.sched.submit(late(), 0).unwrap_err().error;
    seen += 1;
    assert_eq!(e.code(), Code::DeadlineExceeded);
    let s = snap();
    assert_eq!(s.expirations, 3);
    assert_eq!(outcomes(&s), seen);

    // Queue capacity 1: the second queued request is refused.
    let held = h.occupy(1).pop().unwrap();
    let (mut q, _) = queue(&h, h.admit(1));
    let mut full = Box::pin(h.sched.enqueue(h.admit(1)));
    seen += 3;
    fails_with(&mut full, Code::ResourceExhausted);
    let s = snap();
    assert_eq!((s.rejections, s.queue_depth), (1, 1));
    held.release();
    granted(&mut q).release();
    let s = snap();
    assert_eq!((s.grants, s.rejections, s.expirations), (2, 1, 3));
    assert_eq!(outcomes(&s), seen);
    assert!(h.ledger.usage().is_zero());
}

// ---- F11: lazy removal and the fast path ----------------------------------------------------

/// How the emptied tenant's only request leaves the queue.
#[derive(Clone, Copy)]
enum Withdraw {
    Handle,
    Token,
    DropFuture,
}

/// How the other tenant gets the free cell.
#[derive(Clone, Copy)]
enum Fast {
    Enqueue,
    TryEnqueue,
}

/// Tenant 1's only request leaves the queue, so tenant 1 keeps its ring position; the next grant,
/// made on the fast path to tenant 2, was tenant 1's turn, so tenant 1 re-joins behind tenant 3,
/// who queued first.
fn emptied_tenant_turn<M: Mechanism>(withdraw: Withdraw, fast: Fast) {
    let h = Harness::<M>::new(&[(1, 8)], 4);
    let x = h.occupy(1).pop().unwrap();
    let (req, token) = admit_with_token(&h, 1);
    let mut a1 = Box::pin(h.sched.enqueue(req));
    assert!(poll_once(&mut a1).is_pending());
    match withdraw {
        Withdraw::Handle => {
            h.sched.cancel(a1.handle().unwrap()).unwrap();
            fails_with(&mut a1, Code::Cancelled);
        }
        Withdraw::Token => {
            token.cancel("host");
            fails_with(&mut a1, Code::Cancelled);
        }
        Withdraw::DropFuture => {}
    }
    drop(a1);
    x.release(); // the cell is free and nothing live is queued
    let b1 = match fast {
        Fast::Enqueue => {
            let mut f = Box::pin(h.sched.enqueue(h.admit(2)));
            granted(&mut f)
        }
        Fast::TryEnqueue => h.sched.try_enqueue(h.admit(2)).expect("a free cell"),
    };
    let c1 = queue(&h, h.admit(3));
    let a2 = queue(&h, h.admit(1));
    let (c1_id, a2_id) = (c1.1, a2.1);
    let mut pending = vec![c1, a2];
    assert_eq!(grant_order(b1, &mut pending), vec![c1_id, a2_id]);
    assert!(h.ledger.usage().is_zero());
}

fn f11_fast_path_grant_is_the_emptied_tenants_turn<M: Mechanism>() {
    emptied_tenant_turn::<M>(Withdraw::Handle, Fast::Enqueue);
}

fn f11_fast_try_enqueue_grant_is_the_emptied_tenants_turn<M: Mechanism>() {
    emptied_tenant_turn::<M>(Withdraw::Token, Fast::TryEnqueue);
}

fn f11_fast_grant_after_withdrawal_is_the_emptied_tenants_turn<M: Mechanism>() {
    emptied_tenant_turn::<M>(Withdraw::DropFuture, Fast::TryEnqueue);
}

/// Releases every assignment in `held` (each release grants the next request in line), then
/// checks that exactly the next `held.len()` requests of `order` were granted, in that order,
/// and that the one after them still waits. Returns the new assignments. `check` runs after the
/// releases and before the granted requests are polled.
fn release_round<M: Mechanism>(
    held: Vec<Assignment>,
    order: &mut std::collections::VecDeque<Pending<'_, M>>,
    check: impl FnOnce(usize),
) -> Vec<Assignment> {
    let n = held.len().min(order.len());
    for a in held {
        a.release();
    }
    check(n);
    let mut next = Vec::with_capacity(n);
    for _ in 0..n {
        let (mut f, id) = order.pop_front().unwrap();
        match poll_once(&mut f) {
            Poll::Ready(Ok(a)) => next.push(a),
            other => panic!("{id:?} should have been granted in this round: {other:?}"),
        }
    }
    if let Some((f, id)) = order.front_mut() {
        assert!(poll_once(f).is_pending(), "{id:?} granted out of turn");
    }
    next
}

/// At size: `cells` emptied tenants keep their ring positions while every cell is held; the first
/// fast-path grant after the cells come free was their turn, so every tenant that queues before
/// they come back is served first.
fn emptied_tenants_at_size<M: Mechanism>(cells: u32) {
    let n = cells;
    let h = Harness::<M>::new(&[(n, MANY_TENANTS)], MANY_TENANTS);
    // Tenants 1..=n empty their queues, n+1..=2n take the free cells, the rest queue in order.
    let (emptied, fast, rest) = (1..=n, n + 1..=2 * n, 2 * n + 1..MANY_TENANTS);
    let held = h.occupy(n as usize);
    for t in emptied.clone() {
        let (f, _) = queue(&h, h.admit(t));
        h.sched.cancel(f.handle().unwrap()).unwrap();
    }
    assert_eq!(h.sched.snapshot(ClassId(0)).unwrap().queue_depth, 0);
    for a in held {
        a.release();
    }
    let mut held: Vec<_> = fast
        .map(|t| h.sched.try_enqueue(h.admit(t)).expect("a free cell"))
        .collect();
    let mut order: std::collections::VecDeque<_> =
        rest.chain(emptied).map(|t| queue(&h, h.admit(t))).collect();
    while !order.is_empty() {
        held = release_round(held, &mut order, |_| {});
    }
    for a in held {
        a.release();
    }
    assert!(h.ledger.usage().is_zero());
}

fn f11_fast_grant_retires_emptied_tenants_33_cells<M: Mechanism>() {
    emptied_tenants_at_size::<M>(33);
}

fn f11_fast_grant_retires_emptied_tenants_1000_cells<M: Mechanism>() {
    emptied_tenants_at_size::<M>(1000);
}

// ---- F45: the queue slot goes back at grant -------------------------------------------------

fn f45_queue_slot_is_returned_at_grant_not_at_acceptance<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let (mut r, _) = queue(&h, h.admit(1));
    assert_eq!((queue_slots(&h), concurrency(&h)), (1, 2));
    held.release(); // the pass grants R; R's owner has not polled yet
    assert_eq!(
        (queue_slots(&h), concurrency(&h)),
        (0, 1),
        "granted: the queue slot is back, the concurrency stays reserved for R"
    );
    let t = h.ledger.usage().tenants[1];
    assert_eq!((t.queue_slots, t.concurrency), (0, 1));
    let a = granted(&mut r);
    assert_eq!((queue_slots(&h), concurrency(&h)), (0, 1));
    a.release();
    assert!(h.ledger.usage().is_zero());
}

fn f45_pull_job_returns_its_queue_slot_at_grant<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    h.sched.submit(h.admit(1), 9).unwrap();
    assert_eq!((queue_slots(&h), concurrency(&h)), (1, 2));
    held.release(); // granted to the executors' ready queue
    assert_eq!(h.sched.snapshot(ClassId(0)).unwrap().queue_depth, 0);
    assert_eq!((queue_slots(&h), concurrency(&h)), (0, 1));
    let job = h
        .sched
        .try_next(ClassId(0))
        .unwrap()
        .expect("the granted job");
    assert_eq!(job.payload, 9);
    job.assignment.release();
    assert!(h.ledger.usage().is_zero());
}

/// At size: every cell is held and one request per tenant queues; each round frees every cell,
/// and before any granted owner polls, the queue slots held are exactly the requests still
/// queued while concurrency stays reserved for the granted ones.
fn queue_slots_at_size<M: Mechanism>(cells: u32) {
    let h = Harness::<M>::new(&[(cells, MANY_TENANTS)], MANY_TENANTS);
    let mut held = h.occupy(cells as usize);
    let mut order: std::collections::VecDeque<_> =
        (1..MANY_TENANTS).map(|t| queue(&h, h.admit(t))).collect();
    let mut live = u64::from(MANY_TENANTS - 1) + u64::from(cells);
    while !order.is_empty() {
        let waiting = order.len() as u64;
        let released = held.len() as u64;
        held = release_round(held, &mut order, |granted| {
            let granted = granted as u64;
            live -= released;
            let u = h.ledger.usage();
            assert_eq!(u.classes[0].queue_slots, waiting - granted);
            assert_eq!(u.classes[0].concurrency, live);
        });
    }
    for a in held {
        a.release();
    }
    assert!(h.ledger.usage().is_zero());
}

fn f45_queue_slots_return_at_grant_33_cells<M: Mechanism>() {
    queue_slots_at_size::<M>(33);
}

fn f45_queue_slots_return_at_grant_1000_cells<M: Mechanism>() {
    queue_slots_at_size::<M>(1000);
}

// ---- F32: cancellation in pull mode and without a token -------------------------------------

/// A pull job whose token is cancelled while it is queued is never delivered, and never takes a
/// cell: it ends as cancelled when its turn comes.
fn f32_cancelled_pull_job_is_not_delivered<M: Mechanism>() {
    let (ledger, sched) = tracked_world::<M>(1);
    let drops = Arc::new(AtomicUsize::new(0));
    let held = sched.try_enqueue(admit_for(&ledger, 1, 0).0).unwrap();
    let (req, token) = admit_for(&ledger, 2, 1);
    sched.submit(req, Tracked(drops.clone())).unwrap();
    token.cancel("host");
    held.release();
    assert!(
        sched.try_next(ClassId(0)).unwrap().is_none(),
        "a cancelled job was delivered"
    );
    let mut next = Box::pin(sched.next(ClassId(0)));
    assert!(poll_once(&mut next).is_pending());
    drop(next);
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the payload was dropped");
    assert!(ledger.usage().is_zero());
    let s = sched.snapshot(ClassId(0)).unwrap();
    assert_eq!((s.cells_available, s.queue_depth), (1, 0));
    assert_eq!(outcomes(&s), 2);
    // Ended at its grant as cancelled: it never took the cell (the one grant is the held one).
    assert_eq!(
        (s.grants, s.cancellations),
        (1, 1),
        "the cancelled job was granted a cell"
    );
}

/// A pull job whose token is cancelled after its grant, before an executor takes it, is not
/// delivered either; its cell goes back.
fn f32_pull_job_cancelled_after_its_grant_is_not_delivered<M: Mechanism>() {
    let (ledger, sched) = tracked_world::<M>(1);
    let drops = Arc::new(AtomicUsize::new(0));
    let held = sched.try_enqueue(admit_for(&ledger, 1, 0).0).unwrap();
    let (req, token) = admit_for(&ledger, 2, 1);
    sched.submit(req, Tracked(drops.clone())).unwrap();
    held.release(); // granted to the ready queue
    token.cancel("host");
    assert!(
        sched.try_next(ClassId(0)).unwrap().is_none(),
        "a cancelled job was delivered"
    );
    assert_eq!(drops.load(Ordering::SeqCst), 1, "the payload was dropped");
    assert!(ledger.usage().is_zero());
    let s = sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(s.cells_available, 1);
    assert_eq!(outcomes(&s), 2);
    // The cell serves the next job.
    let (req, _) = admit_for(&ledger, 3, 1);
    sched.submit(req, Tracked(drops.clone())).unwrap();
    let job = sched.try_next(ClassId(0)).unwrap().expect("the next job");
    job.assignment.release();
    drop(job.payload);
    assert!(ledger.usage().is_zero());
}

/// A request without a token is cancelled through its handle.
fn f32_request_without_token_is_cancelled_by_handle<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let held = h.occupy(1).pop().unwrap();
    let permit = |t| {
        h.ledger
            .admit(AdmissionRequest::new(h.fresh_id(), TenantId(t)).class(ClassId(0)))
            .unwrap()
    };
    let req = AdmittedRequest::without_token(permit(1));
    assert!(req.token().is_none());
    let (mut f, _) = queue(&h, req);
    let handle = f.handle().unwrap();
    h.sched.cancel(handle).unwrap();
    assert_eq!(h.sched.cancel(handle).unwrap_err().code(), Code::NotFound);
    fails_with(&mut f, Code::Cancelled);
    drop(f);
    // Pull mode, through `From<Permit>`.
    let job = h.sched.submit(permit(1).into(), 5).unwrap();
    h.sched.cancel(job).unwrap();
    assert_eq!(h.sched.cancel(job).unwrap_err().code(), Code::NotFound);
    held.release();
    assert!(h.sched.try_next(ClassId(0)).unwrap().is_none());
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!((s.cancellations, s.cells_available), (2, 1));
    assert!(h.ledger.usage().is_zero());
    // And granted like any other when not cancelled.
    let mut g = Box::pin(h.sched.enqueue(permit(1).into()));
    granted(&mut g).release();
    assert!(h.ledger.usage().is_zero());
}

// ---- F46: deadlines -------------------------------------------------------------------------

/// A token-less request's deadline is checked at enqueue, in the queue and at acceptance.
fn f46_deadline_applies_without_a_token<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let late = || {
        let p = h
            .ledger
            .admit(
                AdmissionRequest::new(h.fresh_id(), TenantId(1))
                    .class(ClassId(0))
                    .deadline(Duration::from_millis(10)),
            )
            .unwrap();
        AdmittedRequest::without_token(p)
    };
    // At enqueue.
    let r = late();
    h.advance(Duration::from_millis(20));
    let mut f = Box::pin(h.sched.enqueue(r));
    fails_with(&mut f, Code::DeadlineExceeded);
    // In the queue.
    let held = h.occupy(1).pop().unwrap();
    let (mut q, _) = queue(&h, late());
    h.advance(Duration::from_millis(20));
    fails_with(&mut q, Code::DeadlineExceeded);
    // At acceptance: granted, then the deadline passes before the owner polls.
    let (mut q, _) = queue(&h, late());
    held.release();
    h.advance(Duration::from_millis(20));
    fails_with(&mut q, Code::DeadlineExceeded);
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!((s.cells_available, s.queue_depth), (1, 0));
    assert!(h.ledger.usage().is_zero());
}

// ---- F34: duplicate live ids ------------------------------------------------------------------

fn assert_duplicate(e: &fairway::Error) {
    assert_eq!(
        (e.code(), e.reason()),
        (Code::AlreadyExists, Reason::DuplicateRequest),
        "{e}"
    );
}

/// While a request is live — queued, granted, or holding its cell — a second request with its
/// id is refused with `already-exists / duplicate-request`, refunded, and leaves the first
/// untouched; once the first has ended, the id can be used again.
fn f34_second_live_request_with_the_same_id_is_refused<M: Mechanism>() {
    let (ledger, sched) = tracked_world::<M>(1);
    let drops = Arc::new(AtomicUsize::new(0));
    // Live and holding the cell.
    let held = sched.try_enqueue(admit_id(&ledger, 7, 0)).unwrap();
    let e = sched.try_enqueue(admit_id(&ledger, 7, 1)).unwrap_err();
    assert_duplicate(&e.error);
    assert!(e.request.is_none(), "a refused request is refunded");
    // Live and queued (future mode).
    let mut queued = Box::pin(sched.enqueue(admit_id(&ledger, 8, 0)));
    assert!(poll_once(&mut queued).is_pending());
    let mut dup = Box::pin(sched.enqueue(admit_id(&ledger, 8, 1)));
    match poll_once(&mut dup) {
        Poll::Ready(Err(e)) => assert_duplicate(&e),
        other => panic!("expected duplicate-request, got {other:?}"),
    }
    drop(dup);
    // Live and queued (pull mode): the payload comes back with the refusal.
    sched
        .submit(admit_id(&ledger, 9, 2), Tracked(drops.clone()))
        .unwrap();
    let refused = sched
        .submit(admit_id(&ledger, 9, 3), Tracked(drops.clone()))
        .unwrap_err();
    assert_duplicate(&refused.error);
    assert!(refused.returned.is_some(), "the payload is given back");
    drop(refused);
    // Ids 7 and 8 and 9 across modes: 8 is refused while 9 (pull) is queued, whatever the mode.
    let mut dup = Box::pin(sched.enqueue(admit_id(&ledger, 9, 1)));
    match poll_once(&mut dup) {
        Poll::Ready(Err(e)) => assert_duplicate(&e),
        other => panic!("expected duplicate-request, got {other:?}"),
    }
    drop(dup);
    // The first ones end; their ids are free again.
    held.release();
    let a8 = match poll_once(&mut queued) {
        Poll::Ready(Ok(a)) => a,
        other => panic!("8 is granted when 7 releases: {other:?}"),
    };
    a8.release();
    let job = sched.try_next(ClassId(0)).unwrap().expect("9 is delivered");
    assert_eq!(job.assignment.request_id(), fairway::RequestId(9));
    job.assignment.release();
    drop(job.payload);
    for id in [7, 8, 9] {
        sched
            .try_enqueue(admit_id(&ledger, id, 0))
            .unwrap_or_else(|e| panic!("id {id} is free again: {}", e.error))
            .release();
    }
    assert!(ledger.usage().is_zero(), "{:?}", ledger.usage());
    let s = sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(s.cells_available, s.cells_total);
}

/// At 1000 cells and 10^4 tenants: every cell held under its own id, a queue of requests behind
/// them, and a duplicate of each live id refused; after everything ends, every id is usable.
fn f34_duplicate_ids_refused_in_every_mode_at_1000_cells<M: Mechanism>() {
    const CELLS: u32 = 1000;
    let ledger = Ledger::new(ledger_config(1, MANY_TENANTS)).unwrap();
    let sched = Scheduler::builder(ledger.clone())
        .payload::<u64>()
        .class(CELLS, 4 * CELLS)
        .build_with::<M>()
        .unwrap();
    let held: Vec<_> = (0..u64::from(CELLS))
        .map(|id| {
            sched
                .try_enqueue(admit_id(&ledger, id, (id % 10_000) as u32))
                .unwrap()
        })
        .collect();
    let mut queued: Vec<_> = (1000..3000u64)
        .map(|id| {
            let mut f = Box::pin(sched.enqueue(admit_id(&ledger, id, (id % 10_000) as u32)));
            assert!(poll_once(&mut f).is_pending());
            f
        })
        .collect();
    for id in (0..3000u64).step_by(7) {
        let e = sched
            .try_enqueue(admit_id(&ledger, id, ((id + 1) % 10_000) as u32))
            .unwrap_err();
        assert_duplicate(&e.error);
    }
    for a in held {
        a.release();
    }
    for f in queued.iter_mut().take(1000) {
        match poll_once(f) {
            Poll::Ready(Ok(a)) => a.release(),
            other => panic!("expected a grant, got {other:?}"),
        }
    }
    for f in queued.iter_mut().skip(1000) {
        match poll_once(f) {
            Poll::Ready(Ok(a)) => a.release(),
            other => panic!("expected a grant, got {other:?}"),
        }
    }
    drop(queued);
    for id in (0..3000u64).step_by(7) {
        sched
            .try_enqueue(admit_id(&ledger, id, 0))
            .unwrap_or_else(|e| panic!("id {id} is free again: {}", e.error))
            .release();
    }
    assert!(ledger.usage().is_zero(), "{:?}", ledger.usage());
}

/// Requests cancelled or withdrawn while no cell is free leave tombstones that no grant meets
/// (no tenant gets a turn, no pass runs): the engine must still find room for every request
/// while fewer than `queue_capacity` are live. 1,000 rounds of 8 tenants queuing a request each
/// behind one held cell, half cancelled by handle, half dropped: far more tombstones than entry
/// slots (the token engine's lost compaction once refused `queue-full` here below capacity).
fn f45_cancels_while_no_cell_is_free_never_refuse_below_capacity<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 16)], 8);
    let held = h.occupy(1);
    for round in 0..1000u32 {
        let mut queued = Vec::new();
        for tenant in 0..8 {
            let mut f = Box::pin(h.sched.enqueue(h.admit(tenant)));
            match poll_once(&mut f) {
                Poll::Pending => queued.push(f),
                Poll::Ready(r) => panic!(
                    "round {round}, tenant {tenant}: refused with {} of 16 queued: {:?}",
                    queued.len(),
                    r.err()
                ),
            }
        }
        assert_eq!(h.sched.queue_depth(ClassId(0)), Ok(8));
        for (i, f) in queued.into_iter().enumerate() {
            if i % 2 == 0 {
                let handle = f.handle().expect("queued");
                h.sched.cancel(handle).expect("still queued");
            }
            drop(f);
        }
        assert_eq!(h.sched.queue_depth(ClassId(0)), Ok(0));
    }
    held.into_iter().for_each(Assignment::release);
    let mut last = Box::pin(h.sched.enqueue(h.admit(0)));
    match poll_once(&mut last) {
        Poll::Ready(r) => r.expect("granted on the free cell").release(),
        Poll::Pending => panic!("a free cell and nothing live queued: granted at once"),
    }
    assert_eq!(h.sched.available_cells(ClassId(0)), Ok(1));
    assert_eq!(h.sched.queue_depth(ClassId(0)), Ok(0));
}
