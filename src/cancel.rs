//! Shared cancellation (SPEC F32, F34).
//!
//! A [`CancellationToken`] is the host's own cancellation signal for one request. The scheduler
//! observes it; it keeps no second registry. Clones share one state.

use crate::ids::RequestId;
use crate::sync::{Arc, AtomicU32, AtomicWaker, Ordering, UnsafeCell};
use core::future::Future;
use core::pin::Pin;
use core::task::{Context, Poll, Waker};

/// Token states: `LIVE` → `WRITING` (the winner writes the reason) → `CANCELLED`.
const LIVE: u32 = 0;
const WRITING: u32 = 1;
const CANCELLED: u32 = 2;

struct Inner {
    id: RequestId,
    state: AtomicU32,
    /// Written once by the winner of `LIVE → WRITING`, read only after observing `CANCELLED`.
    reason: UnsafeCell<&'static str>,
    /// The scheduler's waiter for this request (one enqueue future per request id).
    scheduler: AtomicWaker,
    /// The host's waiter (`cancelled()`); last registrant wins.
    host: AtomicWaker,
}

/// A clonable, shared cancellation signal for the request with a given [`RequestId`].
///
/// `cancel(reason)` returns `true` only for the first call; the first reason is kept; the
/// scheduler and the host's waiter are woken.
///
/// # Examples
///
/// ```
/// use fairway::{CancellationToken, RequestId};
/// let token = CancellationToken::new(RequestId(7));
/// let clone = token.clone();
/// assert!(clone.cancel("client-went-away"));
/// assert!(!token.cancel("second"));
/// assert_eq!(token.reason(), Some("client-went-away"));
/// ```
#[derive(Clone)]
pub struct CancellationToken {
    inner: Arc<Inner>,
}

// SAFETY: `reason` is written only by the single thread that wins the `LIVE → WRITING` CAS and
// read only after an Acquire load observes `CANCELLED`, which that thread stores with Release
// after the write. All other fields are `Sync`.
unsafe impl Sync for Inner {}
// SAFETY: as above; the `&'static str` inside is `Send`.
unsafe impl Send for Inner {}

impl CancellationToken {
    /// A live token for request `id`. Allocates once (the shared state).
    pub fn new(id: RequestId) -> Self {
        Self {
            inner: Arc::new(Inner {
                id,
                state: AtomicU32::new(LIVE),
                reason: UnsafeCell::new(""),
                scheduler: AtomicWaker::new(),
                host: AtomicWaker::new(),
            }),
        }
    }

    /// The request this token belongs to.
    #[inline]
    pub fn id(&self) -> RequestId {
        self.inner.id
    }

    /// Cancels with `reason`. Returns `true` only for the first call on any clone.
    pub fn cancel(&self, reason: &'static str) -> bool {
        // Relaxed on success is enough for the claim itself: the reason is published by the
        // Release store below; nobody reads it until they see CANCELLED.
        if self
            .inner
            .state
            .compare_exchange(LIVE, WRITING, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        // SAFETY: we won LIVE → WRITING, so we are the only writer and no reader reads before
        // CANCELLED is visible.
        self.inner.reason.with_mut(|r| unsafe { *r = reason });
        // Release: publishes `reason`; pairs with the Acquire loads in `reason()` / `is_cancelled()`.
        self.inner.state.store(CANCELLED, Ordering::Release);
        self.inner.scheduler.wake();
        self.inner.host.wake();
        true
    }

    /// Whether the token has been cancelled.
    #[inline]
    pub fn is_cancelled(&self) -> bool {
        // Acquire: pairs with the Release store in `cancel`.
        self.inner.state.load(Ordering::Acquire) == CANCELLED
    }

    /// The first cancellation reason, once cancelled.
    pub fn reason(&self) -> Option<&'static str> {
        if self.is_cancelled() {
            // SAFETY: CANCELLED was observed with Acquire, so the single write happened before
            // and no write follows.
            Some(self.inner.reason.with(|r| unsafe { *r }))
        } else {
            None
        }
    }

    /// A future that resolves when the token is cancelled. Only one task at a time should await
    /// it (the last registered waker is the one woken).
    #[inline]
    pub fn cancelled(&self) -> Cancelled<'_> {
        Cancelled { token: self }
    }

    /// Registers the scheduler's waker; the caller re-checks `is_cancelled` afterwards.
    pub(crate) fn register_scheduler(&self, waker: &Waker) {
        crate::sync::register_waker(&self.inner.scheduler, waker);
    }

    /// Whether both handles share one state.
    #[inline]
    pub fn same_as(&self, other: &CancellationToken) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }
}

impl core::fmt::Debug for CancellationToken {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("CancellationToken")
            .field("id", &self.inner.id)
            .field("cancelled", &self.is_cancelled())
            .finish()
    }
}

/// Future returned by [`CancellationToken::cancelled`].
#[derive(Debug)]
pub struct Cancelled<'a> {
    token: &'a CancellationToken,
}

impl Future for Cancelled<'_> {
    type Output = &'static str;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<&'static str> {
        if let Some(r) = self.token.reason() {
            return Poll::Ready(r);
        }
        crate::sync::register_waker(&self.token.inner.host, cx.waker());
        // Re-check after registering: a cancel between the check and the registration would
        // otherwise be missed.
        match self.token.reason() {
            Some(r) => Poll::Ready(r),
            None => Poll::Pending,
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn f32_first_cancel_wins_and_keeps_reason() {
        let t = CancellationToken::new(RequestId(1));
        assert!(!t.is_cancelled());
        assert_eq!(t.reason(), None);
        let c = t.clone();
        assert!(c.cancel("first"));
        assert!(!t.cancel("second"));
        assert_eq!(t.reason(), Some("first"));
        assert!(t.same_as(&c));
        assert!(!t.same_as(&CancellationToken::new(RequestId(1))));
    }

    #[test]
    fn f32_cancel_wakes_host_waiter() {
        let t = CancellationToken::new(RequestId(2));
        let t2 = t.clone();
        let h = std::thread::spawn(move || crate::block::block_on(t2.cancelled()));
        std::thread::sleep(std::time::Duration::from_millis(10));
        t.cancel("bye");
        assert_eq!(h.join().unwrap(), "bye");
    }
}
