//! loom models of the lock-free graph's deduplication (SPEC D02): a submission of a live
//! identity joins its job by one CAS on the node's claim word, racing the job's end and the
//! release of its last claim by its ended job's last handle (which frees the slot, SPEC D31),
//! and racing another submission of the same identity.

use super::lockfree::{LockFreeGraph, Work};
use super::loom_support::{bounds, collect, spec};
use super::{Admission, GraphEngine, JobOutcome, NodeRef};
use crate::error::Reason;
use crate::sync::model::{model, Outcomes};
use crate::sync::Arc;

/// A running job of key 1 completes and its submitter reads the outcome and drops its handle
/// (the last claim unless a join came first) while another thread submits key 1 again. The
/// submission joins (and its handle then reads the same outcome and is dropped, freeing the
/// slot) or, once the job ended, is refused `duplicate-key`; never a second job, and the slot
/// is freed exactly once.
#[test]
fn loom_graph_join_races_the_end_and_the_last_take() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(2, 1, 2)));
        let mut w = Work::default();
        let Ok(Admission::Admitted(p)) =
            g.submit(&spec(1, &[]), crate::graph::rules::NO_DEADLINE, &mut w)
        else {
            panic!("not admitted");
        };
        let r = g.pop_ready(&mut w).expect("ready");
        assert_eq!(r.node, p);
        g.admitted(p, &mut w);
        assert!(g.start(p));

        let owner = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                g.complete(p, JobOutcome::Succeeded, &mut w).unwrap();
                collect(&*g, p).unwrap()
            })
        };
        let joiner = {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let r = g.submit(&spec(1, &[]), crate::graph::rules::NO_DEADLINE, &mut w);
                assert!(g.pop_ready(&mut w).is_none(), "a second job");
                r
            })
        };
        assert_eq!(owner.join().unwrap(), Some(JobOutcome::Succeeded));
        match joiner.join().unwrap() {
            Ok(Admission::DedupeJoined(j)) => {
                assert_eq!(j, p);
                assert_eq!(g.occupancy().nodes_used, 1, "the joiner's claim holds it");
                assert_eq!(collect(&*g, j).unwrap(), Some(JobOutcome::Succeeded));
                seen.hit("joined");
            }
            Err(e) if e.reason() == Reason::DuplicateKey => seen.hit("refused-after-end"),
            other => panic!("{other:?}"),
        }
        // Freed once: the handle is stale and the slot is free.
        assert!(g.outcome(p, false).is_err());
        assert!(g.release(p, false, &mut Work::default()).is_err());
        assert_eq!(g.occupancy().nodes_used, 0);
        let mut w = Work::default();
        let Ok(Admission::Admitted(n)) =
            g.submit(&spec(2, &[]), crate::graph::rules::NO_DEADLINE, &mut w)
        else {
            panic!("the freed slot serves a new job");
        };
        assert_ne!(n, p);
    });
    eprintln!("{outcomes:?}");
    outcomes.assert_exactly(&["joined", "refused-after-end"]);
}

/// Two threads submit key 1 at once: exactly one is admitted and the other joins it, whether
/// it saw the key live at its first look or only at publication (after it had reserved a
/// node, which then goes back). Nothing is left but the one job's slot.
#[test]
fn loom_graph_racing_submits_of_one_identity_admit_one() {
    let outcomes = std::sync::Arc::new(Outcomes::new());
    let seen = outcomes.clone();
    model(move || {
        let g = Arc::new(LockFreeGraph::new(bounds(2, 1, 2)));
        let submit = |g: Arc<LockFreeGraph>| {
            loom::thread::spawn(move || {
                let mut w = Work::default();
                let r = g
                    .submit(&spec(1, &[]), crate::graph::rules::NO_DEADLINE, &mut w)
                    .unwrap();
                let readied = g.pop_ready(&mut w).map(|r| r.node);
                (r, readied)
            })
        };
        let a = submit(g.clone());
        let b = submit(g.clone());
        let (ra, ready_a) = a.join().unwrap();
        let (rb, ready_b) = b.join().unwrap();
        let (admitted, joined, ready): (NodeRef, NodeRef, Option<NodeRef>) = match (ra, rb) {
            (Admission::Admitted(x), Admission::DedupeJoined(y)) => (x, y, ready_a.or(ready_b)),
            (Admission::DedupeJoined(y), Admission::Admitted(x)) => (x, y, ready_a.or(ready_b)),
            other => panic!("{other:?}"),
        };
        assert_eq!(joined, admitted);
        assert_eq!(ready, Some(admitted), "the one job is ready once");
        assert!(ready_a.is_none() || ready_b.is_none());
        let o = g.occupancy();
        assert_eq!((o.nodes_used, o.waiting, o.ready), (1, 0, 1), "{o:?}");
        seen.hit(if admitted.idx == 0 {
            "first-slot"
        } else {
            "second-slot"
        });
    });
    eprintln!("{outcomes:?}");
    // The loser reserved the first free slot and gave it back: the winner holds the second.
    outcomes.assert_exactly(&["first-slot", "second-slot"]);
}

/// Two handles of one ended job (the submitter's and a joiner's) read its outcome and are
/// dropped on two threads, and each then submits a new job, which may reuse the freed slot
/// (SPEC D02, D31: the last handle's release frees it). Whichever release is last, the other's
/// read of the outcome happened before the slot is set up again: the claims' RMWs are one
/// release sequence, so a reuse never races a holder still reading the old outcome.
#[test]
fn d02_the_last_take_frees_the_slot_only_after_every_other_take_read_the_outcome() {
    model(|| {
        let g = Arc::new(LockFreeGraph::new(bounds(1, 1, 4)));
        let mut w = Work::default();
        let Ok(Admission::Admitted(p)) =
            g.submit(&spec(1, &[]), crate::graph::rules::NO_DEADLINE, &mut w)
        else {
            panic!("not admitted");
        };
        let Ok(Admission::DedupeJoined(j)) =
            g.submit(&spec(1, &[]), crate::graph::rules::NO_DEADLINE, &mut w)
        else {
            panic!("the second submit of a live identity did not join");
        };
        assert_eq!(j, p);
        assert!(g.pop_ready(&mut w).is_some());
        g.admitted(p, &mut w);
        assert!(g.start(p));
        g.complete(p, JobOutcome::Succeeded, &mut w).unwrap();
        let taker = |key: u64| {
            let g = g.clone();
            loom::thread::spawn(move || {
                let mut w = Work::default();
                assert_eq!(collect(&*g, p).unwrap(), Some(JobOutcome::Succeeded));
                matches!(
                    g.submit(&spec(key, &[]), crate::graph::rules::NO_DEADLINE, &mut w),
                    Ok(Admission::Admitted(_))
                )
            })
        };
        let a = taker(2);
        let b = taker(3);
        let admitted = usize::from(a.join().unwrap()) + usize::from(b.join().unwrap());
        assert!(admitted <= 1, "one node slot served {admitted} jobs");
        assert!(g.outcome(p, false).is_err(), "the old handle is not stale");
    });
}
