//! Unit tests of the scheduler facade's own bookkeeping (the rule tests are in tests/).

use super::*;
use crate::admission::{AdmissionRequest, ClassSpec, LedgerConfig};
use crate::ids::{RequestId, TenantId};
use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};

fn setup() -> (Ledger, Scheduler) {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("c")], 4)).unwrap();
    let scheduler = Scheduler::builder(ledger.clone())
        .class_config(ClassConfig::new(1, 8).on_drop(DropPolicy::Release))
        .build()
        .unwrap();
    (ledger, scheduler)
}

fn request(ledger: &Ledger, id: u64) -> AdmittedRequest {
    let permit = ledger
        .admit(AdmissionRequest::new(RequestId(id), TenantId(0)))
        .unwrap();
    AdmittedRequest::without_token(permit)
}

/// Handles to the scheduler's shared state: its own, its futures' and its assignments'.
fn handles(s: &Scheduler) -> usize {
    Arc::strong_count(&s.shared)
}

/// X01: an owned enqueue future that resolves hands its own handle to the assignment (moved,
/// not cloned), both on the fast path and after waiting; the assignment then outlives the
/// future and the scheduler and still gives everything back.
#[test]
fn x01_owned_enqueue_moves_its_handle_into_the_assignment() {
    let (ledger, scheduler) = setup();
    let mut cx = Context::from_waker(Waker::noop());

    // Granted at once.
    let mut fut = Box::pin(scheduler.enqueue_owned(request(&ledger, 1)));
    assert_eq!(handles(&scheduler), 2);
    let Poll::Ready(Ok(first)) = fut.as_mut().poll(&mut cx) else {
        panic!("the cell is free")
    };
    // The completed future is still alive and holds no handle: the assignment has its.
    assert_eq!(handles(&scheduler), 2);
    drop(fut);
    assert_eq!(handles(&scheduler), 2);

    // Granted after waiting behind `first`.
    let mut fut = Box::pin(scheduler.enqueue_owned(request(&ledger, 2)));
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert_eq!(handles(&scheduler), 3);
    first.release();
    assert_eq!(handles(&scheduler), 2);
    let Poll::Ready(Ok(second)) = fut.as_mut().poll(&mut cx) else {
        panic!("the released cell goes to the waiting request")
    };
    assert_eq!(handles(&scheduler), 2);
    drop(fut);
    assert_eq!(handles(&scheduler), 2);

    // The assignment outlives its scheduler and still returns its cell and quota.
    drop(scheduler);
    second.release();
    assert!(ledger.usage().is_zero());
}

/// X01: a borrowed enqueue future's assignment takes a handle of its own; a future that ends
/// without one (refused, or dropped while queued) gives back whatever it held.
#[test]
fn x01_enqueue_futures_leave_no_handle_behind() {
    let (ledger, scheduler) = setup();
    let mut cx = Context::from_waker(Waker::noop());

    let held = {
        let mut fut = pin!(scheduler.enqueue(request(&ledger, 1)));
        let Poll::Ready(Ok(a)) = fut.as_mut().poll(&mut cx) else {
            panic!("the cell is free")
        };
        assert_eq!(handles(&scheduler), 2);
        a
    };
    assert_eq!(handles(&scheduler), 2);

    // Owned, dropped while queued.
    let mut fut = Box::pin(scheduler.enqueue_owned(request(&ledger, 2)));
    assert!(fut.as_mut().poll(&mut cx).is_pending());
    assert_eq!(handles(&scheduler), 3);
    drop(fut);
    assert_eq!(handles(&scheduler), 2);

    // Owned, refused (a duplicate id): resolves to an error and keeps its handle until dropped.
    let mut fut = Box::pin(scheduler.enqueue_owned(request(&ledger, 1)));
    assert!(matches!(fut.as_mut().poll(&mut cx), Poll::Ready(Err(_))));
    assert_eq!(handles(&scheduler), 3);
    drop(fut);
    assert_eq!(handles(&scheduler), 2);

    held.release();
    assert_eq!(handles(&scheduler), 1);
    assert!(ledger.usage().is_zero());
}

/// X01: an owned pull future that resolves to a job hands its handle to the job's assignment
/// and gives its waiter slot back; one that is dropped unresolved gives back both.
#[test]
fn x01_owned_next_moves_its_handle_into_the_job() {
    let (ledger, scheduler) = setup();
    let mut cx = Context::from_waker(Waker::noop());
    let class = ClassId(0);

    // Waiting first (a waiter slot claimed), then a job arrives.
    let mut next = Box::pin(scheduler.next_owned(class));
    assert!(next.as_mut().poll(&mut cx).is_pending());
    assert_eq!(handles(&scheduler), 2);
    let permit = ledger
        .admit(AdmissionRequest::new(RequestId(1), TenantId(0)))
        .unwrap();
    scheduler.submit(permit.into(), ()).unwrap();
    let Poll::Ready(Ok(Some(job))) = next.as_mut().poll(&mut cx) else {
        panic!("the submitted job is granted to the waiting executor")
    };
    assert_eq!(handles(&scheduler), 2);
    drop(next);
    assert_eq!(handles(&scheduler), 2);

    // An unresolved owned `Next` dropped: its handle goes, the next one still gets a job.
    let mut idle = Box::pin(scheduler.next_owned(class));
    assert!(idle.as_mut().poll(&mut cx).is_pending());
    assert_eq!(handles(&scheduler), 3);
    drop(idle);
    assert_eq!(handles(&scheduler), 2);

    // A borrowed `Next`'s job takes a handle of its own.
    let permit = ledger
        .admit(AdmissionRequest::new(RequestId(2), TenantId(0)))
        .unwrap();
    scheduler.submit(permit.into(), ()).unwrap();
    job.assignment.release();
    let second = {
        let mut next = pin!(scheduler.next(class));
        let Poll::Ready(Ok(Some(job))) = next.as_mut().poll(&mut cx) else {
            panic!("the cell is free again")
        };
        job
    };
    assert_eq!(handles(&scheduler), 2);
    drop(scheduler);
    second.assignment.release();
    assert!(ledger.usage().is_zero());
}

/// An owned `Next` that resolved to a job has handed its scheduler handle on: polled again, it
/// panics (as a completed `Enqueue` does) instead of reaching a scheduler it no longer holds.
#[test]
#[should_panic(expected = "`Next` polled after completion")]
fn x01_owned_next_polled_after_its_job_panics() {
    let (ledger, scheduler) = setup();
    let mut cx = Context::from_waker(Waker::noop());
    let permit = ledger
        .admit(AdmissionRequest::new(RequestId(1), TenantId(0)))
        .unwrap();
    scheduler.submit(permit.into(), ()).unwrap();
    let mut next = Box::pin(scheduler.next_owned(ClassId(0)));
    let Poll::Ready(Ok(Some(job))) = next.as_mut().poll(&mut cx) else {
        panic!("the submitted job is ready")
    };
    job.assignment.release();
    let _ = next.as_mut().poll(&mut cx);
}
