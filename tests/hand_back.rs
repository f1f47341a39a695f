//! A turn handed back is never lost (SPEC F25): whenever a request is queued and a cell of its
//! class is free, some waiter is armed to take it, however many requests wait. The engines keep
//! a fixed number of waiter slots per class (four per cell, at least 64); these tests queue more
//! requests than that, so the one that matters holds no slot.
//!
//! The recipe: every cell is held; `n` tenants (more than the class has waiter slots) queue one
//! request each and are polled, so they hold every slot; one more request is polled (it finds
//! no slot); the `n` are dropped, leaving tombstones ahead of it in the rotation; one cell is
//! released. Its pass meets 64 tombstones and hands the rest back; the survivor must be woken
//! (and, polled, granted) without anyone else calling in.

#[macro_use]
mod common;

use common::{queue, CountingWaker, Harness};
use fairway::oracle::Mechanism;
use fairway::ClassId;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

both_engines!(
    f25_hand_back_past_the_waiter_slots_1_cell_70_tenants,
    f25_hand_back_past_the_waiter_slots_1_cell_1000_tenants,
    f25_hand_back_past_the_waiter_slots_1_cell_10000_tenants,
    f25_hand_back_past_the_waiter_slots_33_cells_300_tenants,
    f25_hand_back_past_the_waiter_slots_1000_cells_5000_tenants,
    f25_blocking_enqueue_past_the_waiter_slots_is_granted,
);

/// Holds every one of `cells` cells, queues `tenants` requests (one per tenant, each polled),
/// then the survivor, drops the `tenants`, releases one cell, and follows the survivor's wakes
/// until it is granted. Fails naming the state if it is ever left pending with no wake.
fn stranding_recipe<M: Mechanism>(cells: u32, tenants: u32) {
    let cap = tenants + 1;
    let h = Harness::<M>::new(&[(cells, cap)], tenants + 2);
    let mut held = h.occupy(cells as usize);
    let mut dropped: Vec<_> = (0..tenants).map(|t| queue(&h, h.admit(t + 1))).collect();

    let survivor_waker = Arc::new(CountingWaker::default());
    let waker = Waker::from(survivor_waker.clone());
    let mut survivor = Box::pin(h.sched.enqueue(h.admit(tenants + 1)));
    assert!(
        Pin::new(&mut survivor)
            .poll(&mut Context::from_waker(&waker))
            .is_pending(),
        "the survivor should have queued behind {cells} held cells"
    );
    dropped.clear();
    held.pop().expect("a held cell").release();

    // Follow the survivor: it is polled only when woken, as an executor would poll it. Each
    // poll may run one more pass of tombstones (64 candidates), so a large recipe takes
    // several rounds.
    let mut seen = 0;
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let wakes = survivor_waker.0.load(Ordering::SeqCst);
        if wakes == seen {
            let snap = h.sched.snapshot(ClassId(0)).unwrap();
            panic!(
                "stranded: the survivor is pending with no wake armed after {wakes} wakes \
                 (cells available {}, queue depth {}, {tenants} dropped tenants, {cells} cells)",
                snap.cells_available, snap.queue_depth
            );
        }
        seen = wakes;
        match Pin::new(&mut survivor).poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(Ok(a)) => {
                a.release();
                break;
            }
            Poll::Ready(Err(e)) => panic!("the survivor failed: {e}"),
            Poll::Pending => {}
        }
        assert!(
            Instant::now() < deadline,
            "the survivor was woken {seen} times in 30 s and never granted"
        );
    }
    held.into_iter().for_each(|a| a.release());
    let snap = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(snap.queue_depth, 0, "nothing left queued");
    assert_eq!(snap.cells_available, cells, "every cell back");
}

fn f25_hand_back_past_the_waiter_slots_1_cell_70_tenants<M: Mechanism>() {
    stranding_recipe::<M>(1, 70);
}

fn f25_hand_back_past_the_waiter_slots_1_cell_1000_tenants<M: Mechanism>() {
    stranding_recipe::<M>(1, 1_000);
}

fn f25_hand_back_past_the_waiter_slots_1_cell_10000_tenants<M: Mechanism>() {
    stranding_recipe::<M>(1, 10_000);
}

/// 33 cells: 192 waiter slots (four per cell, whole words); 300 queued tenants exceed them.
fn f25_hand_back_past_the_waiter_slots_33_cells_300_tenants<M: Mechanism>() {
    stranding_recipe::<M>(33, 300);
}

/// 1,000 cells: 4,032 waiter slots; 5,000 queued tenants exceed them.
fn f25_hand_back_past_the_waiter_slots_1000_cells_5000_tenants<M: Mechanism>() {
    stranding_recipe::<M>(1_000, 5_000);
}

/// The form of the recipe: the survivor waits in `enqueue_blocking` on a thread of its
/// own, and must return within seconds of the release.
fn f25_blocking_enqueue_past_the_waiter_slots_is_granted<M: Mechanism>() {
    let tenants = 70;
    let h = Arc::new(Harness::<M>::new(&[(1, tenants + 1)], tenants + 2));
    let mut held = h.occupy(1);
    let mut dropped: Vec<_> = (0..tenants).map(|t| queue(&h, h.admit(t + 1))).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    let h2 = h.clone();
    let survivor = std::thread::spawn(move || {
        let r = h2.sched.enqueue_blocking(h2.admit(tenants + 1));
        let _ = tx.send(r.is_ok());
    });
    // Wait until the survivor is queued (its blocking call polled once).
    let start = Instant::now();
    while h.sched.snapshot(ClassId(0)).unwrap().queue_depth < tenants + 1 {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the blocking survivor never queued"
        );
        std::thread::sleep(Duration::from_millis(1));
    }
    // Give its first poll time to end (it finds no waiter slot, then parks).
    std::thread::sleep(Duration::from_millis(50));
    dropped.clear();
    held.pop().unwrap().release();
    match rx.recv_timeout(Duration::from_secs(5)) {
        Ok(true) => {}
        Ok(false) => panic!("the blocking survivor failed"),
        Err(_) => {
            let snap = h.sched.snapshot(ClassId(0)).unwrap();
            panic!(
                "stranded: enqueue_blocking still parked 5 s after the release \
                 (cells available {}, queue depth {})",
                snap.cells_available, snap.queue_depth
            );
        }
    }
    survivor.join().unwrap();
}
