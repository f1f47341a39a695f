//! The within-tenant order, once for every engine (SPEC F13, F14): which of a tenant's queued
//! requests goes next. The policy (the oracle's) and the tenant ring keep their own heaps and
//! FIFOs, each node type with its own links, and both order them with [`Rank::before`] and pick
//! with [`pick`].

/// A queued request's place in its tenant's order: higher priority first, then the earlier
/// deadline ([`NO_DEADLINE`](super::NO_DEADLINE) is the latest), then the earlier arrival.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Rank {
    pub(crate) priority: u8,
    pub(crate) deadline: u64,
    /// Arrival order within the tenant.
    pub(crate) seq: u64,
}

impl Rank {
    /// Whether `self` goes before `other` (F13).
    #[inline(always)]
    pub(crate) fn before(self, other: Rank) -> bool {
        (other.priority, self.deadline, self.seq) < (self.priority, other.deadline, other.seq)
    }
}

/// The tenant's candidate (F14): its oldest request (`oldest`, queued at `oldest_at`) once that
/// has waited `starvation_after` or more at `now`, else its best by rank (`best`).
#[inline(always)]
pub(crate) fn pick(best: u32, oldest: u32, oldest_at: u64, now: u64, starvation_after: u64) -> u32 {
    if now.saturating_sub(oldest_at) >= starvation_after {
        oldest
    } else {
        best
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::policy::NO_DEADLINE;

    fn r(priority: u8, deadline: u64, seq: u64) -> Rank {
        Rank {
            priority,
            deadline,
            seq,
        }
    }

    /// F13's three keys, each deciding only when the ones before it tie.
    #[test]
    fn f13_rank_orders_by_priority_then_deadline_then_arrival() {
        assert!(r(2, NO_DEADLINE, 9).before(r(1, 0, 0)), "priority first");
        assert!(r(1, 5, 9).before(r(1, 6, 0)), "then the earlier deadline");
        assert!(
            r(1, 5, 9).before(r(1, NO_DEADLINE, 0)),
            "a deadline before none"
        );
        assert!(r(1, 5, 3).before(r(1, 5, 4)), "then arrival");
        assert!(!r(1, 5, 3).before(r(1, 5, 3)), "strict");
    }

    /// F14's bound: at exactly `starvation_after` of waiting the oldest goes first.
    #[test]
    fn f14_the_oldest_goes_first_at_exactly_the_bound() {
        assert_eq!(pick(1, 2, 100, 149, 50), 1);
        assert_eq!(pick(1, 2, 100, 150, 50), 2);
        assert_eq!(
            pick(1, 2, 100, u64::MAX, u64::MAX),
            1,
            "never aged at u64::MAX"
        );
    }
}
