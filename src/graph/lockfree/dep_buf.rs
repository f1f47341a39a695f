//! A fixed buffer of the key slots of one job's dependencies, on the stack: up to the largest
//! `max_deps` a graph can be built with, so no submit, discovery or retirement allocates.

use super::KeyRef;
use crate::graph::rules::MAX_DEPS;
use core::mem::MaybeUninit;

/// Up to [`MAX_DEPS`] key slots (or, for the urgency walk, producer nodes). Entries past `len` are left uninitialised: no 8 KiB memset per
/// submit.
pub(super) struct DepBuf<T: Copy = KeyRef> {
    slots: [MaybeUninit<T>; MAX_DEPS],
    len: usize,
}

impl<T: Copy> DepBuf<T> {
    #[inline]
    pub(super) fn new() -> Self {
        Self {
            slots: [const { MaybeUninit::uninit() }; MAX_DEPS],
            len: 0,
        }
    }

    /// Appends `k`.
    ///
    /// # Panics
    ///
    /// Past [`MAX_DEPS`] entries: the builder refuses a larger `max_deps` and submit refuses
    /// more dependencies than `max_deps`, so it does not happen.
    #[inline]
    pub(super) fn push(&mut self, k: T) {
        assert!(self.len < MAX_DEPS, "more than MAX_DEPS dependencies");
        self.slots[self.len].write(k);
        self.len += 1;
    }

    #[inline]
    pub(super) fn as_slice(&self) -> &[T] {
        // SAFETY: the first `len` entries were written by `push`; `MaybeUninit<T>` has `T`'s
        // layout.
        unsafe { &*(&self.slots[..self.len] as *const [MaybeUninit<T>] as *const [T]) }
    }

    /// Forgets every entry (they are `Copy`: nothing to drop).
    #[inline]
    pub(super) fn clear(&mut self) {
        self.len = 0;
    }

    #[inline]
    pub(super) fn as_mut_slice(&mut self) -> &mut [T] {
        // SAFETY: as in `as_slice`; the borrow of `self` is exclusive.
        unsafe { &mut *(&mut self.slots[..self.len] as *mut [MaybeUninit<T>] as *mut [T]) }
    }
}
