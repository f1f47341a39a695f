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

/// The stable reason of an [`Error`], finer than its [`Code`] (SPEC F63).
///
/// Every variant has a fixed kebab-case string form ([`Reason::as_str`]) that never changes
/// between releases; hosts may log or export it. Code should match on the variant, never on the
/// string. The enum is `#[non_exhaustive]`: new reasons may be added.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Reason {
    /// A configuration field is out of range; [`Error::field`] names it.
    Configuration,
    /// A host pool does not match the configured classes (SPEC F07).
    PoolTopology,
    /// A token's identity differs from its request's (SPEC F34).
    CancellationIdentity,
    /// A class id names no configured class.
    Class,
    /// A tenant id is out of range for the ledger.
    Tenant,
    /// A tenant id is beyond `max_tenants`.
    TenantOutOfRange,
    /// A weight is out of range.
    Weight,
    /// A weight of zero.
    ZeroWeight,
    /// A permit minted by another ledger (SPEC F04).
    ForeignAdmission,
    /// A handle minted by another scheduler (SPEC F30).
    ForeignHandle,
    /// The class's queue is full (or its capacity is 0, SPEC F06).
    QueueFull,
    /// The tenant's queue-slot limit.
    TenantQueueSlots,
    /// The tenant's concurrency limit.
    TenantConcurrency,
    /// The tenant's CPU-unit limit.
    TenantCpuUnits,
    /// The tenant's memory-unit limit.
    TenantMemoryUnits,
    /// The class's queue-slot limit.
    ClassQueueSlots,
    /// The class's concurrency limit.
    ClassConcurrency,
    /// The class's CPU-unit limit.
    ClassCpuUnits,
    /// The class's memory-unit limit.
    ClassMemoryUnits,
    /// A live request already has this id (SPEC F34).
    DuplicateRequest,
    /// The id names no live queued request (SPEC F33).
    UnknownRequest,
    /// An in-place change came after the request left the queue: it was granted or ended
    /// first (SPEC F36).
    TooLate,
    /// The first reason given to [`CancellationToken::cancel`](crate::cancel::CancellationToken::cancel).
    Host(&'static str),
    /// A blocking wait ran out of time.
    Timeout,
    /// The request's original deadline passed (SPEC F46).
    DeadlineExceeded,
    /// The scheduler (or its ledger) was shut down (SPEC F47).
    Shutdown,
    /// Every cell of the class is quarantined (SPEC F22).
    AllCellsQuarantined,
    /// No cell is free right now.
    NoCapacity,
    /// A sequence or generation counter is exhausted (SPEC F21).
    SequenceExhausted,
    /// A pool claimed free capacity it did not have.
    PoolCapacityMismatch,
    /// A pool returned a lease for another request, class or budget (SPEC F08).
    PoolLeaseMismatch,
    /// A granted request had no lease attached.
    LeaseMissing,
    /// The policy ran out of slots it was sized for.
    PolicySlot,
    /// A pull-mode request was granted as if it had a waiting future.
    PullGrantedDirectly,
    /// A handle names a slot that has since been reused (SPEC F30).
    StaleHandle,
    /// A request ended without a more specific reason.
    Failed,
    /// A cell given back to service is not quarantined (SPEC F44).
    CellNotQuarantined,
    /// A host pool cannot return quarantined cells to service (SPEC F44).
    RestoreUnsupported,
    /// A job's dependencies would form a cycle, or a job depends on itself (SPEC D15).
    Cycle,
    /// A job's `OnSuccess` (or `OnAdmission`) dependency failed (SPEC D10).
    DependencyFailed,
    /// A graph key already has a job (SPEC D01; generations come later).
    DuplicateKey,
    /// A graph key is outside the range the key table can hold.
    KeyRange,
    /// A job lists more dependencies than the graph was built for.
    TooManyDependencies,
    /// A graph job of an older generation of its key, superseded by `advance` (SPEC D20).
    Superseded,
    /// A graph key was removed or reset; its waiters and work fail with it (SPEC D24).
    Removed,
    /// A graph key that names nothing live: never named, or removed (SPEC D20, D24).
    UnknownKey,
    /// A graph key's generation counter is at its maximum; `advance` refuses (SPEC D22).
    GenerationExhausted,
    /// A witness whose key version is no longer current (SPEC D21, D23).
    StaleWitness,
    /// The version directory has no free record: live roots retain the rest (SPEC V04).
    VersionsRetained,
    /// Every root slot of the version directory is held by live roots of older epochs (SPEC V04).
    RootEpochs,
    /// A graph job's [`RunningJob`](crate::graph::RunningJob) was dropped without
    /// [`complete`](crate::graph::Graph::complete): a panic or an early return (SPEC D33).
    Abandoned,
    /// One handle appears twice in a call that consumes each handle's outcome once.
    DuplicateHandle,
    /// A dependency pins a version its key has not reached (SPEC D33).
    UnknownVersion,
    /// A cell id at or past its class's cell count.
    CellRange,
    /// A graph job whose last demander went: every handle dropped or cancelled, and no
    /// dependent waits on it (SPEC D31).
    Withdrawn,
    /// A graph job whose dependency was cancelled (withdrawn, or itself failed so),
    /// transitively through its gates (SPEC D31).
    DependencyCancelled,
}

impl Reason {
    /// The stable, kebab-case form, e.g. `"queue-full"`. For [`Reason::Host`] it is the host's
    /// own string.
    pub const fn as_str(self) -> &'static str {
        match self {
            Reason::Configuration => "configuration",
            Reason::PoolTopology => "pool-topology",
            Reason::CancellationIdentity => "cancellation-identity",
            Reason::Class => "class",
            Reason::Tenant => "tenant",
            Reason::TenantOutOfRange => "tenant-out-of-range",
            Reason::Weight => "weight",
            Reason::ZeroWeight => "zero-weight",
            Reason::ForeignAdmission => "foreign-admission",
            Reason::ForeignHandle => "foreign-handle",
            Reason::QueueFull => "queue-full",
            Reason::TenantQueueSlots => "tenant-queue-slots",
            Reason::TenantConcurrency => "tenant-concurrency",
            Reason::TenantCpuUnits => "tenant-cpu-units",
            Reason::TenantMemoryUnits => "tenant-memory-units",
            Reason::ClassQueueSlots => "class-queue-slots",
            Reason::ClassConcurrency => "class-concurrency",
            Reason::ClassCpuUnits => "class-cpu-units",
            Reason::ClassMemoryUnits => "class-memory-units",
            Reason::DuplicateRequest => "duplicate-request",
            Reason::UnknownRequest => "unknown-request",
            Reason::TooLate => "too-late",
            Reason::Host(s) => s,
            Reason::Timeout => "timeout",
            Reason::DeadlineExceeded => "deadline-exceeded",
            Reason::Shutdown => "shutdown",
            Reason::AllCellsQuarantined => "all-cells-quarantined",
            Reason::NoCapacity => "no-capacity",
            Reason::SequenceExhausted => "sequence-exhausted",
            Reason::PoolCapacityMismatch => "pool-capacity-mismatch",
            Reason::PoolLeaseMismatch => "pool-lease-mismatch",
            Reason::LeaseMissing => "lease-missing",
            Reason::PolicySlot => "policy-slot",
            Reason::PullGrantedDirectly => "pull-granted-directly",
            Reason::StaleHandle => "stale-handle",
            Reason::Failed => "failed",
            Reason::CellNotQuarantined => "cell-not-quarantined",
            Reason::RestoreUnsupported => "restore-unsupported",
            Reason::Cycle => "cycle",
            Reason::DependencyFailed => "dependency-failed",
            Reason::DuplicateKey => "duplicate-key",
            Reason::KeyRange => "key-range",
            Reason::TooManyDependencies => "too-many-dependencies",
            Reason::Superseded => "superseded",
            Reason::Removed => "removed",
            Reason::UnknownKey => "unknown-key",
            Reason::GenerationExhausted => "generation-exhausted",
            Reason::StaleWitness => "stale-witness",
            Reason::VersionsRetained => "versions-retained",
            Reason::RootEpochs => "root-epochs",
            Reason::Abandoned => "abandoned",
            Reason::DuplicateHandle => "duplicate-handle",
            Reason::UnknownVersion => "unknown-version",
            Reason::CellRange => "cell-range",
            Reason::Withdrawn => "withdrawn",
            Reason::DependencyCancelled => "dependency-cancelled",
        }
    }
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Compares the stable string form, for logs and tests (`assert_eq!(err.reason(), "queue-full")`).
impl PartialEq<&str> for Reason {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
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
/// use fairway::{Code, Error, Reason};
/// let e = Error::new(Code::ResourceExhausted, Reason::QueueFull);
/// assert_eq!(e.to_string(), "resource-exhausted / queue-full");
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Error {
    code: Code,
    reason: Reason,
    field: Option<&'static str>,
}

impl Error {
    /// An error with `code` and a stable `reason`.
    #[inline]
    pub const fn new(code: Code, reason: Reason) -> Self {
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
            reason: Reason::Configuration,
            field: Some(field),
        }
    }

    /// The stable code.
    #[inline]
    pub const fn code(&self) -> Code {
        self.code
    }

    /// The stable reason, e.g. [`Reason::QueueFull`] (`"queue-full"`).
    #[inline]
    pub const fn reason(&self) -> Reason {
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
        assert_eq!(e.reason(), Reason::Configuration);
        assert_eq!(e.reason(), "configuration");
        assert_eq!(e.field(), Some("cells"));
        assert_eq!(e.to_string(), "invalid-argument / configuration (cells)");
        let boxed: Box<dyn std::error::Error> =
            Box::new(Error::new(Code::Unavailable, Reason::Shutdown));
        assert_eq!(boxed.to_string(), "unavailable / shutdown");
    }
}
