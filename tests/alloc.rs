//! Allocation counts of steady-state operations (SPEC F02, Q03; PERF P10).
//!
//! The thread-local counting global allocator of `fairway-bench-support`: each test counts only
//! its own thread's allocations, so the test harness's threads cannot disturb the numbers.

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
use fairway::oracle::{Mechanism, Ring, SchedulerOn};
use fairway::{AdmittedRequest, CancellationToken, ClassId, RequestId, Scheduler, TenantId};
use fairway_bench_support::alloc::{count, Counting};
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Operations per test: past every power-of-two growth step a hidden buffer would take within
/// 10^5 operations. 10^6 in release builds; 2×10^5 in debug builds, where 10^6 took 10 s a test.
const OPS: u64 = if cfg!(miri) {
    100
} else if cfg!(debug_assertions) {
    200_000
} else {
    1_000_000
};
const TENANTS: u32 = 16;

struct Fixture<M: Mechanism> {
    ledger: Ledger,
    sched: SchedulerOn<u64, M>,
    /// One token per tenant, reused: request ids are reused once their request has ended.
    tokens: Vec<CancellationToken>,
}

impl<M: Mechanism> Fixture<M> {
    fn new(cells: u32) -> Self {
        let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], TENANTS)).unwrap();
        let sched = Scheduler::builder(ledger.clone())
            .payload::<u64>()
            .class(cells, 4096)
            .build_with::<M>()
            .unwrap();
        let tokens = (0..TENANTS)
            .map(|t| CancellationToken::new(RequestId(u64::from(t))))
            .collect();
        Self {
            ledger,
            sched,
            tokens,
        }
    }

    fn request(&self, i: u64) -> AdmittedRequest {
        let t = (i % u64::from(TENANTS)) as u32;
        let id = RequestId(u64::from(t));
        let permit = self
            .ledger
            .admit(
                AdmissionRequest::new(id, TenantId(t))
                    .class(ClassId(0))
                    .priority((i % 4) as u8),
            )
            .unwrap();
        AdmittedRequest::new(permit, self.tokens[t as usize].clone())
    }
}

fn q03_fast_path_cycle_does_not_allocate_on<M: Mechanism>() {
    let f = Fixture::<M>::new(1);
    // Warm-up: lazily initialised statics (the clock, thread-locals) may allocate once.
    f.sched.try_enqueue(f.request(0)).unwrap().release();
    let n = count(|| {
        for i in 0..OPS {
            f.sched.try_enqueue(f.request(i)).unwrap().release();
        }
    });
    assert_eq!(
        n, 0,
        "{n} allocations in {OPS} enqueue/grant/release cycles"
    );
}

fn q03_queued_grant_and_cancel_cycles_do_not_allocate_on<M: Mechanism>() {
    let f = Fixture::<M>::new(1);
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    // Request ids are per tenant here (id = tenant, so the per-tenant tokens can be reused), and
    // two live requests never share one (SPEC F34): the held cell's request is tenant 15's, the
    // cycles use tenants 2i % 16 and 2i + 1 % 16.
    let mut held = f.sched.try_enqueue(f.request(15)).unwrap();
    let mut cycle = |i: u64, held: &mut Option<fairway::Assignment>| {
        // Queue two requests behind the held cell; cancel one by handle, drop... then release
        // the cell and accept the other.
        let mut granted = pin!(f.sched.enqueue(f.request(i)));
        assert!(granted.as_mut().poll(&mut cx).is_pending());
        let mut cancelled = pin!(f.sched.enqueue(f.request(i + 1)));
        assert!(cancelled.as_mut().poll(&mut cx).is_pending());
        f.sched.cancel(cancelled.handle().unwrap()).unwrap();
        assert!(matches!(
            cancelled.as_mut().poll(&mut cx),
            Poll::Ready(Err(_))
        ));
        held.take().unwrap().release();
        match granted.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(a)) => *held = Some(a),
            other => panic!("{other:?}"),
        }
    };
    let mut slot = Some(held);
    cycle(0, &mut slot);
    let n = count(|| {
        for i in 0..OPS / 2 {
            cycle(i * 2 + 2, &mut slot);
        }
    });
    held = slot.take().unwrap();
    held.release();
    assert_eq!(
        n, 0,
        "{n} allocations in {OPS} queued enqueue/cancel/grant/release operations"
    );
    assert!(f.ledger.usage().is_zero());
}

fn q03_pull_mode_cycle_does_not_allocate_on<M: Mechanism>() {
    let f = Fixture::<M>::new(2);
    let cycle = |i: u64| {
        f.sched.submit(f.request(i), i).unwrap();
        let job = f.sched.try_next(ClassId(0)).unwrap().unwrap();
        assert_eq!(job.payload, i);
        job.assignment.release();
    };
    cycle(0);
    let n = count(|| (0..OPS).for_each(cycle));
    assert_eq!(n, 0, "{n} allocations in {OPS} submit/next/release cycles");
}

#[test]
fn q03_turn_ring_does_not_allocate() {
    use fairway::internals::Scq;
    let ring = Scq::new(64);
    let n = count(|| {
        for i in 0..OPS {
            let index = (i % 64) as u32;
            ring.push(index);
            assert_eq!(ring.pop(), Some(index));
        }
    });
    assert_eq!(n, 0, "{n} allocations in {OPS} turn-ring cycles");
}

fn f02_after_build_no_operation_allocates_on<M: Mechanism>() {
    // Building allocates; afterwards enqueue (fast and queued), cancel by handle and by drop,
    // release, quarantine and shutdown do not.
    let f = Fixture::<M>::new(2);
    let waker = Waker::noop();
    let mut cx = Context::from_waker(waker);
    let n = count(|| {
        let a = f.sched.try_enqueue(f.request(1)).unwrap();
        let b = f.sched.try_enqueue(f.request(2)).unwrap();
        let mut queued = pin!(f.sched.enqueue(f.request(3)));
        assert!(queued.as_mut().poll(&mut cx).is_pending());
        // The only allocation below: a control. `black_box` keeps the optimiser from eliding
        // the allocation (it did, in one build of this tree).
        let mut dropped = std::hint::black_box(Box::new(0u8));
        *dropped += 1;
        std::hint::black_box(&dropped);
        let mut cancelled = pin!(f.sched.enqueue(f.request(4)));
        assert!(cancelled.as_mut().poll(&mut cx).is_pending());
        f.sched.cancel(cancelled.handle().unwrap()).unwrap();
        a.quarantine("test");
        b.release();
        f.sched.shutdown();
        assert!(matches!(queued.as_mut().poll(&mut cx), Poll::Ready(Err(_))));
    });
    assert_eq!(n, 1, "only the test's own control allocation");
    assert!(f.ledger.usage().is_zero());
}

/// The whole host path of a token-less request — admit, enqueue (granted at once, or queued
/// behind a held cell and granted by a release), release, refund — allocates nothing, with a
/// fresh request id every time.
fn q03_token_less_request_path_does_not_allocate_on<M: Mechanism>() {
    let f = Fixture::<M>::new(1);
    let admit = |id: u64| {
        let t = (id % u64::from(TENANTS)) as u32;
        let permit = f
            .ledger
            .admit(AdmissionRequest::new(RequestId(id), TenantId(t)).class(ClassId(0)))
            .unwrap();
        AdmittedRequest::without_token(permit)
    };
    let mut cx = Context::from_waker(Waker::noop());
    let mut cycle = |id: u64| {
        // Fast path: nothing queued, a cell free.
        let held = f.sched.enqueue_blocking(admit(id)).unwrap();
        // Queued path: behind the held cell, granted when it is released.
        let mut queued = pin!(f.sched.enqueue(admit(id + 1)));
        assert!(queued.as_mut().poll(&mut cx).is_pending());
        held.release();
        match queued.as_mut().poll(&mut cx) {
            Poll::Ready(Ok(a)) => a.release(),
            other => panic!("{other:?}"),
        }
    };
    cycle(0);
    let n = count(|| {
        for i in 1..=OPS / 2 {
            cycle(i * 2);
        }
    });
    assert_eq!(
        n, 0,
        "{n} allocations in {OPS} token-less admit/enqueue/grant/release/refund cycles"
    );
    assert!(f.ledger.usage().is_zero());
}

#[test]
fn q03_fast_path_cycle_does_not_allocate() {
    q03_fast_path_cycle_does_not_allocate_on::<Ring>();
}

#[test]
fn q03_queued_grant_and_cancel_cycles_do_not_allocate() {
    q03_queued_grant_and_cancel_cycles_do_not_allocate_on::<Ring>();
}

#[test]
fn q03_pull_mode_cycle_does_not_allocate() {
    q03_pull_mode_cycle_does_not_allocate_on::<Ring>();
}

#[test]
fn q03_token_less_request_path_does_not_allocate() {
    q03_token_less_request_path_does_not_allocate_on::<Ring>();
}

#[test]
fn f02_after_build_no_operation_allocates() {
    f02_after_build_no_operation_allocates_on::<Ring>();
}
