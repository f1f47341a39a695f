//! Producers waiting for room in a full class queue (SPEC F23): the waiting forms of pull-mode
//! `submit`.
//!
//! A producer whose submit met `queue-full` registers here (its tenant and waker) and then
//! submits once more; if that too meets `queue-full`, it sleeps until it is *notified*. Every
//! departure of a queued request (granted, cancelled, expired, refused, or an enqueue that
//! gave its count back) calls [`RoomWaiters::freed`] with the departing request's tenant, which
//! notifies one waiter that is not notified yet: the oldest waiter of that same tenant if it has
//! one, otherwise the oldest waiter of the next tenant in round-robin order. A notified waiter
//! submits once more; on `queue-full` again it goes back to sleep at its place (the oldest of
//! its tenant stays the oldest). A waiter dropped while notified passes its notification on, as
//! if its tenant's request had just left. A stop (shutdown, drain, death) notifies everyone;
//! their next submit returns the stop's error.
//!
//! # The hot path
//!
//! A departure pays one load of [`RoomWaiters::waiting`] (a word written only by waiters); the
//! lock is taken only when someone waits, which is the queue-full slow path.
//!
//! # No lost wake-up
//!
//! A waiter increments `waiting`, then makes an RMW on the engine's queue count (or takes the
//! engine's lock, on the mutex oracle) before it submits again; a departure changes the queue
//! count with an RMW (or under that lock) and then loads `waiting`. The RMWs on the count are
//! totally ordered: if the waiter's comes later, its submit sees the room; if the departure's
//! comes later, it reads from the waiter's Release RMW, so its load sees the increment and it
//! takes the lock, where the waiter's entry already is (both were made in one critical section).
//! A departure that finds every waiter already notified notifies nobody: each notified waiter
//! clears its flag under the lock before it submits, so a room freed before that is seen by its
//! submit, and one freed after it finds the waiter un-notified again.
//!
//! # What is not promised
//!
//! Notification follows the tenant order above, but it hands over no reservation: a woken
//! waiter retries the ordinary submit, so a producer that submits without waiting, or a waiter
//! of another tenant retrying at the same moment, can take the room first; the woken waiter
//! then sleeps again at its place (the project's deviations page names this).

use crate::sync::{AtomicU64, Mutex, MutexGuard, Ordering};
use core::task::Waker;

/// Producers waiting for room in one class's queue.
pub(crate) struct RoomWaiters {
    /// How many waiters are registered: written under the lock, read by every departure.
    waiting: AtomicU64,
    list: Mutex<Rooms>,
}

/// The registered waiters, oldest first.
struct Rooms {
    next_id: u64,
    /// The tenant served last by a round-robin pick.
    last_tenant: Option<u32>,
    entries: Vec<Entry>,
}

struct Entry {
    id: u64,
    tenant: u32,
    waker: Waker,
    notified: bool,
}

impl core::fmt::Debug for RoomWaiters {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("RoomWaiters")
            .field("waiting", &self.waiting.load(Ordering::Relaxed))
            .finish_non_exhaustive()
    }
}

impl RoomWaiters {
    /// Room for `expected` waiters before the list grows (it grows only on the waiting path).
    pub(crate) fn new(expected: usize) -> Self {
        Self {
            waiting: AtomicU64::new(0),
            list: Mutex::new(Rooms {
                next_id: 0,
                last_tenant: None,
                entries: Vec::with_capacity(expected),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Rooms> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A queued request of `tenant` left the queue (its count is already given back): notifies
    /// one waiter, if any waits.
    #[inline]
    pub(crate) fn freed(&self, tenant: u32) {
        // Acquire: reads from the Release increment in `register` whenever the waiter's RMW on
        // the queue count came before the caller's (see the module docs).
        if self.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        self.notify_one(tenant);
    }

    #[cold]
    fn notify_one(&self, tenant: u32) {
        let woken = {
            let mut r = self.lock();
            r.pick(tenant)
        };
        if let Some(w) = woken {
            w.wake();
        }
    }

    /// Registers a waiter of `tenant`; returns its id. The caller then orders itself against
    /// departures (an RMW on the queue count) and submits once more.
    pub(crate) fn register(&self, tenant: u32, waker: &Waker) -> u64 {
        let mut r = self.lock();
        let id = r.next_id;
        r.next_id += 1;
        r.entries.push(Entry {
            id,
            tenant,
            waker: waker.clone(),
            notified: false,
        });
        // Release: a departure whose load reads this also sees the entry (taken under the
        // lock it then takes).
        self.waiting.fetch_add(1, Ordering::Release);
        id
    }

    /// Whether waiter `id` has been notified since it last looked (and clears that); refreshes
    /// its waker either way. A waiter that is no longer registered counts as notified.
    pub(crate) fn take_notified(&self, id: u64, waker: &Waker) -> bool {
        let mut r = self.lock();
        let Some(e) = r.entries.iter_mut().find(|e| e.id == id) else {
            return true;
        };
        if !e.waker.will_wake(waker) {
            e.waker.clone_from(waker);
        }
        core::mem::replace(&mut e.notified, false)
    }

    /// Waiter `id` leaves (it submitted, failed, or was dropped). A notification it had not
    /// acted on goes to the next waiter, as if a request of its tenant had left.
    pub(crate) fn leave(&self, id: u64) {
        let woken = {
            let mut r = self.lock();
            let Some(at) = r.entries.iter().position(|e| e.id == id) else {
                return;
            };
            let e = r.entries.remove(at);
            // Relaxed: under the lock; a departure that misses the decrement only takes the
            // lock for nothing.
            self.waiting.fetch_sub(1, Ordering::Relaxed);
            if e.notified {
                r.pick(e.tenant)
            } else {
                None
            }
        };
        if let Some(w) = woken {
            w.wake();
        }
    }

    /// Notifies every waiter: the class stopped admitting (shutdown, drain, death).
    pub(crate) fn wake_all(&self) {
        // Acquire: as in `freed`; the stop is an RMW on the queue count's word.
        if self.waiting.load(Ordering::Acquire) == 0 {
            return;
        }
        // Woken under the lock (a waker only schedules its task; none re-enters this list),
        // so that nothing is collected and no waiter registered meanwhile is missed.
        let mut r = self.lock();
        for e in &mut r.entries {
            e.notified = true;
            e.waker.wake_by_ref();
        }
    }
}

impl Rooms {
    /// Marks the waiter to serve for a room `tenant` freed and returns its waker: the oldest
    /// un-notified waiter of `tenant`, else the oldest of the next tenant after the last one
    /// served (wrapping), else nobody.
    fn pick(&mut self, tenant: u32) -> Option<Waker> {
        let own = self
            .entries
            .iter()
            .position(|e| !e.notified && e.tenant == tenant);
        let at = own.or_else(|| {
            // The oldest waiter of the smallest waiting tenant above the last one served, else
            // of the smallest waiting tenant.
            let lowest = |above: bool| {
                self.entries
                    .iter()
                    .enumerate()
                    .filter(|(_, e)| {
                        !e.notified && (!above || self.last_tenant.is_none_or(|t| e.tenant > t))
                    })
                    .min_by_key(|(i, e)| (e.tenant, *i))
                    .map(|(i, _)| i)
            };
            lowest(true).or_else(|| lowest(false))
        })?;
        let e = &mut self.entries[at];
        e.notified = true;
        if own.is_none() {
            self.last_tenant = Some(e.tenant);
        }
        Some(e.waker.clone())
    }
}
