//! [`FixedCellPool`]: the built-in lock-free pool, a bitmap of free cells.
//!
//! # State
//!
//! Cell `c` is bit `c % 32` of word `c / 32` in two bitmaps (bit 63 of each `free` word is the
//! `WATCH` flag, below; bits 32..63 are never cells):
//!
//! | `free` bit | `quarantined` bit | cell is     |
//! |------------|-------------------|-------------|
//! | 1          | 0                 | available   |
//! | 0          | 0                 | leased      |
//! | 0          | 1                 | quarantined (until the host restores it) |
//! | 1          | 1                 | never       |
//!
//! Bits at or past `cells` are 0 in both maps, always. Transitions: acquire clears a `free` bit
//! (one successful CAS), release sets it (one `fetch_add` of the clear bit), quarantine sets the `quarantined` bit
//! (a `fetch_or`, rare path) and counts it in `quarantined_count`; restore (host-driven, after
//! cleaning) clears it, uncounts it and sets the `free` bit. Only the owner of a lease
//! releases or quarantines its cell, so each bit has one writer at a time besides acquirers
//! racing to clear a set bit.
//!
//! The number of leased cells is derived (`total - available - quarantined`) rather than kept in
//! a counter: a counter would add a contended RMW to every acquire and every release, doubling the
//! cost of the hot path for a figure that is only sampled. Within one [`PoolCounters`] sample the
//! three figures add up to `total` by construction; see [`FixedCellPool::counters`] for why
//! `available + quarantined` never exceeds it.
//!
//! # Change notification without a cost on every release
//!
//! A subscriber registers its waker and then sets `WATCH` in every `free` word with an RMW; a
//! release is one RMW on its word, whose returned value says whether `WATCH` was set, and
//! only then does it clear the flag and wake. Because the flag lives in the same word as the free
//! bits, the subscriber's RMW and the releaser's RMW are ordered in that word's modification
//! order: either the releaser sees `WATCH` (and the waker registered before it), or the
//! subscriber's RMW reads the released bit (Acquire) and its probe that follows finds the cell.
//! So an unwatched release costs one RMW, and no release is lost (SPEC F17; loom model
//! `f17_no_lost_wakeup`).
//!
//! Misuse (a lease of another class, a cell out of range, releasing or quarantining a cell that
//! is not leased — a double release, or a lease forged with [`Lease::new`]) is detected without
//! changing any state (a double release finds its bit already set before its RMW): it panics in
//! debug builds and is ignored in release builds. A forged lease for a cell that is currently
//! leased to someone else cannot be told apart from the real one; released concurrently with the
//! real one, the two `fetch_add`s would carry into the next bit, so a forged lease is a bug of the
//! same weight as a double free, which `Lease` (affine, not `Clone`) rules out for real leases.

use super::{CellPool, Lease, LeaseRequest, PoolCounters};
use crate::error::Reason;
use crate::error::{Code, Error, Result};
use crate::ids::{CellId, ClassId, RequestId};
use crate::sync::{register_waker, AtomicU32, AtomicU64, AtomicWaker, Ordering};
use core::fmt;
use core::task::Waker;

/// Cells per bitmap word: 32, so that a lease's cell id maps back to its word with a shift (a
/// division by 63 sat on the release path's critical chain and cost ~15 % of an acquire +
/// release). Bit 63 of each `free` word is [`WATCH`].
const BITS: u32 = 32;

/// In a `free` word: a change subscriber wants to hear of the next release in this word.
const WATCH: u64 = 1 << 63;

const _: () = assert!(BITS == 32 && WATCH == 1 << 63);

/// A lock-free pool of `cells` interchangeable cells of one class.
///
/// # Examples
///
/// ```
/// use fairway::pool::{CellPool, FixedCellPool, LeaseRequest};
/// use fairway::{ClassId, RequestId};
/// let pool = FixedCellPool::new(ClassId(0), 1)?;
/// let req = LeaseRequest { request: RequestId(1), class: ClassId(0), cpu_units: 0, memory_units: 0 };
/// let lease = pool.try_acquire_now(&req)?.expect("one cell is free");
/// assert!(lease.matches(&req));
/// assert!(pool.try_acquire_now(&req)?.is_none()); // never waits
/// pool.release(lease);
/// assert_eq!(pool.counters().available, 1);
/// # Ok::<(), fairway::Error>(())
/// ```
///
/// # Capacity
///
/// One bit per cell in each of two bitmaps (allocated by [`FixedCellPool::new`]); no per-cell
/// padding. Acquisition scans at most `ceil(cells / 32)` words, starting at a word picked from
/// the request id so that concurrent acquirers spread over the words; release and quarantine are
/// O(1). No operation allocates.
pub struct FixedCellPool {
    class: ClassId,
    cells: u32,
    /// Bit set ⇔ the cell is available (see the module's state table).
    free: Box<[AtomicU64]>,
    /// Bit set ⇔ the cell is quarantined. Set by quarantine, cleared only by restore.
    quarantined: Box<[AtomicU64]>,
    /// Number of bits set in `quarantined`; incremented after the bit is set.
    quarantined_count: AtomicU32,
    /// The one change subscriber (last registration wins), woken after each release or
    /// quarantine.
    changes: AtomicWaker,
}

impl FixedCellPool {
    /// Whether `cell` is quarantined now (an observation; `false` out of range).
    pub(crate) fn is_quarantined(&self, cell: CellId) -> bool {
        if cell.0 >= self.cells {
            return false;
        }
        let (w, mask) = ((cell.0 / BITS) as usize, 1u64 << (cell.0 % BITS));
        // Relaxed: an observation.
        self.quarantined[w].load(Ordering::Relaxed) & mask != 0
    }

    /// A pool of `cells` cells of `class`, all available.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` (field `cells`) if `cells` is 0 or above
    /// [`ClassConfig::MAX_CELLS`](crate::ClassConfig::MAX_CELLS), before allocating anything.
    pub fn new(class: ClassId, cells: u32) -> Result<Self> {
        if cells == 0 || cells > crate::policy::MAX_CELLS {
            return Err(Error::configuration("cells"));
        }
        let words = cells.div_ceil(BITS) as usize;
        let free = (0..words)
            .map(|w| {
                let first = w as u32 * BITS;
                let in_word = (cells - first).min(BITS);
                AtomicU64::new((1u64 << in_word) - 1)
            })
            .collect();
        let quarantined = (0..words).map(|_| AtomicU64::new(0)).collect();
        Ok(Self {
            class,
            cells,
            free,
            quarantined,
            quarantined_count: AtomicU32::new(0),
            changes: AtomicWaker::new(),
        })
    }

    /// [`CellPool::try_acquire_now`] without the lease around the cell: one scan of the words.
    /// A cell id comes back in a register, where a `Result<Option<Lease>>` (48 bytes of
    /// mixed-width fields) went through memory, and re-reading it cost a store-forwarding stall on
    /// every grant.
    ///
    /// `Ok(None)` means only that this scan met no free bit: a cell released into a word the
    /// scan had already passed is missed. A caller that knows a cell is free (holds a cell
    /// credit) uses [`acquire_credited`](Self::acquire_credited) instead.
    ///
    /// # Errors
    ///
    /// `unavailable / all-cells-quarantined` when every cell is quarantined.
    #[inline]
    pub(crate) fn acquire_cell(&self, request: RequestId) -> Result<Option<CellId>> {
        if let Some(cell) = self.scan(request) {
            return Ok(Some(cell));
        }
        self.check_quarantined()?;
        Ok(None)
    }

    /// A cell for a caller that holds a cell credit: rescans until it finds one.
    ///
    /// # Termination
    ///
    /// The engines count the cells neither leased nor quarantined as credits; a releaser sets
    /// its free bit *before* it returns the credit, and an acquirer takes a credit *before* it
    /// clears a bit. So while this caller holds its credit, the number of set bits is at least
    /// the number of credit holders that have not yet cleared one, itself at least one: at every
    /// instant some bit is set. One scan can still miss every set bit, because it reads each
    /// word at a different instant: the bit it would have found in word `w` was cleared before
    /// the scan reached `w` by another credit holder, which thereby finished its acquisition. So
    /// every failed scan is paid for by another caller's completed acquisition (lock-free, not
    /// wait-free), and the credits bound how many acquisitions can be in progress at once; a
    /// scan fails only while other threads keep acquiring. (With more than 32 cells a single
    /// scan was trusted, and a credit holder could fail with no cell free in its view while
    /// cells were free.)
    ///
    /// # Errors
    ///
    /// `unavailable / all-cells-quarantined` when every cell is quarantined (a caller holding a
    /// credit never sees it; kept so that a credit-accounting bug ends in an error rather than
    /// a spin).
    #[inline]
    pub(crate) fn acquire_credited(&self, request: RequestId) -> Result<CellId> {
        loop {
            if let Some(cell) = self.scan(request) {
                return Ok(cell);
            }
            self.check_quarantined()?;
            // Another credit holder is between taking the bit we raced for and its release;
            // let it run (under loom: let the model schedule it).
            #[cfg(loom)]
            loom::thread::yield_now();
            #[cfg(not(loom))]
            core::hint::spin_loop();
        }
    }

    /// `unavailable / all-cells-quarantined` once every cell is quarantined.
    #[inline]
    fn check_quarantined(&self) -> Result<()> {
        // Relaxed: a hint on the cold path (a cell comes back only through a host's restore,
        // which the scheduler refuses once the class has died).
        if self.quarantined_count.load(Ordering::Relaxed) == self.cells {
            return Err(Error::new(Code::Unavailable, Reason::AllCellsQuarantined));
        }
        Ok(())
    }

    /// One pass over the words, clearing the first free bit met; `None` if every word read
    /// empty when the pass reached it.
    #[inline]
    fn scan(&self, request: RequestId) -> Option<CellId> {
        let words = self.free.len();
        // Start at a word derived from the request id: concurrent acquirers spread over the
        // words without a shared (and contended) rotating hint.
        // (Multiply-shift instead of `%`: a 64-bit division costs more than the whole acquire.)
        let start = if words == 1 {
            0
        } else {
            ((u128::from(request.0.wrapping_mul(0x9E37_79B9_7F4A_7C15)) * words as u128) >> 64)
                as usize
        };
        for i in 0..words {
            let w = if start + i < words {
                start + i
            } else {
                start + i - words
            };
            let word = &self.free[w];
            // Relaxed: only a guess of which bits are set; the CAS below re-validates it and
            // carries the Acquire.
            let mut bits = word.load(Ordering::Relaxed);
            while bits & !WATCH != 0 {
                let bit = (bits & !WATCH).trailing_zeros();
                let mask = 1u64 << bit;
                // Acquire (success): pairs with the Release `fetch_add` in `release`, so the
                // previous holder's use of the cell happens-before this lease. `WATCH` is kept
                // as it is.
                // Relaxed (failure): we only learn the current bits and retry.
                match word.compare_exchange_weak(
                    bits,
                    bits & !mask,
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Some(CellId(w as u32 * BITS + bit)),
                    Err(current) => bits = current,
                }
            }
        }
        None
    }

    /// The word index and bit mask of `lease`'s cell, or `None` if the lease cannot be from this
    /// pool (other class, cell out of range).
    #[inline]
    fn locate(&self, lease: &Lease) -> Option<(usize, u64)> {
        let cell = lease.cell().0;
        (lease.class() == self.class && cell < self.cells)
            .then(|| ((cell / BITS) as usize, 1u64 << (cell % BITS)))
    }

    /// Whether the cell at (`word`, `mask`) is leased (neither free nor quarantined), as far as
    /// the owner of its lease can tell. Used only to detect misuse.
    #[inline]
    fn is_leased(&self, word: usize, mask: u64) -> bool {
        // Relaxed (both): misuse detection only. The owner of a real lease cleared the free bit
        // itself (or received the lease through a synchronising hand-off), so it sees the bit
        // clear; nobody else may set either bit of a leased cell.
        self.free[word].load(Ordering::Relaxed) & mask == 0
            && self.quarantined[word].load(Ordering::Relaxed) & mask == 0
    }
}

impl CellPool for FixedCellPool {
    fn class(&self) -> ClassId {
        self.class
    }

    fn capacity(&self) -> u32 {
        self.cells
    }

    #[inline]
    fn try_acquire_now(&self, req: &LeaseRequest) -> Result<Option<Lease>> {
        Ok(self
            .acquire_cell(req.request)?
            .map(|cell| Lease::new(req, cell)))
    }

    #[inline]
    fn release(&self, lease: Lease) {
        let Some((w, mask)) = self.locate(&lease) else {
            debug_assert!(false, "release of a lease from another pool");
            return;
        };
        // Misuse detection (a cell that is not leased: double release, quarantined, forged).
        // It must come before the RMW: `fetch_add` of a bit that is already set would carry into
        // the next cell's bit.
        debug_assert!(w < self.free.len() && w < self.quarantined.len());
        // SAFETY: `locate` checked `cell < self.cells`, so `w = cell / BITS` is below
        // `ceil(cells / BITS)`, the length of both maps (built together in `new`, never resized).
        let (free, quarantined) = unsafe {
            (
                self.free.get_unchecked(w),
                self.quarantined.get_unchecked(w),
            )
        };
        // Relaxed (both): see `is_leased`.
        if quarantined.load(Ordering::Relaxed) & mask != 0 {
            debug_assert!(false, "release of a quarantined cell");
            return;
        }
        if free.load(Ordering::Relaxed) & mask != 0 {
            debug_assert!(false, "double release of a cell");
            return;
        }
        // `fetch_add` of a clear bit is `fetch_or`, and it is one `lock xadd` on x86, where a
        // `fetch_or` whose result is used becomes a load + CAS loop.
        // Release: publishes the holder's use of the cell; pairs with the Acquire CAS in
        // `try_acquire_now` of the next holder, and (F17) with the Acquire of a subscriber's
        // `WATCH` RMW, whose probe then finds the cell. Acquire: if we read a `WATCH` set by a
        // subscriber, its waker registration (before that RMW) is visible to our wake.
        let before = free.fetch_add(mask, Ordering::AcqRel);
        debug_assert!(before & mask == 0, "concurrent release of one cell");
        if before & WATCH != 0 {
            // Relaxed: the flag is only a hint; a subscriber that sets it again after this clear
            // registered its waker first, and the wake below reaches that waker.
            free.fetch_and(!WATCH, Ordering::Relaxed);
            self.changes.wake();
        }
    }

    fn quarantine(&self, lease: Lease, reason: &'static str) {
        // FixedCellPool keeps only the count; the reason is for hosts' own pools and logs.
        let _ = reason;
        let Some((w, mask)) = self.locate(&lease).filter(|&(w, m)| self.is_leased(w, m)) else {
            debug_assert!(
                false,
                "quarantine of a cell that is not leased from this pool"
            );
            return;
        };
        // Relaxed: the bit is read only by misuse detection (see `is_leased`); the count below
        // carries the ordering that `counters` needs.
        self.quarantined[w].fetch_or(mask, Ordering::Relaxed);
        // Release: pairs with the Acquire load in `counters`: a sampler that counts this cell as
        // quarantined also sees its free bit clear (the clear happened-before this lease's
        // owner got here).
        self.quarantined_count.fetch_add(1, Ordering::Release);
        self.changes.wake();
    }

    fn subscribe_changes(&self, waker: &Waker) -> Result<()> {
        register_waker(&self.changes, waker);
        for word in self.free.iter() {
            // AcqRel: Release publishes the registration above to a releaser that reads the flag;
            // Acquire reads a release that came first, so the caller's probe after this call sees
            // its cell (see the module docs).
            word.fetch_or(WATCH, Ordering::AcqRel);
        }
        Ok(())
    }

    /// Returns a quarantined cell to service (F44): clears its quarantine bit (one `fetch_and`,
    /// which also decides between concurrent restores of the same cell), uncounts it, then
    /// frees it as a release does.
    fn restore(&self, cell: CellId) -> Result<()> {
        let not_quarantined = Error::new(Code::InvalidArgument, Reason::CellNotQuarantined);
        if cell.0 >= self.cells {
            return Err(Error::new(Code::InvalidArgument, Reason::CellRange));
        }
        let (w, mask) = ((cell.0 / BITS) as usize, 1u64 << (cell.0 % BITS));
        // Relaxed: the bit is only read by misuse detection; the count below orders.
        if self.quarantined[w].fetch_and(!mask, Ordering::Relaxed) & mask == 0 {
            return Err(not_quarantined);
        }
        // Release: pairs with the Acquire load in `counters`, as in `quarantine`.
        self.quarantined_count.fetch_sub(1, Ordering::Release);
        // Release / Acquire: as in `release` (the next holder's acquire, a subscriber's WATCH).
        let before = self.free[w].fetch_add(mask, Ordering::AcqRel);
        debug_assert!(before & mask == 0, "a quarantined cell was free");
        if before & WATCH != 0 {
            // Relaxed: a hint, as in `release`.
            self.free[w].fetch_and(!WATCH, Ordering::Relaxed);
        }
        self.changes.wake();
        Ok(())
    }

    /// A sample of the split. `quarantined` is read first (Acquire) and the free bits after, so
    /// no cell is counted both as quarantined and available while cells only go into
    /// quarantine; a cell [`restore`](CellPool::restore)d between the two reads could be, and
    /// `available` is clamped so the split still adds up. `leased` is the remainder. Each word
    /// is read at a different instant, so under concurrent churn the sample is a plausible state,
    /// not necessarily one that existed at a single instant.
    fn counters(&self) -> PoolCounters {
        // Acquire: pairs with the Release increment in `quarantine` (see there).
        let quarantined = self.quarantined_count.load(Ordering::Acquire);
        let available: u32 = self
            .free
            .iter()
            // Relaxed: each word is a sample; see above for the one ordering needed.
            .map(|w| (w.load(Ordering::Relaxed) & !WATCH).count_ones())
            .sum::<u32>()
            .min(self.cells - quarantined.min(self.cells));
        debug_assert!(available + quarantined <= self.cells);
        PoolCounters {
            total: self.cells,
            available,
            leased: self.cells.saturating_sub(available + quarantined),
            quarantined,
        }
    }
}

impl fmt::Debug for FixedCellPool {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("FixedCellPool")
            .field("class", &self.class)
            .field("counters", &self.counters())
            .finish_non_exhaustive()
    }
}
