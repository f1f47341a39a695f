//! The waiting forms of pull-mode submit (SPEC F23): a producer that meets `queue-full` waits
//! for room, is told of it per tenant, and refunds everything when it gives up.

#[macro_use]
mod common;

use common::*;
use fairway::oracle::Mechanism;
use fairway::ClassId;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::task::Poll;
use std::time::Duration;

both_engines!(
    f23_a_waiting_submit_is_queued_once_a_grant_makes_room,
    f23_a_room_freed_by_a_tenant_goes_to_that_tenants_waiter_first,
    f23_a_room_no_waiter_of_its_tenant_wants_goes_round_robin,
    f23_a_dropped_waiting_submit_refunds_everything_and_passes_its_turn_on,
    f23_a_waiting_submit_ends_with_the_shutdown_error,
    f23_submit_blocking_waits_for_room_past_the_waiter_slots,
);

const LIMIT: Duration = Duration::from_secs(60);

/// One cell (held by the returned job) and a queue of `cap` slots, filled by `fill` submits of
/// the given tenants.
fn full<M: Mechanism>(cap: u32, fill: &[u32]) -> (Harness<M>, fairway::Job<u64>) {
    let h = Harness::<M>::new(&[(1, cap)], 8);
    h.sched.submit(h.admit(0), 0).unwrap();
    let running = h
        .sched
        .try_next(ClassId(0))
        .unwrap()
        .expect("the cell was free");
    for (i, &t) in fill.iter().enumerate() {
        h.sched.submit(h.admit(t), 100 + i as u64).unwrap();
    }
    let e = h.sched.submit(h.admit(7), 999).unwrap_err();
    assert_eq!(e.error.reason(), "queue-full", "set-up: the queue is full");
    (h, running)
}

fn f23_a_waiting_submit_is_queued_once_a_grant_makes_room<M: Mechanism>() {
    let (h, running) = full::<M>(2, &[1, 1]);
    let mut w = h.sched.submit_async(h.admit(1), 7);
    assert!(poll_once(&mut w).is_pending(), "the queue is full");
    assert!(poll_once(&mut w).is_pending(), "no room yet");
    running.assignment.release(); // grants the first queued request: one slot frees
    match poll_once(&mut w) {
        Poll::Ready(Ok(handle)) => assert_eq!(handle.class(), ClassId(0)),
        other => panic!("expected the waiting submit to be queued, got {other:?}"),
    }
    let mut got = Vec::new();
    while let Some(job) = h.sched.try_next(ClassId(0)).unwrap() {
        got.push(job.payload);
        job.assignment.release();
    }
    assert_eq!(got, [100, 101, 7]);
    assert!(h.ledger.usage().is_zero());
}

fn f23_a_room_freed_by_a_tenant_goes_to_that_tenants_waiter_first<M: Mechanism>() {
    // Queued: tenant 1's request, then tenant 2's. Tenant 2's producer waits first, then
    // tenant 1's. Tenant 1's request leaves (cancelled): its room goes to tenant 1's waiter,
    // although tenant 2's waited longer.
    let h = Harness::<M>::new(&[(1, 2)], 8);
    h.sched.submit(h.admit(0), 0).unwrap();
    let running = h.sched.try_next(ClassId(0)).unwrap().unwrap();
    let one = h.sched.submit(h.admit(1), 10).unwrap();
    let two = h.sched.submit(h.admit(2), 20).unwrap();
    let mut w2 = h.sched.submit_async(h.admit(2), 21);
    let mut w1 = h.sched.submit_async(h.admit(1), 11);
    assert!(poll_once(&mut w2).is_pending());
    assert!(poll_once(&mut w1).is_pending());
    h.sched.cancel(one).unwrap();
    assert!(
        poll_once(&mut w2).is_pending(),
        "tenant 2's waiter took the room tenant 1's request freed"
    );
    assert!(matches!(poll_once(&mut w1), Poll::Ready(Ok(_))));
    h.sched.cancel(two).unwrap();
    assert!(matches!(poll_once(&mut w2), Poll::Ready(Ok(_))));
    running.assignment.release();
    let mut got = Vec::new();
    while let Some(job) = h.sched.try_next(ClassId(0)).unwrap() {
        got.push(job.payload);
        job.assignment.release();
    }
    got.sort_unstable();
    assert_eq!(got, [11, 21]);
    assert!(h.ledger.usage().is_zero());
}

fn f23_a_room_no_waiter_of_its_tenant_wants_goes_round_robin<M: Mechanism>() {
    // Tenant 5 fills the queue; waiters of tenants 3, 1, 3, 2 (in that order). Each of tenant
    // 5's requests that leaves frees a room none of its own waiters wants: they go to the
    // waiting tenants in turn (1, 2, 3), and then to tenant 3's second waiter.
    let (h, running) = full::<M>(4, &[5, 5, 5, 5]);
    let tenants = [3u32, 1, 3, 2];
    let mut waiters: Vec<_> = tenants
        .iter()
        .map(|&t| h.sched.submit_async(h.admit(t), u64::from(t)))
        .collect();
    for w in &mut waiters {
        assert!(poll_once(w).is_pending());
    }
    let mut served = Vec::new();
    let mut running = Some(running);
    let mut jobs = Vec::new();
    for _ in 0..4 {
        // One of tenant 5's requests is granted (the cell comes back each time).
        if let Some(r) = running.take() {
            r.assignment.release();
        }
        let mut ready = Vec::new();
        for (i, w) in waiters.iter_mut().enumerate() {
            if served.contains(&i) {
                continue;
            }
            if let Poll::Ready(r) = poll_once(w) {
                r.expect("queued");
                ready.push(i);
            }
        }
        assert_eq!(ready.len(), 1, "one room, one waiter told: {ready:?}");
        served.push(ready[0]);
        let job = h.sched.try_next(ClassId(0)).unwrap().expect("tenant 5's");
        jobs.push(job);
        running = jobs.pop();
    }
    let order: Vec<u32> = served.iter().map(|&i| tenants[i]).collect();
    assert_eq!(order, [1, 2, 3, 3]);
    assert_eq!(served[2], 0, "tenant 3's oldest waiter goes first");
    drop(running);
    drop(waiters);
    h.sched.shutdown();
    drop(h.sched.take_undelivered());
}

fn f23_a_dropped_waiting_submit_refunds_everything_and_passes_its_turn_on<M: Mechanism>() {
    let (h, running) = full::<M>(1, &[1]);
    let mut first = h.sched.submit_async(h.admit(2), 1);
    let mut second = h.sched.submit_async(h.admit(2), 2);
    assert!(poll_once(&mut first).is_pending());
    assert!(poll_once(&mut second).is_pending());
    let usage = h.ledger.usage();
    // A room frees and tenant 2's oldest waiter is told; it is dropped before it acts.
    running.assignment.release();
    drop(first);
    assert!(
        h.ledger.usage() != usage,
        "the dropped waiter's permit was refunded"
    );
    match poll_once(&mut second) {
        Poll::Ready(Ok(_)) => {}
        other => panic!("the dropped waiter's notification was not passed on: {other:?}"),
    }
    let job = h.sched.try_next(ClassId(0)).unwrap().expect("tenant 1's");
    job.assignment.release();
    let job = h
        .sched
        .try_next(ClassId(0))
        .unwrap()
        .expect("the second waiter's");
    assert_eq!(job.payload, 2);
    job.assignment.release();
    // A waiter dropped without ever being told refunds too.
    let (h, running) = full::<M>(1, &[1]);
    let mut w = h.sched.submit_async(h.admit(3), 3);
    assert!(poll_once(&mut w).is_pending());
    drop(w);
    running.assignment.release();
    let job = h.sched.try_next(ClassId(0)).unwrap().unwrap();
    job.assignment.release();
    assert!(h.ledger.usage().is_zero(), "{:?}", h.ledger.usage());
}

fn f23_a_waiting_submit_ends_with_the_shutdown_error<M: Mechanism>() {
    let (h, running) = full::<M>(1, &[1]);
    let mut w = h.sched.submit_async(h.admit(2), 2);
    assert!(poll_once(&mut w).is_pending());
    h.sched.shutdown();
    match poll_once(&mut w) {
        Poll::Ready(Err(e)) => {
            assert_eq!(e.error.reason(), "shutdown");
            assert!(e.returned.is_some(), "the payload comes back");
        }
        other => panic!("expected the shutdown error, got {other:?}"),
    }
    running.assignment.release();
    drop(w);
    drop(h.sched.take_undelivered());
    assert!(h.ledger.usage().is_zero());
}

/// 200 producers on 8 threads wait in `submit_blocking` on a queue of 4 slots (more waiting
/// producers than the class has executor waiter slots), while one executor drains: every
/// request is queued once and delivered once, and the ledger closes at zero.
fn f23_submit_blocking_waits_for_room_past_the_waiter_slots<M: Mechanism>() {
    const PRODUCERS: usize = 8;
    const EACH: usize = 25;
    let h = Arc::new(Harness::<M>::new(&[(1, 4)], 8));
    let delivered = Arc::new(AtomicUsize::new(0));
    let h2 = h.clone();
    let counted = delivered.clone();
    within(LIMIT, "200 blocking submits on a 4-slot queue", move || {
        let producers: Vec<_> = (0..PRODUCERS)
            .map(|p| {
                let h = h2.clone();
                std::thread::spawn(move || {
                    for i in 0..EACH {
                        let req = h.admit(p as u32);
                        h.sched
                            .submit_blocking(req, (p * EACH + i) as u64)
                            .expect("queued once room frees");
                    }
                })
            })
            .collect();
        let mut seen = [false; PRODUCERS * EACH];
        while seen.iter().any(|s| !s) {
            let job = h2
                .sched
                .next_blocking(ClassId(0))
                .unwrap()
                .expect("the class is open");
            assert!(!seen[job.payload as usize], "delivered twice");
            seen[job.payload as usize] = true;
            counted.fetch_add(1, Ordering::Relaxed);
            job.assignment.release();
        }
        for p in producers {
            p.join().unwrap();
        }
    });
    assert_eq!(delivered.load(Ordering::Relaxed), PRODUCERS * EACH);
    assert!(h.ledger.usage().is_zero());
}
