//! Pending requests beyond the waiter slots (SPEC F25: the slots are a fast path, never the
//! limit).
//!
//! A future-mode request that finds every one of the class's `pending` waiter slots claimed
//! marks its entry slot here instead; its waker is the one it already registered in its entry
//! slot. A call that hands a turn back wakes the marked entries too, so the handed-back turn is
//! taken even when more requests wait than the class has waiter slots.
//!
//! The handshake is the one the waiter slots use (store buffering ruled out by RMWs on the
//! same words): the poller marks its bit and raises `count` (RMWs), then reads `ctl` in its
//! help; the waker reads `count` and every word with RMWs after the hand-back's `ctl` RMW. Either
//! the waker's RMW on `count` comes first in its modification order, and the poller's increment
//! reads from it (Acquire) and so sees the hand-back in its help, or the poller's increment comes
//! first and the waker, reading it (Acquire), sees the poller's bit (marked before it) and wakes
//! the entry.

use crate::sync::{AtomicU32, AtomicU64, Ordering};

/// Entry slots per word of the map.
const WORD: usize = 64;

/// One bit per entry slot: pending with no waiter slot.
pub(super) struct Unslotted {
    bits: Box<[AtomicU64]>,
    /// Bits set: lets a hand-back skip the scan (one RMW) while nobody is beyond the slots.
    count: AtomicU32,
}

impl Unslotted {
    pub(super) fn new(slots: usize) -> Self {
        Unslotted {
            bits: (0..slots.div_ceil(WORD).max(1))
                .map(|_| AtomicU64::new(0))
                .collect(),
            count: AtomicU32::new(0),
        }
    }

    /// The owner of entry slot `index` waits with no waiter slot. Its waker is registered in
    /// its entry slot before this call; it re-checks (helps) after it.
    pub(super) fn mark(&self, index: u32) {
        let (w, bit) = Self::at(index);
        // AcqRel: Release publishes the waker's registration to the scan's Acquire RMW;
        // Acquire pairs with a scan's Release RMW on the same word (see the module docs).
        let old = self.bits[w].fetch_or(bit, Ordering::AcqRel);
        debug_assert_eq!(old & bit, 0, "entry slot {index} marked twice");
        // AcqRel: as above, on `count` (the scan's first RMW).
        self.count.fetch_add(1, Ordering::AcqRel);
    }

    /// The owner of entry slot `index`, marked, stops waiting.
    pub(super) fn unmark(&self, index: u32) {
        let (w, bit) = Self::at(index);
        // Relaxed: giving the mark up publishes nothing.
        self.count.fetch_sub(1, Ordering::Relaxed);
        self.bits[w].fetch_and(!bit, Ordering::Relaxed);
    }

    /// Calls `wake` with every marked entry slot. Called after a turn was handed back.
    pub(super) fn for_each(&self, mut wake: impl FnMut(u32)) {
        // An RMW, not a load (see the module docs). AcqRel: Acquire pairs with `mark`'s Release
        // increment; Release pairs with a later `mark`'s Acquire (its help then sees `ctl`).
        if self.count.fetch_add(0, Ordering::AcqRel) == 0 {
            return;
        }
        for (w, word) in self.bits.iter().enumerate() {
            // AcqRel: as above, per word.
            let mut bits = word.fetch_or(0, Ordering::AcqRel);
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                wake((w * WORD + i) as u32);
            }
        }
    }

    fn at(index: u32) -> (usize, u64) {
        let i = index as usize;
        (i / WORD, 1 << (i % WORD))
    }
}
