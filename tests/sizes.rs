//! Sizes past toy: classes of 33 to 1000 cells, 10^4 tenants and 10^5 queue slots, on both
//! engines (SPEC F01, F02, F08, F17).
//!
//! Every other suite runs with at most a handful of cells, one bitmap word of the built-in pool,
//! and a few tenants; these tests run the same request paths at sizes where the pool spans many
//! words and the policy's tables are large, and check conservation at the end.

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
use fairway::oracle::{Baseline, Mechanism, Ring, SchedulerOn, StdMutex};
use fairway::{
    AdmittedRequest, Assignment, CancellationToken, ClassId, Code, RequestId, Scheduler, TenantId,
};
use fairway::{ClassConfig, Footprint};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Counts, per thread, the bytes allocated (in total) and live.
struct Counting;

thread_local! {
    static ALLOCATED: Cell<u64> = const { Cell::new(0) };
    static LIVE: Cell<i64> = const { Cell::new(0) };
}

fn count(grow: usize, shrink: usize) {
    let _ = ALLOCATED.try_with(|c| c.set(c.get() + grow as u64));
    let _ = LIVE.try_with(|c| c.set(c.get() + grow as i64 - shrink as i64));
}

// SAFETY: every call is forwarded to `System` unchanged; the counters are thread-local cells.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 0);
        // SAFETY: forwarded with the caller's layout.
        unsafe { System.alloc(layout) }
    }
    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count(layout.size(), 0);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        count(0, layout.size());
        // SAFETY: `ptr` came from `System` with this layout.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count(new_size, layout.size());
        // SAFETY: as above.
        unsafe { System.realloc(ptr, layout, new_size) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Runs `f`; returns its result, the bytes it allocated in total on this thread, and the bytes
/// it left allocated.
fn measured<R>(f: impl FnOnce() -> R) -> (R, u64, i64) {
    let (a, l) = (ALLOCATED.with(Cell::get), LIVE.with(Cell::get));
    let r = f();
    (r, ALLOCATED.with(Cell::get) - a, LIVE.with(Cell::get) - l)
}

/// A scheduler with one class of `cells` cells and `queue` queue slots, for `tenants` tenants.
struct World<M: Mechanism> {
    ledger: Ledger,
    sched: SchedulerOn<(), M>,
    ids: AtomicU64,
    tenants: u32,
}

impl<M: Mechanism> World<M> {
    fn new(cells: u32, queue: u32, tenants: u32) -> Self {
        let ledger =
            Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cells")], tenants)).unwrap();
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
fn f08_credit_holder_finds_its_cell_33_cells() {
    credit_churn::<Ring>(33, &[5, 32], 6);
}

#[test]
fn f08_credit_holder_finds_its_cell_33_cells_baseline() {
    credit_churn::<Baseline<StdMutex>>(33, &[5, 32], 6);
}

#[test]
fn f08_credit_holder_finds_its_cell_64_cells() {
    credit_churn::<Ring>(64, &[0, 40], 6);
}

#[test]
fn f08_credit_holder_finds_its_cell_64_cells_baseline() {
    credit_churn::<Baseline<StdMutex>>(64, &[0, 40], 6);
}

#[test]
fn f08_credit_holder_finds_its_cell_1000_cells() {
    credit_churn::<Ring>(1000, &[3, 300, 640, 999], 6);
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
        tokens.push(
            req.token()
                .expect("the harness gives every request a token")
                .clone(),
        );
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
fn q04_1000_cells_10k_tenants_100k_slots_conserve() {
    large_class_conserves::<Ring>();
}

#[test]
fn q04_1000_cells_10k_tenants_100k_slots_conserve_baseline() {
    large_class_conserves::<Baseline<StdMutex>>();
}

// ---------------------------------------------------------------------------------------------
// SPEC F01 / F02: configurations are checked before anything is allocated, and a host can read
// what a valid one will allocate.
// ---------------------------------------------------------------------------------------------

/// What a refused configuration may allocate: the error and small temporaries, nothing sized by
/// the configuration.
const REFUSAL_BYTES: u64 = 64 << 10;

fn ledger(tenants: u32) -> Ledger {
    Ledger::new(LedgerConfig::new(vec![ClassSpec::new("c")], tenants)).unwrap()
}

#[track_caller]
fn assert_config_error(e: &fairway::Error, field: &str) {
    assert_eq!(e.code(), Code::InvalidArgument, "{e}");
    assert_eq!(
        (e.reason().as_str(), e.field()),
        ("configuration", Some(field))
    );
}

fn over_limits_refused<M: Mechanism>() {
    let cases = [
        (ClassConfig::MAX_CELLS + 1, 0, "cells"),
        (u32::MAX, 0, "cells"),
        (1, ClassConfig::MAX_QUEUE_CAPACITY + 1, "queue_capacity"),
        (1, u32::MAX, "queue_capacity"),
        (u32::MAX, u32::MAX, "cells"),
    ];
    for (cells, queue, field) in cases {
        let l = ledger(1);
        let e = Scheduler::<()>::builder(l.clone())
            .class(cells, queue)
            .footprint()
            .unwrap_err();
        assert_config_error(&e, field);
        let builder = Scheduler::<()>::builder(l).class(cells, queue);
        let (r, bytes, _) = measured(|| builder.build_with::<M>().map(drop));
        assert_config_error(&r.unwrap_err(), field);
        assert!(
            bytes < REFUSAL_BYTES,
            "{cells} cells, queue {queue}: {bytes} bytes allocated before refusing"
        );
    }
    // The limits themselves are accepted (footprint only: a class at the limits is ~4.2 GB).
    let f = Scheduler::<()>::builder(ledger(1))
        .class(ClassConfig::MAX_CELLS, ClassConfig::MAX_QUEUE_CAPACITY)
        .footprint()
        .unwrap();
    assert_eq!(
        f.entry_slots,
        2 * u64::from(ClassConfig::MAX_QUEUE_CAPACITY) + u64::from(ClassConfig::MAX_CELLS)
    );
    assert!(f.bytes > 3_000_000_000 && f.bytes < 5_000_000_000, "{f:?}");
}

#[test]
fn f01_over_limit_cells_and_queue_refused_before_allocating() {
    over_limits_refused::<Ring>();
}

#[test]
fn f01_over_limit_cells_and_queue_refused_before_allocating_baseline() {
    over_limits_refused::<Baseline<StdMutex>>();
}

#[test]
fn f01_over_limit_max_tenants_refused_before_allocating() {
    for tenants in [LedgerConfig::MAX_TENANTS + 1, u32::MAX] {
        let config = LedgerConfig::new(vec![ClassSpec::new("c")], tenants);
        let (r, bytes, _) = measured(|| Ledger::new(config).map(drop));
        assert_config_error(&r.unwrap_err(), "max_tenants");
        assert!(
            bytes < REFUSAL_BYTES,
            "{tenants} tenants: {bytes} bytes allocated before refusing"
        );
    }
}

#[test]
fn f01_fixed_pool_over_limit_refused_before_allocating() {
    for cells in [ClassConfig::MAX_CELLS + 1, u32::MAX] {
        let (r, bytes, _) =
            measured(|| fairway::pool::FixedCellPool::new(ClassId(0), cells).map(drop));
        assert_config_error(&r.unwrap_err(), "cells");
        assert!(bytes < REFUSAL_BYTES, "{cells} cells: {bytes} bytes");
    }
}

/// Builds `classes` for `tenants` tenants and compares what the build left allocated with
/// [`Builder::footprint`]: the estimate is an upper bound, and within 25 % (plus a few KiB of
/// fixed overhead) of the real figure. Measured on this suite's configurations (1000 cells, 10^5
/// queue, 10^4 tenants): 86.5 MB allocated for 87.1 MB estimated (lock-free), 76.6 MB for 77.4 MB
/// (baseline).
fn footprint_matches<M: Mechanism, T: Send + 'static>(classes: &[(u32, u32)], tenants: u32) {
    let names = ["a", "b", "c"];
    let config = LedgerConfig::new(
        names[..classes.len()]
            .iter()
            .map(|n| ClassSpec::new(n))
            .collect(),
        tenants,
    );
    let estimate = config.footprint_bytes();
    let (ledger, _, live) = measured(|| Ledger::new(config).unwrap());
    assert!(
        live as u64 <= estimate && estimate <= live as u64 + 1024,
        "ledger: {live} bytes, estimated {estimate}"
    );
    let mut b = Scheduler::builder(ledger).payload::<T>();
    for &(cells, queue) in classes {
        b = b.class(cells, queue);
    }
    let footprint = b.footprint_with::<M>().unwrap();
    let (sched, _, live) = measured(|| b.build_with::<M>().unwrap());
    let live = live as u64;
    assert!(
        live <= footprint.bytes && footprint.bytes <= live + live / 4 + (16 << 10),
        "{classes:?}, {tenants} tenants, payload {} bytes: {live} bytes allocated, {footprint:?}",
        std::mem::size_of::<T>()
    );
    drop(sched);
}

#[test]
fn f02_footprint_bounds_the_allocation() {
    footprint_matches::<Ring, ()>(&[(CELLS, QUEUE)], TENANTS);
    footprint_matches::<Ring, [u64; 8]>(&[(64, 1000), (1, 0)], 10);
    footprint_matches::<Ring, u64>(&[(1, 1), (33, 5000), (1000, 20)], 3000);
}

#[test]
fn f02_footprint_bounds_the_allocation_baseline() {
    footprint_matches::<Baseline<StdMutex>, ()>(&[(CELLS, QUEUE)], TENANTS);
    footprint_matches::<Baseline<StdMutex>, [u64; 8]>(&[(64, 1000), (1, 0)], 10);
    footprint_matches::<Baseline<StdMutex>, u64>(&[(1, 1), (33, 5000), (1000, 20)], 3000);
}

#[test]
fn f02_footprint_per_unit_figures() {
    // One more unit of queue capacity costs two slots; a cell one slot and its own bytes; a
    // tenant its bytes in each class.
    let f = |cells, queue, tenants| {
        Scheduler::<()>::builder(ledger(tenants))
            .class(cells, queue)
            .footprint()
            .unwrap()
            .bytes
    };
    assert_eq!(f(1, 1, 1) - f(1, 0, 1), 2 * Footprint::BYTES_PER_SLOT);
    assert_eq!(
        f(2, 0, 1) - f(1, 0, 1),
        Footprint::BYTES_PER_SLOT + Footprint::BYTES_PER_CELL
    );
    assert_eq!(f(1, 0, 2) - f(1, 0, 1), Footprint::BYTES_PER_TENANT);
}
