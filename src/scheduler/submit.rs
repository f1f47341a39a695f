//! The waiting forms of pull-mode submit (SPEC F23): a producer that meets `queue-full` waits
//! for room instead of spinning. The waiting itself is the engine's `rooms` list: who is told
//! of a freed room, in which order, and why no room is missed.

use super::*;
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll};

/// [`Scheduler::submit_async`](super::Scheduler::submit_async): a pull-mode submit that waits
/// for room in its class's queue.
///
/// # Cancel safety
///
/// Cancel-safe: dropping it before it resolves drops the request and its payload, which
/// refunds every reservation its permit held; nothing stays queued.
pub type Submit<T = ()> = SubmitOn<T, Ring>;

/// [`Submit`] of a scheduler over any [`Mechanism`] (the oracle's twins).
#[doc(hidden)]
#[must_use = "futures do nothing unless polled; dropping this one drops the request"]
pub struct SubmitOn<T: Send + 'static, M: Mechanism> {
    scheduler: SchedulerOn<T, M>,
    /// The request's class, where it waits.
    class: ClassId,
    /// The request and payload, until they are queued or given back.
    request: Option<(AdmittedRequest, T)>,
    /// This producer's place among the class's waiting producers, once it met `queue-full`.
    waiter: Option<u64>,
}

// The future never pins its payload (it only moves it into the queue), so it is `Unpin`
// whatever `T` is.
impl<T: Send + 'static, M: Mechanism> Unpin for SubmitOn<T, M> {}

impl<T: Send + 'static, M: Mechanism> fmt::Debug for SubmitOn<T, M> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Submit")
            .field("waiting", &self.waiter.is_some())
            .field("done", &self.request.is_none())
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static, M: Mechanism> SubmitOn<T, M> {
    fn engine(&self) -> Option<&M::Class<T>> {
        self.scheduler.shared.class(self.class).ok()
    }

    /// Leaves the class's waiting producers, if this one is among them.
    fn leave(&mut self) {
        if let Some(id) = self.waiter.take() {
            if let Some(engine) = self.engine() {
                engine.rooms().leave(id);
            }
        }
    }
}

impl<T: Send + 'static, M: Mechanism> Future for SubmitOn<T, M> {
    type Output = Result<RequestHandle, SubmitError<T>>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.get_mut();
        let mut just_registered = false;
        loop {
            if let (Some(id), false) = (this.waiter, just_registered) {
                let engine = this.engine().expect("a waiting producer holds its request");
                if !engine.rooms().take_notified(id, cx.waker()) {
                    return Poll::Pending;
                }
            }
            let (request, payload) = this
                .request
                .take()
                .expect("Submit polled after it resolved");
            let tenant = request.permit.tenant().0;
            match this.scheduler.submit_keeping(request, payload) {
                Ok(handle) => {
                    this.leave();
                    return Poll::Ready(Ok(handle));
                }
                Err((error, Some(back))) if error.reason() == Reason::QueueFull => {
                    this.request = Some(back);
                    if this.waiter.is_some() {
                        // Told of room, but it was taken first: wait on at this place.
                        return Poll::Pending;
                    }
                    let engine = this.engine().expect("the submit found the class");
                    let id = engine.rooms().register(tenant, cx.waker());
                    engine.order_room_waiter();
                    this.waiter = Some(id);
                    // Registered, then ordered against departures: one more try sees any room
                    // freed before this point, and a room freed after it tells a waiter.
                    just_registered = true;
                }
                Err((error, back)) => {
                    this.leave();
                    return Poll::Ready(Err(SubmitError {
                        error,
                        returned: back.map(|(r, payload)| (r.permit, payload)),
                    }));
                }
            }
        }
    }
}

impl<T: Send + 'static, M: Mechanism> Drop for SubmitOn<T, M> {
    fn drop(&mut self) {
        // The request (permit and payload) drops with the future: its permit refunds its
        // reservations. A notification this producer had not acted on goes to the next one.
        self.leave();
    }
}

impl<T: Send + 'static, M: Mechanism> SchedulerOn<T, M> {
    /// Pull mode: [`submit`](Self::submit) that waits for room when the class's queue is full
    /// (SPEC F23), instead of failing `queue-full`.
    ///
    /// The future owns a handle to the scheduler (one `Arc` clone), so it is `'static` and can
    /// be spawned. Producers waiting in one class are told of room per tenant: a room that a
    /// request of tenant A frees goes first to tenant A's oldest waiting producer, and otherwise
    /// to the oldest waiting producer of the next waiting tenant in turn. Telling is not
    /// reserving: a producer that submits without waiting at that moment can take the room
    /// first, and the told producer then waits on at its place.
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit), except `queue-full`; a stop (shutdown, drain, every cell
    /// quarantined) ends the wait with its error.
    ///
    /// # Cancel safety
    ///
    /// Cancel-safe: dropping the future drops the request and payload it holds, which refunds
    /// everything its permit reserved.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
    /// use fairway::{AdmittedRequest, ClassId, RequestId, Scheduler, TenantId};
    /// use std::pin::pin;
    /// use std::task::{Context, Poll, Waker};
    /// use std::future::Future;
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4))?;
    /// let scheduler = Scheduler::builder(ledger.clone()).payload::<u32>().class(1, 1).build()?;
    /// let request = |id| -> fairway::Result<AdmittedRequest> {
    ///     let permit = ledger.admit(AdmissionRequest::new(RequestId(id), TenantId(0)))?;
    ///     Ok(AdmittedRequest::without_token(permit))
    /// };
    /// scheduler.submit(request(1)?, 1).map_err(|e| e.error)?;
    /// let first = scheduler.try_next(ClassId(0))?.expect("the cell was free");
    /// scheduler.submit(request(2)?, 2).map_err(|e| e.error)?; // queued: the cell is busy
    /// // The queue (one slot) is full: the third producer waits for room.
    /// let mut third = pin!(scheduler.submit_async(request(3)?, 3));
    /// let mut cx = Context::from_waker(Waker::noop());
    /// assert!(third.as_mut().poll(&mut cx).is_pending());
    /// first.assignment.release(); // the second request is granted: room for the third
    /// assert!(matches!(third.as_mut().poll(&mut cx), Poll::Ready(Ok(_))));
    /// for payload in [2, 3] {
    ///     let job = scheduler.try_next(ClassId(0))?.expect("queued");
    ///     assert_eq!(job.payload, payload);
    ///     job.assignment.release();
    /// }
    /// assert!(ledger.usage().is_zero());
    /// # Ok::<(), fairway::Error>(())
    /// ```
    pub fn submit_async(&self, request: AdmittedRequest, payload: T) -> SubmitOn<T, M> {
        SubmitOn {
            scheduler: self.clone(),
            class: request.permit.class(),
            request: Some((request, payload)),
            waiter: None,
        }
    }

    /// Pull mode: [`submit_async`](Self::submit_async), waiting on this thread.
    ///
    /// # Errors
    ///
    /// As [`submit_async`](Self::submit_async).
    ///
    /// # Panics
    ///
    /// As [`enqueue_blocking`](Self::enqueue_blocking): with the `tokio` feature, inside a
    /// current-thread tokio runtime.
    pub fn submit_blocking(
        &self,
        request: AdmittedRequest,
        payload: T,
    ) -> Result<RequestHandle, SubmitError<T>> {
        assert_not_in_current_thread_runtime("Scheduler::submit_blocking");
        crate::block::block_on(self.submit_async(request, payload))
    }
}
