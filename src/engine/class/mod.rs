//! The tenant-ring engine as a [`ClassEngine`] (docs/ring-engine.md): `grant::Core`'s turns
//! grant, and this module wraps each grant in what the scheduler needs — leases from the pool,
//! one waker per entry, pull mode's ready queue, shutdown, drain, quarantine and the deadline
//! sweep. There is no class-wide token on the grant path.
//!
//! # Words
//!
//! * **`life`** (one per class): the live queued count, the leases out (granted and not yet
//!   back) and the flags `SHUT`, `DRAIN`, `DEAD`. Admission (the capacity check) and the drain
//!   check read it; it holds no cell credit (those are the turn protocol's `ctl`).
//! * **Entry slots** are the core's; each carries a reference word (the generation and the
//!   holders: the entry's own, handed to the grant's taker, and the owner's — the future, or for
//!   pull mode the content). A handle is the generation and the index, so a stale handle is
//!   refused (SPEC F30). Beside the core's entry word (`QUEUED → GRANTED` or an end), each slot
//!   has a **fate** word: what its owner will see (`PENDING`, granted with the lease stored, or
//!   an end). The granter stores the lease, then CASes `PENDING → GRANTED` and wakes the owner's
//!   waker; an owner that gives up CASes `PENDING → ABANDONED`, and a granter that finds that
//!   returns the lease itself.
//!
//! # Rare work (SPEC F24)
//!
//! Deadlines: producers `fetch_min` an entry's deadline into `earliest`; a call that reads the
//! clock past it takes the sweep token (try-only, never on the grant path) and ends the expired
//! entries (`ring.sweep_held` is the pause point inside). Shutdown and the death of the class
//! end every queued entry with the same scan.
//!
//! # Files
//!
//! * this one: the engine's fields, its construction, and the [`ClassEngine`] impl, which
//!   dispatches to the others;
//! * `slot`: the entry slots, the grant's delivery through the fate word, and the owner's side;
//! * `enqueue`: the producer's side and the fast path;
//! * `after`: the work collected on a turn and done after it, help and release;
//! * `life`: the `life` word, shutdown / close / drain, quarantine / restore;
//! * `sweep`: the slow path behind the sweep token (the deadline sweep, compaction);
//! * `pull`: pull mode's ready queue;
//! * `stats`: the lease ages behind samples.

use core::task::{Context, Poll};
use std::sync::Arc;

use self::slot::Slot;
use super::grant::Core;
use crate::admission::{ExecutionPermit, Ledger, Permit};
use crate::cancel::CancellationToken;
use crate::clock::Clock;
use crate::engine::rooms::RoomWaiters;
use crate::engine::waiters::ExecWaiters;
use crate::engine::Undelivered;
use crate::engine::{ClassEngine, ClassSetup, Ended, Enqueued, LeaseAges, Polled, Pulled, Ticket};
use crate::error::{Code, Error, Reason};
use crate::ids::{CellId, ClassId};
use crate::pool::{ClassPool, Lease};
use crate::raw::idset::IdSet;
use crate::raw::scq::Scq;
use crate::stats::ClassStats;
use crate::sync::{AtomicBool, AtomicU32, AtomicU64};

mod after;
mod enqueue;
mod life;
mod pull;
mod slot;
mod stats;
mod sweep;
mod unslotted;

/// The tenant-ring engine for one class. See the module docs.
pub struct RingClass<T> {
    core: Core,
    slots: Box<[Slot<T>]>,
    life: crossbeam_utils::CachePadded<AtomicU64>,
    class: ClassId,
    ledger: Ledger,
    ids: Arc<IdSet>,
    queue_capacity: u32,
    pool: ClassPool,
    clock: Arc<dyn Clock>,
    /// Cells not quarantined.
    usable: AtomicU32,
    undelivered: Undelivered<T>,
    /// Granted pull-mode entries waiting for an executor (each entry at most once).
    ready: Scq,
    exec: ExecWaiters,
    /// Producers waiting for room in the queue (SPEC F23): told of every departure.
    rooms: RoomWaiters,
    /// Pending future-mode requests' waiter slots (one claimed per pending owner, given up when
    /// it stops waiting), woken when a call hands a turn back (SPEC F25): any of them takes it.
    pending: ExecWaiters,
    /// Pending future-mode requests that found every waiter slot claimed: woken with the
    /// slots' holders when a turn is handed back (SPEC F25).
    unslotted: unslotted::Unslotted,
    stats: ClassStats,
    /// The sweep's trigger: at or below the earliest deadline of a queued entry (`u64::MAX`:
    /// none known). Stays passed while a sweep cycle is under way.
    earliest: AtomicU64,
    /// Deadlines queued since the current sweep cycle began (producers `fetch_min` them here and
    /// into `earliest`), folded into `earliest` at the cycle's end.
    fresh: AtomicU64,
    /// The next slot the sweep looks at, and the earliest deadline it kept this cycle (touched
    /// only under the sweep token).
    cursor: AtomicU32,
    cycle_min: AtomicU64,
    /// The sweep's try-token.
    sweeping: AtomicBool,
    lease_ages: LeaseAges,
}

// SAFETY: the slots' cells are accessed under the ownership protocol of the module docs: the
// producer writes a slot before publishing it (the core's Release store and inbox push); the
// granter, the ender and the owner each read or take what the fate word or the core's entry
// CAS handed them (Acquire/Release pairs); `T` moves between threads only as `Send`.
unsafe impl<T: Send> Sync for RingClass<T> {}
// SAFETY: as above; all fields are owned.
unsafe impl<T: Send> Send for RingClass<T> {}

impl<T: Send + 'static> RingClass<T> {
    /// The scheduler's ledger (the models admit through it).
    #[cfg(all(test, loom))]
    pub(super) fn ledger(&self) -> &Ledger {
        &self.ledger
    }

    fn slot(&self, index: u32) -> &Slot<T> {
        &self.slots[index as usize]
    }

    /// The slot index of a handle its caller holds a reference through, if still current.
    fn held(&self, handle: u64) -> Option<u32> {
        self.core
            .is_current(handle)
            .then_some((handle & u64::from(u32::MAX)) as u32)
    }

    fn ticket(&self, index: u32) -> Ticket {
        // SAFETY: written before the entry was queued and read-only while the caller holds a
        // reference (the slot cannot be reused meanwhile).
        self.slot(index).ticket.with(|t| unsafe { *t })
    }

    fn is_pull(&self, index: u32) -> bool {
        // SAFETY: as `ticket`.
        self.slot(index).pull.with(|p| unsafe { *p })
    }
}

#[allow(private_interfaces)]
impl<T: Send + 'static> ClassEngine<T> for RingClass<T> {
    fn new(s: ClassSetup) -> Result<Self, Error> {
        // Validates the sizes and gives the slot count (the policy itself is not used).
        let (_, slots) = s.policy()?;
        let core = Core::new(s.cells, slots as u32, s.max_tenants, s.starvation_after)
            .with_tenant_cap(s.queue_capacity.max(1));
        Ok(Self {
            core,
            slots: (0..slots).map(|_| Slot::new()).collect(),
            life: crossbeam_utils::CachePadded::new(AtomicU64::new(0)),
            class: s.class,
            ledger: s.ledger,
            ids: s.ids,
            queue_capacity: s.queue_capacity,
            pool: s.pool,
            clock: s.clock,
            usable: AtomicU32::new(s.cells),
            undelivered: Undelivered::new(slots),
            ready: Scq::new(slots as u32),
            exec: ExecWaiters::new(ExecWaiters::slots_for(s.cells)),
            pending: ExecWaiters::new(ExecWaiters::slots_for(s.cells)),
            rooms: RoomWaiters::new(ExecWaiters::slots_for(s.cells)),
            unslotted: unslotted::Unslotted::new(slots),
            stats: ClassStats::new(),
            earliest: AtomicU64::new(u64::MAX),
            fresh: AtomicU64::new(u64::MAX),
            cursor: AtomicU32::new(0),
            cycle_min: AtomicU64::new(u64::MAX),
            sweeping: AtomicBool::new(false),
            lease_ages: LeaseAges::new(s.cells),
        })
    }

    fn enqueue(
        &self,
        ticket: Ticket,
        pull: Option<(Permit, T)>,
        token: Option<&CancellationToken>,
    ) -> Result<Enqueued, (Error, Option<(Permit, T)>)> {
        self.enqueue_entry(ticket, pull, token)
    }

    fn try_grant_now(&self, ticket: &Ticket) -> Result<Option<Lease>, Error> {
        if self.queue_capacity == 0 {
            return Err(Error::new(Code::ResourceExhausted, Reason::QueueFull));
        }
        self.try_fast(ticket)
    }

    fn poll(&self, handle: u64, cx: &mut Context<'_>) -> Polled {
        self.poll_entry(handle, cx)
    }

    fn withdraw_refunding(
        &self,
        handle: u64,
        why: Ended,
        permit: &mut Option<ExecutionPermit>,
    ) -> Option<Lease> {
        self.withdraw(handle, why, permit)
    }

    fn cancel(&self, handle: u64) -> Result<(), Error> {
        self.cancel_entry(handle)
    }

    fn change(
        &self,
        handle: u64,
        priority: Option<u8>,
        deadline: Option<Option<u64>>,
    ) -> Result<(), Error> {
        self.change_entry(handle, priority, deadline)
    }

    fn release_then(&self, lease: Lease, then: impl FnOnce()) {
        self.release_lease(lease, then);
    }

    fn quarantine_then(&self, lease: Lease, reason: &'static str, then: impl FnOnce()) {
        self.quarantine_lease(lease, reason, then);
    }

    fn try_next(&self) -> Option<Pulled<T>> {
        self.next_now()
    }

    fn poll_next(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<Option<Pulled<T>>> {
        self.poll_ready(cx, slot)
    }

    fn forget_waiter(&self, slot: usize) {
        self.exec.forget(slot);
    }

    fn count_refused(&self, expired: bool) {
        self.stats.count_refused_at_enqueue(expired);
    }

    fn count_refused_after_grant(&self) {
        self.stats.count_refused_at_acceptance();
    }

    fn shutdown(&self) {
        self.shut_down();
    }

    fn close(&self) {
        self.close_for_drain();
    }

    fn poll_drained(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<()> {
        self.poll_drain(cx, slot)
    }

    fn queue_depth(&self) -> u32 {
        self.life().queued()
    }

    fn available_cells(&self) -> u32 {
        self.core.counters().0 as u32
    }

    fn pool(&self) -> &ClassPool {
        &self.pool
    }

    fn restore_cell(&self, cell: CellId) -> Result<(), Error> {
        self.restore(cell)
    }

    fn undelivered(&self) -> &Undelivered<T> {
        &self.undelivered
    }

    fn stats(&self) -> &ClassStats {
        &self.stats
    }

    fn samples(&self) -> crate::stats::Samples {
        self.sample()
    }

    fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }

    fn rooms(&self) -> &RoomWaiters {
        &self.rooms
    }

    fn order_room_waiter(&self) {
        // AcqRel, changing nothing: orders the waiter's registration against the departures'
        // RMWs on `life` (see the `rooms` module docs).
        self.life_sync();
    }
}

impl<T> Drop for RingClass<T> {
    fn drop(&mut self) {
        // Leases of granted-but-untaken pull entries go back to the pool.
        while let Some(index) = self.ready.pop() {
            let lease = self.slots[index as usize].lease.with_mut(|l| {
                // SAFETY: `&mut self`: no other user exists.
                unsafe { (*l).take() }
            });
            if let Some(l) = lease {
                self.pool.release(l);
            }
        }
    }
}
