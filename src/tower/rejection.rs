//! Why the fair layer refused a request, and the HTTP status that says so.

use crate::{Code, Error, Reason};
use std::fmt;

/// The error of a [`FairService`](super::FairService): the layer refused the request, or the
/// inner service failed.
#[derive(Debug)]
pub enum FairError<E> {
    /// The layer refused the request before the inner service saw it.
    Rejected(Rejection),
    /// The inner service's own error.
    Inner(E),
}

impl<E: fmt::Display> fmt::Display for FairError<E> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FairError::Rejected(r) => fmt::Display::fmt(r, f),
            FairError::Inner(e) => fmt::Display::fmt(e, f),
        }
    }
}

impl<E: std::error::Error + 'static> std::error::Error for FairError<E> {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            FairError::Rejected(r) => Some(r),
            FairError::Inner(e) => Some(e),
        }
    }
}

/// A request the fair layer refused: its quota, a full queue, a passed deadline, no free cell
/// when shedding, or a stopped scheduler. The scheduler's [`Error`] says which.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    error: Error,
}

impl Rejection {
    pub(crate) fn new(error: Error) -> Self {
        Self { error }
    }

    /// The scheduler's or the ledger's error.
    pub fn error(&self) -> &Error {
        &self.error
    }

    /// The error, by value.
    pub fn into_error(self) -> Error {
        self.error
    }

    /// The HTTP status for this refusal:
    ///
    /// - **429** Too Many Requests: the tenant's own quota (its concurrency, queue slots, CPU or
    ///   memory units) is used up: that tenant should slow down, others are unaffected;
    /// - **504** Gateway Timeout: the request's deadline passed before a cell was free;
    /// - **503** Service Unavailable: everything else: the class's queue or quota is full, no
    ///   cell was free when shedding, every cell is quarantined, the scheduler is shutting down,
    ///   or the request was malformed for this scheduler (a tenant or class out of range).
    pub fn status(&self) -> u16 {
        match (self.error.code(), self.error.reason()) {
            (
                _,
                Reason::TenantQueueSlots
                | Reason::TenantConcurrency
                | Reason::TenantCpuUnits
                | Reason::TenantMemoryUnits,
            ) => 429,
            (Code::DeadlineExceeded, _) | (_, Reason::DeadlineExceeded) => 504,
            _ => 503,
        }
    }

    /// [`status`](Self::status) as the `http` crate's type (the `http` feature).
    #[cfg(feature = "http")]
    pub fn status_code(&self) -> http::StatusCode {
        // `status` only returns the three values below, all valid.
        match self.status() {
            429 => http::StatusCode::TOO_MANY_REQUESTS,
            504 => http::StatusCode::GATEWAY_TIMEOUT,
            _ => http::StatusCode::SERVICE_UNAVAILABLE,
        }
    }

    /// A response with [`status_code`](Self::status_code) and the error's text
    /// (`"resource-exhausted / tenant-concurrency"`) as a plain-text body (the `http` feature).
    #[cfg(feature = "http")]
    pub fn to_response<B: From<String>>(&self) -> http::Response<B> {
        let mut response = http::Response::new(B::from(self.error.to_string()));
        *response.status_mut() = self.status_code();
        response.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static("text/plain; charset=utf-8"),
        );
        response
    }
}

impl fmt::Display for Rejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "refused by the fair layer: {}", self.error)
    }
}

impl std::error::Error for Rejection {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.error)
    }
}
