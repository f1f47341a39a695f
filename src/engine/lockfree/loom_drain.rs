//! loom models of a graceful drain (SPEC F47): a drainer waiting in `poll_drained` while other
//! threads make the last changes it waits for. A drainer whose wake-up is lost parks forever,
//! which loom reports as a deadlock, so a lost wake-up fails the model.

use super::LockFreeClass;
use crate::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
use crate::clock::Clock;
use crate::engine::{ClassEngine, ClassSetup, Enqueued, Ticket};
use crate::pool::{FixedCellPool, Lease};
use crate::sync::model::model;
use crate::sync::{Arc, Ordering};
use crate::{ClassId, RequestId, TenantId};
use core::task::Poll;

/// A clock that never moves (the models are about interleavings).
struct Frozen;

impl Clock for Frozen {
    fn now(&self) -> u64 {
        0
    }
}

fn class(cells: u32) -> Arc<LockFreeClass<u32>> {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("a")], 2)).unwrap();
    let engine = LockFreeClass::new(ClassSetup {
        class: ClassId(0),
        ids: std::sync::Arc::new(crate::raw::idset::IdSet::new(8).unwrap()),
        ledger,
        cells,
        queue_capacity: 2,
        max_tenants: 2,
        starvation_after: u64::MAX,
        pool: crate::pool::ClassPool::Fixed(FixedCellPool::new(ClassId(0), cells).unwrap()),
        clock: std::sync::Arc::new(Frozen),
    })
    .unwrap();
    Arc::new(engine)
}

/// Enqueues a future-mode request of tenant 0 (its queue slot is the engine's to refund, the
/// rest of the permit goes back at once).
fn enqueue(engine: &LockFreeClass<u32>, id: u64) -> Enqueued {
    let permit = engine
        .ledger
        .admit(AdmissionRequest::new(RequestId(id), TenantId(0)))
        .unwrap();
    let ticket = Ticket::from_permit(&permit);
    drop(permit.detach_queue_slot());
    match engine.enqueue(ticket, None, None) {
        Ok(e) => e,
        Err((e, _)) => panic!("setup enqueue refused: {e:?}"),
    }
}

/// Takes the free cell (setup only).
fn hold(engine: &LockFreeClass<u32>, id: u64) -> Lease {
    match enqueue(engine, id) {
        Enqueued::Granted(lease) => {
            engine.ledger.refund_queue_slot(TenantId(0), ClassId(0));
            lease
        }
        Enqueued::Queued(_) => panic!("setup expected a fast grant"),
    }
}

/// Waits for the class to drain the way `Scheduler::drain` does (parks until woken).
fn drain(engine: &LockFreeClass<u32>) {
    let mut slot = None;
    loom::future::block_on(core::future::poll_fn(|cx| {
        engine.poll_drained(cx, &mut slot)
    }));
    if let Some(i) = slot {
        engine.forget_waiter(i);
    }
}

/// After the drain resolved: nothing queued, every cell back, every queue slot refunded.
fn assert_drained(engine: &LockFreeClass<u32>, cells: u32) {
    // Acquire: the drainer saw these changes through `poll_drained`'s Acquire loads.
    let cur = engine.ctl.load(Ordering::Acquire);
    assert_eq!((cur.queued(), cur.free()), (0, u64::from(cells)), "{cur:?}");
    assert!(
        engine.ledger.usage().is_zero(),
        "a queue slot left reserved"
    );
}

/// The last release of a closed class wakes the drainer.
#[test]
fn f47_drain_racing_the_last_release_is_never_lost() {
    model(|| {
        let engine = class(1);
        let held = hold(&engine, 1);
        engine.close();
        let releaser = {
            let engine = engine.clone();
            loom::thread::spawn(move || engine.release(held))
        };
        drain(&engine);
        assert_drained(&engine, 1);
        releaser.join().unwrap();
    });
}

/// A queued request cancelled while its class drains, racing the release of the cell it waited
/// for: whichever comes last wakes the drainer, and the drain never resolves before both.
#[test]
fn f47_drain_racing_a_cancel_and_a_release_is_never_lost() {
    model(|| {
        let engine = class(1);
        let held = hold(&engine, 1);
        let Enqueued::Queued(key) = enqueue(&engine, 2) else {
            panic!("setup expected to queue");
        };
        engine.close();
        let canceller = {
            let engine = engine.clone();
            loom::thread::spawn(move || {
                // Cancelled while queued, or granted first (then its cell goes straight back).
                if engine.cancel(key).is_err() {
                    let lease = engine.withdraw(key, crate::engine::Ended::Cancelled);
                    engine.release(lease.expect("granted: the lease comes back"));
                } else {
                    drop(engine.withdraw(key, crate::engine::Ended::Cancelled));
                }
            })
        };
        let releaser = {
            let engine = engine.clone();
            loom::thread::spawn(move || engine.release(held))
        };
        drain(&engine);
        assert_drained(&engine, 1);
        canceller.join().unwrap();
        releaser.join().unwrap();
        // Poll readiness once more: a drained class stays drained.
        let mut slot = None;
        let polled = engine.poll_drained(
            &mut core::task::Context::from_waker(core::task::Waker::noop()),
            &mut slot,
        );
        assert_eq!(polled, Poll::Ready(()));
    });
}
