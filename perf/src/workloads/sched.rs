//! The scheduler comparison: the lock-free engine against the std-Mutex and parking_lot
//! baselines on one "multi-tenant mix" workload, plus the P11 fairness run.
//!
//! # The multi-tenant mix
//!
//! 16 tenants chosen with a Zipf(1) skew (tenant 0 about 30 % of requests, tenant 15 about 2 %),
//! priorities 0-3 uniformly, a generous 1 s deadline on a quarter of the requests (they rarely
//! expire but take the deadline path), about 1.6 % of requests cancelled, and executors that hold
//! their cell for 100-300 ns of `black_box` work before releasing it. One class of 1 or 4 cells.
//!
//! * [`Mode::Wait`]: every thread loops admit → `enqueue_blocking` → hold → release. A cancelled
//!   request is polled once and its future dropped if it is still queued.
//! * [`Mode::Pull`] (SPEC F23): half the threads `submit` (backing off while the queue is full)
//!   and the other half `try_next`, spinning then yielding while there is nothing, and finally
//!   parking in `next_blocking`; a cancelled request is withdrawn by its handle right after
//!   submission. At 1 thread the thread alternates one submit and one `try_next`.
//! * [`Mode::Rpc`] (P4, P5): pull mode as a request/response service: each producer keeps at
//!   most `cells` of its jobs outstanding (a closed loop, as an RPC client with a window does), and
//!   executors poll `try_next` without ever parking, as a runtime's worker threads do. The queue
//!   stays short, so enqueue-to-grant latency is the hand-off itself — what the engine adds
//!   under contention and preemption — rather than queueing behind a saturated backlog (which in
//!   the pull rows is the Zipf-heavy tenant waiting for its fair share, the same in every
//!   engine).
//! * [`Mode::Cycle`] (P1): 1 thread, 1 cell, no hold, a backlog of [`BACKLOG`] waiting futures
//!   drawn from the mix: each cycle releases the held cell, which grants the backlog request the
//!   policy picks (tenant turn, priority, deadline, sequence), polls that future (found through
//!   its waker, which records its index) and enqueues a fresh request in its place. The cost of
//!   one enqueue → policy → grant → release cycle. No cancellations.
//! * [`Mode::Fast`] (P1, empty queue): 1 thread, 1 cell, the wait-mode loop without the hold:
//!   every request finds the cell free and takes the fast path.
//!
//! Latency is enqueue-to-grant, in timer ticks: stamped just before `enqueue_blocking`/`submit`
//! (the pull-mode stamp travels as the payload), read when the grant is in hand. Every grant is
//! timed with the TSC; with the `Instant` fallback one in [`Timer::sample_every`].
//!
//! Steady state allocates nothing: request ids and cancellation tokens are reused (one token per
//! thread and tenant), per-thread histograms and tallies are allocated before the start barrier,
//! and each thread runs one warm-up cycle first (the blocking waker is created lazily).

use std::future::Future;
use std::hint::black_box;
use std::pin::{pin, Pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Barrier};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

use crossbeam_utils::{Backoff, CachePadded};
use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::{
    AdmittedRequest, Baseline, CancellationToken, ClassId, Code, LockFree, Mechanism,
    ParkingLotMutex, RequestId, Scheduler, StdMutex, TenantId,
};

use crate::alloc_count;
use crate::stats::Latency;
use crate::timer::{Source, Timer};

/// Tenants of the mix.
pub const TENANTS: usize = 16;
/// Label of the lock-free engine (the numerator of every ratio).
pub const LOCK_FREE: &str = "lock-free";
/// Label of the std-Mutex baseline.
pub const STD: &str = "std Mutex";
/// Label of the parking_lot baseline.
pub const PARKING_LOT: &str = "parking_lot";
/// The engines in report (and interleaving) order.
pub const ENGINES: [&str; 3] = [LOCK_FREE, STD, PARKING_LOT];

/// Class queue capacity in pull mode: producers back off when it is full, so pull-mode latency
/// includes queueing behind up to this many requests.
const PULL_CAPACITY: u32 = 32;
/// Class queue capacity in wait mode (at most one request per thread is queued).
const WAIT_CAPACITY: u32 = 64;
/// The generous deadline of a quarter of the requests.
const DEADLINE: Duration = Duration::from_secs(1);

/// How the threads drive the scheduler.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Mode {
    /// 1 thread, no hold, a backlog: the P1 cycle through the policy.
    Cycle,
    /// 1 thread, no hold, empty queue: the P1 cycle through the fast path.
    Fast,
    /// Waiting futures.
    Wait,
    /// Producers and executors (SPEC F23).
    Pull,
    /// Producers with a bounded window of outstanding jobs, executors that never park.
    Rpc,
}

impl Mode {
    /// Label in the report.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Cycle => "cycle",
            Mode::Fast => "fast",
            Mode::Wait => "wait",
            Mode::Pull => "pull",
            Mode::Rpc => "rpc",
        }
    }
}

/// One configuration of the mix.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Config {
    /// Driving mode.
    pub mode: Mode,
    /// Threads.
    pub threads: usize,
    /// Cells of the class.
    pub cells: u32,
}

/// One run of one engine on one configuration.
#[derive(Debug)]
pub struct Sample {
    /// Engine label.
    pub engine: &'static str,
    /// What ran.
    pub config: Config,
    /// Repetition index (samples with the same index ran back to back).
    pub rep: usize,
    /// Grants per second.
    pub grants_per_sec: f64,
    /// Enqueue-to-grant latency, merged over threads, in ticks.
    pub latency: Latency,
    /// Heap allocations in the timed region per grant.
    pub allocs_per_op: f64,
    /// Grants per tenant.
    pub per_tenant: [u64; TENANTS],
    /// Requests withdrawn before their grant.
    pub cancelled: u64,
}

impl Sample {
    /// Jain's fairness index over grants per tenant: `(Σx)² / (n Σx²)`, 1 when equal.
    pub fn jain(&self) -> f64 {
        jain(&self.per_tenant.map(|x| x as f64))
    }
}

/// Jain's fairness index of `xs`; NaN when all are zero.
pub fn jain(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    sum * sum / (xs.len() as f64 * squares)
}

/// Busy work standing in for the executor's job: `n` iterations of a `black_box` loop.
#[inline(never)]
fn hold(n: u32) {
    for i in 0..n {
        black_box(i);
    }
}

/// Iterations of [`hold`] that take about 100 ns on this machine.
pub fn calibrate_hold() -> u32 {
    const N: u32 = 2_000_000;
    hold(N / 10);
    let t = Instant::now();
    hold(N);
    let ns_per_iter = t.elapsed().as_nanos() as f64 / f64::from(N);
    ((100.0 / ns_per_iter.max(0.01)) as u32).max(1)
}

/// A xorshift64* generator: a few cycles a number, no allocation.
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

/// 1024 entries mapping a uniform 10-bit number to a tenant with probability `∝ 1/(k+1)`.
fn zipf_table() -> [u8; 1024] {
    let weights: Vec<f64> = (0..TENANTS).map(|k| 1.0 / (k as f64 + 1.0)).collect();
    let total: f64 = weights.iter().sum();
    let mut table = [0u8; 1024];
    let (mut k, mut acc) = (0, weights[0] / total);
    for (i, slot) in table.iter_mut().enumerate() {
        while (i as f64 + 0.5) / 1024.0 > acc && k + 1 < TENANTS {
            k += 1;
            acc += weights[k] / total;
        }
        *slot = k as u8;
    }
    table
}

/// What one run shares between its threads.
struct Shared<M: Mechanism> {
    ledger: Ledger,
    sched: Scheduler<u64, M>,
    stop: AtomicBool,
    start: Barrier,
    timer: Timer,
    /// Record one grant in this many (1 with the TSC).
    every: u64,
    /// [`hold`] iterations for 100 ns; 0 in cycle mode.
    hold100: u32,
    zipf: [u8; 1024],
    /// Rpc mode: jobs outstanding per producer (submitted, not yet released by an executor).
    outstanding: Vec<CachePadded<AtomicU64>>,
    /// Rpc mode: the window, jobs each producer may have outstanding.
    window: u64,
}

impl<M: Mechanism> Shared<M> {
    fn stopped(&self) -> bool {
        // Relaxed: a stop hint; the joins synchronise the results.
        self.stop.load(Ordering::Relaxed)
    }
}

/// What one thread counts.
struct Tally {
    latency: Latency,
    grants: u64,
    per_tenant: [u64; TENANTS],
    cancelled: u64,
    allocs: u64,
    timed: u64,
}

impl Tally {
    fn new() -> Self {
        Self {
            latency: Latency::new(),
            grants: 0,
            per_tenant: [0; TENANTS],
            cancelled: 0,
            allocs: 0,
            timed: 0,
        }
    }

    /// Counts one grant to `tenant`, stamped `t0` at enqueue and read now.
    #[inline(always)]
    fn grant(&mut self, s: &Shared<impl Mechanism>, tenant: TenantId, t0: u64) {
        self.timed += 1;
        if self.timed.is_multiple_of(s.every) {
            let t1 = s.timer.now();
            self.latency.record(t1.saturating_sub(t0));
        }
        self.grants += 1;
        self.per_tenant[tenant.0 as usize % TENANTS] += 1;
    }
}

/// A thread's request source: random tenants, priorities, deadlines and cancellations, with one
/// reusable token per tenant.
struct Requests {
    rng: Rng,
    tokens: Vec<CancellationToken>,
    id_base: u64,
}

/// One drawn request.
struct Draw {
    tenant: u32,
    request: AdmissionRequest,
    cancel: bool,
    hold: u32,
}

impl Requests {
    fn new(thread: usize) -> Self {
        let id_base = (thread * TENANTS) as u64;
        Self {
            rng: Rng(
                0x9e37_79b9_7f4a_7c15 ^ (thread as u64 + 1).wrapping_mul(0xbf58_476d_1ce4_e5b9)
            ),
            tokens: (0..TENANTS as u64)
                .map(|t| CancellationToken::new(RequestId(id_base + t)))
                .collect(),
            id_base,
        }
    }

    fn draw<M: Mechanism>(&mut self, s: &Shared<M>) -> Draw {
        self.draw_as(s, None)
    }

    /// A draw under request id `id` (default: one id per thread and tenant, matching
    /// [`token`](Self::token)).
    fn draw_as<M: Mechanism>(&mut self, s: &Shared<M>, id: Option<u64>) -> Draw {
        let r = self.rng.next();
        let tenant = u32::from(s.zipf[(r & 1023) as usize]);
        let mut request = AdmissionRequest::new(
            RequestId(id.unwrap_or(self.id_base + u64::from(tenant))),
            TenantId(tenant),
        )
        .class(ClassId(0))
        .priority(((r >> 10) & 3) as u8);
        if (r >> 12) & 3 == 0 {
            request = request.deadline(DEADLINE);
        }
        let hold = if s.hold100 == 0 {
            0
        } else {
            s.hold100 + ((r >> 20) % u64::from(2 * s.hold100)) as u32
        };
        Draw {
            tenant,
            request,
            cancel: (r >> 14) & 63 == 0,
            hold,
        }
    }

    fn token(&self, tenant: u32) -> CancellationToken {
        self.tokens[tenant as usize].clone()
    }
}

/// Builds the ledger and scheduler of one run.
fn setup<M: Mechanism>(
    timer: &Timer,
    config: Config,
    hold100: u32,
    tenant_limits: Limits,
    capacity: u32,
) -> Arc<Shared<M>> {
    let ledger = Ledger::new(LedgerConfig {
        classes: vec![ClassSpec::new("cells")],
        max_tenants: TENANTS as u32,
        tenant_limits,
    })
    .expect("valid ledger");
    let sched = Scheduler::builder(ledger.clone())
        .payload::<u64>()
        .class(config.cells, capacity)
        .build_with::<M>()
        .expect("valid scheduler");
    Arc::new(Shared {
        ledger,
        sched,
        stop: AtomicBool::new(false),
        start: Barrier::new(config.threads + 1),
        timer: *timer,
        every: if timer.source() == Source::Tsc {
            1
        } else {
            timer.sample_every()
        },
        hold100: if matches!(config.mode, Mode::Cycle | Mode::Fast) {
            0
        } else {
            hold100
        },
        zipf: zipf_table(),
        outstanding: (0..config.threads)
            .map(|_| CachePadded::new(AtomicU64::new(0)))
            .collect(),
        window: u64::from(config.cells),
    })
}

/// Wait mode: admit → enqueue (blocking) → hold → release, until stopped.
fn wait_worker<M: Mechanism>(s: &Shared<M>, src: &mut Requests, tally: &mut Tally) {
    let mut cx = Context::from_waker(Waker::noop());
    let backoff = Backoff::new();
    let mut step = |tally: &mut Tally, src: &mut Requests| {
        let d = src.draw(s);
        let Ok(permit) = s.ledger.admit(d.request) else {
            backoff.snooze();
            return;
        };
        let request = AdmittedRequest::new(permit, src.token(d.tenant));
        let t0 = s.timer.now();
        if d.cancel {
            // Poll once; withdraw by dropping the future if it has to wait.
            let mut fut = pin!(s.sched.enqueue(request));
            match fut.as_mut().poll(&mut cx) {
                Poll::Ready(Ok(a)) => {
                    tally.grant(s, a.tenant(), t0);
                    hold(d.hold);
                    a.release();
                }
                Poll::Ready(Err(_)) => {}
                Poll::Pending => tally.cancelled += 1,
            }
            return;
        }
        if let Ok(a) = s.sched.enqueue_blocking(request) {
            tally.grant(s, a.tenant(), t0);
            hold(d.hold);
            a.release();
        }
    };
    // Warm-up outside the timed region (lazily created thread-locals).
    step(&mut Tally::new(), src);
    s.start.wait();
    let before = alloc_count::thread_allocs();
    while !s.stopped() {
        step(tally, src);
    }
    tally.allocs = alloc_count::thread_allocs() - before;
}

/// Waiting futures of the P1 cycle.
pub const BACKLOG: usize = 16;

thread_local! {
    /// The backlog index whose waker was woken last ([`usize::MAX`]: none since the last read).
    static WOKEN: core::cell::Cell<usize> = const { core::cell::Cell::new(usize::MAX) };
}

/// A waker that records `index` in [`WOKEN`]: no allocation, the index is the data pointer.
fn index_waker(index: usize) -> Waker {
    use std::task::{RawWaker, RawWakerVTable};
    fn clone(data: *const ()) -> RawWaker {
        RawWaker::new(data, &VTABLE)
    }
    fn wake(data: *const ()) {
        WOKEN.with(|w| w.set(data as usize));
    }
    fn drop(_: *const ()) {}
    static VTABLE: RawWakerVTable = RawWakerVTable::new(clone, wake, wake, drop);
    // SAFETY: the vtable's functions ignore the data pointer except as an integer; `clone`
    // returns the same waker and `drop` has nothing to free.
    unsafe { Waker::from_raw(RawWaker::new(index as *const (), &VTABLE)) }
}

/// Cycle mode: a backlog of [`BACKLOG`] waiting futures behind the one held cell; each release
/// grants the one the policy picks.
fn cycle_worker<M: Mechanism>(s: &Shared<M>, src: &mut Requests, tally: &mut Tally) {
    // Backlog slot `k` holds request id `BASE + k` (live ids stay distinct); the held request
    // uses the thread's ids.
    const BASE: u64 = 1 << 32;
    let tokens: Vec<CancellationToken> = (0..BACKLOG as u64)
        .map(|k| CancellationToken::new(RequestId(BASE + k)))
        .collect();
    let enqueue = |src: &mut Requests, k: usize| loop {
        let d = src.draw_as(s, Some(BASE + k as u64));
        if let Ok(permit) = s.ledger.admit(d.request) {
            let t0 = s.timer.now();
            break (
                s.sched
                    .enqueue(AdmittedRequest::new(permit, tokens[k].clone())),
                t0,
            );
        }
    };
    let held = loop {
        let d = src.draw(s);
        let permit = s.ledger.admit(d.request).expect("the ledger is unlimited");
        if let Ok(a) = s
            .sched
            .try_enqueue(AdmittedRequest::new(permit, src.token(d.tenant)))
        {
            break a;
        }
    };
    let wakers: Vec<Waker> = (0..BACKLOG).map(index_waker).collect();
    let mut backlog: Vec<_> = (0..BACKLOG).map(|k| enqueue(src, k)).collect();
    for (k, (fut, _)) in backlog.iter_mut().enumerate() {
        let mut cx = Context::from_waker(&wakers[k]);
        assert!(
            Pin::new(fut).poll(&mut cx).is_pending(),
            "the only cell is held"
        );
    }
    // One untimed cycle warms the path; then the timed loop.
    let mut step =
        |tally: &mut Tally, src: &mut Requests, held: &mut Option<fairway::Assignment>| {
            WOKEN.with(|w| w.set(usize::MAX));
            held.take().expect("a cell is held").release();
            let woken = WOKEN.with(|w| w.replace(usize::MAX));
            let k = if woken < BACKLOG { woken } else { 0 };
            let (fut, t0) = &mut backlog[k];
            let mut cx = Context::from_waker(&wakers[k]);
            match Pin::new(fut).poll(&mut cx) {
                Poll::Ready(Ok(a)) => {
                    tally.grant(s, a.tenant(), *t0);
                    *held = Some(a);
                }
                other => panic!("the released cell went to backlog entry {k}: {other:?}"),
            }
            backlog[k] = enqueue(src, k);
            let (fut, _) = &mut backlog[k];
            assert!(
                Pin::new(fut).poll(&mut cx).is_pending(),
                "the only cell is held"
            );
        };
    let mut held = Some(held);
    step(&mut Tally::new(), src, &mut held);
    s.start.wait();
    let before = alloc_count::thread_allocs();
    while !s.stopped() {
        step(tally, src, &mut held);
    }
    tally.allocs = alloc_count::thread_allocs() - before;
    if let Some(a) = held {
        a.release();
    }
}

/// Pull mode, producer side: one submission (retried while the queue is full). Returns whether
/// it was queued.
fn submit_one<M: Mechanism>(s: &Shared<M>, src: &mut Requests, tally: &mut Tally) -> bool {
    let d = src.draw(s);
    let backoff = Backoff::new();
    let Ok(mut permit) = s.ledger.admit(d.request) else {
        return false;
    };
    loop {
        let t0 = s.timer.now();
        match s
            .sched
            .submit(AdmittedRequest::new(permit, src.token(d.tenant)), t0)
        {
            Ok(handle) => {
                if d.cancel && s.sched.cancel(handle).is_ok() {
                    tally.cancelled += 1;
                }
                return true;
            }
            Err(e) => match e.returned {
                Some((p, _)) if e.error.code() == Code::ResourceExhausted && !s.stopped() => {
                    permit = p;
                    backoff.snooze();
                }
                _ => return false,
            },
        }
    }
}

/// Pull mode, executor side: one grant counted and held.
fn run_job<M: Mechanism>(s: &Shared<M>, job: fairway::Job<u64>, hold_n: u32, tally: &mut Tally) {
    tally.grant(s, job.assignment.tenant(), job.payload);
    hold(hold_n);
    job.assignment.release();
}

/// Pull mode, 1 thread: submit one, pull one.
fn pull_alone<M: Mechanism>(s: &Shared<M>, src: &mut Requests, tally: &mut Tally) {
    let step = |tally: &mut Tally, src: &mut Requests| {
        submit_one(s, src, tally);
        if let Some(job) = s.sched.try_next(ClassId(0)).expect("class 0 exists") {
            let h = src.draw(s).hold;
            run_job(s, job, h, tally);
        }
    };
    step(&mut Tally::new(), src);
    s.start.wait();
    let before = alloc_count::thread_allocs();
    while !s.stopped() {
        step(tally, src);
    }
    tally.allocs = alloc_count::thread_allocs() - before;
}

/// Pull mode, producer thread.
fn producer<M: Mechanism>(s: &Shared<M>, src: &mut Requests, tally: &mut Tally) {
    s.start.wait();
    let before = alloc_count::thread_allocs();
    while !s.stopped() {
        submit_one(s, src, tally);
    }
    tally.allocs = alloc_count::thread_allocs() - before;
}

/// Pull mode, executor thread: `try_next`, spinning then yielding while empty, then parking in
/// `next_blocking` (woken by work or by the shutdown that ends the run).
fn executor<M: Mechanism>(s: &Shared<M>, src: &mut Requests, tally: &mut Tally) {
    let backoff = Backoff::new();
    // Warm-up of the thread's blocking waker (created on first use): one blocking enqueue, granted
    // at once or as soon as another warming executor releases, before any producer starts.
    let d = src.draw(s);
    if let Ok(permit) = s.ledger.admit(d.request) {
        let request = AdmittedRequest::new(permit, src.token(d.tenant));
        if let Ok(a) = s.sched.enqueue_blocking(request) {
            a.release();
        }
    }
    s.start.wait();
    let before = alloc_count::thread_allocs();
    while !s.stopped() {
        let h = src.draw(s).hold;
        match s.sched.try_next(ClassId(0)).expect("class 0 exists") {
            Some(job) => {
                backoff.reset();
                run_job(s, job, h, tally);
            }
            None if backoff.is_completed() => {
                match s.sched.next_blocking(ClassId(0)).expect("class 0 exists") {
                    Some(job) => {
                        backoff.reset();
                        run_job(s, job, h, tally);
                    }
                    None => break,
                }
            }
            None => backoff.snooze(),
        }
    }
    tally.allocs = alloc_count::thread_allocs() - before;
}

/// Rpc mode: the payload of a job carries its enqueue stamp and, in the top 8 bits, the index
/// of the producer whose window it counts against.
const PRODUCER_SHIFT: u32 = 56;

/// Rpc mode, producer thread: submit while fewer than `window` of its jobs are outstanding.
fn rpc_producer<M: Mechanism>(s: &Shared<M>, me: usize, src: &mut Requests, tally: &mut Tally) {
    let mine = &s.outstanding[me];
    s.start.wait();
    let before = alloc_count::thread_allocs();
    let mut spins = 0u32;
    while !s.stopped() {
        // Relaxed: a count; the executor's decrement is what frees the window.
        if mine.load(Ordering::Relaxed) >= s.window {
            spins += 1;
            if spins.is_multiple_of(64) {
                std::thread::yield_now();
            } else {
                std::hint::spin_loop();
            }
            continue;
        }
        spins = 0;
        let d = src.draw(s);
        let Ok(permit) = s.ledger.admit(d.request) else {
            continue;
        };
        // Relaxed: as above. Counted before the submission, so an executor never takes the
        // count below zero.
        mine.fetch_add(1, Ordering::Relaxed);
        let t0 = s.timer.now() & ((1 << PRODUCER_SHIFT) - 1);
        let payload = t0 | ((me as u64) << PRODUCER_SHIFT);
        match s
            .sched
            .submit(AdmittedRequest::new(permit, src.token(d.tenant)), payload)
        {
            Ok(handle) => {
                if d.cancel && s.sched.cancel(handle).is_ok() {
                    tally.cancelled += 1;
                    mine.fetch_sub(1, Ordering::Relaxed);
                }
            }
            Err(_) => {
                mine.fetch_sub(1, Ordering::Relaxed);
            }
        }
    }
    tally.allocs = alloc_count::thread_allocs() - before;
}

/// Rpc mode, executor thread: `try_next` in a loop, pausing and now and then yielding while
/// there is nothing, never parking.
fn rpc_executor<M: Mechanism>(s: &Shared<M>, src: &mut Requests, tally: &mut Tally) {
    s.start.wait();
    let before = alloc_count::thread_allocs();
    let mut idle = 0u32;
    while !s.stopped() {
        let h = src.draw(s).hold;
        match s.sched.try_next(ClassId(0)).expect("class 0 exists") {
            Some(job) => {
                idle = 0;
                let producer = (job.payload >> PRODUCER_SHIFT) as usize;
                let t0 = job.payload & ((1 << PRODUCER_SHIFT) - 1);
                tally.grant(s, job.assignment.tenant(), t0);
                hold(h);
                job.assignment.release();
                // Relaxed: see `rpc_producer`.
                s.outstanding[producer].fetch_sub(1, Ordering::Relaxed);
            }
            // A short pause per empty poll (an exponential backoff would put its own
            // microseconds into the latency being measured), and a yield now and then so
            // oversubscribed runs still progress.
            None => {
                idle += 1;
                if idle.is_multiple_of(64) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }
    tally.allocs = alloc_count::thread_allocs() - before;
}

/// One run of engine `M` on `config` for `run_for`.
fn run_once<M: Mechanism>(
    timer: &Timer,
    config: Config,
    hold100: u32,
    run_for: Duration,
) -> Measured {
    let capacity = if matches!(config.mode, Mode::Pull | Mode::Rpc) {
        PULL_CAPACITY
    } else {
        WAIT_CAPACITY
    };
    let s = setup::<M>(timer, config, hold100, Limits::UNLIMITED, capacity);
    let handles: Vec<_> = (0..config.threads)
        .map(|i| {
            let s = s.clone();
            let producers = config.threads / 2;
            std::thread::spawn(move || {
                let mut tally = Tally::new();
                let mut src = Requests::new(i);
                match config.mode {
                    Mode::Cycle => cycle_worker(&s, &mut src, &mut tally),
                    Mode::Fast | Mode::Wait => wait_worker(&s, &mut src, &mut tally),
                    Mode::Pull if config.threads == 1 => pull_alone(&s, &mut src, &mut tally),
                    Mode::Pull if i < producers => producer(&s, &mut src, &mut tally),
                    Mode::Pull => executor(&s, &mut src, &mut tally),
                    Mode::Rpc if i < producers.max(1) => rpc_producer(&s, i, &mut src, &mut tally),
                    Mode::Rpc => rpc_executor(&s, &mut src, &mut tally),
                }
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
    // Producers (and wait-mode threads) first, then wake parked executors by shutting down.
    let (first, executors): (Vec<_>, Vec<_>) =
        handles.into_iter().enumerate().partition(|(i, _)| {
            config.mode != Mode::Pull || config.threads == 1 || *i < config.threads / 2
        });
    let mut tallies = Vec::with_capacity(config.threads);
    for (_, h) in first {
        tallies.push(h.join().expect("workload thread panicked"));
    }
    s.sched.shutdown();
    for (_, h) in executors {
        tallies.push(h.join().expect("workload thread panicked"));
    }
    let mut latency = Latency::new();
    let (mut grants, mut allocs, mut cancelled) = (0u64, 0u64, 0u64);
    let mut per_tenant = [0u64; TENANTS];
    for t in &tallies {
        latency.merge(&t.latency);
        grants += t.grants;
        allocs += t.allocs;
        cancelled += t.cancelled;
        for (a, b) in per_tenant.iter_mut().zip(t.per_tenant) {
            *a += b;
        }
    }
    (
        grants as f64 / elapsed.as_secs_f64(),
        latency,
        allocs as f64 / grants.max(1) as f64,
        per_tenant,
        cancelled,
    )
}

/// One timed run: grants per second, latency, allocations per grant, grants per tenant, and
/// requests cancelled.
type Measured = (f64, Latency, f64, [u64; TENANTS], u64);

/// A type-erased engine for the interleaving loop.
struct Engine {
    name: &'static str,
    run: fn(&Timer, Config, u32, Duration) -> Measured,
    fairness: fn(&Timer, Duration) -> Vec<f64>,
}

fn engines() -> [Engine; 3] {
    [
        Engine {
            name: LOCK_FREE,
            run: run_once::<LockFree>,
            fairness: fairness_once::<LockFree>,
        },
        Engine {
            name: STD,
            run: run_once::<Baseline<StdMutex>>,
            fairness: fairness_once::<Baseline<StdMutex>>,
        },
        Engine {
            name: PARKING_LOT,
            run: run_once::<Baseline<ParkingLotMutex>>,
            fairness: fairness_once::<Baseline<ParkingLotMutex>>,
        },
    ]
}

/// The configurations for `threads`: the P1 cycles (if 1 is among them), then wait, pull and
/// (from 2 threads) rpc mode at each thread count with 1 and 4 cells.
pub fn configs(threads: &[usize]) -> Vec<Config> {
    let mut v = Vec::new();
    if threads.contains(&1) {
        for mode in [Mode::Cycle, Mode::Fast] {
            v.push(Config {
                mode,
                threads: 1,
                cells: 1,
            });
        }
    }
    for mode in [Mode::Wait, Mode::Pull, Mode::Rpc] {
        for &threads in threads {
            if mode == Mode::Rpc && threads < 2 {
                // A producer and an executor at least.
                continue;
            }
            for cells in [1, 4] {
                v.push(Config {
                    mode,
                    threads,
                    cells,
                });
            }
        }
    }
    v
}

/// Runs every engine on every configuration, interleaved (A B C, A B C, ...), `reps` times,
/// after one discarded warm-up round per configuration.
pub fn run(
    timer: &Timer,
    configs: &[Config],
    reps: usize,
    run_for: Duration,
    hold100: u32,
) -> Vec<Sample> {
    let engines = engines();
    let mut samples = Vec::new();
    for &config in configs {
        for e in &engines {
            (e.run)(timer, config, hold100, run_for / 4);
        }
        for rep in 0..reps {
            for e in &engines {
                let (grants_per_sec, latency, allocs_per_op, per_tenant, cancelled) =
                    (e.run)(timer, config, hold100, run_for);
                samples.push(Sample {
                    engine: e.name,
                    config,
                    rep,
                    grants_per_sec,
                    latency,
                    allocs_per_op,
                    per_tenant,
                    cancelled,
                });
            }
        }
    }
    samples
}

/// Grants in one P11 window.
pub const WINDOW: usize = 1_000;
/// Tenants of the P11 run.
const FAIR_TENANTS: u32 = 4;

/// P11 for every engine, interleaved: per engine and repetition, the Jain index of every
/// 1,000-grant window.
pub fn fairness(timer: &Timer, reps: usize, run_for: Duration) -> Vec<(&'static str, Vec<f64>)> {
    let engines = engines();
    let mut out: Vec<(&'static str, Vec<f64>)> =
        engines.iter().map(|e| (e.name, Vec::new())).collect();
    for _ in 0..reps {
        for (e, (_, windows)) in engines.iter().zip(out.iter_mut()) {
            windows.extend((e.fairness)(timer, run_for));
        }
    }
    out
}

/// One P11 run: 4 equal-weight tenants, each held at its queue limit (16) by one producer thread,
/// drained by one executor thread through a single cell; returns the Jain index of each full
/// 1,000-grant window.
fn fairness_once<M: Mechanism>(timer: &Timer, run_for: Duration) -> Vec<f64> {
    let limits = Limits {
        queue_slots: 16,
        ..Limits::UNLIMITED
    };
    let config = Config {
        mode: Mode::Pull,
        threads: 2,
        cells: 1,
    };
    let s = setup::<M>(timer, config, 0, limits, 64);
    let order_cap = 4_000_000;
    let producer = {
        let s = s.clone();
        std::thread::spawn(move || {
            let tokens: Vec<_> = (0..FAIR_TENANTS)
                .map(|t| CancellationToken::new(RequestId(u64::from(t))))
                .collect();
            s.start.wait();
            let backoff = Backoff::new();
            while !s.stopped() {
                let mut queued = false;
                for t in 0..FAIR_TENANTS {
                    // Tenant limit: at most 16 queued each; refusals mean "already saturated".
                    let req = AdmissionRequest::new(RequestId(u64::from(t)), TenantId(t))
                        .class(ClassId(0));
                    if let Ok(p) = s.ledger.admit(req) {
                        let r = AdmittedRequest::new(p, tokens[t as usize].clone());
                        queued |= s.sched.submit(r, 0).is_ok();
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
    let executor = {
        let s = s.clone();
        std::thread::spawn(move || {
            let mut order: Vec<u8> = Vec::with_capacity(order_cap);
            s.start.wait();
            let backoff = Backoff::new();
            while !s.stopped() && order.len() < order_cap {
                match s.sched.try_next(ClassId(0)).expect("class 0 exists") {
                    Some(job) => {
                        order.push(job.assignment.tenant().0 as u8);
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
    std::thread::sleep(run_for);
    // Relaxed: see `Shared::stopped`.
    s.stop.store(true, Ordering::Relaxed);
    producer.join().expect("producer panicked");
    let order = executor.join().expect("executor panicked");
    s.sched.shutdown();
    // Skip the first window: the queues are still filling.
    order
        .chunks_exact(WINDOW)
        .skip(1)
        .map(|w| {
            let mut counts = [0f64; FAIR_TENANTS as usize];
            for &t in w {
                counts[usize::from(t)] += 1.0;
            }
            jain(&counts)
        })
        .collect()
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
}
