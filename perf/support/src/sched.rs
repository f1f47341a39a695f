//! The scheduler engines and their workloads.
//!
//! # Engines
//!
//! fairway's engine ([`Ring`]: grants through an atomic ring of tenant turns, labelled
//! `lock-free` in the rows) against its mutex twins, the same policy under one mutex,
//! [`Baseline<StdMutex>`] and [`Baseline<ParkingLotMutex>`]; [`engines`] lists them with their
//! workloads as function pointers, in report (and interleaving) order.
//!
//! # Single-thread operations (criterion benches, `fairway-perf`, `perf/callgrind.sh`)
//!
//! * [`Cycle`] (P1): one cell held, [`BACKLOG`] requests of the mix waiting; each operation
//!   releases the held cell (which grants the request the policy picks: tenant turn, priority,
//!   deadline, sequence), polls that future (found through its waker) and enqueues a fresh
//!   request in its place.
//! * [`FastPath`] (P1): nothing queued; `try_enqueue` takes the free cell, then release.
//! * [`Cancel`] (P7): one cell held, `depth` requests queued; one operation cancels a random
//!   queued request by its handle, polls its future (resolving to the cancellation, refunding
//!   the permit) and enqueues a replacement under the same id.
//! * [`AdmitRefund`] (P13): nothing queued, the cheapest request: admit, grant, release, refund.
//! * [`OwnedFast`]: as [`AdmitRefund`] through an owned enqueue future (`enqueue_owned`).
//! * [`UncontendedCas`] (P13's yardstick): one successful `compare_exchange`.
//!
//! # Threaded workloads of the multi-tenant mix (`fairway-perf`)
//!
//! 16 tenants drawn with a Zipf(1) skew, priorities 0-3, a 1 s deadline on a quarter of the
//! requests, and executors holding their cell for 100-300 ns of `black_box` work.
//!
//! * [`Mode::Wait`] (closed loop): every thread loops admit → `enqueue_blocking` → hold →
//!   release; about 1.6 % of requests are polled once and dropped if they have to wait.
//! * [`Mode::Pull`] (closed loop, SPEC F23; P3, P6): half the threads `submit` as fast as the
//!   queue admits (about 1.6 % cancelled by handle), half take jobs with `try_next`, parking in
//!   `next_blocking` when idle. The queue stays full, so its latency is the backlog's.
//! * [`open_loop`] (P4, P5): producers submit on a fixed schedule at a given rate; a job carries
//!   its *scheduled* arrival time and latency is counted from it, so a producer that stalls (or
//!   is refused by a full queue and retries) cannot hide the queueing it causes. Executors are
//!   those of the pull mode: `try_next`, a short backoff, then `next_blocking`, as a runtime's
//!   idle worker threads park.
//! * [`fairness`] (P11): 4 equal tenants saturating one cell; the Jain index of every
//!   1,000-grant window.
//!
//! Steady state allocates nothing: requests go without a cancellation token (they are cancelled
//! by handle) under fresh request ids, histograms and tallies are allocated before the start
//! barrier, and each thread warms its path first.

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, OnceLock};
use std::task::{Context, Poll, RawWaker, RawWakerVTable, Waker};
use std::time::{Duration, Instant};

use crossbeam_utils::Backoff;
use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::oracle::{
    Baseline, EnqueueOn, Mechanism, ParkingLotMutex, Ring, SchedulerOn, StdMutex,
};
use fairway::{AdmittedRequest, Assignment, ClassId, Code, RequestId, Scheduler, TenantId};

use crate::alloc::thread_allocs;
use crate::latency::{Latency, Timer};
use crate::{Measured, Named, OpUser, SingleOp};

/// Tenants of the fixture and of the mix.
pub const TENANTS: u32 = 16;

impl Named for Ring {
    const NAME: &'static str = "lock-free";
}

impl Named for Baseline<StdMutex> {
    const NAME: &'static str = "std Mutex";
}

impl Named for Baseline<ParkingLotMutex> {
    const NAME: &'static str = "parking_lot";
}

/// A scheduler engine under test, with its label.
pub trait Engine: Mechanism + Named {}

impl<M: Mechanism + Named> Engine for M {}

/// A ledger of [`TENANTS`] tenants, one class, and a scheduler of engine `M` on it. Requests
/// get fresh ids (two live requests never share one, SPEC F34) and no cancellation token: the
/// workloads cancel by handle, and a token-less request allocates nothing.
pub struct Fixture<M: Mechanism> {
    /// The ledger the scheduler is bound to.
    pub ledger: Ledger,
    /// The scheduler (payloads are `u64`, for the pull mode).
    pub sched: SchedulerOn<u64, M>,
    /// The next fresh request id.
    next_id: AtomicU64,
    /// The id count the workload was sized for (see [`ids`](Self::ids)).
    ids: u64,
}

impl<M: Engine> Named for Fixture<M> {
    const NAME: &'static str = M::NAME;
}

impl<M: Mechanism> Fixture<M> {
    /// `cells` cells, a queue bound of `queue_capacity`, a workload of `ids` concurrent
    /// requests at most, unlimited tenants.
    pub fn new(cells: u32, queue_capacity: u32, ids: u64) -> Self {
        Self::with_limits(cells, queue_capacity, ids, Limits::UNLIMITED)
    }

    /// As [`new`](Self::new), with `tenant_limits` on every tenant.
    pub fn with_limits(cells: u32, queue_capacity: u32, ids: u64, tenant_limits: Limits) -> Self {
        let ledger = Ledger::new(
            LedgerConfig::new(vec![ClassSpec::new("cpu")], TENANTS).tenant_limits(tenant_limits),
        )
        .expect("ledger");
        let sched = Scheduler::builder(ledger.clone())
            .payload::<u64>()
            .class(cells, queue_capacity)
            .build_with::<M>()
            .expect("scheduler");
        Self {
            ledger,
            sched,
            next_id: AtomicU64::new(0),
            ids,
        }
    }

    /// The number of concurrent requests the fixture was sized for.
    pub fn ids(&self) -> u64 {
        self.ids
    }

    /// A request id no other request of this fixture has had.
    pub fn fresh_id(&self) -> RequestId {
        // Relaxed: only uniqueness matters.
        RequestId(self.next_id.fetch_add(1, Ordering::Relaxed))
    }

    /// Admits request number `i` under a fresh id: tenant `i % 16`, a priority cycling over
    /// 0..4 and, for every third request, a deadline far in the future (so it orders the queue
    /// but never expires). (`_slot` is the caller's bookkeeping index, kept for its call sites.)
    pub fn request(&self, i: u64, _slot: u64) -> AdmittedRequest {
        let tenant = (i % u64::from(TENANTS)) as u32;
        let mut req = AdmissionRequest::new(self.fresh_id(), TenantId(tenant))
            .class(ClassId(0))
            .priority(((i / u64::from(TENANTS)) % 4) as u8);
        if i.is_multiple_of(3) {
            req = req.deadline(Duration::from_secs(3600));
        }
        self.admitted(req)
    }

    /// Admits `req`, token-less.
    pub fn admitted(&self, req: AdmissionRequest) -> AdmittedRequest {
        let permit = self.ledger.admit(req).expect("admission");
        AdmittedRequest::without_token(permit)
    }
}

// ---------------------------------------------------------------------------------------------
// Single-thread operations
// ---------------------------------------------------------------------------------------------

/// Waiting futures of the P1 cycle.
pub const BACKLOG: usize = 16;

thread_local! {
    /// The backlog index whose waker was woken last ([`usize::MAX`]: none since the last read).
    static WOKEN: std::cell::Cell<usize> = const { std::cell::Cell::new(usize::MAX) };
}

/// A waker that records `index` in [`WOKEN`]: no allocation, the index is the data pointer.
fn index_waker(index: usize) -> Waker {
    fn clone(data: *const ()) -> RawWaker {
        RawWaker::new(data, &VTABLE)
    }
    fn wake(data: *const ()) {
        WOKEN.with(|w| w.set(data as usize));
    }
    fn drop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake, drop);
    // SAFETY: the vtable's functions use the data pointer only as an integer; `clone` returns
    // the same waker and `drop` has nothing to free.
    unsafe { Waker::from_raw(RawWaker::new(index as *const (), &VTABLE)) }
}

/// The P1 cycle through the policy (see the module docs).
pub struct Cycle<'a, M: Mechanism> {
    f: &'a Fixture<M>,
    held: Option<Assignment>,
    backlog: Vec<EnqueueOn<'a, u64, M>>,
    wakers: Vec<Waker>,
    next: u64,
}

impl<'a, M: Mechanism> Cycle<'a, M> {
    /// A fixture for [`new`](Self::new).
    pub fn fixture() -> Fixture<M> {
        Fixture::new(1, 4096, BACKLOG as u64 + 1)
    }

    /// One cell of `f` (from [`fixture`](Self::fixture)) held, [`BACKLOG`] requests waiting
    /// (backlog slot `k` uses request id `k`).
    pub fn new(f: &'a Fixture<M>) -> Self {
        let held = f
            .sched
            .try_enqueue(f.request(0, BACKLOG as u64))
            .expect("the cell is free");
        let wakers: Vec<Waker> = (0..BACKLOG).map(index_waker).collect();
        let backlog = (0..BACKLOG)
            .map(|k| {
                let mut fut = f.sched.enqueue(f.request(k as u64 + 1, k as u64));
                let mut cx = Context::from_waker(&wakers[k]);
                assert!(Pin::new(&mut fut).poll(&mut cx).is_pending(), "cell held");
                fut
            })
            .collect();
        Self {
            f,
            held: Some(held),
            backlog,
            wakers,
            next: BACKLOG as u64 + 1,
        }
    }
}

impl<M: Mechanism> SingleOp for Cycle<'_, M> {
    fn run(&mut self, iters: u64) {
        for _ in 0..iters {
            WOKEN.with(|w| w.set(usize::MAX));
            self.held.take().expect("a cell is held").release();
            let k = WOKEN.with(|w| w.replace(usize::MAX));
            assert!(k < BACKLOG, "the release woke a backlog entry");
            let mut cx = Context::from_waker(&self.wakers[k]);
            match Pin::new(&mut self.backlog[k]).poll(&mut cx) {
                Poll::Ready(Ok(a)) => self.held = Some(a),
                other => panic!("the released cell went to backlog entry {k}: {other:?}"),
            }
            self.next += 1;
            self.backlog[k] = self.f.sched.enqueue(self.f.request(self.next, k as u64));
            assert!(Pin::new(&mut self.backlog[k]).poll(&mut cx).is_pending());
        }
    }
}

/// The P1 fast path: `try_enqueue` on a free cell, then release.
pub struct FastPath<M: Mechanism> {
    f: Fixture<M>,
    next: u64,
}

impl<M: Mechanism> FastPath<M> {
    /// One free cell.
    pub fn new() -> Self {
        Self {
            f: Fixture::new(1, 4096, u64::from(TENANTS)),
            next: 0,
        }
    }
}

impl<M: Mechanism> Default for FastPath<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Mechanism> SingleOp for FastPath<M> {
    fn run(&mut self, iters: u64) {
        let ids = self.f.ids();
        for _ in 0..iters {
            self.next += 1;
            let a = self
                .f
                .sched
                .try_enqueue(self.f.request(self.next, self.next % ids))
                .expect("the cell is free");
            black_box(a.cell());
            a.release();
        }
    }
}

/// P7: cancel + replace at queue depth `depth` (see the module docs).
pub struct Cancel<'a, M: Mechanism> {
    f: &'a Fixture<M>,
    held: Option<Assignment>,
    queued: Vec<EnqueueOn<'a, u64, M>>,
    pick: u64,
    next: u64,
}

impl<'a, M: Mechanism> Cancel<'a, M> {
    /// A fixture for [`new`](Self::new) at `depth`: one cell, a queue bound of 4096 at every
    /// depth, ids 0..depth for the queue slots and id `depth` for the held request.
    pub fn fixture(depth: usize) -> Fixture<M> {
        Fixture::new(1, 4096, depth as u64 + 1)
    }

    /// One cell of `f` (from [`fixture`](Self::fixture)) held and `depth` requests queued
    /// behind it.
    pub fn new(f: &'a Fixture<M>, depth: usize) -> Self {
        let held = f
            .sched
            .try_enqueue(f.request(0, depth as u64))
            .expect("the cell is free");
        let mut cx = Context::from_waker(Waker::noop());
        let queued = (0..depth)
            .map(|k| {
                let mut fut = f.sched.enqueue(f.request(k as u64 + 1, k as u64));
                assert!(Pin::new(&mut fut).poll(&mut cx).is_pending(), "cell held");
                fut
            })
            .collect();
        Self {
            f,
            held: Some(held),
            queued,
            pick: 0x9E37_79B9_7F4A_7C15,
            next: depth as u64 + 1,
        }
    }
}

impl<M: Mechanism> SingleOp for Cancel<'_, M> {
    fn run(&mut self, iters: u64) {
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..iters {
            let k = (xorshift(&mut self.pick) % self.queued.len() as u64) as usize;
            let slot = &mut self.queued[k];
            let handle = slot.handle().expect("queued");
            self.f.sched.cancel(handle).expect("queued requests cancel");
            assert!(matches!(
                Pin::new(&mut *slot).poll(&mut cx),
                Poll::Ready(Err(_))
            ));
            self.next += 1;
            *slot = self.f.sched.enqueue(self.f.request(self.next, k as u64));
            assert!(Pin::new(&mut *slot).poll(&mut cx).is_pending());
        }
    }
}

impl<M: Mechanism> Drop for Cancel<'_, M> {
    fn drop(&mut self) {
        self.queued.clear();
        if let Some(a) = self.held.take() {
            a.release();
        }
    }
}

/// SPEC F36 beside P7: the same queue as [`Cancel`] (one cell held, `depth` requests queued);
/// one operation changes the priority of a random queued request in place
/// (`Scheduler::set_priority`), where [`Cancel`] cancels it and queues a replacement. On the
/// engine the change is applied to the tenant's order by the tenant's next turn, which this
/// queue never gets (its cell stays held): the row is the changer's side, as the cancel row
/// leaves its tombstones to a later turn.
pub struct Reorder<'a, M: Mechanism> {
    queue: Cancel<'a, M>,
    handles: Vec<fairway::RequestHandle>,
    turn: u8,
}

impl<'a, M: Mechanism> Reorder<'a, M> {
    /// `depth` requests queued behind one held cell of `f` (a [`Cancel::fixture`]).
    pub fn new(f: &'a Fixture<M>, depth: usize) -> Self {
        let queue = Cancel::new(f, depth);
        let handles = queue
            .queued
            .iter()
            .map(|q| q.handle().expect("queued"))
            .collect();
        Self {
            queue,
            handles,
            turn: 0,
        }
    }
}

impl<M: Mechanism> SingleOp for Reorder<'_, M> {
    fn run(&mut self, iters: u64) {
        for _ in 0..iters {
            let k = (xorshift(&mut self.queue.pick) % self.handles.len() as u64) as usize;
            self.turn = self.turn.wrapping_add(1);
            self.queue
                .f
                .sched
                .set_priority(self.handles[k], self.turn % 8)
                .expect("queued requests change");
        }
    }
}

/// P13: nothing queued, the cheapest request the public API allows: admit (one tenant, no
/// priority, no deadline), `try_enqueue` (grant), release (which refunds the permit), on engine
/// `M`.
pub struct AdmitRefund<M: Mechanism = Ring> {
    f: Fixture<M>,
    request: AdmissionRequest,
}

impl<M: Engine> Named for AdmitRefund<M> {
    const NAME: &'static str = "admit→refund";
}

impl<M: Mechanism> AdmitRefund<M> {
    /// One free cell.
    pub fn new() -> Self {
        Self {
            f: Fixture::new(1, 64, 1),
            request: AdmissionRequest::new(RequestId(0), TenantId(0)).class(ClassId(0)),
        }
    }
}

impl<M: Mechanism> Default for AdmitRefund<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Mechanism> SingleOp for AdmitRefund<M> {
    fn run(&mut self, iters: u64) {
        for _ in 0..iters {
            // A token-less request (P13): admit, grant, release, refund, and nothing else.
            let request = self.f.admitted(self.request.clone());
            let a = self.f.sched.try_enqueue(request).expect("the cell is free");
            black_box(a.cell());
            a.release();
        }
    }
}

/// Jobs queued behind the executor in the [`PullCycle`].
pub const PULL_DEPTH: usize = 64;

/// The queued cycle in pull mode (SPEC F23): one cell, [`PULL_DEPTH`] jobs of the mix
/// submitted; each operation takes the next job with `try_next` (the policy's pick), releases
/// its cell and submits a fresh job in its place, so the depth stays put.
pub struct PullCycle<M: Mechanism> {
    f: Fixture<M>,
    next: u64,
}

impl<M: Mechanism> PullCycle<M> {
    /// One free cell, [`PULL_DEPTH`] jobs queued.
    pub fn new() -> Self {
        let f = Fixture::new(1, 4096, PULL_DEPTH as u64 + 1);
        for i in 0..PULL_DEPTH as u64 {
            f.sched
                .submit(f.request(i, i), i)
                .map_err(|e| e.error)
                .expect("the queue has room");
        }
        Self {
            f,
            next: PULL_DEPTH as u64,
        }
    }
}

impl<M: Mechanism> Default for PullCycle<M> {
    fn default() -> Self {
        Self::new()
    }
}

impl<M: Mechanism> SingleOp for PullCycle<M> {
    fn run(&mut self, iters: u64) {
        for _ in 0..iters {
            let job = self
                .f
                .sched
                .try_next(ClassId(0))
                .expect("class 0 exists")
                .expect("jobs are queued and the cell is free");
            black_box(job.payload);
            job.assignment.release();
            self.next += 1;
            self.f
                .sched
                .submit(self.f.request(self.next, self.next), self.next)
                .map_err(|e| e.error)
                .expect("the queue has room");
        }
    }
}

/// P13's request through an owned enqueue future (`enqueue_owned`, the form a host spawns):
/// nothing queued; admit, enqueue, one poll (granted), drop the future, release, refund.
pub struct OwnedFast {
    f: Fixture<Ring>,
    request: AdmissionRequest,
}

impl Named for OwnedFast {
    const NAME: &'static str = "owned enqueue";
}

impl OwnedFast {
    /// One free cell.
    pub fn new() -> Self {
        Self {
            f: Fixture::new(1, 64, 1),
            request: AdmissionRequest::new(RequestId(0), TenantId(0)).class(ClassId(0)),
        }
    }
}

impl Default for OwnedFast {
    fn default() -> Self {
        Self::new()
    }
}

impl SingleOp for OwnedFast {
    fn run(&mut self, iters: u64) {
        let mut cx = Context::from_waker(Waker::noop());
        for _ in 0..iters {
            let request = self.f.admitted(self.request.clone());
            let mut fut = self.f.sched.enqueue_owned(request);
            let Poll::Ready(Ok(a)) = Pin::new(&mut fut).poll(&mut cx) else {
                panic!("the cell is free")
            };
            drop(fut);
            black_box(a.cell());
            a.release();
        }
    }
}

/// One successful, uncontended `compare_exchange`: P13's yardstick.
#[derive(Default)]
pub struct UncontendedCas(AtomicU64);

impl Named for UncontendedCas {
    const NAME: &'static str = "uncontended CAS";
}

impl SingleOp for UncontendedCas {
    fn run(&mut self, iters: u64) {
        let a = black_box(&self.0);
        for _ in 0..iters {
            // Relaxed: one thread; only the instruction's cost is measured.
            let v = a.load(Ordering::Relaxed);
            let r = a.compare_exchange(v, v + 1, Ordering::AcqRel, Ordering::Relaxed);
            black_box(r.is_ok());
        }
    }
}

/// A xorshift64* step: a few cycles, no allocation.
fn xorshift(s: &mut u64) -> u64 {
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_f491_4f6c_dd1d)
}

// ---------------------------------------------------------------------------------------------
// Threaded workloads
// ---------------------------------------------------------------------------------------------

/// How the closed-loop threads drive the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Waiting futures: admit → `enqueue_blocking` → hold → release.
    Wait,
    /// Producers and executors (SPEC F23).
    Pull,
}

/// Class queue bound of the threaded workloads: producers back off (pull) or retry (open loop)
/// while it is full.
const CAPACITY: u32 = 32;

/// Iterations of [`hold`] that take about 100 ns here, measured once per process.
fn hold100() -> u32 {
    static N: OnceLock<u32> = OnceLock::new();
    *N.get_or_init(|| {
        const N: u32 = 2_000_000;
        hold(N / 10);
        let t = Instant::now();
        hold(N);
        let ns_per_iter = t.elapsed().as_nanos() as f64 / f64::from(N);
        ((100.0 / ns_per_iter.max(0.01)) as u32).max(1)
    })
}

/// Busy work standing in for the executor's job.
#[inline(never)]
fn hold(n: u32) {
    for i in 0..n {
        black_box(i);
    }
}

/// 1024 entries mapping a uniform 10-bit number to a tenant with probability `∝ 1/(k+1)`.
fn zipf_table() -> [u8; 1024] {
    let weights: Vec<f64> = (0..TENANTS).map(|k| 1.0 / (f64::from(k) + 1.0)).collect();
    let total: f64 = weights.iter().sum();
    let mut table = [0u8; 1024];
    let (mut k, mut acc) = (0, weights[0] / total);
    for (i, slot) in table.iter_mut().enumerate() {
        while (i as f64 + 0.5) / 1024.0 > acc && k + 1 < TENANTS as usize {
            k += 1;
            acc += weights[k] / total;
        }
        *slot = k as u8;
    }
    table
}

/// What a run shares between its threads.
struct Shared<M: Mechanism> {
    f: Fixture<M>,
    stop: AtomicBool,
    start: Barrier,
    timer: Timer,
    hold100: u32,
    zipf: [u8; 1024],
    /// Threads of the run.
    threads: usize,
    /// Open loop: arrivals per second in all (0 otherwise).
    rate: f64,
}

impl<M: Mechanism> Shared<M> {
    fn new(threads: usize, cells: u32, limits: Limits, rate: f64) -> Arc<Self> {
        // One token per thread and tenant: ids `thread * TENANTS + tenant`.
        let ids = (threads as u64 + 1) * u64::from(TENANTS);
        Arc::new(Self {
            f: Fixture::with_limits(cells, CAPACITY, ids, limits),
            stop: AtomicBool::new(false),
            start: Barrier::new(threads + 1),
            timer: Timer::new(),
            hold100: hold100(),
            zipf: zipf_table(),
            threads,
            rate,
        })
    }

    fn stopped(&self) -> bool {
        // Relaxed: a stop hint; the joins synchronise the results.
        self.stop.load(Ordering::Relaxed)
    }

    /// Draws and admits the next request of the mix: (request, cancel it?, hold iterations).
    fn draw(&self, rng: &mut u64) -> (AdmittedRequest, bool, u32) {
        let r = xorshift(rng);
        let tenant = u32::from(self.zipf[(r & 1023) as usize]);
        let id = self.f.fresh_id();
        let mut req = AdmissionRequest::new(id, TenantId(tenant))
            .class(ClassId(0))
            .priority(((r >> 10) & 3) as u8);
        if (r >> 12) & 3 == 0 {
            req = req.deadline(Duration::from_secs(1));
        }
        let hold = self.hold100 + ((r >> 20) % u64::from(2 * self.hold100)) as u32;
        (self.f.admitted(req), (r >> 14) & 63 == 0, hold)
    }
}

/// What one thread counts.
#[derive(Default)]
struct Tally {
    latency: Latency,
    grants: u64,
    allocs: u64,
}

/// Runs `threads` threads of `body(shared, thread, tally)` for `run_for` after a start barrier;
/// `stop` ends the run (set the flag, wake what is parked) before the joins.
fn timed<M: Mechanism>(
    s: &Arc<Shared<M>>,
    threads: usize,
    run_for: Duration,
    body: fn(&Shared<M>, usize, &mut Tally),
) -> Measured {
    let handles: Vec<_> = (0..threads)
        .map(|i| {
            let s = s.clone();
            std::thread::spawn(move || {
                let mut tally = Tally::default();
                body(&s, i, &mut tally);
                tally
            })
        })
        .collect();
    s.start.wait();
    let begin = Instant::now();
    std::thread::sleep(run_for);
    // Relaxed: see `Shared::stopped`.
    s.stop.store(true, Ordering::Relaxed);
    let elapsed = begin.elapsed();
    // Wakes executors parked in `next_blocking`; producers see the flag.
    s.f.sched.shutdown();
    let mut m = Measured::default();
    let (mut grants, mut allocs) = (0, 0);
    for h in handles {
        let t = h.join().expect("workload thread panicked");
        m.latency.merge(&t.latency);
        grants += t.grants;
        allocs += t.allocs;
    }
    m.ops_per_sec = grants as f64 / elapsed.as_secs_f64();
    m.allocs_per_op = allocs as f64 / grants.max(1) as f64;
    m
}

/// Counts the allocations of `f` (the timed loop) into `tally`.
fn counted(tally: &mut Tally, f: impl FnOnce(&mut Tally)) {
    let before = thread_allocs();
    f(tally);
    tally.allocs = thread_allocs() - before;
}

/// Executor side: one job counted (latency from the stamp in its payload), held and released.
#[inline]
fn run_job<M: Mechanism>(s: &Shared<M>, job: fairway::Job<u64>, hold_n: u32, tally: &mut Tally) {
    tally
        .latency
        .record(s.timer.now_ns().saturating_sub(job.payload));
    tally.grants += 1;
    hold(hold_n);
    job.assignment.release();
}

/// Producer side: one request of the mix submitted with `stamp` (retried while the queue is
/// full), and cancelled by handle if the draw says so.
fn submit<M: Mechanism>(s: &Shared<M>, rng: &mut u64, stamp: Option<u64>) {
    let (mut request, cancel, _) = s.draw(rng);
    let backoff = Backoff::new();
    loop {
        match s
            .f
            .sched
            .submit(request, stamp.unwrap_or_else(|| s.timer.now_ns()))
        {
            Ok(handle) => {
                if cancel && stamp.is_none() {
                    let _ = s.f.sched.cancel(handle);
                }
                return;
            }
            Err(e) => match e.returned {
                Some((permit, _)) if e.error.code() == Code::ResourceExhausted && !s.stopped() => {
                    request = AdmittedRequest::without_token(permit);
                    backoff.snooze();
                }
                _ => return,
            },
        }
    }
}

/// Thread `me`'s random state.
fn seed(me: usize) -> u64 {
    0x9e37_79b9_7f4a_7c15 ^ (me as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9)
}

/// Wait mode, one thread.
fn wait_thread<M: Mechanism>(s: &Shared<M>, me: usize, tally: &mut Tally) {
    let mut rng = seed(me);
    let mut cx = Context::from_waker(Waker::noop());
    let step = |tally: &mut Tally, rng: &mut u64, cx: &mut Context<'_>| {
        let (request, cancel, h) = s.draw(rng);
        let t0 = s.timer.now_ns();
        let granted = if cancel {
            // Poll once; withdraw by dropping the future if it has to wait.
            match pin!(s.f.sched.enqueue(request)).poll(cx) {
                Poll::Ready(Ok(a)) => Some(a),
                _ => None,
            }
        } else {
            s.f.sched.enqueue_blocking(request).ok()
        };
        if let Some(a) = granted {
            tally.latency.record(s.timer.now_ns() - t0);
            tally.grants += 1;
            hold(h);
            a.release();
        }
    };
    // Warm-up outside the timed region (lazily created thread-locals).
    step(&mut Tally::default(), &mut rng, &mut cx);
    s.start.wait();
    counted(tally, |tally| {
        while !s.stopped() {
            step(tally, &mut rng, &mut cx);
        }
    });
}

/// Pull mode, one thread: a producer (the first half), an executor (the second half), or both
/// alternately when alone.
fn pull_thread<M: Mechanism>(s: &Shared<M>, me: usize, tally: &mut Tally) {
    let threads = s.threads;
    let (produce, execute) = (
        threads == 1 || me < threads / 2,
        threads == 1 || me >= threads / 2,
    );
    let mut rng = seed(me);
    if execute {
        warm_executor(s, &mut rng);
    }
    s.start.wait();
    let backoff = Backoff::new();
    counted(tally, |tally| {
        while !s.stopped() {
            if produce {
                submit(s, &mut rng, None);
            }
            if execute && !execute_one(s, &mut rng, &backoff, threads > 1, tally) {
                break;
            }
        }
    });
}

/// Warms an executor thread's blocking waker: one blocking enqueue, granted at once or as soon
/// as another warming executor releases, before any producer starts.
fn warm_executor<M: Mechanism>(s: &Shared<M>, rng: &mut u64) {
    if let Ok(a) = s.f.sched.enqueue_blocking(s.draw(rng).0) {
        a.release();
    }
}

/// Executor side, one step: `try_next`, backing off (spin, then yield) while there is nothing
/// and then, if `park`, waiting in `next_blocking`. Returns `false` once the scheduler is shut
/// down.
fn execute_one<M: Mechanism>(
    s: &Shared<M>,
    rng: &mut u64,
    backoff: &Backoff,
    park: bool,
    tally: &mut Tally,
) -> bool {
    let h = s.draw_hold(rng);
    let job = match s.f.sched.try_next(ClassId(0)).expect("class 0 exists") {
        Some(job) => job,
        None if park && backoff.is_completed() => {
            match s.f.sched.next_blocking(ClassId(0)).expect("class 0 exists") {
                Some(job) => job,
                None => return false,
            }
        }
        None => {
            backoff.snooze();
            return true;
        }
    };
    backoff.reset();
    run_job(s, job, h, tally);
    true
}

impl<M: Mechanism> Shared<M> {
    /// Hold iterations for the next job.
    fn draw_hold(&self, rng: &mut u64) -> u32 {
        self.hold100 + (xorshift(rng) % u64::from(2 * self.hold100)) as u32
    }
}

/// One closed-loop run of engine `M`: `mode`, `threads`, `cells`, for `run_for`.
pub fn closed_loop<M: Mechanism>(
    mode: Mode,
    threads: usize,
    cells: u32,
    run_for: Duration,
) -> Measured {
    let s = Shared::<M>::new(threads, cells, Limits::UNLIMITED, 0.0);
    let body = match mode {
        Mode::Wait => wait_thread::<M>,
        Mode::Pull => pull_thread::<M>,
    };
    timed(&s, threads, run_for, body)
}

/// One open-loop run of engine `M` on `threads` (≥ 2: half producers, the rest executors) and
/// `cells`, with `rate` arrivals per second in all, for `run_for`. Latency is counted from each
/// request's scheduled arrival (see the module docs); throughput is grants per second.
pub fn open_loop<M: Mechanism>(
    threads: usize,
    cells: u32,
    rate: f64,
    run_for: Duration,
) -> Measured {
    assert!(
        threads >= 2,
        "an open-loop run needs a producer and an executor"
    );
    assert!(rate > 0.0, "a positive arrival rate");
    let s = Shared::<M>::new(threads, cells, Limits::UNLIMITED, rate);
    timed(&s, threads, run_for, open_thread::<M>)
}

/// Open loop, one thread.
fn open_thread<M: Mechanism>(s: &Shared<M>, me: usize, tally: &mut Tally) {
    let (producers, rate) = (s.threads / 2, s.rate);
    let mut rng = seed(me);
    if me >= producers {
        warm_executor(s, &mut rng);
    }
    s.start.wait();
    counted(tally, |tally| {
        let mut idle = 0u32;
        if me < producers {
            // Producer `me` owns every `producers`-th arrival of one schedule of `rate` a second.
            let interval = 1e9 * producers as f64 / rate;
            let origin = s.timer.now_ns() as f64 + interval * me as f64 / producers as f64;
            let mut k = 0u64;
            while !s.stopped() {
                let due = (origin + interval * k as f64) as u64;
                if s.timer.now_ns() < due {
                    pause(&mut idle);
                    continue;
                }
                submit(s, &mut rng, Some(due));
                k += 1;
            }
        } else {
            let backoff = Backoff::new();
            while !s.stopped() && execute_one(s, &mut rng, &backoff, true, tally) {}
        }
    });
}

/// A short pause while waiting (an exponential backoff would add its own microseconds to the
/// latency measured), and a yield now and then so oversubscribed runs progress.
#[inline]
fn pause(idle: &mut u32) {
    *idle += 1;
    if idle.is_multiple_of(64) {
        std::thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

/// Grants in one P11 window.
pub const WINDOW: usize = 1_000;
/// Tenants of the P11 run.
const FAIR_TENANTS: u32 = 4;

/// One P11 run of engine `M`: 4 equal-weight tenants, each held at its queue limit (16) by one
/// producer thread, drained by one executor thread through a single cell. `score` is the smallest
/// Jain index over the full 1,000-grant windows after the first.
pub fn fairness<M: Mechanism>(run_for: Duration) -> Measured {
    let limits = Limits::UNLIMITED.queue_slots(16);
    let s = Shared::<M>::new(2, 1, limits, 0.0);
    let order_cap = 4_000_000;
    let producer = {
        let s = s.clone();
        std::thread::spawn(move || {
            s.start.wait();
            let backoff = Backoff::new();
            while !s.stopped() {
                let mut queued = false;
                for t in 0..FAIR_TENANTS {
                    // At most 16 queued per tenant; a refusal means "already saturated".
                    let req = AdmissionRequest::new(s.f.fresh_id(), TenantId(t)).class(ClassId(0));
                    if let Ok(p) = s.f.ledger.admit(req) {
                        let r = AdmittedRequest::without_token(p);
                        queued |= s.f.sched.submit(r, 0).is_ok();
                    }
                }
                if queued {
                    backoff.reset();
                } else {
                    backoff.snooze();
                }
            }
        })
    };
    let granted = Arc::new(AtomicUsize::new(0));
    let executor = {
        let s = s.clone();
        let granted = Arc::clone(&granted);
        std::thread::spawn(move || {
            let mut order: Vec<u8> = Vec::with_capacity(order_cap);
            s.start.wait();
            let backoff = Backoff::new();
            while !s.stopped() && order.len() < order_cap {
                match s.f.sched.try_next(ClassId(0)).expect("class 0 exists") {
                    Some(job) => {
                        order.push(job.assignment.tenant().0 as u8);
                        // Relaxed: a progress figure for the main thread's minimum-sample wait.
                        granted.store(order.len(), Ordering::Relaxed);
                        job.assignment.release();
                        backoff.reset();
                    }
                    None => backoff.snooze(),
                }
            }
            order
        })
    };
    s.start.wait();
    let begin = Instant::now();
    std::thread::sleep(run_for);
    // A score needs full windows after the first: on a loaded machine a short run may not reach
    // them, so it runs on (up to 20 s) until three windows are in.
    let give_up = begin + run_for.max(Duration::from_secs(20));
    while granted.load(Ordering::Relaxed) < 3 * WINDOW && Instant::now() < give_up {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Relaxed: see `Shared::stopped`.
    s.stop.store(true, Ordering::Relaxed);
    producer.join().expect("producer panicked");
    let order = executor.join().expect("executor panicked");
    let elapsed = begin.elapsed();
    s.f.sched.shutdown();
    // Skip the first window: the queues are still filling.
    let min = order
        .chunks_exact(WINDOW)
        .skip(1)
        .map(|w| {
            let mut counts = [0f64; FAIR_TENANTS as usize];
            w.iter().for_each(|&t| counts[usize::from(t)] += 1.0);
            jain(&counts)
        })
        .reduce(f64::min);
    Measured {
        ops_per_sec: order.len() as f64 / elapsed.as_secs_f64(),
        // No full window after the first (the executor was starved for 20 s): no score.
        score: min,
        ..Measured::default()
    }
}

/// Jain's fairness index `(Σx)² / (n Σx²)`: 1 when all are equal, `1/n` when one has all.
pub fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    sum * sum / (xs.len() as f64 * squares)
}

/// One engine's workloads, type-erased for the harness's interleaving loops.
pub struct EngineRuns {
    /// Label.
    pub name: &'static str,
    /// [`closed_loop`].
    pub closed: fn(Mode, usize, u32, Duration) -> Measured,
    /// [`open_loop`].
    pub open: fn(usize, u32, f64, Duration) -> Measured,
    /// [`fairness`].
    pub fairness: fn(Duration) -> Measured,
    /// Runs a closure on a fresh [`Cycle`].
    pub cycle: fn(OpUser<'_>),
    /// Runs a closure on a fresh [`FastPath`].
    pub fast: fn(OpUser<'_>),
    /// Runs a closure on a fresh [`Cancel`] at a depth.
    pub cancel: fn(usize, OpUser<'_>),
    /// Runs a closure on a fresh [`Reorder`] at a depth.
    pub reorder: fn(usize, OpUser<'_>),
    /// Runs a closure on a fresh [`AdmitRefund`].
    pub admit_refund: fn(OpUser<'_>),
    /// Runs a closure on a fresh [`PullCycle`].
    pub pull_cycle: fn(OpUser<'_>),
}

impl EngineRuns {
    fn of<M: Engine>() -> Self {
        Self {
            name: M::NAME,
            closed: closed_loop::<M>,
            open: open_loop::<M>,
            fairness: fairness::<M>,
            cycle: |run| run(&mut Cycle::new(&Cycle::<M>::fixture())),
            fast: |run| run(&mut FastPath::<M>::new()),
            cancel: |depth, run| run(&mut Cancel::new(&Cancel::<M>::fixture(depth), depth)),
            reorder: |depth, run| run(&mut Reorder::new(&Cancel::<M>::fixture(depth), depth)),
            admit_refund: |run| run(&mut AdmitRefund::<M>::new()),
            pull_cycle: |run| run(&mut PullCycle::<M>::new()),
        }
    }
}

/// The engines in report order: fairway's (the first ratio's numerator), then its mutex twins,
/// std Mutex and parking_lot, so `engines()[0]` and the per-workload throughput ratios of
/// `--compare` (first backend over each other) keep their meaning.
pub fn engines() -> [EngineRuns; 3] {
    [
        EngineRuns::of::<Ring>(),
        EngineRuns::of::<Baseline<StdMutex>>(),
        EngineRuns::of::<Baseline<ParkingLotMutex>>(),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index_bounds() {
        assert!((jain(&[5.0, 5.0, 5.0, 5.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[4.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
    }

    #[test]
    fn zipf_table_is_skewed_and_covers_every_tenant() {
        let t = zipf_table();
        let count = |k: u8| t.iter().filter(|&&x| x == k).count();
        assert!(count(0) > 250 && count(0) < 380, "{}", count(0));
        assert!((0..TENANTS as u8).all(|k| count(k) > 0));
        assert!(count(0) > count(15) * 10);
    }

    #[test]
    fn single_ops_run_on_every_engine() {
        for e in engines() {
            let run: OpUser<'_> = &mut |op| op.run(100);
            (e.cycle)(run);
            (e.fast)(run);
            (e.cancel)(1, run);
            (e.cancel)(64, run);
            (e.reorder)(1, run);
            (e.reorder)(64, run);
            (e.admit_refund)(run);
            (e.pull_cycle)(run);
        }
        AdmitRefund::<Ring>::new().run(100);
        UncontendedCas::default().run(100);
    }

    #[test]
    fn threaded_workloads_grant_on_every_engine() {
        let ms = Duration::from_millis(20);
        for e in engines() {
            for (mode, threads) in [(Mode::Wait, 2), (Mode::Pull, 1), (Mode::Pull, 2)] {
                let m = (e.closed)(mode, threads, 4, ms);
                assert!(
                    m.ops_per_sec > 0.0 && m.latency.count() > 0,
                    "{} {mode:?}",
                    e.name
                );
            }
            let m = (e.open)(2, 4, 100_000.0, ms);
            assert!(
                m.ops_per_sec > 0.0 && m.latency.count() > 0,
                "{} open",
                e.name
            );
            let m = (e.fairness)(Duration::from_millis(50));
            assert!(m.score.is_some(), "{}", e.name);
        }
    }
}
