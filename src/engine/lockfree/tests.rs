//! Unit tests of the lock-free engine's internals.

use super::*;
use crate::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
use crate::pool::FixedCellPool;
use crate::{ManualClock, RequestId, TenantId};
use core::task::Waker;

fn class(cells: u32) -> (LockFreeClass<u32>, Ledger) {
    let clock = Arc::new(ManualClock::new());
    let ledger = Ledger::with_clock(
        LedgerConfig::new(vec![ClassSpec::new("c")], 2),
        clock.clone(),
    )
    .unwrap();
    let engine = LockFreeClass::new(ClassSetup {
        class: ClassId(0),
        ids: Arc::new(crate::raw::idset::IdSet::new(8).unwrap()),
        ledger: ledger.clone(),
        cells,
        queue_capacity: 4,
        max_tenants: 2,
        starvation_after: u64::MAX,
        pool: crate::pool::ClassPool::Fixed(FixedCellPool::new(ClassId(0), cells).unwrap()),
        clock,
    })
    .unwrap();
    (engine, ledger)
}

/// A future-mode ticket of tenant 0, admitted by `ledger`; its queue slot is the engine's to
/// refund, the rest of the permit goes back at once.
fn ticket(ledger: &Ledger, id: u64) -> Ticket {
    let permit = ledger
        .admit(AdmissionRequest::new(RequestId(id), TenantId(0)))
        .unwrap();
    let ticket = Ticket::from_permit(&permit);
    drop(permit.detach_queue_slot());
    ticket
}

#[test]
fn f31_cancel_frees_the_slot_at_once_when_the_token_is_free() {
    let (engine, ledger) = class(1);
    let held = match engine.enqueue(ticket(&ledger, 1), None, None) {
        Ok(Enqueued::Granted(lease)) => lease,
        other => panic!("expected a fast grant, got {:?}", other.map_err(|e| e.0)),
    };
    let queued = |id| match engine.enqueue(ticket(&ledger, id), None, None) {
        Ok(Enqueued::Queued(key)) => key,
        other => panic!("expected to queue, got {:?}", other.map_err(|e| e.0)),
    };
    let (a, b) = (queued(2), queued(3));
    let free_before = engine.arena.available();
    // No pass has run (no free cell): both entries are still in the inbox. The cancel drains
    // it under the token and takes A straight out of the policy.
    engine.cancel(a).unwrap();
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(
        engine.poll(a, &mut cx),
        Polled::Ended(Ended::Cancelled)
    ));
    // The owner's poll dropped the last reference: A's slot is free again, no tombstone left
    // for a pass or a compaction.
    assert_eq!(engine.arena.available(), free_before + 1);
    engine.policy.with(|p| {
        // SAFETY: no other thread exists; nobody holds the token.
        let policy = unsafe { &*p };
        assert_eq!(policy.len(), 1, "only B is queued in the policy");
    });
    // B is granted when the cell comes back.
    engine.release(held);
    match engine.poll(b, &mut cx) {
        Polled::Granted(lease, _) => engine.release(lease),
        other => panic!("expected B's grant, got {other:?}"),
    }
    assert_eq!(engine.arena.available(), engine.arena.capacity());
    // The facade returns a fast grant's queue slot itself; the engine returned the queued ones.
    engine.ledger.refund_queue_slot(TenantId(0), ClassId(0));
    assert!(ledger.usage().is_zero(), "{:?}", ledger.usage());
}

#[test]
fn f23_grant_refused_by_the_ready_ring_waits_in_order_and_is_delivered() {
    let (engine, ledger) = class(2);
    // Stand-ins for grants whose slots a stalled executor is still popping: the ring is full.
    while engine.ready.push(u64::MAX).is_ok() {}
    for payload in [7, 8] {
        let id = RequestId(payload);
        let permit = ledger
            .admit(AdmissionRequest::new(id, TenantId(0)))
            .unwrap();
        let ticket = Ticket::from_permit(&permit);
        assert!(matches!(
            engine.enqueue(ticket, Some((permit, payload as u32)), None),
            Ok(Enqueued::Queued(_))
        ));
    }
    // Both were granted (two free cells) but went to the overflow, in grant order.
    assert_eq!(engine.overflowed.load(Ordering::Relaxed), 2);
    // The stalled pops finish.
    while engine.ready.pop().is_some() {}
    // An executor finds the ring empty, forces a pass that moves the grants in, and gets them
    // in grant order.
    let first = engine
        .try_next()
        .expect("the overflowed grant is delivered");
    let second = engine.try_next().expect("and the next one");
    assert_eq!((first.payload, second.payload), (7, 8));
    assert_eq!(engine.overflowed.load(Ordering::Relaxed), 0);
    engine.release(first.lease);
    engine.release(second.lease);
    drop((first.permit, second.permit));
    assert!(ledger.usage().is_zero());
}
