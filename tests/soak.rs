//! Soak with conservation (SPEC Q04, F51, F60): long random concurrent churn on every engine,
//! stopped at a quiescence point every 10^4 operations to check that nothing leaked.
//!
//! Operations: enqueue (polled, kept pending, re-polled), try_enqueue, pull-mode submit and
//! try_next, cancel by token and by handle, dropping a pending future, deadlines expiring on a
//! shared manual clock that the workers advance, release, quarantine, dropping an assignment,
//! and shutdown followed by a restart (a new scheduler on the same ledger).
//!
//! At every quiescence point:
//! - the ledger's usage is zero: every permit was refunded, and refunded once (a second refund
//!   would show as a non-zero or wrapped usage);
//! - every class has available + leased + quarantined = total, nothing leased, nothing queued;
//! - every request ended with exactly one outcome (a per-request outcome count, not a sum);
//! - the snapshot counters add up to the requests the scheduler saw: grants + cancellations +
//!   expirations + rejections of each class equals the requests that reached that class.
//!
//! Sizes: 4 cells / 8 tenants / 64 queue slots, 33 cells / 10^4 tenants / 10^5 queue slots and
//! 1000 cells / 10^4 tenants / 10^5 queue slots, in turn across restarts.
//!
//! Operations: `FAIRWAY_SOAK_OPS` for the whole binary (split over its four tests; default
//! 8 * 10^4, CI sets 2 * 10^7 in a release run). Seed: `FAIRWAY_SOAK_SEED` (default fixed; each
//! test prints its seed so a failure replays). Each test prints one machine-readable line:
//! `SOAK engine=.. mode=.. ops=.. checks=.. restarts=.. seed=..`.

use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
use fairway::oracle::{Baseline, Mechanism, Ring, SchedulerOn, StdMutex};
use fairway::{
    AdmittedRequest, Assignment, CancellationToken, ClassId, Clock, Code, ManualClock,
    RequestHandle, RequestId, Scheduler, TenantId,
};
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{mpsc, Arc};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// Operations between quiescence points.
const ROUND: u64 = if cfg!(miri) { 50 } else { 10_000 };
/// Quiescence points between restarts.
const ROUNDS_PER_EPOCH: u64 = 20;
const CLASSES: usize = 2;
const MAX_TENANTS: u32 = 10_000;

/// (cells, tenants used, queue capacity) per epoch, in turn.
const SIZES: [(u32, u32, u32); 3] = if cfg!(miri) {
    [(4, 8, 64), (33, 100, 256), (4, 8, 64)]
} else {
    [(4, 8, 64), (33, 10_000, 100_000), (1000, 10_000, 100_000)]
};

/// A whole test fails after this long instead of hanging.
const TEST_TIMEOUT: Duration = Duration::from_secs(600);
/// A quiescence drain that makes no progress for this long is a stranded request.
const DRAIN_TIMEOUT: Duration = Duration::from_secs(20);

fn total_ops() -> u64 {
    std::env::var("FAIRWAY_SOAK_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(if cfg!(miri) { 400 } else { 80_000 })
}

fn seed() -> u64 {
    std::env::var("FAIRWAY_SOAK_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(0x5EED_0FFA_1E3A_1100)
}

fn next(s: &mut u64) -> u64 {
    // xorshift64*
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    s.wrapping_mul(0x2545_F491_4F6C_DD1D)
}

/// Per-class tallies of what the host saw.
#[derive(Default)]
struct ClassTally {
    /// Requests that reached the class's engine (enqueued, try-enqueued and not refused for lack
    /// of a free cell, or submitted).
    reached: AtomicU64,
    /// Requests refused before they reached the class's engine (not in the snapshot).
    refused_before: AtomicU64,
    /// Requests refused with `deadline-exceeded` whose deadline had passed before `enqueue` or
    /// `try_enqueue` was called: refused at enqueue, which the class's expirations must count.
    past_at_enqueue: AtomicU64,
    /// The same, with a deadline that passed during the call (another thread moved the clock):
    /// refused at enqueue or expired at acceptance, which cannot be told apart from outside.
    past_during_enqueue: AtomicU64,
}

/// Whether the class counts a refusal in its snapshot (SPEC F60): every refusal of a request
/// with a valid permit does (queue full, shut down, cancelled or expired already), except
/// `no-capacity` from `try_enqueue` (the request is given back, never seen) and bad input.
fn counted_refusal(e: &fairway::Error) -> bool {
    !matches!(
        e.reason(),
        fairway::Reason::NoCapacity
            | fairway::Reason::ForeignAdmission
            | fairway::Reason::CancellationIdentity
            | fairway::Reason::DuplicateRequest
            | fairway::Reason::Class
    )
}

/// How a request entered the scheduler.
#[derive(Clone, Copy)]
enum Kind {
    Enqueue = 1,
    TryEnqueue = 2,
    Submit = 3,
}
const KINDS: [&str; 4] = ["not entered", "enqueue", "try_enqueue", "submit"];

/// What one epoch (one scheduler between a start and its shutdown) saw.
struct Epoch<M: Mechanism> {
    ledger: Ledger,
    clock: Arc<ManualClock>,
    sched: SchedulerOn<u64, M>,
    cells: u32,
    tenants: u32,
    /// Outcomes per request id of the current round (`id - base`).
    outcomes: Vec<AtomicU8>,
    /// How each request of the current round entered (`Kind`), for failure messages.
    kinds: Vec<AtomicU8>,
    base: AtomicU64,
    ids: AtomicU64,
    tally: [ClassTally; CLASSES],
    quarantine_budget: [AtomicU64; CLASSES],
}

impl<M: Mechanism> Epoch<M> {
    fn new(
        ledger: &Ledger,
        clock: &Arc<ManualClock>,
        size: (u32, u32, u32),
        first_id: u64,
    ) -> Self {
        let (cells, tenants, queue) = size;
        let sched = Scheduler::builder(ledger.clone())
            .payload::<u64>()
            .class(cells, queue)
            .class(cells, queue)
            .starvation_after(Duration::from_millis(20))
            .build_with::<M>()
            .unwrap();
        Self {
            ledger: ledger.clone(),
            clock: clock.clone(),
            sched,
            cells,
            tenants,
            outcomes: (0..ROUND + 64).map(|_| AtomicU8::new(0)).collect(),
            kinds: (0..ROUND + 64).map(|_| AtomicU8::new(0)).collect(),
            base: AtomicU64::new(first_id),
            ids: AtomicU64::new(first_id),
            tally: Default::default(),
            quarantine_budget: Default::default(),
        }
    }

    /// A new request, or `None` if admission refused it (it then has no outcome to count).
    fn request(&self, rng: &mut u64, deadline: bool) -> Option<(AdmittedRequest, u16)> {
        self.request_in(rng, deadline, None)
    }

    fn request_in(
        &self,
        rng: &mut u64,
        deadline: bool,
        class: Option<u16>,
    ) -> Option<(AdmittedRequest, u16)> {
        let r = next(rng);
        let id = self.ids.fetch_add(1, Ordering::Relaxed);
        let class = class.unwrap_or(((r >> 8) % CLASSES as u64) as u16);
        let mut a = AdmissionRequest::new(
            RequestId(id),
            TenantId((r % u64::from(self.tenants)) as u32),
        )
        .class(ClassId(class))
        .priority(((r >> 16) % 4) as u8)
        .weight(1 + ((r >> 20) % 3) as u32);
        if deadline && (r >> 24).is_multiple_of(4) {
            a = a.deadline(Duration::from_millis(1 + (r >> 32) % 40));
        }
        match self.ledger.admit(a) {
            Ok(permit) => Some((
                AdmittedRequest::new(permit, CancellationToken::new(RequestId(id))),
                class,
            )),
            Err(e) => panic!("admission refused request {id}: {e}"),
        }
    }

    /// Counts the first result of a request in `class`: a grant, or a refusal that the class's
    /// counters must show (an expired deadline: SPEC F46, F60), or a refusal before the request
    /// reached the class (no free cell for `try_enqueue`, a full queue).
    ///
    /// `window` is the request's deadline and the clock read before and after the call that
    /// checked it.
    fn count_result(
        &self,
        class: u16,
        r: &Result<Assignment, fairway::Error>,
        window: (Option<u64>, u64, u64),
    ) {
        let t = &self.tally[usize::from(class)];
        let c = match r {
            Ok(_) => &t.reached,
            Err(err) if err.code() == Code::DeadlineExceeded => match window {
                (Some(d), t0, _) if d <= t0 => &t.past_at_enqueue,
                (Some(d), _, t1) if d <= t1 => &t.past_during_enqueue,
                _ => &t.reached,
            },
            Err(err) if counted_refusal(err) => &t.reached,
            Err(_) => &t.refused_before,
        };
        c.fetch_add(1, Ordering::Relaxed);
    }

    /// Notes how request `id` entered the scheduler.
    fn entered(&self, id: u64, kind: Kind) {
        let i = id - self.base.load(Ordering::Relaxed);
        self.kinds[i as usize].store(kind as u8, Ordering::Relaxed);
    }

    /// Records the one outcome of request `id`.
    fn ended(&self, id: u64) {
        let i = id - self.base.load(Ordering::Relaxed);
        let prev = self.outcomes[i as usize].fetch_add(1, Ordering::Relaxed);
        assert_eq!(prev, 0, "request {id} ended twice");
    }

    /// Ends an assignment: mostly release, rarely quarantine or drop (at most
    /// `min(cells - 1, 8)` per class and epoch, so every class keeps a usable cell).
    fn finish(&self, a: Assignment, rng: &mut u64) {
        let r = next(rng) % 1000;
        let budget = &self.quarantine_budget[usize::from(a.class().0)];
        // Dropping an assignment without a disposition quarantines its cell too.
        if r < 2 && budget.fetch_add(1, Ordering::Relaxed) < u64::from((self.cells - 1).min(8)) {
            if r == 0 {
                a.quarantine("soak");
            } else {
                drop(a);
            }
        } else {
            a.release();
        }
    }

    /// Counts an `enqueue` result that came back at once or on a later poll.
    fn settle(&self, id: u64, r: Result<Assignment, fairway::Error>, held: &mut Vec<Assignment>) {
        self.ended(id);
        if let Ok(a) = r {
            held.push(a);
        }
    }

    /// Starts a new round of ids: every id of the last round must have ended exactly once.
    /// `unended` is how many ids may lack an outcome (pull jobs failed by shutdown).
    fn check_outcomes(&self, unended: u64) {
        let base = self.base.load(Ordering::Relaxed);
        let end = self.ids.load(Ordering::Relaxed);
        let mut missing = 0;
        let mut first_missing = Vec::new();
        for (i, o) in self.outcomes[..(end - base) as usize].iter().enumerate() {
            let kind = self.kinds[i].swap(0, Ordering::Relaxed);
            match o.swap(0, Ordering::Relaxed) {
                0 => {
                    missing += 1;
                    if first_missing.len() < 8 {
                        first_missing.push((base + i as u64, KINDS[usize::from(kind)]));
                    }
                }
                1 => {}
                n => panic!("request {} ended {n} times", base + i as u64),
            }
        }
        assert_eq!(
            missing, unended,
            "requests without an outcome (first: {first_missing:?})"
        );
        self.base.store(end, Ordering::Relaxed);
    }

    /// Quiescence: nothing leased, queued or held; every permit back; the counters add up.
    fn check_quiescent(&self) {
        for c in 0..CLASSES {
            let s = self.sched.snapshot(ClassId(c as u16)).unwrap();
            assert_eq!(
                s.cells_available + s.cells_leased + s.cells_quarantined,
                s.cells_total,
                "class {c}: available + leased + quarantined = total"
            );
            assert_eq!(s.cells_total, self.cells);
            assert_eq!(s.cells_leased, 0, "class {c}: nothing leased at quiescence");
            assert_eq!(s.queue_depth, 0, "class {c}: nothing queued at quiescence");
            assert!(s.cells_quarantined < s.cells_total);
            let t = &self.tally[c];
            let sum = s.grants + s.cancellations + s.expirations + s.rejections;
            let reached = t.reached.load(Ordering::Relaxed);
            let past = t.past_at_enqueue.load(Ordering::Relaxed);
            let during = t.past_during_enqueue.load(Ordering::Relaxed);
            let counted = sum == reached + past + during;
            assert!(
                counted,
                "class {c}: grants {} + cancellations {} + expirations {} + rejections {} = {sum} \
                 must add up to the requests that reached the class: {reached}, plus {past} \
                 refused at enqueue for a past deadline, plus up to {during} whose deadline \
                 passed during the call",
                s.grants, s.cancellations, s.expirations, s.rejections
            );
        }
        let u = self.ledger.usage();
        assert!(u.is_zero(), "every permit refunded exactly once: {u:?}");
    }
}

/// A pending enqueue: its future, token, id, and handle (taken at the first poll).
type PendingFut<'a, M> = (
    Pin<Box<fairway::oracle::EnqueueOn<'a, u64, M>>>,
    CancellationToken,
    u64,
);

/// One worker's part of a round, driven synchronously with no waiting: everything is polled.
struct Worker<'a, M: Mechanism> {
    e: &'a Epoch<M>,
    rng: u64,
    held: Vec<Assignment>,
    pending: Vec<PendingFut<'a, M>>,
    pulls: Vec<(RequestHandle, u64)>,
    max_held: usize,
}

impl<'a, M: Mechanism> Worker<'a, M> {
    fn new(e: &'a Epoch<M>, rng: u64, workers: usize) -> Self {
        Self {
            e,
            rng,
            held: Vec::new(),
            pending: Vec::new(),
            pulls: Vec::new(),
            // Together the workers hold up to about twice the cells, so requests queue at
            // every size.
            max_held: (2 * e.cells as usize / workers).max(2),
        }
    }

    fn poll_pending(&mut self, i: usize) -> bool {
        let mut cx = Context::from_waker(Waker::noop());
        if let Poll::Ready(r) = self.pending[i].0.as_mut().poll(&mut cx) {
            let (_, _, id) = self.pending.swap_remove(i);
            self.e.settle(id, r, &mut self.held);
            true
        } else {
            false
        }
    }

    fn pick(&mut self, n: usize) -> usize {
        (next(&mut self.rng) % n as u64) as usize
    }

    fn step(&mut self) {
        let e = self.e;
        let op = next(&mut self.rng) % 100;
        match op {
            // Enqueue and poll once; kept pending if queued.
            0..=29 => {
                let Some((req, class)) = e.request(&mut self.rng, true) else {
                    return;
                };
                let id = req.permit().id().0;
                e.entered(id, Kind::Enqueue);
                let token = req.token().expect("soak requests carry a token").clone();
                let (deadline, t0) = (req.permit().deadline(), e.clock.now());
                let mut f = Box::pin(e.sched.enqueue(req));
                let window = (deadline, t0, e.clock.now());
                let mut cx = Context::from_waker(Waker::noop());
                match f.as_mut().poll(&mut cx) {
                    Poll::Ready(r) => {
                        // Granted on the fast path, or refused; a refusal before the engine is
                        // not in the class's counters.
                        e.count_result(class, &r, window);
                        e.settle(id, r, &mut self.held);
                    }
                    Poll::Pending => {
                        e.tally[usize::from(class)]
                            .reached
                            .fetch_add(1, Ordering::Relaxed);
                        self.pending.push((f, token, id));
                    }
                }
            }
            30..=36 => {
                let Some((req, class)) = e.request(&mut self.rng, true) else {
                    return;
                };
                let id = req.permit().id().0;
                e.entered(id, Kind::TryEnqueue);
                let (deadline, t0) = (req.permit().deadline(), e.clock.now());
                // No free cell: the request comes back and is dropped, refunding it.
                let r = e.sched.try_enqueue(req).map_err(|err| err.error);
                e.count_result(class, &r, (deadline, t0, e.clock.now()));
                e.ended(id);
                if let Ok(a) = r {
                    self.held.push(a);
                }
            }
            // Pull mode: submit (no deadlines: an expired pulled job vanishes unseen).
            37..=46 => {
                let Some((req, class)) = e.request(&mut self.rng, false) else {
                    return;
                };
                let id = req.permit().id().0;
                e.entered(id, Kind::Submit);
                match e.sched.submit(req, id) {
                    Ok(h) => {
                        e.tally[usize::from(class)]
                            .reached
                            .fetch_add(1, Ordering::Relaxed);
                        self.pulls.push((h, id));
                    }
                    Err(err) if counted_refusal(&err.error) => {
                        e.tally[usize::from(class)]
                            .reached
                            .fetch_add(1, Ordering::Relaxed);
                        e.ended(id);
                    }
                    Err(_) => {
                        e.tally[usize::from(class)]
                            .refused_before
                            .fetch_add(1, Ordering::Relaxed);
                        e.ended(id);
                    }
                }
            }
            47..=54 => {
                let class = ClassId((next(&mut self.rng) % CLASSES as u64) as u16);
                if let Some(job) = e.sched.try_next(class).expect("a configured class") {
                    e.ended(job.payload);
                    self.held.push(job.assignment);
                }
            }
            // Cancel a pull job by handle.
            55..=56 if !self.pulls.is_empty() => {
                let i = self.pick(self.pulls.len());
                let (h, id) = self.pulls.swap_remove(i);
                if e.sched.cancel(h).is_ok() {
                    e.ended(id);
                }
            }
            // Cancel a pending enqueue by token, by handle, or by dropping it.
            57..=60 if !self.pending.is_empty() => {
                let i = self.pick(self.pending.len());
                self.pending[i].1.cancel("soak");
                self.poll_pending(i);
            }
            61..=63 if !self.pending.is_empty() => {
                let i = self.pick(self.pending.len());
                if let Some(h) = self.pending[i].0.handle() {
                    let _ = e.sched.cancel(h);
                }
                self.poll_pending(i);
            }
            64..=67 if !self.pending.is_empty() => {
                let i = self.pick(self.pending.len());
                let (f, _, id) = self.pending.swap_remove(i);
                drop(f);
                e.ended(id);
            }
            68..=77 if !self.pending.is_empty() => {
                let i = self.pick(self.pending.len());
                self.poll_pending(i);
            }
            // Time passes: deadlines expire, requests age.
            78..=80 => e
                .clock
                .advance(Duration::from_millis(1 + next(&mut self.rng) % 5)),
            _ => {
                if !self.held.is_empty() && (self.held.len() >= self.max_held || op < 97) {
                    let i = self.pick(self.held.len());
                    let a = self.held.swap_remove(i);
                    e.finish(a, &mut self.rng);
                }
            }
        }
    }

    /// Ends everything this worker holds, then drives its pending requests and the pull jobs
    /// until none is left. Fails if no progress is made for `DRAIN_TIMEOUT` (a stranded
    /// request: work queued while a cell is free).
    fn drain(mut self, others_done: &std::sync::Barrier) {
        for a in self.held.drain(..) {
            a.release();
        }
        // Every worker has given back what it held before anyone waits for a grant.
        others_done.wait();
        let mut last_progress = Instant::now();
        loop {
            let mut progressed = false;
            let mut i = 0;
            while i < self.pending.len() {
                if self.poll_pending(i) {
                    progressed = true;
                } else {
                    i += 1;
                }
            }
            for a in self.held.drain(..) {
                a.release();
            }
            for c in 0..CLASSES {
                while let Some(job) = self
                    .e
                    .sched
                    .try_next(ClassId(c as u16))
                    .expect("a configured class")
                {
                    self.e.ended(job.payload);
                    job.assignment.release();
                    progressed = true;
                }
            }
            self.pulls.clear();
            if self.pending.is_empty() {
                return;
            }
            if progressed {
                last_progress = Instant::now();
            } else if last_progress.elapsed() > DRAIN_TIMEOUT {
                let ids: Vec<_> = self.pending.iter().map(|p| p.2).take(8).collect();
                let snaps: Vec<_> = (0..CLASSES)
                    .map(|c| self.e.sched.snapshot(ClassId(c as u16)).unwrap())
                    .map(|s| (s.cells_available, s.cells_leased, s.queue_depth))
                    .collect();
                panic!(
                    "stranded: {} requests still queued after every cell was released \
                     (first ids {ids:?}; per class (available, leased, depth) {snaps:?})",
                    self.pending.len()
                );
            } else {
                std::thread::yield_now();
            }
        }
    }
}

/// Shuts an epoch down with pull jobs queued behind held cells, and checks that the shutdown
/// failed exactly those, that new work is refused, and that every permit came back.
fn shutdown_epoch<M: Mechanism>(e: &Epoch<M>, rng: &mut u64) {
    // Hold every usable cell of class 0, then queue pull jobs behind them.
    let mut held = Vec::new();
    loop {
        let Some((req, class)) = e.request_in(rng, false, Some(0)) else {
            continue;
        };
        let id = req.permit().id().0;
        let r = e.sched.try_enqueue(req).map_err(|err| err.error);
        e.count_result(class, &r, (None, 0, 0));
        e.ended(id);
        match r {
            Ok(a) => held.push(a),
            Err(_) => break,
        }
    }
    let queued = 1 + next(rng) % 8;
    for _ in 0..queued {
        let (req, _) = e.request_in(rng, false, Some(0)).unwrap();
        let id = req.permit().id().0;
        e.sched
            .submit(req, id)
            .expect("queued behind the held cells");
        e.tally[0].reached.fetch_add(1, Ordering::Relaxed);
    }
    let rejections = |e: &Epoch<M>| -> u64 {
        (0..CLASSES)
            .map(|c| e.sched.snapshot(ClassId(c as u16)).unwrap().rejections)
            .sum()
    };
    let before = rejections(e);
    e.sched.shutdown();
    assert_eq!(
        rejections(e) - before,
        queued,
        "shutdown failed every queued job"
    );
    // New work is refused.
    let (req, class) = e.request(rng, false).unwrap();
    let id = req.permit().id().0;
    let err = e.sched.try_enqueue(req).unwrap_err();
    assert_eq!(err.error.code(), Code::Unavailable);
    e.count_result(class, &Err(err.error), (None, 0, 0));
    e.ended(id);
    for a in held {
        a.release();
    }
    for c in 0..CLASSES {
        assert!(
            e.sched.try_next(ClassId(c as u16)).unwrap().is_none(),
            "a job after shutdown"
        );
    }
    e.check_outcomes(queued);
    e.check_quiescent();
}

#[derive(Default)]
struct Figures {
    ops: u64,
    checks: u64,
    restarts: u64,
}

fn ledger(clock: &Arc<ManualClock>) -> Ledger {
    Ledger::with_clock(
        LedgerConfig::new(vec![ClassSpec::new("a"), ClassSpec::new("b")], MAX_TENANTS),
        clock.clone(),
    )
    .unwrap()
}

/// Plain threads: `workers` threads run each round; the main thread checks at quiescence.
fn soak_threads<M: Mechanism>(ops: u64, seed: u64) -> Figures {
    let clock = Arc::new(ManualClock::new());
    let ledger = ledger(&clock);
    let workers = 2;
    let mut f = Figures::default();
    let mut first_id = 1;
    let mut rng = seed;
    let mut epoch = 0;
    while f.ops < ops {
        let e = Epoch::<M>::new(&ledger, &clock, SIZES[epoch % SIZES.len()], first_id);
        for _ in 0..ROUNDS_PER_EPOCH {
            if f.ops >= ops {
                break;
            }
            let barrier = std::sync::Barrier::new(workers);
            std::thread::scope(|s| {
                for _ in 0..workers {
                    let (e, barrier) = (&e, &barrier);
                    let wseed = next(&mut rng) | 1;
                    s.spawn(move || {
                        let mut worker = Worker::new(e, wseed, workers);
                        for _ in 0..ROUND / workers as u64 {
                            worker.step();
                        }
                        worker.drain(barrier);
                    });
                }
            });
            f.ops += ROUND;
            e.check_outcomes(0);
            e.check_quiescent();
            f.checks += 1;
        }
        shutdown_epoch(&e, &mut rng);
        f.checks += 1;
        first_id = e.ids.load(Ordering::Relaxed);
        f.restarts += 1;
        epoch += 1;
    }
    f
}

/// Tasks on a multi-thread tokio runtime: every wait is bounded by a tokio timeout (dropping
/// the future cancels it), so no task waits on another forever.
fn soak_tokio<M: Mechanism>(ops: u64, seed: u64) -> Figures {
    let clock = Arc::new(ManualClock::new());
    let ledger = ledger(&clock);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    const TASKS: u64 = 16;
    let mut f = Figures::default();
    let mut first_id = 1;
    let mut rng = seed;
    let mut epoch = 0;
    while f.ops < ops {
        let e = Arc::new(Epoch::<M>::new(
            &ledger,
            &clock,
            SIZES[epoch % SIZES.len()],
            first_id,
        ));
        for _ in 0..ROUNDS_PER_EPOCH {
            if f.ops >= ops {
                break;
            }
            let seeds: Vec<u64> = (0..TASKS).map(|_| next(&mut rng) | 1).collect();
            let e2 = e.clone();
            rt.block_on(async move {
                let mut handles = Vec::new();
                for s in seeds {
                    let e = e2.clone();
                    handles.push(tokio::spawn(async move {
                        let mut rng = s;
                        for _ in 0..ROUND / TASKS {
                            tokio_step(&e, &mut rng).await;
                        }
                    }));
                }
                for h in handles {
                    h.await.unwrap();
                }
            });
            // Pull jobs left queued are taken and released here.
            for c in 0..CLASSES {
                while let Some(job) = e
                    .sched
                    .try_next(ClassId(c as u16))
                    .expect("a configured class")
                {
                    e.ended(job.payload);
                    job.assignment.release();
                }
            }
            f.ops += ROUND;
            e.check_outcomes(0);
            e.check_quiescent();
            f.checks += 1;
        }
        shutdown_epoch(&e, &mut rng);
        f.checks += 1;
        first_id = e.ids.load(Ordering::Relaxed);
        f.restarts += 1;
        epoch += 1;
    }
    f
}

async fn tokio_step<M: Mechanism>(e: &Epoch<M>, rng: &mut u64) {
    let op = next(rng) % 10;
    match op {
        0..=5 => {
            let Some((req, class)) = e.request(rng, true) else {
                return;
            };
            let id = req.permit().id().0;
            e.entered(id, Kind::Enqueue);
            let (deadline, t0) = (req.permit().deadline(), e.clock.now());
            let fut = e.sched.enqueue(req);
            let window = (deadline, t0, e.clock.now());
            let waited = Duration::from_micros(next(rng) % 200);
            let r = tokio::time::timeout(waited, fut).await;
            let t = &e.tally[usize::from(class)];
            match r {
                Ok(r) => {
                    e.count_result(class, &r, window);
                    e.ended(id);
                    if let Ok(a) = r {
                        if next(rng).is_multiple_of(3) {
                            tokio::task::yield_now().await;
                        }
                        e.finish(a, rng);
                    }
                }
                Err(_) => {
                    // Timed out: the future was dropped, which withdrew the request.
                    t.reached.fetch_add(1, Ordering::Relaxed);
                    e.ended(id);
                }
            }
        }
        6 => {
            let Some((req, class)) = e.request(rng, false) else {
                return;
            };
            let id = req.permit().id().0;
            e.entered(id, Kind::Submit);
            let t = &e.tally[usize::from(class)];
            match e.sched.submit(req, id) {
                Ok(h) => {
                    t.reached.fetch_add(1, Ordering::Relaxed);
                    if next(rng).is_multiple_of(4) && e.sched.cancel(h).is_ok() {
                        e.ended(id);
                    }
                }
                Err(err) if counted_refusal(&err.error) => {
                    t.reached.fetch_add(1, Ordering::Relaxed);
                    e.ended(id);
                }
                Err(_) => {
                    t.refused_before.fetch_add(1, Ordering::Relaxed);
                    e.ended(id);
                }
            }
        }
        7 | 8 => {
            let class = ClassId((next(rng) % CLASSES as u64) as u16);
            if let Some(job) = e.sched.try_next(class).expect("a configured class") {
                e.ended(job.payload);
                e.finish(job.assignment, rng);
            }
        }
        _ => e.clock.advance(Duration::from_millis(1 + next(rng) % 5)),
    }
}

/// Runs `f` on its own thread and fails if it does not finish within `TEST_TIMEOUT`.
fn with_timeout(name: &'static str, f: impl FnOnce() -> Figures + Send + 'static) -> Figures {
    let (tx, rx) = mpsc::channel();
    let h = std::thread::spawn(move || {
        let r = f();
        let _ = tx.send(());
        r
    });
    match rx.recv_timeout(TEST_TIMEOUT) {
        Ok(()) => h.join().unwrap(),
        // The thread panicked (the sender was dropped): report its panic.
        Err(mpsc::RecvTimeoutError::Disconnected) => match h.join() {
            Ok(r) => r,
            Err(p) => std::panic::resume_unwind(p),
        },
        Err(mpsc::RecvTimeoutError::Timeout) => panic!("{name}: no result after {TEST_TIMEOUT:?}"),
    }
}

fn run(name: &'static str, engine: &str, mode: &str, f: fn(u64, u64) -> Figures) {
    let ops = (total_ops() / 4).max(ROUND);
    let seed = seed();
    eprintln!("soak {name}: seed {seed} (FAIRWAY_SOAK_SEED={seed} replays), {ops} operations");
    let start = Instant::now();
    let fig = with_timeout(name, move || f(ops, seed));
    println!(
        "SOAK engine={engine} mode={mode} ops={} checks={} restarts={} seed={seed} secs={:.1}",
        fig.ops,
        fig.checks,
        fig.restarts,
        start.elapsed().as_secs_f64()
    );
}

#[test]
fn q04_soak_threads() {
    run(
        "q04_soak_threads",
        "engine",
        "threads",
        soak_threads::<Ring>,
    );
}

#[test]
fn q04_soak_threads_baseline() {
    run(
        "q04_soak_threads_baseline",
        "baseline-std",
        "threads",
        soak_threads::<Baseline<StdMutex>>,
    );
}

#[test]
fn q04_soak_tokio() {
    run("q04_soak_tokio", "engine", "tokio", soak_tokio::<Ring>);
}

#[test]
fn q04_soak_tokio_baseline() {
    run(
        "q04_soak_tokio_baseline",
        "baseline-std",
        "tokio",
        soak_tokio::<Baseline<StdMutex>>,
    );
}
