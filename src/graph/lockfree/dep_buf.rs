//! A fixed buffer of the key slots of one job's dependencies, on the stack: up to the largest
//! `max_deps` a graph can be built with, so no submit, discovery or retirement allocates.

use super::KeyRef;
use crate::graph::rules::MAX_DEPS;
use core::mem::MaybeUninit;

/// Up to [`MAX_DEPS`] key slots. Entries past `len` are left uninitialised: no 8 KiB memset per
/// submit.
pub(super) struct DepBuf {
    slots: [MaybeUninit<KeyRef>; MAX_DEPS],
    len: usize,
}

impl DepBuf {
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
    pub(super) fn push(&mut self, k: KeyRef) {
        assert!(self.len < MAX_DEPS, "more than MAX_DEPS dependencies");
        self.slots[self.len].write(k);
        self.len += 1;
    }

    #[inline]
    pub(super) fn as_slice(&self) -> &[KeyRef] {
        // SAFETY: the first `len` entries were written by `push`; `MaybeUninit<KeyRef>` has
        // `KeyRef`'s layout.
        unsafe { &*(&self.slots[..self.len] as *const [MaybeUninit<KeyRef>] as *const [KeyRef]) }
    }

    #[inline]
    pub(super) fn as_mut_slice(&mut self) -> &mut [KeyRef] {
        // SAFETY: as in `as_slice`; the borrow of `self` is exclusive.
        unsafe {
            &mut *(&mut self.slots[..self.len] as *mut [MaybeUninit<KeyRef>] as *mut [KeyRef])
        }
    }
}
