//! The handles of the mutex twin's entry slots: a slot index and the slot's generation, packed
//! into the `u64` a request handle carries (SPEC F21, F30). Generations are checked, never
//! wrapped: a slot freed at [`MAX_GENERATION`] retires.

use crate::raw::pack::Field;

/// The most entry slots a class of the twin can have: every index a [`Key`] carries (2^24,
/// about 16.8 million).
pub(crate) const MAX_CAPACITY: usize = KEY_INDEX.max() as usize + 1;

/// The last generation a slot can have: a slot freed at this generation retires (SPEC F21).
pub(crate) const MAX_GENERATION: u64 = KEY_GENERATION.max();

/// [`Key`] encoded as a `u64`: index in the low 24 bits, generation in the 40 above.
const KEY_INDEX: Field = Field::first(24);
const KEY_GENERATION: Field = KEY_INDEX.next(40);
const _: () = assert!(KEY_GENERATION.end() == 64);

/// The generation every entry slot of a new twin starts at: 0, except in tests that start slots next to
/// exhaustion through `start_generations_at`, a test-only helper (a 2^40-reuse wait is no test).
#[inline]
pub(crate) fn first_generation() -> u64 {
    #[cfg(test)]
    {
        FIRST_GENERATION.with(core::cell::Cell::get)
    }
    #[cfg(not(test))]
    {
        0
    }
}

#[cfg(test)]
std::thread_local! {
    static FIRST_GENERATION: core::cell::Cell<u64> = const { core::cell::Cell::new(0) };
}

/// Test-only: entry slots of twins built on this thread while the returned
/// guard lives start at generation `first`.
#[cfg(all(test, not(loom)))]
#[must_use = "the first generation goes back to 0 when the guard drops"]
pub(crate) fn start_generations_at(first: u64) -> impl Drop {
    struct Reset(u64);
    impl Drop for Reset {
        fn drop(&mut self) {
            FIRST_GENERATION.with(|g| g.set(self.0));
        }
    }
    Reset(FIRST_GENERATION.with(|g| g.replace(first)))
}

/// Names one allocation of one slot: the slot's index and the generation it had when allocated.
///
/// A key outlives its allocation harmlessly: once the slot is freed, the twin refuses it,
/// including after the slot has been allocated again.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) struct Key {
    pub(crate) index: u32,
    pub(crate) generation: u64,
}

impl Key {
    /// The slot's index.
    #[cfg(all(test, not(loom)))]
    pub(crate) const fn index(self) -> u32 {
        self.index
    }

    /// The generation of the allocation this key names.
    #[cfg(all(test, not(loom)))]
    pub(crate) const fn generation(self) -> u64 {
        self.generation
    }

    /// The key as one `u64` (for handles the host holds); [`Key::from_u64`] inverts it.
    pub(crate) const fn to_u64(self) -> u64 {
        KEY_GENERATION.set(KEY_INDEX.set(0, self.index as u64), self.generation)
    }

    /// The key encoded by [`Key::to_u64`]. Any `u64` decodes to some key; one that names no
    /// allocation (index out of range, generation too wide, slot since freed) is simply refused
    /// by the twin.
    pub(crate) const fn from_u64(raw: u64) -> Key {
        Key {
            index: KEY_INDEX.get(raw) as u32,
            generation: KEY_GENERATION.get(raw),
        }
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;

    #[test]
    fn f30_key_round_trips_through_u64() {
        for (index, generation) in [
            (0, 0),
            (1, 2),
            (MAX_CAPACITY as u32 - 1, MAX_GENERATION),
            (7, 1 << 31),
        ] {
            let k = Key { index, generation };
            assert_eq!(Key::from_u64(k.to_u64()), k);
            assert_eq!((k.index(), k.generation()), (index, generation));
        }
        assert_eq!(
            Key {
                index: 1,
                generation: 2
            }
            .to_u64(),
            2 << 24 | 1
        );
    }

    /// F21 through the scheduler on the mutex twin: with every entry slot started just below
    /// 2^32, requests keep queueing and cancelling past it (with 32-bit generations the slots
    /// retired there and `enqueue` failed `queue-full` below capacity).
    mod engines {
        use crate::admission::{AdmissionRequest, ClassSpec, Ledger, LedgerConfig};
        use crate::cancel::CancellationToken;
        use crate::error::Code;
        use crate::ids::{ClassId, RequestId, TenantId};
        use crate::oracle::{Baseline, Mechanism, StdMutex};
        use crate::scheduler::{AdmittedRequest, Scheduler};
        use core::future::Future;
        use core::pin::pin;
        use core::task::{Context, Poll, Waker};

        fn reuse_past_2_pow_32<M: Mechanism>() {
            let _first = super::super::start_generations_at(u64::from(u32::MAX) - 2);
            let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("c")], 2)).unwrap();
            // One cell and one queue slot: three entry slots in all, reused on every request.
            let sched = Scheduler::<()>::builder(ledger.clone())
                .class(1, 1)
                .build_with::<M>()
                .unwrap();
            let admit = |id: u64| {
                let permit = ledger
                    .admit(AdmissionRequest::new(RequestId(id), TenantId(0)).class(ClassId(0)))
                    .unwrap();
                AdmittedRequest::new(permit, CancellationToken::new(RequestId(id)))
            };
            let held = sched.try_enqueue(admit(1)).unwrap();
            let mut cx = Context::from_waker(Waker::noop());
            for id in 2..40 {
                let mut f = pin!(sched.enqueue(admit(id)));
                assert!(f.as_mut().poll(&mut cx).is_pending(), "request {id} queues");
                let handle = f.handle().expect("queued");
                sched.cancel(handle).unwrap();
                match f.as_mut().poll(&mut cx) {
                    Poll::Ready(Err(e)) => assert_eq!(e.code(), Code::Cancelled, "{e}"),
                    other => panic!("request {id}: {other:?}"),
                }
                assert_eq!(sched.cancel(handle).unwrap_err().code(), Code::NotFound);
            }
            held.release();
            let a = sched.try_enqueue(admit(100)).unwrap();
            a.release();
            assert!(ledger.usage().is_zero());
        }

        #[test]
        fn f21_twin_entry_slots_reused_past_2_pow_32() {
            reuse_past_2_pow_32::<Baseline<StdMutex>>();
        }
    }
}
