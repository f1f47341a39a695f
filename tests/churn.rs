//! Random concurrent churn with conservation at quiescence (SPEC Q04, F51).
//!
//! Threads (plain and on a multi-thread tokio runtime) enqueue, cancel by token and by handle,
//! drop futures, let deadlines expire, release and quarantine, and use pull mode; then the
//! scheduler shuts down. At quiescence every permit is refunded (ledger usage zero), every cell
//! is accounted for (available + leased + quarantined = total, nothing leased), and every request
//! ended with exactly one outcome.
//!
//! Sizes: 4 cells per class with 8 tenants and 64 queue slots, and 33 and 1000 cells per class
//! with 10^4 tenants and 10^5 queue slots (all but two cells of each class held for the whole
//! run, so requests still queue, and the pools scan past their first words).
//!
//! Every test runs under a time limit and fails instead of hanging.
//!
//! The short versions run in CI; `cargo test --release --test churn -- --ignored` runs the long
//! ones (at least 10^6 operations).

mod common;

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
use fairway::oracle::{Baseline, Mechanism, Ring, SchedulerOn};
use fairway::Reason;
use fairway::{AdmittedRequest, CancellationToken, ClassId, Code, RequestId, Scheduler, TenantId};
use std::future::Future;
use std::pin::pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

const CELLS: u32 = 4;
const TENANTS: u32 = 8;
const QUEUE: u32 = 64;

/// The limit of one test: far above its run time, so only a hang reaches it.
const LIMIT: Duration = Duration::from_secs(120);

/// Cells per class, tenants, queue slots per class.
#[derive(Clone, Copy)]
struct Size {
    cells: u32,
    tenants: u32,
    queue: u32,
}

const TOY: Size = Size {
    cells: CELLS,
    tenants: TENANTS,
    queue: QUEUE,
};
const CELLS_33: Size = Size {
    cells: 33,
    tenants: if cfg!(miri) { 100 } else { 10_000 },
    queue: if cfg!(miri) { 256 } else { 100_000 },
};
const CELLS_1000: Size = Size {
    cells: 1000,
    tenants: 10_000,
    queue: 100_000,
};

/// Outcome counters: each request adds exactly one.
#[derive(Default)]
struct Outcomes {
    started: AtomicU64,
    granted: AtomicU64,
    cancelled: AtomicU64,
    expired: AtomicU64,
    refused: AtomicU64,
    /// Pull-mode submissions accepted, and jobs executors received.
    submitted: AtomicU64,
    pulled: AtomicU64,
}

impl Outcomes {
    fn end(&self, r: &Result<(), fairway::Error>) {
        let c = match r {
            Ok(()) => &self.granted,
            Err(e) => match e.code() {
                Code::Cancelled => &self.cancelled,
                Code::DeadlineExceeded => &self.expired,
                _ => &self.refused,
            },
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    fn ended(&self) -> u64 {
        [&self.granted, &self.cancelled, &self.expired, &self.refused]
            .iter()
            .map(|c| c.load(Ordering::Relaxed))
            .sum()
    }
}

struct World<M: Mechanism> {
    size: Size,
    ledger: Ledger,
    sched: SchedulerOn<u64, M>,
    ids: AtomicU64,
    out: Outcomes,
    /// Quarantines allowed per class: at most `CELLS - 1`, so no class ever dies and every
    /// request can finish.
    quarantine_budget: [AtomicU64; 2],
    /// Cells held for the whole run (all but two per class at the larger sizes).
    hogs: std::sync::Mutex<Vec<fairway::Assignment>>,
}

impl<M: Mechanism> World<M> {
    fn new() -> Arc<Self> {
        Self::sized(TOY)
    }

    fn sized(size: Size) -> Arc<Self> {
        let ledger = Ledger::new(
            LedgerConfig::new(vec![ClassSpec::new("a"), ClassSpec::new("b")], size.tenants)
                .tenant_limits(Limits::UNLIMITED.concurrency(64)),
        )
        .unwrap();
        let sched = Scheduler::builder(ledger.clone())
            .payload::<u64>()
            .class(size.cells, size.queue)
            .class(size.cells, size.queue)
            .starvation_after(Duration::from_micros(200))
            .build_with::<M>()
            .unwrap();
        let w = Arc::new(Self {
            size,
            ledger,
            sched,
            ids: AtomicU64::new(1),
            out: Outcomes::default(),
            quarantine_budget: [AtomicU64::new(0), AtomicU64::new(0)],
            hogs: std::sync::Mutex::new(Vec::new()),
        });
        if size.cells > CELLS {
            let mut hogs = Vec::new();
            for c in 0..2u16 {
                for i in 0..size.cells - 2 {
                    let id = RequestId(w.ids.fetch_add(1, Ordering::Relaxed));
                    let permit = w
                        .ledger
                        .admit(
                            AdmissionRequest::new(id, TenantId(i % size.tenants)).class(ClassId(c)),
                        )
                        .unwrap();
                    let req = AdmittedRequest::new(permit, CancellationToken::new(id));
                    hogs.push(w.sched.try_enqueue(req).expect("a free cell"));
                }
            }
            *w.hogs.lock().unwrap() = hogs;
        }
        w
    }

    /// Gives back the cells held for the whole run.
    fn release_hogs(&self) {
        for a in self.hogs.lock().unwrap().drain(..) {
            a.release();
        }
    }

    fn request(&self, rng: &mut u64) -> Option<AdmittedRequest> {
        self.request_with(rng, true)
    }

    fn request_with(&self, rng: &mut u64, deadlines: bool) -> Option<AdmittedRequest> {
        let r = next(rng);
        let id = RequestId(self.ids.fetch_add(1, Ordering::Relaxed));
        let mut a = AdmissionRequest::new(id, TenantId((r % u64::from(self.size.tenants)) as u32))
            .class(ClassId(((r >> 8) % 2) as u16))
            .priority(((r >> 16) % 4) as u8);
        if deadlines && (r >> 24).is_multiple_of(4) {
            a = a.deadline(Duration::from_micros((r >> 32) % 300));
        }
        let permit = self.ledger.admit(a).ok()?;
        Some(AdmittedRequest::new(permit, CancellationToken::new(id)))
    }

    /// Ends an assignment: mostly release, rarely quarantine (keeping at least one usable cell
    /// per class most of the time).
    fn finish(&self, a: fairway::Assignment, rng: &mut u64) {
        std::hint::black_box((0..(next(rng) % 64)).sum::<u64>());
        let budget = &self.quarantine_budget[usize::from(a.class().0)];
        if next(rng).is_multiple_of(500)
            && budget.fetch_add(1, Ordering::Relaxed) < u64::from(CELLS - 1)
            && self.size.cells == CELLS
        {
            a.quarantine("churn");
        } else {
            a.release();
        }
    }

    /// One random operation, driven synchronously on this thread.
    fn step(&self, rng: &mut u64) {
        let pull = next(rng) % 6 == 5;
        let Some(req) = self.request_with(rng, !pull) else {
            return;
        };
        if pull {
            // Pull mode: the executor threads serve it.
            if self.sched.submit(req, 0).is_ok() {
                self.out.submitted.fetch_add(1, Ordering::Relaxed);
            }
            return;
        }
        self.out.started.fetch_add(1, Ordering::Relaxed);
        let waker = Waker::noop();
        let mut cx = Context::from_waker(waker);
        match next(rng) % 5 {
            0 | 1 => {
                let r = self
                    .sched
                    .enqueue_blocking(req)
                    .map(|a| self.finish(a, rng));
                self.out.end(&r);
            }
            2 => {
                // Poll once, then drop: cancels if still queued.
                let mut f = pin!(self.sched.enqueue(req));
                match f.as_mut().poll(&mut cx) {
                    Poll::Ready(r) => self.out.end(&r.map(|a| self.finish(a, rng))),
                    Poll::Pending => {
                        self.out.cancelled.fetch_add(1, Ordering::Relaxed);
                    }
                }
            }
            3 => {
                // Cancel through the token, then wait for the outcome.
                let token = req.token().unwrap().clone();
                let mut f = pin!(self.sched.enqueue(req));
                if let Poll::Ready(r) = f.as_mut().poll(&mut cx) {
                    self.out.end(&r.map(|a| self.finish(a, rng)));
                    return;
                }
                token.cancel("churn");
                let r = fairway_block_on(f);
                self.out.end(&r.map(|a| self.finish(a, rng)));
            }
            _ => {
                // Cancel by handle from this thread while others grant.
                let mut f = pin!(self.sched.enqueue(req));
                if let Poll::Ready(r) = f.as_mut().poll(&mut cx) {
                    self.out.end(&r.map(|a| self.finish(a, rng)));
                    return;
                }
                if let Some(h) = f.handle() {
                    let _ = self.sched.cancel(h);
                }
                let r = fairway_block_on(f);
                self.out.end(&r.map(|a| self.finish(a, rng)));
            }
        }
    }

    /// An executor of `class`: serves pull-mode jobs until the scheduler shuts down.
    fn executor(&self, class: u16, seed: u64) {
        let mut rng = seed;
        while let Some(job) = self
            .sched
            .next_blocking(ClassId(class))
            .expect("known class")
        {
            self.out.pulled.fetch_add(1, Ordering::Relaxed);
            self.finish(job.assignment, &mut rng);
        }
    }

    /// Requests failed by the scheduler: queued ones (rejections) and granted ones refused at
    /// acceptance (counted as grants and, apart, as `refused_at_acceptance`).
    fn rejections(&self) -> u64 {
        (0..2)
            .map(|c| {
                let s = self.sched.snapshot(ClassId(c)).unwrap();
                s.rejections + s.refused_at_acceptance
            })
            .sum()
    }

    /// Checks conservation once everything has stopped. `failed_by_shutdown` is the number of
    /// queued requests the shutdown failed (all pull-mode: no waiting request is left by then).
    fn check(&self, failed_by_shutdown: u64) {
        self.release_hogs();
        for c in 0..2 {
            let s = self.sched.snapshot(ClassId(c)).unwrap();
            assert_eq!(
                s.cells_available + s.cells_leased + s.cells_quarantined,
                s.cells_total
            );
            assert_eq!(s.cells_leased, 0, "nothing is leased at quiescence");
            assert_eq!(s.queue_depth, 0);
            assert!(s.cells_quarantined < s.cells_total);
        }
        assert!(
            self.ledger.usage().is_zero(),
            "every permit refunded: {:?}",
            self.ledger.usage()
        );
        let o = &self.out;
        assert_eq!(
            o.started.load(Ordering::Relaxed),
            o.ended(),
            "every waiting request ended exactly once"
        );
        assert_eq!(
            o.submitted.load(Ordering::Relaxed),
            o.pulled.load(Ordering::Relaxed) + failed_by_shutdown,
            "every submitted job was either executed or failed by shutdown"
        );
        assert!(o.granted.load(Ordering::Relaxed) > 0);
    }
}

fn fairway_block_on<F: Future>(f: F) -> F::Output {
    // A tiny thread-parking executor, independent of the crate's own.
    struct Unpark(std::thread::Thread);
    impl std::task::Wake for Unpark {
        fn wake(self: Arc<Self>) {
            self.0.unpark();
        }
    }
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    let mut f = pin!(f);
    loop {
        if let Poll::Ready(r) = f.as_mut().poll(&mut cx) {
            return r;
        }
        std::thread::park_timeout(Duration::from_millis(1));
    }
}

fn next(s: &mut u64) -> u64 {
    // xorshift64*
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

fn threads<M: Mechanism>(threads: usize, ops: usize) {
    threads_sized::<M>(TOY, threads, ops);
}

fn threads_sized<M: Mechanism>(size: Size, threads: usize, ops: usize) {
    common::within(LIMIT, "churn on plain threads", move || {
        threads_body::<M>(size, threads, ops)
    });
}

fn threads_body<M: Mechanism>(size: Size, threads: usize, ops: usize) {
    let w = World::<M>::sized(size);
    let mut failed_by_shutdown = 0;
    std::thread::scope(|s| {
        let executors: Vec<_> = (0..2u16)
            .map(|c| {
                let w = &w;
                s.spawn(move || w.executor(c, 0xABCD ^ u64::from(c)))
            })
            .collect();
        let workers: Vec<_> = (0..threads)
            .map(|t| {
                let w = &w;
                s.spawn(move || {
                    let mut rng = 0x9E37_79B9_7F4A_7C15 ^ (t as u64 + 1);
                    for _ in 0..ops {
                        w.step(&mut rng);
                    }
                })
            })
            .collect();
        for h in workers {
            h.join().unwrap();
        }
        let before = w.rejections();
        w.sched.shutdown();
        for h in executors {
            h.join().unwrap();
        }
        failed_by_shutdown = w.rejections() - before;
    });
    w.check(failed_by_shutdown);
}

fn tokio_tasks<M: Mechanism>(tasks: usize, ops: usize) {
    tokio_sized::<M>(TOY, tasks, ops);
}

fn tokio_sized<M: Mechanism>(size: Size, tasks: usize, ops: usize) {
    common::within(LIMIT, "churn on tokio", move || {
        tokio_body::<M>(size, tasks, ops)
    });
}

fn tokio_body<M: Mechanism>(size: Size, tasks: usize, ops: usize) {
    let w = World::<M>::sized(size);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let mut handles = Vec::new();
        for t in 0..tasks {
            let w = w.clone();
            handles.push(tokio::spawn(async move {
                let mut rng = 0xD1B5_4A32_D192_ED03 ^ (t as u64 + 1);
                for _ in 0..ops {
                    let Some(req) = w.request(&mut rng) else {
                        continue;
                    };
                    w.out.started.fetch_add(1, Ordering::Relaxed);
                    let fut = w.sched.enqueue(req);
                    let r = if next(&mut rng).is_multiple_of(4) {
                        // Cancel by dropping after a short timeout.
                        match tokio::time::timeout(Duration::from_micros(50), fut).await {
                            Ok(r) => r,
                            Err(_) => Err(fairway::Error::new(Code::Cancelled, Reason::Timeout)),
                        }
                    } else {
                        fut.await
                    };
                    let r = match r {
                        Ok(a) => {
                            if next(&mut rng).is_multiple_of(3) {
                                tokio::task::yield_now().await;
                            }
                            w.finish(a, &mut rng);
                            Ok(())
                        }
                        Err(e) => Err(e),
                    };
                    w.out.end(&r);
                }
            }));
        }
        for h in handles {
            h.await.unwrap();
        }
    });
    w.sched.shutdown();
    w.check(0);
}

const SHORT: usize = if cfg!(miri) { 20 } else { 3_000 };

#[test]
fn q04_churn_plain_threads() {
    threads::<Ring>(4, SHORT);
}

#[test]
fn q04_churn_plain_threads_baseline() {
    threads::<Baseline>(4, SHORT);
}

#[test]
fn q04_churn_tokio() {
    tokio_tasks::<Ring>(16, SHORT / 4);
}

#[test]
fn q04_churn_tokio_baseline() {
    tokio_tasks::<Baseline>(16, SHORT / 4);
}

#[test]
fn q04_churn_33_cells() {
    threads_sized::<Ring>(CELLS_33, 4, SHORT);
    tokio_sized::<Ring>(CELLS_33, 16, SHORT / 4);
}

#[test]
fn q04_churn_33_cells_baseline() {
    threads_sized::<Baseline>(CELLS_33, 4, SHORT);
    tokio_sized::<Baseline>(CELLS_33, 16, SHORT / 4);
}

#[test]
#[cfg_attr(miri, ignore = "1000 cells: too slow under Miri")]
fn q04_churn_1000_cells() {
    threads_sized::<Ring>(CELLS_1000, 4, SHORT);
    tokio_sized::<Ring>(CELLS_1000, 16, SHORT / 4);
}

#[test]
#[cfg_attr(miri, ignore = "1000 cells: too slow under Miri")]
fn q04_churn_1000_cells_baseline() {
    threads_sized::<Baseline>(CELLS_1000, 4, SHORT);
    tokio_sized::<Baseline>(CELLS_1000, 16, SHORT / 4);
}

#[test]
#[ignore = "long: run with --release -- --ignored"]
fn q04_churn_long() {
    threads::<Ring>(8, 150_000);
    tokio_tasks::<Ring>(32, 10_000);
}

#[test]
#[ignore = "long: run with --release -- --ignored"]
fn q04_churn_long_baseline() {
    threads::<Baseline>(8, 150_000);
}

/// Executors parked in `next_blocking` must all return once shutdown has failed the queued work,
/// even when the shutdown's drain runs on another thread's pass (regression: a parked executor
/// missed the drain and slept forever).
fn executors_exit_after_shutdown<M: Mechanism>() {
    const ROUNDS: usize = if cfg!(miri) { 2 } else { 100 };
    for round in 0..ROUNDS {
        let w = World::<M>::new();
        let mut rng = round as u64 + 1;
        // Every cell held, so submitted jobs stay queued and the executors park.
        let mut held = Vec::new();
        while held.len() < 2 * CELLS as usize {
            if let Some(req) = w.request_with(&mut rng, false) {
                if let Ok(a) = w.sched.try_enqueue(req) {
                    held.push(a);
                }
            }
        }
        let mut submitted = 0;
        while submitted < 16 {
            if let Some(req) = w.request_with(&mut rng, false) {
                submitted += usize::from(w.sched.submit(req, 0).is_ok());
            }
        }
        let (done_tx, done_rx) = std::sync::mpsc::channel();
        // Detached threads: if one stays parked, the test fails instead of hanging in a join.
        for c in 0..4u16 {
            let (w, done_tx) = (w.clone(), done_tx.clone());
            std::thread::spawn(move || {
                while let Some(job) = w.sched.next_blocking(ClassId(c % 2)).expect("known class") {
                    job.assignment.release();
                }
                done_tx.send(()).unwrap();
            });
        }
        std::thread::sleep(Duration::from_millis(1));
        w.sched.shutdown();
        for _ in 0..4 {
            done_rx
                .recv_timeout(Duration::from_secs(10))
                .expect("an executor stayed parked after shutdown drained the class");
        }
        held.into_iter().for_each(fairway::Assignment::release);
        assert!(w.ledger.usage().is_zero());
    }
}

#[test]
fn q04_executors_exit_after_shutdown() {
    executors_exit_after_shutdown::<Ring>();
}

#[test]
fn q04_executors_exit_after_shutdown_baseline() {
    executors_exit_after_shutdown::<Baseline>();
}
