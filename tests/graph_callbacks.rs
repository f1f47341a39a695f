//! SPEC D32: callbacks (here: the wakers of waiting submitters) run after the graph's state is
//! consistent and outside every lock, so a callback may call back into the graph. On both graph
//! engines, a waker that re-enters the graph — a submit that takes the lock-free graph's
//! topology lock (a dependency on a key with no producer) or the mutex graph's one lock — must
//! not deadlock, and must see the room whose release woke it.

use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
use fairway::graph::{
    Admission, Dependency, Gate, Graph, GraphEngine, JobHandle, JobKey, JobOutcome,
};
use fairway::oracle::GraphOn;
use fairway::ClassId;
use std::future::Future;
use std::pin::pin;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::Duration;

#[path = "common/graph.rs"]
mod graph_common;
use graph_common::spec;

/// A waker whose `wake` submits a job into the graph and reports what it saw.
struct ReEnter<E: GraphEngine> {
    graph: GraphOn<E>,
    seen: Mutex<mpsc::Sender<(u32, bool)>>,
    /// The handles its submits got: kept, since a dropped one would cancel job 3 (SPEC D31)
    /// and give its node back. The test takes them out at its end.
    kept: Arc<Mutex<Vec<JobHandle<E>>>>,
}

impl<E: GraphEngine> Wake for ReEnter<E> {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        // Wakes may come early (a completion wakes waiting submitters before the outcome is
        // collected); each one re-enters the graph.
        let free_nodes = {
            let o = self.graph.occupancy();
            o.nodes_total - o.nodes_used
        };
        // A dependency on key 99, which has no producer: the lock-free graph parks the waiter
        // under its topology lock; the mutex graph takes its one lock.
        let waits = [Dependency {
            key: JobKey::new(99),
            gate: Gate::OnSuccess,
            pin: None,
        }];
        let admitted = match self.graph.submit(&spec(3, &waits)) {
            Ok(Admission::Admitted(h)) => {
                self.kept.lock().unwrap().push(h);
                true
            }
            Ok(Admission::DedupeJoined(h)) => {
                self.kept.lock().unwrap().push(h);
                false
            }
            _ => false,
        };
        let _ = self.seen.lock().unwrap().send((free_nodes, admitted));
    }
}

fn d32_waker_runs_outside_every_lock_and_may_reenter<E: GraphEngine>() {
    let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1)).unwrap();
    let g = Graph::builder(ledger)
        .class(1)
        .nodes(1)
        .edges(4)
        .keys(8)
        .build_with::<E>()
        .unwrap();
    let Admission::Admitted(a) = g.submit(&spec(1, &[])).unwrap() else {
        panic!("the first job is admitted");
    };
    // The node store is full: the waiting submit of job 2 parks its (re-entering) waker.
    let (tx, rx) = mpsc::channel();
    let kept = Arc::new(Mutex::new(Vec::new()));
    let waker = Waker::from(Arc::new(ReEnter {
        graph: g.clone(),
        seen: Mutex::new(tx),
        kept: kept.clone(),
    }));
    let mut cx = Context::from_waker(&waker);
    let spec2 = spec(2, &[]);
    let mut waiting = pin!(g.submit_waiting(&spec2));
    assert!(waiting.as_mut().poll(&mut cx).is_pending());

    // Run job 1 and collect its outcome on another thread (read it, drop the last handle):
    // that frees the node and wakes.
    let g2 = g.clone();
    let runner = std::thread::spawn(move || {
        let job = g2.try_next(ClassId(0)).expect("job 1 is ready");
        g2.complete(job, JobOutcome::Succeeded).unwrap();
        assert_eq!(a.outcome(), Some(JobOutcome::Succeeded));
        drop(a);
    });
    let (free_nodes, admitted) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the waker ran and returned (a wake under a graph lock would deadlock here)");
    graph_common::join_within(
        runner,
        Duration::from_secs(10),
        "the thread that ran job 1 and dropped its handle (a wake under a lock?)",
    );
    let mut wakes = vec![(free_nodes, admitted)];
    wakes.extend(rx.try_iter());
    // Every wake that saw the freed node took it with its re-entrant submit.
    for &(free, admitted) in &wakes {
        assert_eq!(free == 1, admitted, "wakes: {wakes:?}");
    }
    // The one node went to exactly one of job 3 (submitted by a wake) and job 2 (the waiting
    // submit, polled again now).
    let job3 = wakes.iter().any(|&(_, admitted)| admitted);
    let noop = Waker::noop();
    // Job 2's handle is kept as well until the end.
    let mut job2_handle = None;
    let job2 = match waiting.as_mut().poll(&mut Context::from_waker(noop)) {
        Poll::Ready(r) => {
            job2_handle = Some(r.unwrap());
            true
        }
        Poll::Pending => false,
    };
    assert!(
        job3 != job2,
        "job 3 admitted: {job3}, job 2 admitted: {job2}"
    );
    let o = g.occupancy();
    assert_eq!((o.nodes_used, o.nodes_total), (1, 1));
    drop(job2_handle);
    // Out of the lock first: a drop may wake, and the waker takes that lock.
    let rest = std::mem::take(&mut *kept.lock().unwrap());
    drop(rest);
}

#[test]
fn d32_waker_runs_outside_every_lock_and_may_reenter_lock_free() {
    d32_waker_runs_outside_every_lock_and_may_reenter::<fairway::oracle::LockFreeGraph>();
}

#[test]
fn d32_waker_runs_outside_every_lock_and_may_reenter_mutex() {
    d32_waker_runs_outside_every_lock_and_may_reenter::<fairway::oracle::MutexGraph>();
}
