//! What a request is made of on its way in and out: the admitted request, its handle, the
//! errors that give it back, and a pulled job.

use super::*;

/// A request that passed admission: its permit and, optionally, the host's cancellation token
/// for it.
///
/// A request without a token is cancelled through its [`RequestHandle`] only; it costs no
/// allocation at all on its way through the scheduler (a token is one `Arc`).
#[derive(Debug)]
pub struct AdmittedRequest {
    pub(super) permit: Permit,
    pub(super) token: Option<CancellationToken>,
}

impl AdmittedRequest {
    /// Pairs a permit with the host's token. The token's id must be the permit's request id
    /// (checked at enqueue, SPEC F34).
    #[inline]
    pub fn new(permit: Permit, token: CancellationToken) -> Self {
        Self {
            permit,
            token: Some(token),
        }
    }

    /// A request with no cancellation token: cancellable by [`Scheduler::cancel`] while queued,
    /// by dropping its enqueue future, or by its deadline.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig, Limits};
    /// use fairway::{AdmittedRequest, RequestId, Scheduler, TenantId};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
    /// let scheduler = Scheduler::<()>::builder(ledger.clone()).class(1, 8).build()?;
    /// let permit = ledger.admit(AdmissionRequest::new(RequestId(1), TenantId(0)))?;
    /// let assignment = scheduler.enqueue_blocking(AdmittedRequest::without_token(permit))?;
    /// assignment.release();
    /// # Ok::<(), fairway::Error>(())
    /// ```
    #[inline]
    pub fn without_token(permit: Permit) -> Self {
        Self {
            permit,
            token: None,
        }
    }

    /// The permit.
    #[inline]
    pub fn permit(&self) -> &Permit {
        &self.permit
    }

    /// The token, if the request has one.
    #[inline]
    pub fn token(&self) -> Option<&CancellationToken> {
        self.token.as_ref()
    }

    /// Splits the request back into its parts.
    #[inline]
    pub fn into_parts(self) -> (Permit, Option<CancellationToken>) {
        (self.permit, self.token)
    }
}

impl From<Permit> for AdmittedRequest {
    /// A request without a token ([`AdmittedRequest::without_token`]).
    #[inline]
    fn from(permit: Permit) -> Self {
        Self::without_token(permit)
    }
}

/// A handle to a queued request, for [`Scheduler::cancel`]. Copyable; generation-tagged, so a
/// handle whose request has ended is refused, never acted on (SPEC F30, F33); it also names the
/// scheduler that minted it, which refuses it everywhere else.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RequestHandle {
    pub(super) scheduler: u64,
    pub(super) class: ClassId,
    pub(super) key: u64,
}

impl RequestHandle {
    /// The handle's parts (scheduler, class, key), for a store that keeps handles in atomics.
    #[inline]
    pub(crate) fn raw_parts(&self) -> (u64, ClassId, u64) {
        (self.scheduler, self.class, self.key)
    }

    /// A handle from [`raw_parts`](Self::raw_parts).
    #[inline]
    pub(crate) fn from_raw_parts(scheduler: u64, class: ClassId, key: u64) -> Self {
        Self {
            scheduler,
            class,
            key,
        }
    }

    /// The class the request was queued in.
    #[inline]
    pub fn class(&self) -> ClassId {
        self.class
    }
}

/// A request [`Scheduler::try_enqueue`] could not grant at once, given back with the reason.
#[derive(Debug)]
pub struct TryEnqueueError {
    /// Why (`unavailable / no-capacity` when the request would have had to wait).
    pub error: Error,
    /// The request, untouched, or `None` if it was refused outright and its permit refunded.
    pub request: Option<AdmittedRequest>,
}

impl fmt::Display for TryEnqueueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl std::error::Error for TryEnqueueError {}

/// A pull-mode request refused at submission; the payload and permit are given back.
pub struct SubmitError<T> {
    /// Why.
    pub error: Error,
    /// The permit and payload, when they could be given back.
    pub returned: Option<(Permit, T)>,
}

impl<T> fmt::Debug for SubmitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SubmitError")
            .field("error", &self.error)
            .finish_non_exhaustive()
    }
}

impl<T> fmt::Display for SubmitError<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.error, f)
    }
}

impl<T> std::error::Error for SubmitError<T> {}

/// A pull-mode request handed to an executor, with its assignment (SPEC F23).
#[derive(Debug)]
pub struct Job<T> {
    /// What the host submitted.
    pub payload: T,
    /// The cell and execution permit; release or quarantine it when done.
    pub assignment: Assignment,
}
