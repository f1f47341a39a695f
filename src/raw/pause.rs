//! Test-only pause points (SPEC F24).
//!
//! A pause point is a named place in the code — inside a ring operation, while a lock or a tenant's
//! turn is held — where a test can freeze one chosen thread and check what every other
//! thread can still do. It models the preemption SPEC F24 is about, deterministically.
//!
//! Without the cargo feature `pause-points`, [`point`] is an empty `#[inline(always)]` function:
//! no code, no data, no branch. With it, a thread *armed* with a `Gate` parks at the first
//! point of the gate's name it reaches, until the test calls `Gate::release`. Arming is per
//! thread (a thread-local), so tests running in parallel never park each other's threads, and
//! a thread that was not armed passes every point at the cost of one thread-local read.
//!
//! The points (their names are the contract with the tests):
//!
//! | name                  | where                                                            |
//! |-----------------------|------------------------------------------------------------------|
//! | `scq.push.claimed`    | [`Scq::push`](super::scq::Scq::push): after taking a tail position, before writing the entry |
//! | `scq.pop.claimed`     | [`Scq::pop`](super::scq::Scq::pop): after taking a head position, before reading the entry |
//! | `baseline.locked`     | the mutex twin: inside every critical section, lock held          |
//! | `ring.credit_taken`   | the tenant-ring turn protocol: a credit and a ready unit taken, before the ring pop |
//! | `ring.turn_owned`     | the tenant-ring turn protocol: a tenant's turn claimed, before it is run |
//! | `ring.announce`       | the tenant-ring grant path: a request published in its tenant's inbox, before the announcement |
//! | `ring.cancel_marked`  | the tenant-ring grant path: a request marked cancelled, before its tenant's live count drops |
//!
//! # Examples
//!
//! ```
//! # #[cfg(feature = "pause-points")] {
//! use fairway::internals::pause::Gate;
//! use fairway::internals::Scq;
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! let ring = Arc::new(Scq::new(4));
//! let gate = Gate::new("scq.push.claimed");
//! let stalled = {
//!     let (ring, gate) = (ring.clone(), gate.clone());
//!     std::thread::spawn(move || {
//!         gate.arm();
//!         ring.push(1); // parks after taking its position
//!     })
//! };
//! assert!(gate.wait_parked(Duration::from_secs(10)));
//! ring.push(2);
//! // The consumer passes the stalled producer's position.
//! assert_eq!(ring.pop(), Some(2));
//! gate.release();
//! stalled.join().unwrap();
//! assert_eq!(ring.pop(), Some(1));
//! # }
//! ```

/// Marks the pause point `name`. Without the `pause-points` feature this is nothing.
#[inline(always)]
pub(crate) fn point(name: &'static str) {
    #[cfg(all(feature = "pause-points", not(loom)))]
    imp::point(name);
    let _ = name;
}

#[cfg(all(feature = "pause-points", not(loom)))]
pub use imp::Gate;

#[cfg(all(feature = "pause-points", not(loom)))]
mod imp {
    use std::cell::RefCell;
    use std::sync::{Arc, Condvar, Mutex, PoisonError};
    use std::time::{Duration, Instant};

    thread_local! {
        /// The gate this thread is armed with, if any.
        static ARMED: RefCell<Option<Arc<Inner>>> = const { RefCell::new(None) };
    }

    #[derive(Debug, Default)]
    struct State {
        /// Threads parked at the point now.
        parked: usize,
        /// Threads that have parked at the point so far (including those parked now).
        hits: usize,
        /// Set by `release`: parked threads go on, and later arrivals do not park.
        released: bool,
    }

    #[derive(Debug)]
    struct Inner {
        point: &'static str,
        state: Mutex<State>,
        changed: Condvar,
    }

    /// A test's handle on one pause point: arm threads with it, wait until one is parked, and
    /// let them go.
    ///
    /// Cloning gives another handle on the same gate (to move into the thread to arm).
    #[derive(Debug, Clone)]
    pub struct Gate(Arc<Inner>);

    impl Gate {
        /// A gate for the pause point named `point`, with no thread armed.
        pub fn new(point: &'static str) -> Gate {
            Gate(Arc::new(Inner {
                point,
                state: Mutex::new(State::default()),
                changed: Condvar::new(),
            }))
        }

        /// Arms the calling thread: the first time it reaches this gate's point it parks there
        /// until `Gate::release` (and is disarmed). Replaces any gate the thread was armed
        /// with.
        pub fn arm(&self) {
            ARMED.with(|a| *a.borrow_mut() = Some(self.0.clone()));
        }

        /// Disarms the calling thread (if it has not reached the point yet).
        pub fn disarm() {
            ARMED.with(|a| *a.borrow_mut() = None);
        }

        /// Waits at most `limit` until some thread is parked at the point; `true` if one is.
        pub fn wait_parked(&self, limit: Duration) -> bool {
            let deadline = Instant::now() + limit;
            let mut s = self.lock();
            while s.parked == 0 {
                let left = deadline.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    return false;
                }
                s = self
                    .0
                    .changed
                    .wait_timeout(s, left)
                    .unwrap_or_else(PoisonError::into_inner)
                    .0;
            }
            true
        }

        /// Threads parked at the point now.
        pub fn parked(&self) -> usize {
            self.lock().parked
        }

        /// Threads that have parked at the point so far.
        pub fn hits(&self) -> usize {
            self.lock().hits
        }

        /// Lets every parked thread go on; threads that arrive later pass without parking.
        pub fn release(&self) {
            self.lock().released = true;
            self.0.changed.notify_all();
        }

        fn lock(&self) -> std::sync::MutexGuard<'_, State> {
            self.0.state.lock().unwrap_or_else(PoisonError::into_inner)
        }
    }

    pub(super) fn point(name: &'static str) {
        // Take the gate out only if it is for this point: a thread armed for another point
        // passes this one.
        let Some(gate) = ARMED.with(|a| {
            let mut a = a.borrow_mut();
            match a.as_ref() {
                Some(g) if g.point == name => a.take(),
                _ => None,
            }
        }) else {
            return;
        };
        let mut s = gate.state.lock().unwrap_or_else(PoisonError::into_inner);
        if s.released {
            return;
        }
        s.parked += 1;
        s.hits += 1;
        gate.changed.notify_all();
        while !s.released {
            s = gate.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.parked -= 1;
        gate.changed.notify_all();
    }
}
