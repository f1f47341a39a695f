//! The enqueue and pull futures.

use super::{
    give_up, AdmittedRequest, Assignment, CellReturn, Job, Mechanism, RequestHandle, Ring,
    SchedulerOn, Shared,
};
use crate::admission::ExecutionPermit;
use crate::cancel::CancellationToken;
use crate::engine::{ended_error, ClassEngine, Ended, Enqueued, Polled, Ticket};
use crate::error::Reason;
use crate::error::{Code, Error};
use crate::ids::ClassId;
use crate::pool::Lease;
use crate::raw::idset::Slot;
use core::fmt;
use core::future::Future;
use core::ops::Deref;
use core::pin::Pin;
use core::task::{Context, Poll};
use std::sync::Arc;

/// What a future holds on to: a borrow of the scheduler (`enqueue`, `next`) or an owned clone
/// of it (`enqueue_owned`, `next_owned`, whose futures are `'static`).
pub(super) enum Holder<'a, X> {
    Borrowed(&'a X),
    Owned(X),
    /// The owned handle was handed on to the assignment the future resolved to (an owned
    /// `Enqueue` that completed with one): the future touches its scheduler no more.
    Moved,
}

impl<X> Deref for Holder<'_, X> {
    type Target = X;

    #[inline]
    fn deref(&self) -> &X {
        match self {
            Holder::Borrowed(x) => x,
            Holder::Owned(x) => x,
            // Only a completed `Enqueue` or `Next` is `Moved`, and it reaches its scheduler no
            // more: its poll panics first (polled after completion); `Enqueue`'s drop and
            // `handle` look at its stage (`Done`) first, `Next`'s drop at its waiter slot (none).
            Holder::Moved => moved(),
        }
    }
}

/// A `Moved` holder was used: a bug in this module (kept out of line, off the hot path).
#[cold]
#[inline(never)]
fn moved() -> ! {
    unreachable!("a completed future's scheduler handle was used")
}

impl<T: Send + 'static, M: Mechanism> Holder<'_, SchedulerOn<T, M>> {
    /// As for `Enqueue` below: the handle the job's assignment keeps, moved out of an owned
    /// `Next` (which then is done) or cloned from a borrowed one.
    #[inline]
    fn hand_on(&mut self) -> Arc<dyn CellReturn> {
        if let Holder::Borrowed(scheduler) = self {
            return Arc::clone(&scheduler.shared) as _;
        }
        match core::mem::replace(self, Holder::Moved) {
            Holder::Owned(scheduler) => scheduler.shared,
            _ => moved(),
        }
    }
}

impl<'a, T: Send + 'static, M: Mechanism> Holder<'a, Arc<Shared<T, M>>> {
    /// The handle an assignment keeps its scheduler alive with, for the future that resolves to
    /// it: an owned future's own `Arc`, moved (no count changes hands: one atomic increment now
    /// and one decrement at the future's drop saved), or a clone of a borrowed one.
    #[inline]
    fn hand_on(&mut self) -> Arc<dyn CellReturn> {
        if let Holder::Borrowed(shared) = self {
            return Arc::clone(shared) as _;
        }
        match core::mem::replace(self, Holder::Moved) {
            Holder::Owned(shared) => shared,
            _ => moved(),
        }
    }
}

enum Stage {
    /// Queued under this engine handle.
    Queued(u64),
    /// Granted on the fast path; not yet accepted.
    Granted(Lease),
    /// Refused before queueing (the permit is already refunded).
    Failed(Error),
    Done,
}

/// Future returned by [`Scheduler::enqueue`](super::Scheduler::enqueue) (borrowing the scheduler) and
/// [`Scheduler::enqueue_owned`](super::Scheduler::enqueue_owned) (`Enqueue<'static, ..>`, holding a clone of it, for
/// `tokio::spawn`); resolves to an [`Assignment`].
///
/// # Cancel safety
///
/// Dropping it withdraws the request and refunds everything it held (SPEC F41, F42): a queued
/// entry is removed, a granted but unaccepted cell goes back to its pool, then the quota is
/// refunded. Aborting the task that polls it is the same as dropping it.
pub type Enqueue<'a, T = ()> = EnqueueOn<'a, T, Ring>;

/// [`Enqueue`] of a scheduler over any [`Mechanism`] (the oracle's twins).
#[doc(hidden)]
#[must_use = "futures do nothing unless polled; dropping this one withdraws the request"]
pub struct EnqueueOn<'a, T: Send + 'static, M: Mechanism> {
    shared: Holder<'a, Arc<Shared<T, M>>>,
    class: ClassId,
    stage: Stage,
    /// The execution part of the permit; its queue slot was returned at grant or is owned by
    /// the engine entry while queued (SPEC F45).
    permit: Option<ExecutionPermit>,
    token: Option<CancellationToken>,
    /// The request id's place among the live ids (SPEC F34): handed to the assignment, or given
    /// up when the request ends otherwise.
    live: Option<Slot>,
}

impl<T: Send + 'static, M: Mechanism> fmt::Debug for EnqueueOn<'_, T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Enqueue")
            .field("class", &self.class)
            .finish_non_exhaustive()
    }
}

impl<'a, T: Send + 'static, M: Mechanism> EnqueueOn<'a, T, M> {
    pub(super) fn start(shared: Holder<'a, Arc<Shared<T, M>>>, request: AdmittedRequest) -> Self {
        let class = request.permit.class();
        let (stage, live) = match Self::register(&shared, &request) {
            Ok(registered) => registered,
            Err(error) => {
                return Self {
                    shared,
                    class,
                    stage: Stage::Failed(error),
                    permit: None,
                    token: None,
                    live: None,
                }
            }
        };
        let (permit, token) = request.into_parts();
        let permit = match stage {
            // The entry refunds the queue slot when the request leaves the queue.
            Stage::Queued(_) => permit.detach_queue_slot(),
            // Granted now: only the queue slot goes back (SPEC F45).
            _ => permit.into_execution(),
        };
        Self {
            shared,
            class,
            stage,
            permit: Some(permit),
            token,
            live: Some(live),
        }
    }

    /// The checks and the engine's enqueue; on an error the request is dropped by the caller,
    /// which refunds its permit.
    fn register(shared: &Shared<T, M>, request: &AdmittedRequest) -> Result<(Stage, Slot), Error> {
        let (engine, live) = shared.check(request)?;
        match engine.enqueue(Ticket::from_permit(&request.permit), None, None) {
            Ok(Enqueued::Queued(key)) => Ok((Stage::Queued(key), live)),
            Ok(Enqueued::Granted(lease)) => Ok((Stage::Granted(lease), live)),
            Err((e, _)) => {
                shared.forget_id(live);
                Err(e)
            }
        }
    }

    /// A handle for [`Scheduler::cancel`] while the request is queued.
    pub fn handle(&self) -> Option<RequestHandle> {
        match self.stage {
            Stage::Queued(key) => Some(self.shared.handle(self.class, key)),
            _ => None,
        }
    }

    /// Changes this request's priority in place while it waits (SPEC F36): what
    /// [`Scheduler::set_priority`](crate::Scheduler::set_priority) does with its handle.
    ///
    /// # Errors
    ///
    /// `not-found / too-late` once the request is no longer queued (granted or ended).
    pub fn set_priority(&self, priority: crate::ids::Priority) -> Result<(), Error> {
        match self.stage {
            Stage::Queued(key) => self.engine().change(key, Some(priority), None),
            _ => Err(Error::new(Code::NotFound, Reason::TooLate)),
        }
    }

    /// Changes this request's deadline in place while it waits (SPEC F36), within its
    /// permit's own deadline: what [`Scheduler::set_deadline`](crate::Scheduler::set_deadline)
    /// does with its handle.
    ///
    /// # Errors
    ///
    /// As [`set_priority`](Self::set_priority).
    pub fn set_deadline(&self, deadline: Option<u64>) -> Result<(), Error> {
        match self.stage {
            Stage::Queued(key) => self.engine().change(key, None, Some(deadline)),
            _ => Err(Error::new(Code::NotFound, Reason::TooLate)),
        }
    }

    fn engine(&self) -> &M::Class<T> {
        &self.shared.classes[usize::from(self.class.0)]
    }

    /// Why the owner must stop waiting now, if it must (cancellation, deadline). `now` caches the
    /// clock for the rest of one poll: it is read at most once, and only for a request with a
    /// deadline.
    fn stop_reason(&self, now: &mut Option<u64>) -> Option<(Ended, Error)> {
        if let Some(reason) = self.token.as_ref().and_then(CancellationToken::reason) {
            return Some((
                Ended::Cancelled,
                Error::new(Code::Cancelled, Reason::Host(reason)),
            ));
        }
        let permit = self.permit.as_ref()?;
        if permit
            .deadline()
            .is_some_and(|d| *now.get_or_insert_with(|| self.shared.clock.now()) >= d)
        {
            return Some((
                Ended::Expired,
                Error::new(Code::DeadlineExceeded, Reason::DeadlineExceeded),
            ));
        }
        None
    }

    /// Turns a granted lease into an assignment after the acceptance checks (SPEC F46, F47).
    fn accept(
        &mut self,
        lease: Lease,
        waited: u64,
        now: &mut Option<u64>,
    ) -> Result<Assignment, Error> {
        let refused = if self.shared.is_shut() {
            Some(Error::new(Code::Unavailable, Reason::Shutdown))
        } else {
            self.stop_reason(now).map(|(_, e)| e)
        };
        if let Some(e) = refused {
            // The untouched lease goes back first, then the quota (SPEC F42), before the class
            // counts the cell free.
            self.engine().count_refused_after_grant();
            let permit = self.permit.take();
            self.engine().release_then(lease, || drop(permit));
            self.end();
            return Err(e);
        }
        let permit = self
            .permit
            .take()
            .expect("permit held until the request ends");
        // Last use of `self.shared`: the future is done once it returns (its stage is `Done`).
        Ok(Assignment::new(
            self.shared.hand_on(),
            lease,
            permit,
            waited,
            self.live.take(),
        ))
    }

    /// The request ended without an assignment: its quota is refunded (if it was not already),
    /// then its id is no longer live.
    fn end(&mut self) {
        self.permit = None;
        if let Some(live) = self.live.take() {
            self.shared.forget_id(live);
        }
    }
}

impl<T: Send + 'static, M: Mechanism> Future for EnqueueOn<'_, T, M> {
    type Output = Result<Assignment, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut now = None;
        match core::mem::replace(&mut this.stage, Stage::Done) {
            Stage::Done => panic!("`Enqueue` polled after completion"),
            Stage::Failed(e) => Poll::Ready(Err(e)),
            Stage::Granted(lease) => Poll::Ready(this.accept(lease, 0, &mut now)),
            Stage::Queued(key) => {
                let engine = &this.shared.classes[usize::from(this.class.0)];
                if let Some(token) = &this.token {
                    token.register_scheduler(cx.waker());
                }
                if let Some((why, e)) = this.stop_reason(&mut now) {
                    give_up(engine, key, why, this.permit.take());
                    this.end();
                    return Poll::Ready(Err(e));
                }
                match engine.poll(key, cx) {
                    Polled::Pending => {
                        this.stage = Stage::Queued(key);
                        Poll::Pending
                    }
                    Polled::Granted(lease, waited) => {
                        Poll::Ready(this.accept(lease, waited, &mut now))
                    }
                    Polled::Ended(why) => {
                        this.end();
                        let reason = this.token.as_ref().and_then(CancellationToken::reason);
                        Poll::Ready(Err(ended_error(why, reason)))
                    }
                }
            }
        }
    }
}

impl<T: Send + 'static, M: Mechanism> Drop for EnqueueOn<'_, T, M> {
    fn drop(&mut self) {
        // The cell goes back before the permit (a field, dropped after this body) is refunded.
        match core::mem::replace(&mut self.stage, Stage::Done) {
            Stage::Queued(key) => {
                let permit = self.permit.take();
                give_up(self.engine(), key, Ended::Cancelled, permit);
            }
            Stage::Granted(lease) => {
                let permit = self.permit.take();
                self.engine().release_then(lease, || drop(permit));
            }
            Stage::Failed(_) | Stage::Done => {}
        }
        self.end();
    }
}

/// Future returned by [`Scheduler::next`](super::Scheduler::next) (borrowing the scheduler) and
/// [`Scheduler::next_owned`](super::Scheduler::next_owned) (`Next<'static, ..>`): the next pull-mode job of a class.
///
/// # Cancel safety
///
/// Dropping it before it resolves loses nothing: a job is taken from the class only in the
/// poll that returns it.
pub type Next<'a, T = ()> = NextOn<'a, T, Ring>;

/// [`Next`] of a scheduler over any [`Mechanism`] (the oracle's twins).
#[doc(hidden)]
#[must_use = "futures do nothing unless polled"]
pub struct NextOn<'a, T: Send + 'static, M: Mechanism> {
    scheduler: Holder<'a, SchedulerOn<T, M>>,
    class: ClassId,
    slot: Option<usize>,
}

impl<T: Send + 'static, M: Mechanism> fmt::Debug for NextOn<'_, T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Next")
            .field("class", &self.class)
            .finish_non_exhaustive()
    }
}

impl<'a, T: Send + 'static, M: Mechanism> NextOn<'a, T, M> {
    pub(super) fn new(scheduler: Holder<'a, SchedulerOn<T, M>>, class: ClassId) -> Self {
        Self {
            scheduler,
            class,
            slot: None,
        }
    }
}

impl<T: Send + 'static, M: Mechanism> Future for NextOn<'_, T, M> {
    type Output = Result<Option<Job<T>>, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        if matches!(this.scheduler, Holder::Moved) {
            panic!("`Next` polled after completion");
        }
        let engine = match this.scheduler.shared.class(this.class) {
            Ok(engine) => engine,
            Err(e) => return Poll::Ready(Err(e)),
        };
        let accepted = loop {
            match engine.poll_next(cx, &mut this.slot) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(None) => return Poll::Ready(Ok(None)),
                Poll::Ready(Some(p)) => {
                    if let Some(p) = this.scheduler.check_pulled(p) {
                        break p;
                    }
                }
            }
        };
        // Done: the waiter slot goes back now (as the drop would give it), and the scheduler
        // handle to the job's assignment (moved out of an owned future).
        if let Some(slot) = this.slot.take() {
            engine.forget_waiter(slot);
        }
        Poll::Ready(Ok(Some(super::pull::job(
            this.scheduler.hand_on(),
            accepted,
        ))))
    }
}

impl<T: Send + 'static, M: Mechanism> Drop for NextOn<'_, T, M> {
    fn drop(&mut self) {
        // A `Next` that resolved to a job holds no slot (and may hold no scheduler).
        if let Some(slot) = self.slot {
            if let Ok(engine) = self.scheduler.shared.class(self.class) {
                engine.forget_waiter(slot);
            }
        }
    }
}

/// Future returned by [`Scheduler::drain`](super::Scheduler::drain): resolves once every class is drained.
///
/// # Cancel safety
///
/// Dropping it stops waiting; the scheduler stays closed.
pub type Drain<'a, T = ()> = DrainOn<'a, T, Ring>;

/// [`Drain`] of a scheduler over any [`Mechanism`] (the oracle's twins).
#[doc(hidden)]
#[must_use = "futures do nothing unless polled"]
pub struct DrainOn<'a, T: Send + 'static, M: Mechanism> {
    scheduler: &'a SchedulerOn<T, M>,
    /// The class being waited for; classes before it are drained (and stay so: nothing new is
    /// admitted once closed).
    class: usize,
    slot: Option<usize>,
}

impl<T: Send + 'static, M: Mechanism> fmt::Debug for DrainOn<'_, T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Drain")
            .field("class", &self.class)
            .finish_non_exhaustive()
    }
}

impl<'a, T: Send + 'static, M: Mechanism> DrainOn<'a, T, M> {
    pub(super) fn new(scheduler: &'a SchedulerOn<T, M>) -> Self {
        Self {
            scheduler,
            class: 0,
            slot: None,
        }
    }

    fn forget(&mut self) {
        if let Some(slot) = self.slot.take() {
            self.scheduler.shared.classes[self.class].forget_waiter(slot);
        }
    }
}

impl<T: Send + 'static, M: Mechanism> Future for DrainOn<'_, T, M> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        while let Some(engine) = this.scheduler.shared.classes.get(this.class) {
            if this.scheduler.shared.is_shut() {
                // After a shutdown no executor need come: granted jobs waiting for one are
                // refused here (their payloads kept for `take_undelivered`).
                this.scheduler.refuse_ready(engine);
            }
            match engine.poll_drained(cx, &mut this.slot) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(()) => {
                    this.forget();
                    this.class += 1;
                }
            }
        }
        Poll::Ready(())
    }
}

impl<T: Send + 'static, M: Mechanism> Drop for DrainOn<'_, T, M> {
    fn drop(&mut self) {
        if self.class < self.scheduler.shared.classes.len() {
            self.forget();
        }
    }
}
