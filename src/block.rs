//! A minimal `block_on` for hosts without an async runtime (SPEC X02).
//!
//! The waker unparks the blocked thread. It is created once per thread and reused, so blocking
//! calls do not allocate in steady state.

use core::future::Future;
use core::pin::pin;
use core::task::{Context, Poll, Waker};
use std::sync::Arc;
use std::task::Wake;
use std::thread::{self, Thread};

struct Unpark(Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

thread_local! {
    static WAKER: Waker = Waker::from(Arc::new(Unpark(thread::current())));
}

/// Polls `fut` on the current thread, parking between polls, until it completes.
pub(crate) fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    WAKER.with(|waker| {
        let mut cx = Context::from_waker(waker);
        loop {
            if let Poll::Ready(out) = fut.as_mut().poll(&mut cx) {
                return out;
            }
            // A wake before this park leaves the token set, so the park returns at once.
            thread::park();
        }
    })
}
