//! The ledger's counters: how one holder's limits map onto a packed word (with a field per
//! resource just wide enough for its limit) and words of their own, and the lock-free reserve
//! and refund of amounts on those words, with the limit check that keeps every count within
//! its limit. Used by the [`Ledger`] for each tenant and each class.

use super::*;

/// How one holder's limits map onto its counters: the first `packed` resources (queue slots and
/// concurrency always, then CPU units and memory units while their limits still fit) share one
/// word, each in a field just wide enough for its limit; the others keep a word of their own.
///
/// With everything packed, an admission is one CAS per holder and a refund one `fetch_sub`, and
/// the queue-slot and concurrency limits (both at most `u32::MAX`) always share a word, so a
/// request without CPU or memory units costs one RMW per holder either way.
///
/// Invariant: a packed field never exceeds its limit, which fits its width, so adding an amount
/// that passed the limit check never carries into the next field, and a refund (of at most what
/// was reserved) never borrows from it.
#[derive(Debug, Clone, Copy)]
pub(super) struct Layout {
    limits: [u64; KINDS],
    /// Bit offset of each packed field in the word.
    pub(super) shift: [u32; KINDS],
    /// Width mask of each packed field (after shifting down).
    mask: [u64; KINDS],
    /// Resources `0..packed` are in the word; `packed..KINDS` have their own counters.
    pub(super) packed: usize,
}

#[allow(
    clippy::needless_range_loop,
    reason = "a resource index reads several parallel arrays"
)]
impl Layout {
    pub(super) fn new(limits: [u64; KINDS]) -> Self {
        let (mut shift, mut mask) = ([0; KINDS], [0; KINDS]);
        let (mut used, mut packed) = (0u32, 0);
        for kind in 0..KINDS {
            let width = 64 - limits[kind].leading_zeros();
            // Queue slots and concurrency are `u32` limits: they always fit together. Only a
            // prefix is packed, so a refusal is still reported for the first resource in order.
            if used + width > 64 {
                break;
            }
            shift[kind] = used;
            mask[kind] = if width == 64 {
                u64::MAX
            } else {
                (1 << width) - 1
            };
            used += width;
            packed = kind + 1;
        }
        debug_assert!(packed > CONCURRENCY);
        Self {
            limits,
            shift,
            mask,
            packed,
        }
    }

    /// The word's delta for `amounts[kind]`, `kind` in `start..end`, of the `N` packed
    /// resources (`N == self.packed`; a constant, so the loop unrolls). Every amount must be at
    /// most its limit (so it fits its field).
    #[inline(always)]
    fn delta<const N: usize>(&self, amounts: &[u64; KINDS], start: usize, end: usize) -> u64 {
        let mut d = 0;
        for kind in 0..N {
            if kind >= start && kind < end {
                d |= amounts[kind] << self.shift[kind];
            }
        }
        d
    }
}

/// The counters of one holder (a tenant or a class): the packed word and one word per resource
/// that does not fit it (see [`Layout`]; unused ones stay 0).
///
/// Invariant: each resource's count is the sum of the amounts reserved and not yet refunded by
/// live permits (plus, transiently, the amounts of an admission that is rolling back), and never
/// exceeds its limit.
#[derive(Debug)]
pub(super) struct Counters {
    packed: AtomicU64,
    /// CPU units and memory units, when they do not fit in `packed`.
    apart: [AtomicU64; 2],
}

#[cfg(not(loom))]
const _: () = assert!(core::mem::size_of::<Counters>() == 24);

#[allow(
    clippy::needless_range_loop,
    reason = "a resource index reads several parallel arrays"
)]
impl Counters {
    pub(super) fn new() -> Self {
        Self {
            packed: AtomicU64::new(0),
            apart: [AtomicU64::new(0), AtomicU64::new(0)],
        }
    }

    /// The word of resource `kind` when it is not packed.
    #[inline]
    fn apart(&self, kind: usize) -> &AtomicU64 {
        &self.apart[kind - CPU_UNITS]
    }

    /// Reserves every amount in `amounts` against `layout`'s limits, all or nothing; on refusal
    /// returns the index of the first refused resource, with nothing left reserved.
    #[inline(always)]
    pub(super) fn reserve(
        &self,
        amounts: &[u64; KINDS],
        layout: &Layout,
    ) -> core::result::Result<(), usize> {
        if amounts[CPU_UNITS] | amounts[MEMORY_UNITS] == 0 && amounts[QUEUE_SLOTS] == 1 {
            return self.reserve_slot(amounts[CONCURRENCY], layout);
        }
        self.reserve_units(amounts, layout)
    }

    /// [`reserve`](Self::reserve) of a request with CPU or memory units (out of line, so the
    /// common request's path stays small enough to inline).
    #[inline(never)]
    fn reserve_units(
        &self,
        amounts: &[u64; KINDS],
        layout: &Layout,
    ) -> core::result::Result<(), usize> {
        match layout.packed {
            2 => self.reserve_n::<2>(amounts, layout),
            3 => self.reserve_n::<3>(amounts, layout),
            _ => self.reserve_n::<4>(amounts, layout),
        }
    }

    /// [`reserve`](Self::reserve) of one queue slot, `concurrency` (0 or 1) and nothing else:
    /// the common request, whose fields are the word's first two, at fixed places.
    #[inline(always)]
    fn reserve_slot(&self, concurrency: u64, layout: &Layout) -> core::result::Result<(), usize> {
        debug_assert!(concurrency <= 1);
        let shift = layout.shift[CONCURRENCY];
        let delta = 1 | (concurrency << shift);
        // Relaxed: as in `reserve_n`.
        let mut current = self.packed.load(Ordering::Relaxed);
        loop {
            if current & layout.mask[QUEUE_SLOTS] >= layout.limits[QUEUE_SLOTS] {
                return Err(QUEUE_SLOTS);
            }
            if concurrency
                > layout.limits[CONCURRENCY] - ((current >> shift) & layout.mask[CONCURRENCY])
            {
                return Err(CONCURRENCY);
            }
            match self.packed.compare_exchange_weak(
                current,
                current + delta,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => return Ok(()),
                Err(actual) => current = actual,
            }
        }
    }

    /// [`reserve`](Self::reserve) with `N == layout.packed`.
    #[inline(always)]
    fn reserve_n<const N: usize>(
        &self,
        amounts: &[u64; KINDS],
        layout: &Layout,
    ) -> core::result::Result<(), usize> {
        // Only used once every packed amount has passed its limit check below.
        let delta = layout.delta::<N>(amounts, 0, N);
        // Relaxed (load and both CAS orderings): the counters are plain quantities; the CAS on
        // their one location is what keeps each field within its limit (see the module docs).
        let mut current = self.packed.load(Ordering::Relaxed);
        loop {
            for kind in 0..N {
                let held = (current >> layout.shift[kind]) & layout.mask[kind];
                // `held <= limit` (invariant), so no underflow.
                if amounts[kind] > layout.limits[kind] - held {
                    return Err(kind);
                }
            }
            match self.packed.compare_exchange_weak(
                current,
                current + delta,
                Ordering::Relaxed,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => current = actual,
            }
        }
        for kind in N..KINDS {
            if !try_add(self.apart(kind), amounts[kind], layout.limits[kind]) {
                self.refund_n::<N>(amounts, 0, kind, layout);
                return Err(kind);
            }
        }
        Ok(())
    }

    /// Gives back `amounts[kind]` for every `kind` in `kinds`.
    #[inline(always)]
    pub(super) fn refund(
        &self,
        amounts: &[u64; KINDS],
        kinds: core::ops::Range<usize>,
        layout: &Layout,
    ) {
        let (start, end) = (kinds.start, kinds.end);
        if amounts[CPU_UNITS] | amounts[MEMORY_UNITS] == 0 || end <= CPU_UNITS {
            // Queue slot and concurrency only: the word's first two fields, at fixed places.
            let q = if start == QUEUE_SLOTS && end > QUEUE_SLOTS {
                amounts[QUEUE_SLOTS]
            } else {
                0
            };
            let c = if start <= CONCURRENCY && end > CONCURRENCY {
                amounts[CONCURRENCY]
            } else {
                0
            };
            let delta = q | (c << layout.shift[CONCURRENCY]);
            // Relaxed: the counters are plain quantities (see the module docs).
            let before = self.packed.fetch_sub(delta, Ordering::Relaxed);
            debug_assert!(
                before & layout.mask[QUEUE_SLOTS] >= q,
                "refund of more than was reserved"
            );
            return;
        }
        self.refund_units(amounts, start, end, layout);
    }

    /// [`refund`](Self::refund) with CPU or memory units (out of line, as `reserve_units`).
    #[inline(never)]
    fn refund_units(&self, amounts: &[u64; KINDS], start: usize, end: usize, layout: &Layout) {
        match layout.packed {
            2 => self.refund_n::<2>(amounts, start, end, layout),
            3 => self.refund_n::<3>(amounts, start, end, layout),
            _ => self.refund_n::<4>(amounts, start, end, layout),
        }
    }

    /// [`refund`](Self::refund) of `start..end` with `N == layout.packed`.
    #[inline(always)]
    fn refund_n<const N: usize>(
        &self,
        amounts: &[u64; KINDS],
        start: usize,
        end: usize,
        layout: &Layout,
    ) {
        let delta = layout.delta::<N>(amounts, start, end);
        if delta != 0 {
            // Relaxed: the counters are plain quantities (see the module docs).
            let before = self.packed.fetch_sub(delta, Ordering::Relaxed);
            debug_assert!(
                (start..end.min(N))
                    .all(|k| { (before >> layout.shift[k]) & layout.mask[k] >= amounts[k] }),
                "refund of more than was reserved"
            );
        }
        for kind in N..KINDS {
            let amount = amounts[kind];
            if kind >= start && kind < end && amount != 0 {
                // Relaxed: as above.
                let before = self.apart(kind).fetch_sub(amount, Ordering::Relaxed);
                debug_assert!(before >= amount, "refund of more than was reserved");
            }
        }
    }

    pub(super) fn sample(&self, layout: &Layout) -> Usage {
        // Relaxed: a diagnostic sample; callers order it against drops themselves.
        let word = self.packed.load(Ordering::Relaxed);
        let [q, c, cpu, mem] = core::array::from_fn(|k| {
            if k < layout.packed {
                (word >> layout.shift[k]) & layout.mask[k]
            } else {
                self.apart(k).load(Ordering::Relaxed)
            }
        });
        Usage {
            queue_slots: q,
            concurrency: c,
            cpu_units: cpu,
            memory_units: mem,
        }
    }
}

/// Adds `amount` to `counter` unless that would take it past `limit` (or overflow).
#[inline]
fn try_add(counter: &AtomicU64, amount: u64, limit: u64) -> bool {
    if amount == 0 {
        return true;
    }
    // Relaxed (load and both CAS orderings): the counter is a plain quantity; the CAS on its one
    // location is what keeps it within the limit (see the module docs).
    let mut current = counter.load(Ordering::Relaxed);
    loop {
        let next = match current.checked_add(amount) {
            Some(next) if next <= limit => next,
            _ => return false,
        };
        match counter.compare_exchange_weak(current, next, Ordering::Relaxed, Ordering::Relaxed) {
            Ok(_) => return true,
            Err(actual) => current = actual,
        }
    }
}
