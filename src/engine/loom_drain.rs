//! loom models of the engine's two wait/wake handshakes through the shared waiter slots
//! (`waiters.rs`): a drainer waiting in `poll_drained` while other threads make the last changes
//! it waits for (SPEC F47), and an executor waiting in `poll_next` while a producer's request is
//! granted to it (F23). A waiter whose wake-up is lost parks forever, which loom reports as a
//! deadlock, so a lost wake-up fails the model.

use super::class::RingClass;
use super::loom_engine::{hold, queue, rig_with};
use crate::admission::AdmissionRequest;
use crate::engine::{ClassEngine, Enqueued, Pulled, Ticket};
use crate::ids::{RequestId, TenantId};
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;
use core::task::Poll;

/// A class of `cells` cells on the scheduler's own pool (the engine's other models use a
/// host's).
fn class(cells: u32) -> Arc<RingClass<u32>> {
    rig_with(cells, true)
}

/// Waits for the class to drain the way `Scheduler::drain` does (parks until woken).
fn drain(engine: &RingClass<u32>) {
    let mut slot = None;
    loom::future::block_on(core::future::poll_fn(|cx| {
        engine.poll_drained(cx, &mut slot)
    }));
    if let Some(i) = slot {
        engine.forget_waiter(i);
    }
}

/// After the drain resolved: nothing queued, every cell back, every queue slot refunded.
fn assert_drained(engine: &RingClass<u32>, cells: u32) {
    assert_eq!(
        (engine.queue_depth(), engine.available_cells()),
        (0, cells),
        "(queued, free) after the drain"
    );
    assert!(
        engine.ledger().usage().is_zero(),
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
        let key = queue(&engine, 2, 0, u64::MAX);
        engine.close();
        let canceller = {
            let engine = engine.clone();
            loom::thread::spawn(move || {
                // Cancelled while queued, or granted first: then the lease comes back to the
                // owner if the grant is complete, or the granter returns it itself once it sees
                // the owner gone (a grant still under way).
                if engine.cancel(key).is_err() {
                    if let Some(lease) = engine.withdraw(key, crate::engine::Ended::Cancelled) {
                        engine.release(lease);
                    }
                } else {
                    assert!(
                        engine
                            .withdraw(key, crate::engine::Ended::Cancelled)
                            .is_none(),
                        "a cancelled request holds no lease"
                    );
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

/// Pull mode: a producer hands a payload and its permit to the class while an executor asks for
/// work. The executor gets the payload exactly once, with a lease; the permit is refunded exactly
/// once (SPEC F51); a waiting executor is always woken (F23).
#[test]
fn f23_pull_enqueue_racing_executor_delivers_once() {
    let outcomes: &'static Outcomes = Box::leak(Box::new(Outcomes::new()));
    model(move || {
        let engine = class(1);
        let permit = engine
            .ledger()
            .admit(AdmissionRequest::new(RequestId(1), TenantId(1)))
            .unwrap();
        let producer = {
            let engine = engine.clone();
            loom::thread::spawn(move || {
                let ticket = Ticket::from_permit(&permit);
                match engine.enqueue(ticket, Some((permit, 7)), None) {
                    Ok(Enqueued::Queued(_)) => {}
                    Ok(Enqueued::Granted(_)) => panic!("pull mode took the fast path"),
                    Err((e, _)) => panic!("enqueue refused: {e:?}"),
                }
            })
        };
        let executor = {
            let engine = engine.clone();
            loom::thread::spawn(move || {
                let (pulled, outcome) = match engine.try_next() {
                    Some(p) => (p, "taken-by-try-next"),
                    None => {
                        let mut slot = None;
                        let mut polls = 0;
                        let p = loom::future::block_on(core::future::poll_fn(|cx| {
                            polls += 1;
                            engine.poll_next(cx, &mut slot)
                        }));
                        if let Some(i) = slot {
                            engine.forget_waiter(i);
                        }
                        let p: Pulled<u32> = p.expect("class is live");
                        (
                            p,
                            if polls == 1 {
                                "taken-on-first-poll"
                            } else {
                                "taken-after-wake"
                            },
                        )
                    }
                };
                assert_eq!(pulled.payload, 7);
                assert!(engine.try_next().is_none(), "delivered twice");
                engine.release(pulled.lease);
                drop(pulled.permit);
                outcome
            })
        };
        producer.join().unwrap();
        let outcome = executor.join().unwrap();
        assert!(
            engine.ledger().usage().is_zero(),
            "permit not refunded: {:?}",
            engine.ledger().usage()
        );
        assert_eq!((engine.queue_depth(), engine.available_cells()), (0, 1));
        outcomes.hit(outcome);
    });
    outcomes.assert_exactly(&[
        "taken-after-wake",
        "taken-by-try-next",
        "taken-on-first-poll",
    ]);
}
