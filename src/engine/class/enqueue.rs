//! The producer's side: the enqueue fast path (nothing queued and a credit free: a lease at
//! once, with no entry), and otherwise the admission count in `life`, an entry slot from the
//! core, the slot's cells written and the entry submitted to the core.
//!
//! The slot's cells are written before `submit` publishes the entry (the core's Release store
//! and inbox push), and nobody else can reach a slot the core has just allocated. A deadline is
//! noted for the sweep after the entry is queued. The closing RMW on `life` orders the entry
//! against a concurrent shutdown or death: either the closer's scan sees it queued, or this
//! call ends it itself.

use super::super::grant::{Full, CLOSED};
use super::super::tenant::Meta;
use super::after::After;
use super::life::Change;
use super::slot::PENDING;
use super::RingClass;
use crate::admission::Permit;
use crate::cancel::CancellationToken;
use crate::engine::{Enqueued, Ticket};
use crate::error::{Code, Error, Reason};
use crate::pool::Lease;
use crate::sync::Ordering;

impl<T: Send + 'static> RingClass<T> {
    /// [`ClassEngine::enqueue`](crate::engine::ClassEngine::enqueue): the fast path, else counts the
    /// request in `life`, writes an entry slot and submits it to the core.
    pub(super) fn enqueue_entry(
        &self,
        ticket: Ticket,
        pull: Option<(Permit, T)>,
        token: Option<&CancellationToken>,
    ) -> Result<Enqueued, (Error, Option<(Permit, T)>)> {
        let refused = |e: Error, pull| {
            self.stats
                .count_refused_at_enqueue(e.code() == Code::DeadlineExceeded);
            crate::observe::refused(self.class, ticket.tenant, &e);
            Err((e, pull))
        };
        if self.queue_capacity == 0 {
            return refused(Error::new(Code::ResourceExhausted, Reason::QueueFull), pull);
        }
        if pull.is_none() {
            match self.try_fast(&ticket) {
                Ok(Some(lease)) => return Ok(Enqueued::Granted(lease)),
                Ok(None) => {}
                Err(e) if crate::engine::is_refusal(&e) => return refused(e, pull),
                Err(e) => return Err((e, pull)),
            }
        }
        let queued = match self.try_count_queued(self.queue_capacity) {
            Ok(queued) => queued,
            Err(l) => {
                let e = if l.stopped() {
                    l.stop_error()
                } else {
                    Error::new(Code::ResourceExhausted, Reason::QueueFull)
                };
                return refused(e, pull);
            }
        };
        // The other tenants may still queue `queue_capacity - queued` live requests: a tenant at
        // its cap of slots gets one only while more than that are free.
        let reserve = self.queue_capacity.saturating_sub(queued);
        let index = match self.core.alloc(ticket.tenant, 2, reserve).or_else(|Full| {
            // No slot: tombstones of tenants waiting for a turn hold them. Compact them
            // (the rare slow path, behind the sweep token) and try once more.
            self.compact();
            self.core.alloc(ticket.tenant, 2, reserve)
        }) {
            Ok(i) => i,
            Err(Full) => {
                self.life_change(Change::UNQUEUE);
                // A waiter whose submit met the count just given back must look again.
                self.rooms.freed(ticket.tenant);
                return refused(Error::new(Code::ResourceExhausted, Reason::QueueFull), pull);
            }
        };
        let now = self.clock.now();
        self.maybe_sweep(now);
        let s = self.slot(index);
        let is_pull = pull.is_some();
        let token = if is_pull { token.cloned() } else { None };
        // From here on the entry owns the queue slot's refund.
        let content = pull.map(|(permit, payload)| (permit.detach_queue_slot(), payload));
        // Relaxed: published by the core's Release store in `submit`.
        s.fate.store(PENDING, Ordering::Relaxed);
        drop(crate::sync::take_waker(&s.waker));
        // SAFETY: the slot was just allocated to us and is not reachable by anyone else until
        // `submit` publishes it.
        unsafe {
            s.ticket.with_mut(|t| *t = ticket);
            s.enqueued_at.with_mut(|a| *a = now);
            s.pull.with_mut(|p| *p = is_pull);
            s.token.with_mut(|t| *t = token);
            s.content.with_mut(|c| *c = content);
            s.lease.with_mut(|l| *l = None);
            s.error.with_mut(|x| *x = None);
        }
        let handle = self.core.handle(index);
        let meta = Meta {
            priority: ticket.priority,
            deadline: ticket.deadline,
            enqueued_at: now,
            weight: ticket.weight.max(1),
        };
        let mut after = After::new();
        self.core.submit(index, ticket.tenant, meta, now, &mut |i| {
            self.granted(i, now, &mut after)
        });
        self.finish(&mut after, now);
        self.note_deadline(ticket.deadline);
        // An RMW, not a load: ordered against the RMW that set SHUT/DEAD, after which the
        // closer's scan sees this entry queued; otherwise this call ends it itself.
        if let Some(fate) = self.life_sync().ending_fate() {
            self.end_handle(handle, CLOSED, fate, now);
        }
        Ok(Enqueued::Queued(handle))
    }

    /// The enqueue fast path: nothing queued and a credit free (no tenant ready): granted at
    /// once. `Ok(None)`: the request must queue.
    pub(super) fn try_fast(&self, ticket: &Ticket) -> Result<Option<Lease>, Error> {
        match self.try_count_fast_out() {
            Ok(()) => self.fast_with_count(ticket),
            Err(l) if l.stopped() => Err(l.stop_error()),
            Err(_) => Ok(None),
        }
    }

    /// The fast path after counting a lease out: take the credit and the lease.
    fn fast_with_count(&self, ticket: &Ticket) -> Result<Option<Lease>, Error> {
        if !self.core.take_free_credit() {
            self.life_change(Change::BACK);
            return Ok(None);
        }
        let now = self.clock.now();
        let mut after = After::new();
        let res = self.acquire(ticket, now, &mut after);
        match &res {
            // We hold the cell's lease: its count is ours to write (no RMW).
            Ok(lease) => {
                self.lease_ages.count_fast_grant(lease.cell());
                crate::observe::granted(self.class, ticket.tenant, lease.cell(), 0);
            }
            Err(e) => after.acquire_failed(e),
        }
        self.finish(&mut after, now);
        res.map(Some)
    }
}
