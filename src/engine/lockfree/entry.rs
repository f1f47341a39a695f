//! One request slot and the stage machine of its state byte.
//!
//! The arena keeps an 8-bit state beside each slot's generation; every transition is a CAS of
//! generation and state together, so a stale handle is refused (SPEC F30) and cancel is one CAS
//! (SPEC F31). The byte, typed as [`State`]:
//!
//! | bits | meaning                                                                  |
//! |------|--------------------------------------------------------------------------|
//! | 0–2  | [`Stage`]: queued, granted, or one of the ended stages                   |
//! | 3    | `WAITING`: queued, and the owner's waker is in the slot (see below)      |
//! | 4    | `QREF`: the inbox/policy still holds the index                            |
//! | 5    | `HREF`: the owner (enqueue future, or for pull mode the payload) holds it |
//! | 6    | `PULL`: a pull-mode entry (payload and permit stored in the slot)        |
//! | 7    | `CREF`: a canceller acting through a handle holds it until it is done    |
//!
//! Transitions (every one a CAS that includes the generation):
//!
//! ```text
//! QUEUED ─grant─▶ GRANTED            (token holder; drops QREF)
//! QUEUED ─end───▶ CANCELLED | EXPIRED | CLOSED | DEAD | FAILED
//!                 (by the token holder, dropping QREF; or by the owner / a canceller, keeping it
//!                  for the policy to drop)
//! ```
//!
//! Every transition out of `QUEUED` also clears `WAITING`, and whoever makes it from a state
//! with `WAITING` set takes the owner's waker out of the slot (and wakes it): the grant's CAS
//! carries the waker hand-off, so no separate RMW registers or takes a waker.
//!
//! The owner's waker (`Entry::waker`, a plain cell):
//!
//! ```text
//! owner, QUEUED without WAITING: writes its waker, then CAS QUEUED → QUEUED|WAITING (Release)
//!                                 — refused because the stage moved: takes its waker back
//! owner, QUEUED|WAITING (a re-poll): CAS clears WAITING (the cell is the owner's again), then
//!                                 as above
//! mover, CAS from QUEUED|WAITING: takes the waker (its CAS's Acquire sees the owner's write)
//! ```
//!
//! The cell is empty whenever `WAITING` is clear and the owner is not between its write and its
//! CAS, so a slot is never freed holding a waker and its next owner inherits none.
//!
//! The slot is freed by whoever clears the last reference bit ([`Arena::drop_bits`]).
//!
//! [`Arena::drop_bits`]: crate::raw::arena::Arena::drop_bits

use crate::admission::ExecutionPermit;
use crate::cancel::CancellationToken;
use crate::engine::{Ended, Ticket};
use crate::pool::Lease;
use crate::sync::UnsafeCell;
use crate::Error;
use core::task::Waker;

/// Where a request is in its life.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub(super) enum Stage {
    Queued = 1,
    Granted = 2,
    Cancelled = 3,
    Expired = 4,
    Closed = 5,
    Dead = 6,
    Failed = 7,
}

impl Stage {
    /// The ended stage for `why`.
    pub(super) fn ended(why: Ended) -> Stage {
        match why {
            Ended::Cancelled => Stage::Cancelled,
            Ended::Expired => Stage::Expired,
            Ended::Shutdown => Stage::Closed,
            Ended::Quarantined => Stage::Dead,
            Ended::Failed(_) => Stage::Failed,
        }
    }
}

const STAGE: u8 = 0x07;
/// Queued, with the owner's waker in the slot for whoever moves the entry on.
pub(super) const WAITING: u8 = 0x08;
/// The inbox/policy holds the index.
pub(super) const QREF: u8 = 0x10;
/// The owner holds the slot.
pub(super) const HREF: u8 = 0x20;
/// A pull-mode entry.
pub(super) const PULL: u8 = 0x40;
/// A canceller acting through a handle holds the slot until it has finished with it.
pub(super) const CREF: u8 = 0x80;

/// A slot's state byte.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct State(pub(super) u8);

impl State {
    /// A new entry: queued, referenced by the queue and its owner.
    pub(super) const fn new_queued(pull: bool) -> u8 {
        Stage::Queued as u8 | QREF | HREF | if pull { PULL } else { 0 }
    }

    #[inline]
    pub(super) fn stage(self) -> Stage {
        match self.0 & STAGE {
            1 => Stage::Queued,
            2 => Stage::Granted,
            3 => Stage::Cancelled,
            4 => Stage::Expired,
            5 => Stage::Closed,
            6 => Stage::Dead,
            _ => Stage::Failed,
        }
    }

    #[inline]
    pub(super) fn is_queued(self) -> bool {
        self.0 & STAGE == Stage::Queued as u8
    }

    /// Queued with the owner's waker in the slot.
    #[inline]
    pub(super) fn waiting(self) -> bool {
        self.0 & WAITING != 0
    }

    /// `QUEUED → QUEUED|WAITING`: the owner has put its waker in the slot. `None` unless
    /// queued without `WAITING`.
    #[inline]
    pub(super) fn wait(self) -> Option<u8> {
        (self.is_queued() && !self.waiting()).then_some(self.0 | WAITING)
    }

    /// `QUEUED|WAITING → QUEUED`: the owner takes its waker back (to replace it). `None`
    /// unless queued with `WAITING`.
    #[inline]
    pub(super) fn unwait(self) -> Option<u8> {
        (self.is_queued() && self.waiting()).then_some(self.0 & !WAITING)
    }

    #[inline]
    pub(super) fn queue_holds(self) -> bool {
        self.0 & QREF != 0
    }

    /// The owner (a future, or a pull entry's content) still holds the slot.
    #[inline]
    pub(super) fn owner_holds(self) -> bool {
        self.0 & HREF != 0
    }

    #[inline]
    pub(super) fn is_pull(self) -> bool {
        self.0 & PULL != 0
    }

    /// `QUEUED → to`, keeping the reference bits (the owner's or a canceller's move: the policy
    /// still holds the index and drops it). `None` unless queued.
    #[inline]
    pub(super) fn end_by_owner(self, to: Stage) -> Option<u8> {
        self.is_queued()
            .then_some((self.0 & !(STAGE | WAITING)) | to as u8)
    }

    /// `QUEUED → CANCELLED` by a handle's canceller, which takes `CREF` in the same CAS: it holds
    /// no other reference, and the owner and the policy may drop theirs as soon as they see the
    /// entry cancelled. `None` unless queued.
    #[inline]
    pub(super) fn cancel_by_handle(self) -> Option<u8> {
        self.is_queued()
            .then_some((self.0 & !(STAGE | WAITING)) | Stage::Cancelled as u8 | CREF)
    }

    /// `QUEUED → to`, dropping `QREF` (the token holder's move: it takes the index out of the
    /// policy in the same step). `None` unless queued.
    #[inline]
    pub(super) fn end_by_queue(self, to: Stage) -> Option<u8> {
        self.is_queued()
            .then_some((self.0 & !(STAGE | QREF | WAITING)) | to as u8)
    }
}

/// One request slot.
///
/// Ownership of the cells (each an `UnsafeCell`):
/// - `ticket`, `enqueued_at`, `token`: written by the producer between `alloc` and the inbox
///   push; read-only afterwards (the dispatcher reads them after the inbox's Acquire
///   `take_all`). A pull entry's `token` stays until the slot's next owner overwrites it, so
///   that the pass and the executor may read it whatever the stage.
/// - `lease`, `waited`: written by the dispatcher before its `QUEUED → GRANTED` CAS; after that
///   CAS only the `HREF` holder reads them (after an Acquire load that sees `GRANTED`). If the CAS
///   fails, the dispatcher takes the lease back; nobody else touches it outside `GRANTED`.
/// - `content` (pull mode): written before publication; taken by whoever moves the entry out of
///   `QUEUED` into an ended stage, or by the executor after `GRANTED`.
/// - `error`: written by the dispatcher before a `QUEUED → FAILED` CAS, read by the owner after.
/// - `waker`: the owner's while `WAITING` is clear; from the owner's CAS that sets `WAITING`
///   until a CAS clears it, the waker belongs to whoever makes that CAS (see the module docs).
///
/// `repr(C)` with the waker first: a cancel touches the slot's state word and the waker, which
/// then share the slot's first cache line (see the arena's `Slot`), one miss at any queue depth.
#[repr(C)]
pub(super) struct Entry<T> {
    pub(super) waker: UnsafeCell<Option<Waker>>,
    pub(super) ticket: UnsafeCell<Ticket>,
    pub(super) enqueued_at: UnsafeCell<u64>,
    pub(super) lease: UnsafeCell<Option<Lease>>,
    pub(super) waited: UnsafeCell<u64>,
    /// A pull entry's permit (its queue slot detached: the entry refunds it) and payload.
    pub(super) content: UnsafeCell<Option<(ExecutionPermit, T)>>,
    /// A pull-mode request's token, checked before selection and at delivery (SPEC F32, F46).
    pub(super) token: UnsafeCell<Option<CancellationToken>>,
    pub(super) error: UnsafeCell<Option<Error>>,
}

impl<T> Default for Entry<T> {
    fn default() -> Self {
        Self {
            ticket: UnsafeCell::new(Ticket::BLANK),
            enqueued_at: UnsafeCell::new(0),
            lease: UnsafeCell::new(None),
            waited: UnsafeCell::new(0),
            content: UnsafeCell::new(None),
            token: UnsafeCell::new(None),
            error: UnsafeCell::new(None),
            waker: UnsafeCell::new(None),
        }
    }
}

// SAFETY: every `UnsafeCell` of an entry is accessed by one party at a time, as given by the
// ownership rules on `Entry`, and hand-offs go through AcqRel CASes on the slot's state word or
// the inbox. `T`, `Permit` and the token move between threads, hence `T: Send`.
unsafe impl<T: Send> Sync for Entry<T> {}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn stage_round_trips_and_transitions_keep_reference_bits() {
        for stage in [
            Stage::Queued,
            Stage::Granted,
            Stage::Cancelled,
            Stage::Expired,
            Stage::Closed,
            Stage::Dead,
            Stage::Failed,
        ] {
            assert_eq!(State(stage as u8 | QREF | PULL).stage(), stage);
        }
        let s = State(State::new_queued(true));
        assert!(s.is_queued() && s.is_pull() && s.queue_holds());
        let by_owner = State(s.end_by_owner(Stage::Cancelled).unwrap());
        assert_eq!(by_owner.stage(), Stage::Cancelled);
        assert!(by_owner.queue_holds() && by_owner.0 & HREF != 0 && by_owner.is_pull());
        let by_queue = State(s.end_by_queue(Stage::Granted).unwrap());
        assert!(!by_queue.queue_holds() && by_queue.0 & HREF != 0);
        assert_eq!(by_owner.end_by_owner(Stage::Expired), None);
        assert_eq!(by_queue.end_by_queue(Stage::Expired), None);
        // WAITING: set and cleared only while queued; every move out of QUEUED clears it.
        let waiting = State(s.wait().unwrap());
        assert!(waiting.waiting() && waiting.is_queued() && waiting.stage() == Stage::Queued);
        assert_eq!(waiting.wait(), None);
        assert_eq!(State(waiting.unwait().unwrap()), s);
        assert_eq!(s.unwait(), None);
        for moved in [
            waiting.end_by_owner(Stage::Cancelled),
            waiting.end_by_queue(Stage::Granted),
            waiting.cancel_by_handle(),
        ] {
            let moved = State(moved.unwrap());
            assert!(!moved.waiting() && !moved.is_queued());
            assert_eq!(moved.wait(), None);
        }
    }
}
