//! Rule tests that seeded bugs showed were missing (SPEC F46, F47), each run on both engines.

#[macro_use]
mod common;

use common::*;
use fairway::oracle::Mechanism;
use fairway::{ClassId, Code, Reason};
use std::task::Poll;
use std::time::Duration;

both_engines!(
    f46_fast_path_grant_expired_before_first_poll_fails_at_acceptance,
    f47_shutdown_fails_queued_work_of_every_class,
);

/// A request granted at once on a free cell (nothing queued) whose deadline passes before its
/// owner's first poll fails `deadline-exceeded` at acceptance: the cell goes back to the pool
/// and the quota to the ledger.
fn f46_fast_path_grant_expired_before_first_poll_fails_at_acceptance<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8)], 2);
    let mut f = Box::pin(
        h.sched
            .enqueue(h.admit_with(1, |r| r.deadline(Duration::from_millis(10)))),
    );
    // The request holds the only cell already, unaccepted: nothing else can take it.
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(
        (s.cells_available, s.cells_leased, s.queue_depth),
        (0, 1, 0),
        "granted at once on the free cell"
    );
    h.advance(Duration::from_millis(20));
    match poll_once(&mut f) {
        Poll::Ready(Err(e)) => {
            assert_eq!(e.code(), Code::DeadlineExceeded);
            assert_eq!(e.reason(), Reason::DeadlineExceeded);
        }
        Poll::Ready(Ok(a)) => panic!(
            "accepted {:?} 20 ms after its 10 ms deadline",
            a.request_id()
        ),
        Poll::Pending => panic!("a granted request is pending"),
    }
    let s = h.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(
        (s.cells_available, s.cells_leased),
        (1, 0),
        "the cell is back"
    );
    assert!(h.ledger.usage().is_zero(), "{:?}", h.ledger.usage());
    drop(f);
    assert!(
        h.ledger.usage().is_zero(),
        "refunded once: {:?}",
        h.ledger.usage()
    );
    // The cell serves the next request.
    let a = h
        .sched
        .try_enqueue(h.admit(1))
        .expect("the returned cell is free");
    a.release();
    assert!(h.ledger.usage().is_zero());
}

/// `shutdown()` fails the queued work of every class, waiting and pull-mode alike, not only the
/// first; held cells stay leased until their owners end them.
fn f47_shutdown_fails_queued_work_of_every_class<M: Mechanism>() {
    let h = Harness::<M>::new(&[(1, 8), (1, 8)], 4);
    let in_class = |class: u16, tenant: u32| h.admit_with(tenant, |r| r.class(ClassId(class)));
    let held: Vec<_> = (0..2)
        .map(|c| h.sched.try_enqueue(in_class(c, 0)).expect("a free cell"))
        .collect();
    let mut waiting: Vec<_> = (0..2)
        .flat_map(|c| [queue(&h, in_class(c, 1)), queue(&h, in_class(c, 2))])
        .collect();
    for c in 0..2 {
        h.sched.submit(in_class(c, 3), u64::from(c)).unwrap();
    }
    for c in 0..2 {
        assert_eq!(h.sched.snapshot(ClassId(c)).unwrap().queue_depth, 3);
    }
    h.sched.shutdown();
    for (f, id) in &mut waiting {
        match poll_once(f) {
            Poll::Ready(Err(e)) => assert_eq!(
                (e.code(), e.reason()),
                (Code::Unavailable, Reason::Shutdown),
                "{id:?}"
            ),
            other => panic!("{id:?} after shutdown: {other:?}"),
        }
    }
    for c in 0..2 {
        let s = h.sched.snapshot(ClassId(c)).unwrap();
        assert_eq!(s.queue_depth, 0, "class {c} still has queued work");
        assert_eq!(
            s.rejections, 3,
            "class {c}: two waiting and one pull job failed"
        );
        assert_eq!(s.cells_leased, 1, "class {c}: the held cell stays leased");
    }
    for a in held {
        a.release();
    }
    for c in 0..2 {
        assert!(
            h.sched.try_next(ClassId(c)).unwrap().is_none(),
            "class {c} handed out a job"
        );
    }
    drop(waiting);
    assert!(h.ledger.usage().is_zero(), "{:?}", h.ledger.usage());
}
