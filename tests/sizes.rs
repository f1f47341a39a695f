//! Sizes past toy: classes of 33 to 1000 cells, 10^4 tenants and 10^5 queue slots, on both
//! engines (SPEC F01, F02, F08, F17).
//!
//! Every other suite runs with at most a handful of cells, one bitmap word of the built-in pool,
//! and a few tenants; these tests run the same request paths at sizes where the pool spans many
//! words and the policy's tables are large, and check conservation at the end.

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::{
    AdmittedRequest, Assignment, Baseline, CancellationToken, ClassId, Code, LockFree, Mechanism,
    RequestId, Scheduler, StdMutex, TenantId,
};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// A scheduler with one class of `cells` cells and `queue` queue slots, for `tenants` tenants.
struct World<M: Mechanism> {
    ledger: Ledger,
    sched: Scheduler<(), M>,
    ids: AtomicU64,
    tenants: u32,
}

impl<M: Mechanism> World<M> {
    fn new(cells: u32, queue: u32, tenants: u32) -> Self {
        let ledger = Ledger::new(LedgerConfig {
            classes: vec![ClassSpec::new("cells")],
            max_tenants: tenants,
            tenant_limits: Limits::UNLIMITED,
        })
        .unwrap();
        let sched = Scheduler::<()>::builder(ledger.clone())
            .class(cells, queue)
            .build_with::<M>()
            .unwrap();
        Self {
            ledger,
            sched,
            ids: AtomicU64::new(1),
            tenants,
        }
    }

    fn admit(&self) -> AdmittedRequest {
        // Relaxed: a unique-id counter.
        let id = RequestId(self.ids.fetch_add(1, Ordering::Relaxed));
        let tenant = TenantId((id.0 % u64::from(self.tenants)) as u32);
        let permit = self
            .ledger
            .admit(AdmissionRequest::new(id, tenant).class(ClassId(0)))
            .unwrap();
        AdmittedRequest::new(permit, CancellationToken::new(id))
    }

    /// Every cell of the class, on the fast path, sorted by cell id.
    fn take_all(&self, cells: u32) -> Vec<Assignment> {
        let mut all: Vec<Assignment> = (0..cells)
            .map(|_| {
                self.sched
                    .try_enqueue(self.admit())
                    .unwrap_or_else(|e| panic!("a free cell: {e}"))
            })
            .collect();
        all.sort_by_key(|a| a.cell().0);
        all
    }

    /// Conservation at rest: no permit outstanding, every cell back, nothing queued.
    #[track_caller]
    fn assert_at_rest(&self, cells: u32) {
        assert!(self.ledger.usage().is_zero(), "{:?}", self.ledger.usage());
        let snap = self.sched.snapshot(ClassId(0)).unwrap();
        assert_eq!(snap.cells_total, cells);
        assert_eq!(snap.cells_available, cells, "{snap:?}");
        assert_eq!(snap.cells_leased, 0);
        assert_eq!(snap.queue_depth, 0);
        assert_eq!(snap.oldest_lease_age, None, "a free cell shown as leased");
    }
}

fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
    Pin::new(f).poll(&mut Context::from_waker(Waker::noop()))
}

// ---------------------------------------------------------------------------------------------
// SPEC F08 / F17: a holder of a cell credit always finds its cell, however many bitmap words.
// ---------------------------------------------------------------------------------------------

/// How long each churn runs: the race needs threads preempted midway through a scan of the
/// pool's words, which takes time rather than a round count.
const CHURN: Duration = Duration::from_millis(1500);

/// All cells but `circulating` stay leased; `threads` threads (more than the cores, so scans are
/// preempted midway) grant and release the circulating ones: half on the fast path
/// (`try_enqueue`), half queueing (`enqueue_blocking`, granted by releasers' passes). A credit
/// holder that finds no cell failed the fast path with `internal / pool-capacity-mismatch`, or
/// gave its credit back in a pass with no one to run the next pass, leaving a queued request
/// stranded with a cell free; a watchdog turns that hang into a failure.
fn credit_churn<M: Mechanism>(cells: u32, circulating: &[u32], threads: usize) {
    let w = World::<M>::new(cells, 64, 16);
    let mut kept = Vec::new();
    for a in w.take_all(cells) {
        if circulating.contains(&a.cell().0) {
            a.release();
        } else {
            kept.push(a);
        }
    }
    let until = Instant::now() + CHURN;
    let internal = AtomicU64::new(0);
    let done = AtomicU64::new(0);
    let grants = AtomicU64::new(0);
    std::thread::scope(|s| {
        for t in 0..threads {
            let (w, internal, done, grants) = (&w, &internal, &done, &grants);
            s.spawn(move || {
                while Instant::now() < until {
                    let a = if t % 2 == 0 {
                        match w.sched.try_enqueue(w.admit()) {
                            Ok(a) => a,
                            Err(e) if e.error.code() == Code::Internal => {
                                // Relaxed: tallies read after the scope joins.
                                internal.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            Err(_) => continue,
                        }
                    } else {
                        match w.sched.enqueue_blocking(w.admit()) {
                            Ok(a) => a,
                            Err(e) if e.code() == Code::Internal => {
                                internal.fetch_add(1, Ordering::Relaxed);
                                continue;
                            }
                            Err(e) => panic!("unexpected refusal: {e}"),
                        }
                    };
                    grants.fetch_add(1, Ordering::Relaxed);
                    a.release();
                }
                done.fetch_add(1, Ordering::Relaxed);
            });
        }
        // Watchdog: a stranded `enqueue_blocking` never returns.
        let deadline = until + Duration::from_secs(20);
        while done.load(Ordering::Relaxed) < threads as u64 {
            assert!(
                Instant::now() < deadline,
                "a queued request was stranded with a cell free ({cells} cells)"
            );
            std::thread::sleep(Duration::from_millis(10));
        }
    });
    assert_eq!(
        internal.load(Ordering::Relaxed),
        0,
        "a credit holder found no cell ({cells} cells)"
    );
    assert!(grants.load(Ordering::Relaxed) > 0);
    kept.into_iter().for_each(Assignment::release);
    w.assert_at_rest(cells);
}

#[test]
fn f08_credit_holder_finds_its_cell_33_cells_lockfree() {
    credit_churn::<LockFree>(33, &[5, 32], 6);
}

#[test]
fn f08_credit_holder_finds_its_cell_33_cells_baseline() {
    credit_churn::<Baseline<StdMutex>>(33, &[5, 32], 6);
}

#[test]
fn f08_credit_holder_finds_its_cell_64_cells_lockfree() {
    credit_churn::<LockFree>(64, &[0, 40], 6);
}

#[test]
fn f08_credit_holder_finds_its_cell_64_cells_baseline() {
    credit_churn::<Baseline<StdMutex>>(64, &[0, 40], 6);
}

#[test]
fn f08_credit_holder_finds_its_cell_1000_cells_lockfree() {
    credit_churn::<LockFree>(1000, &[3, 300, 640, 999], 6);
}

#[test]
fn f08_credit_holder_finds_its_cell_1000_cells_baseline() {
    credit_churn::<Baseline<StdMutex>>(1000, &[3, 300, 640, 999], 6);
}

// ---------------------------------------------------------------------------------------------
// Sizes: 1000 cells, 10^4 tenants, 10^5 queue slots.
// ---------------------------------------------------------------------------------------------

const CELLS: u32 = 1000;
const TENANTS: u32 = 10_000;
const QUEUE: u32 = 100_000;
/// Requests queued behind the busy cells.
const QUEUED: usize = 6000;

/// Builds the large class, holds every cell, queues `QUEUED` requests spread over all tenants,
/// cancels a third of them (half by handle, half by token), then releases cells until every
/// request has ended; checks each request ended once and that the class and the ledger are back
/// at rest (SPEC Q04).
fn large_class_conserves<M: Mechanism>() {
    let w = World::<M>::new(CELLS, QUEUE, TENANTS);
    let held = w.take_all(CELLS);
    assert_eq!(held.len(), CELLS as usize);
    let snap = w.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!((snap.cells_available, snap.cells_leased), (0, CELLS));
    assert!(snap.oldest_lease_age.is_some());

    let mut pending = Vec::with_capacity(QUEUED);
    let mut tokens = Vec::with_capacity(QUEUED);
    for _ in 0..QUEUED {
        let req = w.admit();
        tokens.push(req.token().clone());
        let mut f = Box::pin(w.sched.enqueue(req));
        assert!(poll_once(&mut f).is_pending(), "every cell is held");
        pending.push(Some(f));
    }
    assert_eq!(
        w.sched.snapshot(ClassId(0)).unwrap().queue_depth,
        QUEUED as u32
    );
    let mut cancelled = 0;
    for i in (0..QUEUED).step_by(3) {
        if i % 2 == 0 {
            let handle = pending[i].as_ref().unwrap().handle().expect("queued");
            w.sched.cancel(handle).unwrap();
        } else {
            assert!(tokens[i].cancel("sizes"));
        }
        cancelled += 1;
    }

    let (mut granted, mut ended_cancelled) = (0usize, 0usize);
    let mut cells = held;
    loop {
        let mut progress = false;
        for slot in pending.iter_mut() {
            let Some(f) = slot else { continue };
            match poll_once(f) {
                Poll::Pending => {}
                Poll::Ready(Ok(a)) => {
                    granted += 1;
                    cells.push(a);
                    *slot = None;
                    progress = true;
                }
                Poll::Ready(Err(e)) => {
                    assert_eq!(e.code(), Code::Cancelled, "{e}");
                    ended_cancelled += 1;
                    *slot = None;
                    progress = true;
                }
            }
        }
        if cells.is_empty() && !progress {
            break;
        }
        // Every cell back at once: each release grants the next queued request.
        cells.drain(..).for_each(Assignment::release);
    }
    assert!(pending.iter().all(Option::is_none), "a request never ended");
    assert_eq!(ended_cancelled, cancelled);
    assert_eq!(granted + ended_cancelled, QUEUED);
    let snap = w.sched.snapshot(ClassId(0)).unwrap();
    assert_eq!(snap.grants, (CELLS as usize + granted) as u64);
    w.assert_at_rest(CELLS);
}

#[test]
fn q04_1000_cells_10k_tenants_100k_slots_conserve_lockfree() {
    large_class_conserves::<LockFree>();
}

#[test]
fn q04_1000_cells_10k_tenants_100k_slots_conserve_baseline() {
    large_class_conserves::<Baseline<StdMutex>>();
}
