//! The waker slots of executors waiting in pull mode (SPEC F23) and of drainers (F47): one
//! bit per slot to claim it, an overflow list past the slots.

use crate::sync::{AtomicU64, AtomicWaker, Mutex, Ordering};
use core::task::{Context, Waker};

/// Waiter slots per word of [`ExecWaiters::claimed`].
const WORD: usize = 64;

/// The top bit of the last word of [`ExecWaiters::claimed`]: waiters past the slots are parked
/// on the overflow list. The slot count leaves that bit free ([`ExecWaiters::slots_for`]), so
/// `wake_all` sees it with the RMW it makes on that word anyway: no extra atomic on any path.
const OVERFLOW: u64 = 1 << (WORD - 1);

/// Waker slots for executors waiting in pull mode, claimed with one bit each.
///
/// Sized at build (see [`ExecWaiters::slots_for`]). An executor that finds every slot claimed
/// parks its waker on a locked overflow list instead (SPEC F22: an idle class costs nothing,
/// whatever the number of executors); `wake_all` wakes that list too. The list's lock is taken
/// only by waiters past the slots and by a `wake_all` that finds the `OVERFLOW` bit set: never
/// on a path with a free slot.
pub(crate) struct ExecWaiters {
    claimed: Box<[AtomicU64]>,
    slots: Box<[AtomicWaker]>,
    overflow: Mutex<Overflowed>,
}

/// Executors waiting past the slots: one entry per waiting call, told apart by id (the calls
/// of one task share its waker).
#[derive(Default)]
struct Overflowed {
    next: usize,
    list: Vec<(usize, Waker)>,
}

impl ExecWaiters {
    /// Waiter slots for a class of `cells` cells: four per cell, at least 63, one less than a
    /// whole number of words (the last word's top bit is [`OVERFLOW`]). Shrunk under loom,
    /// where every slot is a modelled object.
    pub(crate) fn slots_for(cells: u32) -> usize {
        if cfg!(loom) {
            return 2;
        }
        let want = (cells as usize).saturating_mul(4).clamp(WORD, 1 << 16);
        want.div_ceil(WORD) * WORD - 1
    }

    pub(crate) fn new(slots: usize) -> Self {
        assert!(
            !slots.is_multiple_of(WORD),
            "the last word keeps its top bit for the overflow"
        );
        Self {
            claimed: (0..slots.div_ceil(WORD))
                .map(|_| AtomicU64::new(0))
                .collect(),
            slots: (0..slots).map(|_| AtomicWaker::new()).collect(),
            overflow: Mutex::new(Overflowed::default()),
        }
    }

    /// The bits of word `w` that name a slot.
    fn valid_bits(&self, w: usize) -> u64 {
        let left = self.slots.len() - w * WORD;
        if left >= WORD {
            u64::MAX
        } else {
            u64::MAX >> (WORD - left)
        }
    }

    fn last_word(&self) -> &AtomicU64 {
        self.claimed.last().expect("at least one word")
    }

    fn lock_overflow(&self) -> crate::sync::MutexGuard<'_, Overflowed> {
        self.overflow.lock().unwrap_or_else(|e| e.into_inner())
    }

    pub(crate) fn claim(&self) -> Option<usize> {
        for (w, word) in self.claimed.iter().enumerate() {
            let valid = self.valid_bits(w);
            // Relaxed first read; the CAS below orders.
            let mut cur = word.load(Ordering::Relaxed);
            loop {
                let free = !cur & valid;
                if free == 0 {
                    break;
                }
                let i = free.trailing_zeros() as usize;
                // Acquire: if this CAS comes after a `wake_all` in the word's modification order,
                // it reads from that `wake_all`'s Release RMW, so the publications (granted pull entries, a
                // drained class's last change) before it
                // are visible to the re-check that follows the registration (see `wake_all`).
                match word.compare_exchange_weak(
                    cur,
                    cur | (1 << i),
                    Ordering::Acquire,
                    Ordering::Relaxed,
                ) {
                    Ok(_) => return Some(w * WORD + i),
                    Err(a) => cur = a,
                }
            }
        }
        None
    }

    /// Gives slot `i` up (or the overflow entry it names), dropping the waker registered
    /// there so that no later wake reaches a task that has left.
    pub(crate) fn forget(&self, i: usize) {
        if i >= self.slots.len() {
            let mut o = self.lock_overflow();
            o.list.retain(|(id, _)| *id != i);
            return;
        }
        drop(crate::sync::take_waker(&self.slots[i]));
        // Relaxed: giving a slot up publishes nothing.
        self.claimed[i / WORD].fetch_and(!(1 << (i % WORD)), Ordering::Relaxed);
    }

    pub(crate) fn register(&self, i: usize, cx: &Context<'_>) {
        crate::sync::register_waker(&self.slots[i], cx.waker());
    }

    /// Registers `cx` in the waiter's slot, claiming one first if it holds none; with every
    /// slot claimed, parks it on the overflow list (and moves it to a slot later, once one is
    /// free). `*slot` names a slot (below the slot count) or an overflow entry (at or above
    /// it). The caller re-checks its condition after this call.
    pub(crate) fn register_in(&self, slot: &mut Option<usize>, cx: &Context<'_>) {
        if let Some(i) = *slot {
            if i < self.slots.len() {
                return self.register(i, cx);
            }
        }
        if let Some(i) = self.claim() {
            if let Some(o) = slot.replace(i) {
                self.forget(o);
            }
            return self.register(i, cx);
        }
        self.park_overflow(slot, cx);
    }

    /// Parks `cx` on the overflow list (refreshing the entry `*slot` names if it is still
    /// there), then sets [`OVERFLOW`].
    fn park_overflow(&self, slot: &mut Option<usize>, cx: &Context<'_>) {
        let mut o = self.lock_overflow();
        let found = slot.and_then(|id| o.list.iter_mut().find(|(x, _)| *x == id));
        match found {
            Some((_, w)) => {
                if !w.will_wake(cx.waker()) {
                    w.clone_from(cx.waker());
                }
            }
            None => {
                let id = self.slots.len() + o.next;
                o.next = (o.next + 1) % (usize::MAX - self.slots.len());
                o.list.push((id, cx.waker().clone()));
                *slot = Some(id);
            }
        }
        // AcqRel, under the lock: as the claim's CAS (Acquire: if this RMW comes after a
        // `wake_all`'s on the word, the caller's re-check sees that call's pushes); Release:
        // a `wake_all` whose RMW reads this bit then takes the lock and finds the entry.
        self.last_word().fetch_or(OVERFLOW, Ordering::AcqRel);
    }

    /// Wakes every registered waiter. Called after publishing what a waiter re-checks (a granted
    /// pull entry, a class's last change before it drains).
    pub(crate) fn wake_all(&self) {
        let last = self.claimed.len() - 1;
        for (w, word) in self.claimed.iter().enumerate() {
            // An RMW, not a load. The executor claims a slot, registers, then re-checks the
            // condition; we publish, then read `claimed`. With a plain load both reads
            // could be stale (store buffering): we miss the new claim and it misses our push,
            // and the executor sleeps with work ready. As an RMW this read is ordered against
            // the claim's CAS: either we see the bit and wake the slot, or the claim reads from
            // us (Acquire in `claim`) and its re-check sees the push. The overflow bit is read
            // by the same RMW, with the same argument against `park_overflow`'s RMW.
            // Release: publishes what this call follows to a later claim.
            let all = word.fetch_or(0, Ordering::Release);
            let mut bits = all & self.valid_bits(w);
            while bits != 0 {
                let i = bits.trailing_zeros() as usize;
                bits &= bits - 1;
                self.slots[w * WORD + i].wake();
            }
            if w == last && all & OVERFLOW != 0 {
                self.wake_overflow();
            }
        }
    }

    /// Wakes every waiter parked past the slots; the rare path. Each woken call polls again
    /// and parks a new entry if it still finds nothing.
    #[cold]
    fn wake_overflow(&self) {
        let taken = {
            let mut o = self.lock_overflow();
            // Relaxed: under the lock, which orders it against `park_overflow`'s RMW.
            self.last_word().fetch_and(!OVERFLOW, Ordering::Relaxed);
            std::mem::take(&mut o.list)
        };
        for (_, w) in taken {
            w.wake();
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use crate::sync::AtomicUsize;
    use std::sync::Arc;
    use std::task::Wake;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.wake_by_ref();
        }
        fn wake_by_ref(self: &Arc<Self>) {
            // Relaxed: a test counter, read after `wake_all` returned on this thread.
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    /// `wake_all` wakes every waiting executor (SPEC F23), those past the waiter slots on the
    /// overflow list too: 100 executors on 63 slots, each woken exactly once; one that left
    /// (`forget`) is not woken.
    #[test]
    fn f23_wake_all_reaches_executors_past_the_waiter_slots() {
        let waiters = ExecWaiters::new(ExecWaiters::slots_for(1));
        let counts: Vec<Arc<Count>> = (0..100)
            .map(|_| Arc::new(Count(AtomicUsize::new(0))))
            .collect();
        let mut slots: Vec<Option<usize>> = vec![None; counts.len()];
        for (c, slot) in counts.iter().zip(&mut slots) {
            let waker = Waker::from(c.clone());
            waiters.register_in(slot, &Context::from_waker(&waker));
        }
        assert!(
            slots.iter().filter(|s| s.unwrap() >= 63).count() == 37,
            "37 executors past the 63 slots"
        );
        let gone = slots[99].take().unwrap();
        waiters.forget(gone);
        waiters.wake_all();
        for (i, c) in counts.iter().enumerate() {
            let woken = c.0.load(Ordering::Relaxed);
            let want = usize::from(i != 99);
            assert_eq!(
                woken, want,
                "executor {i} (slot {:?}) woken {woken} times",
                slots[i]
            );
        }
    }
}
