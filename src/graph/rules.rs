//! The rule core both graph engines share: input validation, identity packing and what a
//! producer's event means for each gate (SPEC D10, D15). Both engines call these functions and
//! nothing else decides a gate.

use super::{Gate, JobKey, JobSpec};
use crate::error::{Code, Error, Reason};

/// The largest `max_deps` a graph can be built with: the lock-free engine keeps one job's
/// dependency key slots in a stack buffer of this many entries, so no submit allocates.
pub(crate) const MAX_DEPS: usize = 1024;

/// `unavailable / dependency-failed`: the outcome of a job whose gate cannot hold any more.
pub(crate) const DEPENDENCY_FAILED: Error = Error::new(Code::Unavailable, Reason::DependencyFailed);

/// `invalid-argument / cycle` (SPEC D15).
pub(crate) const CYCLE: Error = Error::new(Code::InvalidArgument, Reason::Cycle);

/// `already-exists / duplicate-key`.
pub(crate) const DUPLICATE_KEY: Error = Error::new(Code::AlreadyExists, Reason::DuplicateKey);

/// `unavailable / shutdown`: the graph was shut down (SPEC D02's error layer).
pub(crate) const SHUTDOWN: Error = Error::new(Code::Unavailable, Reason::Shutdown);

/// `not-found / stale-handle`: a handle whose job is gone, or never was in this graph.
pub(crate) const STALE: Error = Error::new(Code::NotFound, Reason::StaleHandle);

/// The key table's 64-bit identity of a key: never 0 (0 marks an empty slot).
#[inline]
pub(crate) fn ident(key: JobKey) -> u64 {
    (key.key.0 << 8 | u64::from(key.stage.0)) + 1
}

/// Checks a job before anything is touched: key ranges, the dependency bound, self-dependency.
pub(crate) fn validate(spec: &JobSpec<'_>, max_deps: usize) -> Result<(), Error> {
    if spec.key.key.0 > super::WorkKey::MAX {
        return Err(Error::new(Code::InvalidArgument, Reason::KeyRange));
    }
    if spec.deps.len() > max_deps {
        return Err(Error::new(
            Code::InvalidArgument,
            Reason::TooManyDependencies,
        ));
    }
    for d in spec.deps {
        if d.key.key.0 > super::WorkKey::MAX {
            return Err(Error::new(Code::InvalidArgument, Reason::KeyRange));
        }
        if d.key == spec.key {
            return Err(CYCLE);
        }
    }
    Ok(())
}

/// Whether an edge with `gate` is released by the producer's admission (`true`) or by its end.
#[inline]
pub(crate) fn on_admission_list(gate: Gate) -> bool {
    matches!(gate, Gate::OnAdmission)
}

/// Whether `gate` holds given what its list was sealed with: for an admission-list edge `ok`
/// means "the producer was admitted", for an end-list edge "the producer succeeded".
#[inline]
pub(crate) fn gate_met(gate: Gate, ok: bool) -> bool {
    match gate {
        Gate::Sequential => true,
        Gate::OnSuccess | Gate::OnAdmission => ok,
    }
}

/// Whether `gate` holds for a producer that has already ended: `admitted` whether it ever took
/// its permit, `succeeded` its outcome.
#[inline]
pub(crate) fn gate_met_after_end(gate: Gate, admitted: bool, succeeded: bool) -> bool {
    if on_admission_list(gate) {
        gate_met(gate, admitted)
    } else {
        gate_met(gate, succeeded)
    }
}

/// Gate encoding in an edge word; `pinned` marks a dependency pinned to one version (SPEC D33).
#[inline]
pub(crate) fn gate_code(gate: Gate, pinned: bool) -> u32 {
    let g = match gate {
        Gate::Sequential => 0,
        Gate::OnSuccess => 1,
        Gate::OnAdmission => 2,
    };
    g | u32::from(pinned) << 8
}

/// Inverse of [`gate_code`]: the gate.
#[inline]
pub(crate) fn gate_from(code: u32) -> Gate {
    match code & 0xff {
        0 => Gate::Sequential,
        1 => Gate::OnSuccess,
        _ => Gate::OnAdmission,
    }
}

/// Inverse of [`gate_code`]: whether the edge is pinned.
#[inline]
pub(crate) fn pinned_from(code: u32) -> bool {
    code & 1 << 8 != 0
}

/// What a dependency pinned to a version sees of its key (SPEC D33).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Pin {
    /// The key is at the pinned version (or the dependency is not pinned): link as usual.
    Current,
    /// The key advanced past the pinned version: the dependency counts as a producer that
    /// ended `superseded` without being admitted.
    Superseded,
    /// The key was removed (or re-created) since: the dependency fails `removed`.
    Removed,
}

/// Compares a pinned version (packed) with the key's current one (`0`: the key has none).
#[inline]
pub(crate) fn pin_state(pin: Option<u64>, current: u64) -> Pin {
    match pin {
        None => Pin::Current,
        Some(p) if p == current => Pin::Current,
        Some(p)
            if current != 0 && p >> super::keys::GEN_BITS == current >> super::keys::GEN_BITS =>
        {
            Pin::Superseded
        }
        Some(_) => Pin::Removed,
    }
}

/// Whether a pinned dependency whose version was superseded meets `gate`: the version's job
/// counts as ended, failed and never admitted, so only `Sequential` holds.
#[inline]
pub(crate) fn gate_met_superseded(gate: Gate) -> bool {
    gate_met_after_end(gate, false, false)
}

/// `cancelled / superseded`: the outcome of a dependent whose pinned dependency's version
/// was superseded (SPEC D33), the same error a superseded job ends with.
pub(crate) const PIN_SUPERSEDED: Error = super::keys::SUPERSEDED;

/// Whether admitting `batch` (key identity → its dependencies) all at once closes a cycle:
/// a depth-first walk from every batch job over the batch's own edges and, for a key outside
/// the batch, `live_deps(key)` (the dependency keys of its live producer, `None` if it has
/// none). The graph outside the batch has no cycle, so any cycle passes through a batch job.
/// Allocates its colour map and stack (the batch path is not a hot path).
pub(crate) fn batch_closes_cycle(
    batch: &std::collections::HashMap<u64, &[super::Dependency]>,
    live_deps: impl Fn(u64) -> Option<Vec<u64>>,
) -> bool {
    use std::collections::HashMap;
    let children = |key: u64| -> Vec<u64> {
        match batch.get(&key) {
            Some(deps) => deps.iter().map(|d| ident(d.key)).collect(),
            None => live_deps(key).unwrap_or_default(),
        }
    };
    // false: on the current path; true: fully explored.
    let mut colour: HashMap<u64, bool> = HashMap::new();
    for &root in batch.keys() {
        if colour.contains_key(&root) {
            continue;
        }
        colour.insert(root, false);
        let mut stack = vec![(root, children(root))];
        while let Some((key, kids)) = stack.last_mut() {
            match kids.pop() {
                Some(k) => match colour.get(&k) {
                    Some(false) => return true,
                    Some(true) => {}
                    None => {
                        colour.insert(k, false);
                        let c = children(k);
                        stack.push((k, c));
                    }
                },
                None => {
                    colour.insert(*key, true);
                    stack.pop();
                }
            }
        }
    }
    false
}

/// `internal / abandoned`: the outcome of a job whose `RunningJob` was dropped without
/// `complete` (SPEC D33).
pub(crate) const ABANDONED: Error = Error::new(Code::Internal, Reason::Abandoned);

/// `cancelled / withdrawn`: the outcome of a job whose last demander went (SPEC D31).
pub(crate) const WITHDRAWN: Error = Error::new(Code::Cancelled, Reason::Withdrawn);

/// `cancelled / dependency-cancelled`: the outcome of a job whose gate failed because its
/// producer was cancelled (SPEC D31), transitively.
pub(crate) const DEPENDENCY_CANCELLED: Error =
    Error::new(Code::Cancelled, Reason::DependencyCancelled);

/// Whether `outcome` is a cancellation that flows downstream (SPEC D31): a failed gate on
/// such a producer fails its dependent `dependency-cancelled`.
#[inline]
pub(crate) fn is_cancellation(outcome: &super::JobOutcome) -> bool {
    matches!(outcome, super::JobOutcome::Failed(e)
        if matches!(e.reason(), Reason::Withdrawn | Reason::DependencyCancelled))
}

/// No deadline, in an absolute deadline word (SPEC D30).
pub(crate) const NO_DEADLINE: u64 = u64::MAX;

/// `deadline-exceeded / deadline-exceeded`: a job whose effective deadline passed before it
/// became ready, or while it was queued (SPEC D30, F46).
pub(crate) const DEADLINE_EXCEEDED: Error =
    Error::new(Code::DeadlineExceeded, Reason::DeadlineExceeded);

pub(crate) use super::Urgency;
