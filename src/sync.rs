//! The one synchronisation shim.
//!
//! Every atomic, `UnsafeCell`, `Arc` and waker cell used by the crate comes from here. Under
//! `cfg(loom)` they are loom's, so the models in `src/**/loom_*.rs` see every access; otherwise
//! they are the standard library's (and `atomic-waker`'s). Nothing else in the crate imports
//! `std::sync::atomic` directly.

#[cfg(not(loom))]
mod imp {
    /// Only the tests count with it.
    #[cfg(test)]
    pub(crate) use std::sync::atomic::AtomicUsize;
    pub(crate) use std::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering,
    };
    pub(crate) use std::sync::{Arc, Condvar, Mutex, MutexGuard};

    pub(crate) use atomic_waker::AtomicWaker;

    /// Registers `waker` in `cell` (the call is spelled differently by `atomic-waker` and loom).
    #[inline]
    pub(crate) fn register_waker(cell: &AtomicWaker, waker: &std::task::Waker) {
        cell.register(waker);
    }

    /// Takes the registered waker out of `cell`, if any (spelled differently by `atomic-waker`
    /// and loom).
    #[inline]
    pub(crate) fn take_waker(cell: &AtomicWaker) -> Option<std::task::Waker> {
        cell.take()
    }

    /// `UnsafeCell` with loom's closure API, so the same code compiles under both.
    #[derive(Debug)]
    pub(crate) struct UnsafeCell<T>(std::cell::UnsafeCell<T>);

    impl<T> UnsafeCell<T> {
        pub(crate) const fn new(value: T) -> Self {
            Self(std::cell::UnsafeCell::new(value))
        }

        /// Runs `f` with a shared raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn with<R>(&self, f: impl FnOnce(*const T) -> R) -> R {
            f(self.0.get())
        }

        /// Runs `f` with a mutable raw pointer to the contents.
        #[inline(always)]
        pub(crate) fn with_mut<R>(&self, f: impl FnOnce(*mut T) -> R) -> R {
            f(self.0.get())
        }
    }
}

#[cfg(loom)]
mod imp {
    pub(crate) use loom::cell::UnsafeCell;
    pub(crate) use loom::future::AtomicWaker;
    /// Only the tests count with it.
    #[cfg(test)]
    pub(crate) use loom::sync::atomic::AtomicUsize;
    pub(crate) use loom::sync::atomic::{
        fence, AtomicBool, AtomicPtr, AtomicU32, AtomicU64, Ordering,
    };
    pub(crate) use loom::sync::{Arc, Condvar, Mutex, MutexGuard};

    /// Registers `waker` in `cell` (the call is spelled differently by `atomic-waker` and loom).
    #[inline]
    pub(crate) fn register_waker(cell: &AtomicWaker, waker: &std::task::Waker) {
        cell.register_by_ref(waker);
    }

    /// Takes the registered waker out of `cell`, if any (spelled differently by `atomic-waker`
    /// and loom).
    #[inline]
    pub(crate) fn take_waker(cell: &AtomicWaker) -> Option<std::task::Waker> {
        cell.take_waker()
    }
}

#[allow(unused_imports)]
pub(crate) use imp::*;

/// The epoch collector that reclaims the graph's retired segments and index arrays (SPEC D51).
///
/// [`pin`](epoch::pin) returns a [`Pin`](epoch::Pin), which dereferences to crossbeam's
/// `Guard`. Under `cfg(loom)` crossbeam-epoch is built on loom's atomics (`--cfg
/// crossbeam_loom`), but its pins cost so many branches that the models which never retire
/// anything would exceed loom's limits; so
/// there a pin is real only inside `model_with_epoch`, which the reclamation models use, and
/// elsewhere it is crossbeam's unprotected guard (nothing is retired in those models: a
/// deferred free would run at once).
#[allow(unused_imports)]
pub(crate) mod epoch {
    pub(crate) use crossbeam_epoch::{is_pinned, Atomic, Guard, Owned, Shared};

    /// A pinned epoch (see the module docs).
    pub(crate) struct Pin(Inner);

    #[cfg(not(loom))]
    type Inner = crossbeam_epoch::Guard;
    #[cfg(loom)]
    enum Inner {
        Real(crossbeam_epoch::Guard),
        Unprotected,
    }

    impl core::ops::Deref for Pin {
        type Target = crossbeam_epoch::Guard;

        #[inline(always)]
        fn deref(&self) -> &crossbeam_epoch::Guard {
            #[cfg(not(loom))]
            {
                &self.0
            }
            #[cfg(loom)]
            match &self.0 {
                Inner::Real(g) => g,
                // SAFETY: only in models that retire nothing (see the module docs), where no
                // deferred free can run early.
                Inner::Unprotected => unsafe { crossbeam_epoch::unprotected() },
            }
        }
    }

    /// Pins the current thread (nested pins only bump a count).
    #[inline]
    pub(crate) fn pin() -> Pin {
        #[cfg(not(loom))]
        {
            Pin(crossbeam_epoch::pin())
        }
        #[cfg(loom)]
        {
            if REAL.with(|r| r.get()) {
                Pin(Inner::Real(crossbeam_epoch::pin()))
            } else {
                Pin(Inner::Unprotected)
            }
        }
    }

    /// A guard for loads by a thread that already holds a [`Pin`] further up its stack (every
    /// public graph call takes one): it costs nothing, where a nested [`pin`] costs a
    /// thread-local lookup and two counter updates. What it loads is protected by that outer
    /// pin, so it must not be kept past it, and nothing may be deferred through it.
    #[inline(always)]
    pub(crate) fn held() -> &'static Guard {
        debug_assert!(
            cfg!(loom) || is_pinned(),
            "an epoch read by a thread that holds no pin"
        );
        // SAFETY: the unprotected guard's loads are plain loads; the caller's outer pin keeps
        // what they return from being reclaimed (see above), and no caller defers through it.
        unsafe { crossbeam_epoch::unprotected() }
    }

    /// A pin if the thread holds none yet (the mutex graph's side tables, whose callers do not
    /// pin); `None` where an outer pin already protects the reads.
    #[inline]
    pub(crate) fn ensure_pinned() -> Option<Pin> {
        if is_pinned() {
            None
        } else {
            Some(pin())
        }
    }

    #[cfg(loom)]
    std::thread_local! {
        /// Set while a reclamation model runs (loom runs a model's threads on the thread
        /// that calls it).
        static REAL: core::cell::Cell<bool> = const { core::cell::Cell::new(false) };
    }

    /// Runs `f` (a call of a loom model) with real epoch pins.
    #[cfg(all(loom, test))]
    pub(crate) fn model_with_epoch(f: impl FnOnce()) {
        REAL.with(|r| r.set(true));
        struct Reset;
        impl Drop for Reset {
            fn drop(&mut self) {
                REAL.with(|r| r.set(false));
            }
        }
        let _reset = Reset;
        f();
    }
}

/// Process-unique numbers (graph ids, key incarnations). Only uniqueness matters, no access is
/// ordered against another, and a `static` needs a `const` constructor, which loom's atomics
/// lack: so these stay the standard library's under loom too.
pub(crate) mod unique {
    use std::sync::atomic::{AtomicU64, Ordering};

    /// The next value of `counter`, which starts at 1.
    #[inline]
    pub(crate) fn next(counter: &'static AtomicU64) -> u64 {
        // Relaxed: only uniqueness matters.
        counter.fetch_add(1, Ordering::Relaxed)
    }

    /// A counter for [`next`], starting at 1.
    pub(crate) const fn counter() -> AtomicU64 {
        AtomicU64::new(1)
    }

    /// Graph ids.
    pub(crate) static GRAPH_IDS: AtomicU64 = counter();
    /// Key incarnations of the graph.
    pub(crate) static INCARNATIONS: AtomicU64 = counter();
    /// Scheduler ids.
    pub(crate) static SCHEDULER_IDS: AtomicU64 = counter();
    /// Request ids of the tower layer (below its top bit).
    #[cfg(feature = "tower")]
    pub(crate) static LAYER_REQUEST_IDS: AtomicU64 = counter();
}

/// Outcome bookkeeping for loom models: a model records which outcome each execution reached,
/// and asserts at the end that every expected outcome was reached at least once, so a model that
/// silently explored one interleaving fails instead of passing.
#[cfg(all(test, loom))]
pub(crate) mod model {
    use std::collections::BTreeMap;
    use std::sync::Mutex;

    /// Counts how often each named outcome was reached across a loom run.
    #[derive(Debug, Default)]
    pub(crate) struct Outcomes {
        seen: Mutex<BTreeMap<&'static str, usize>>,
    }

    impl Outcomes {
        /// An empty tally.
        pub(crate) fn new() -> Self {
            Self::default()
        }

        /// Records one execution that ended in `outcome`.
        pub(crate) fn hit(&self, outcome: &'static str) {
            *self.seen.lock().unwrap().entry(outcome).or_default() += 1;
        }

        /// Panics unless every name in `expected` was reached, and nothing else was.
        pub(crate) fn assert_exactly(&self, expected: &[&'static str]) {
            let seen = self.seen.lock().unwrap();
            for e in expected {
                assert!(
                    seen.contains_key(e),
                    "outcome {e:?} never reached; seen {seen:?}"
                );
            }
            for k in seen.keys() {
                assert!(
                    expected.contains(k),
                    "unexpected outcome {k:?}; seen {seen:?}"
                );
            }
        }
    }

    /// `loom::thread::spawn` on a 1 MiB stack, for models whose threads run the engine's grant
    /// path inside a graph call: deeper than the default stack of a modelled thread holds.
    #[track_caller]
    pub(crate) fn spawn_deep<F, T>(f: F) -> loom::thread::JoinHandle<T>
    where
        F: FnOnce() -> T + Send + 'static,
        T: Send + 'static,
    {
        loom::thread::Builder::new()
            .stack_size(1 << 20)
            .spawn(f)
            .expect("a modelled thread spawns")
    }

    /// [`model`] with `f` run on a [`spawn_deep`] thread that the model's main thread joins:
    /// for models that build a graph (its scheduler's classes are built on the calling stack)
    /// or call into one from the main thread.
    /// Its branch bound is ten times loom's default: a whole graph call (hand-off, scheduler
    /// submit, the in-place re-order it may make) takes more branches than a primitive's.
    pub(crate) fn model_deep(f: impl Fn() + Sync + Send + 'static) {
        let f = std::sync::Arc::new(f);
        let mut builder = loom::model::Builder::new();
        builder.max_branches *= 10;
        builder.check(move || {
            let f = f.clone();
            spawn_deep(move || f()).join().expect("the model's body");
        });
    }

    /// Runs `f` under loom's exhaustive scheduler (bounded by `LOOM_MAX_PREEMPTIONS`).
    pub(crate) fn model(f: impl Fn() + Sync + Send + 'static) {
        let mut builder = loom::model::Builder::new();
        builder.max_branches *= 10;
        builder.check(f);
    }
}
