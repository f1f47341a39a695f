//! A minimal `block_on` for hosts without an async runtime (SPEC X02).
//!
//! The waker unparks the blocked thread. It is created once per thread and reused, so blocking
//! calls do not allocate in steady state.
//!
//! A future that wakes itself from inside its own poll asks to be polled again at once (the
//! scheduler's own futures park instead, SPEC F22, but a host's may not). Polled in a loop, such a
//! future would keep a core busy; after [`SPINS`] polls in a row that woke themselves, `block_on`
//! sleeps between polls instead (50 µs, doubling up to 1 ms), so any number of idle blocking
//! callers leave the CPU idle. A real wake-up that happens to land during a poll only counts
//! toward the same threshold, so it costs at most one short sleep in a long run of them.

use crate::sync::{AtomicBool, Ordering};
use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use core::time::Duration;
use std::sync::Arc;
use std::task::Wake;
use std::thread::{self, Thread};

/// Self-woken polls in a row after which `block_on` sleeps between polls.
const SPINS: u32 = 16;
/// First and longest sleep between self-woken polls.
const FIRST_NAP: Duration = Duration::from_micros(50);
const LONGEST_NAP: Duration = Duration::from_millis(1);

struct Unpark {
    thread: Thread,
    /// Set by every wake; cleared before each poll.
    woken: AtomicBool,
}

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        // Relaxed: a hint for the backoff only; `unpark`/`park` carry the synchronisation.
        self.woken.store(true, Ordering::Relaxed);
        self.thread.unpark();
    }
}

thread_local! {
    static UNPARK: Arc<Unpark> = Arc::new(Unpark {
        thread: thread::current(),
        woken: AtomicBool::new(false),
    });
    static WAKER: Waker = UNPARK.with(|u| Waker::from(u.clone()));
}

/// Polls `fut` on the current thread, parking between polls, until it completes.
pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    UNPARK.with(|unpark| {
        WAKER.with(|waker| {
            let mut cx = Context::from_waker(waker);
            let mut spins = 0u32;
            let mut nap = FIRST_NAP;
            loop {
                // Relaxed: see `wake_by_ref`.
                unpark.woken.store(false, Ordering::Relaxed);
                if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                    return out;
                }
                // Relaxed: see `wake_by_ref`.
                if unpark.woken.load(Ordering::Relaxed) {
                    spins += 1;
                    if spins >= SPINS {
                        thread::sleep(nap);
                        nap = (nap * 2).min(LONGEST_NAP);
                    }
                } else {
                    spins = 0;
                    nap = FIRST_NAP;
                }
                // A wake before this park leaves the token set, so the park returns at once.
                thread::park();
            }
        })
    })
}
