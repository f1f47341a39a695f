//! Errors with a stable code and reason (SPEC F63).

use core::fmt;

/// The stable category of an [`Error`]. Its string form (see [`Code::as_str`]) never changes
/// between releases, so hosts may match on it or export it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Code {
    /// The caller passed a value the library refuses (bad configuration, wrong token, cycle).
    InvalidArgument,
    /// The caller presented something it may not use here (a permit from another ledger).
    PermissionDenied,
    /// A bounded resource is full (queue slots, quota).
    ResourceExhausted,
    /// Something with the same identity is already live.
    AlreadyExists,
    /// The id names nothing live.
    NotFound,
    /// The request was cancelled; the reason is the first cancellation reason.
    Cancelled,
    /// The request's original deadline passed.
    DeadlineExceeded,
    /// The service cannot do this now (shutdown, all cells quarantined, exhausted sequence).
    Unavailable,
    /// An invariant was broken by a collaborator (for example a host pool returned a foreign lease).
    Internal,
}

impl Code {
    /// The stable, kebab-case name of the code, e.g. `"resource-exhausted"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Code::InvalidArgument => "invalid-argument",
            Code::PermissionDenied => "permission-denied",
            Code::ResourceExhausted => "resource-exhausted",
            Code::AlreadyExists => "already-exists",
            Code::NotFound => "not-found",
            Code::Cancelled => "cancelled",
            Code::DeadlineExceeded => "deadline-exceeded",
            Code::Unavailable => "unavailable",
            Code::Internal => "internal",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An error of fairway: a stable [`Code`], a stable `reason` and, for configuration errors, the
/// name of the offending field.
///
/// Errors never embed caller payloads or tenant data, and creating one never allocates.
///
/// # Examples
///
/// ```
/// use fairway::{Code, Error};
/// let e = Error::new(Code::ResourceExhausted, "queue-full");
/// assert_eq!(e.to_string(), "resource-exhausted / queue-full");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error {
    code: Code,
    reason: &'static str,
    field: Option<&'static str>,
}

impl Error {
    /// An error with `code` and a stable `reason`.
    #[inline]
    pub const fn new(code: Code, reason: &'static str) -> Self {
        Self {
            code,
            reason,
            field: None,
        }
    }

    /// `invalid-argument / configuration`, naming the offending `field`.
    #[inline]
    pub const fn configuration(field: &'static str) -> Self {
        Self {
            code: Code::InvalidArgument,
            reason: "configuration",
            field: Some(field),
        }
    }

    /// The stable code.
    #[inline]
    pub const fn code(&self) -> Code {
        self.code
    }

    /// The stable reason, e.g. `"queue-full"`.
    #[inline]
    pub const fn reason(&self) -> &'static str {
        self.reason
    }

    /// The configuration field this error is about, if any.
    #[inline]
    pub const fn field(&self) -> Option<&'static str> {
        self.field
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} / {}", self.code, self.reason)?;
        if let Some(field) = self.field {
            write!(f, " ({field})")?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

/// `Result` with fairway's [`Error`].
pub type Result<T, E = Error> = core::result::Result<T, E>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn f63_error_has_stable_code_and_reason() {
        let e = Error::configuration("cells");
        assert_eq!(e.code(), Code::InvalidArgument);
        assert_eq!(e.reason(), "configuration");
        assert_eq!(e.field(), Some("cells"));
        assert_eq!(e.to_string(), "invalid-argument / configuration (cells)");
        let boxed: Box<dyn std::error::Error> = Box::new(Error::new(Code::Unavailable, "shutdown"));
        assert_eq!(boxed.to_string(), "unavailable / shutdown");
    }
}
