//! The baseline's policy judges: what a grant or an end does to an entry, under the class lock.

use super::*;

/// Wakes and drops collected under the lock, finished after it is released.
pub(super) struct After<T> {
    pub(super) wakes: ArrayVec<Waker, { PASS_BUDGET as usize + 1 }>,
    /// Payloads of ended pull-mode entries, dropped after the lock (host code). Their permits
    /// are refunded under the lock, so a drainer that finds the class empty finds the quota
    /// refunded too.
    pub(super) contents: ArrayVec<T, { PASS_BUDGET as usize + 1 }>,
    pub(super) exec: ExecWakes,
    pub(super) more: bool,
}

impl<T> After<T> {
    pub(super) fn new() -> Self {
        Self {
            wakes: ArrayVec::new(),
            contents: ArrayVec::new(),
            exec: ExecWakes::default(),
            more: false,
        }
    }

    /// Wakes and drops what the pass collected, in place (moving the vectors out by value would
    /// copy their whole inline storage, kilobytes with the contents, on every pass).
    pub(super) fn finish(&mut self) -> bool {
        for w in self.wakes.drain(..) {
            w.wake();
        }
        self.exec.wake();
        self.contents.clear();
        self.more
    }
}

pub(super) struct GrantJudge<'a, 'b, T: Send, L: BaselineLock> {
    pub(super) class: &'a BaselineClass<T, L>,
    pub(super) inner: &'b mut Inner<T>,
    pub(super) now: u64,
    pub(super) after: &'b mut After<T>,
    pub(super) stop: bool,
    pub(super) keep_credit: bool,
    pub(super) pulled: &'b mut bool,
}

impl<T: Send + 'static, L: BaselineLock> Judge for GrantJudge<'_, '_, T, L> {
    fn judge(&mut self, index: u32) -> Verdict {
        if self.stop {
            return Verdict::Keep;
        }
        let ticket = {
            let s = &mut self.inner.slots[index as usize];
            if s.stage != Stage::Queued {
                // A tombstone (cancelled while queued): it leaves the policy now.
                s.queued_ref = false;
                self.inner.maybe_free(index);
                return Verdict::Drop;
            }
            if s.token
                .as_ref()
                .is_some_and(CancellationToken::is_cancelled)
            {
                // A pull-mode request whose token was cancelled fails `cancelled` before
                // selection, as a waiting future would (SPEC F32, F46).
                end_queued(self.class, self.inner, index, Ended::Cancelled, self.after);
                self.inner.slots[index as usize].queued_ref = false;
                self.inner.maybe_free(index);
                return Verdict::Drop;
            }
            s.ticket
        };
        let lease = match self.class.acquire(self.inner, &ticket, self.now) {
            Ok(l) => l,
            Err(err) => {
                self.stop = true;
                self.keep_credit = matches!(err.reason(), Reason::PoolLeaseMismatch);
                return Verdict::Keep;
            }
        };
        let s = &mut self.inner.slots[index as usize];
        let waited = self.now.saturating_sub(s.enqueued_at);
        s.stage = Stage::Granted;
        s.queued_ref = false;
        s.lease = Some(lease);
        s.waited = waited;
        let key = Key {
            index,
            generation: s.generation,
        }
        .to_u64();
        let pull = s.pull;
        let waker = s.waker.take();
        self.inner.queued -= 1;
        // Under the lock, which orders it against a waiter's submit (see `engine::rooms`).
        self.class.rooms.freed(ticket.tenant);
        // At grant only the queue slot goes back (SPEC F45).
        self.class
            .ledger
            .refund_queue_slot(TenantId(ticket.tenant), self.class.class);
        // Under the class lock: the only writer.
        self.class.stats.record_grant_exclusive(waited);
        if pull {
            self.inner.ready.push_back(key);
            *self.pulled = true;
        } else if let Some(w) = waker {
            if let Err(e) = self.after.wakes.try_push(w) {
                e.element().wake();
            }
        }
        Verdict::Take
    }
}

pub(super) struct EndJudge<'a, 'b, T: Send, L: BaselineLock> {
    pub(super) class: &'a BaselineClass<T, L>,
    pub(super) inner: &'b mut Inner<T>,
    pub(super) why: Ended,
    pub(super) after: &'b mut After<T>,
}

impl<T: Send + 'static, L: BaselineLock> Judge for EndJudge<'_, '_, T, L> {
    fn judge(&mut self, index: u32) -> Verdict {
        if self.after.wakes.is_full() || self.after.contents.is_full() {
            return Verdict::Keep;
        }
        if self.inner.slots[index as usize].stage == Stage::Queued {
            end_queued(self.class, self.inner, index, self.why, self.after);
        }
        self.inner.slots[index as usize].queued_ref = false;
        self.inner.maybe_free(index);
        Verdict::Drop
    }
}

/// Ends a queued entry. The policy may still hold it as a tombstone (`queued_ref`), as the
/// engine keeps one in its tenant's order, so that both run the same rotation rules (SPEC F11's lazy removal);
/// callers that remove it from the policy clear `queued_ref` themselves.
/// Takes a cancelled or withdrawn entry out of the policy at once and drops the queue's
/// reference, as the engine does for the same call in a sequential run (so the two grant
/// orders stay identical). The tenant keeps its ring
/// position (F11).
pub(super) fn unqueue<T: Send>(policy: &mut Policy, inner: &mut Inner<T>, index: u32) {
    if policy.remove(index) {
        inner.slots[index as usize].queued_ref = false;
        inner.maybe_free(index);
    }
}

pub(super) fn end_queued<T: Send + 'static, L: BaselineLock>(
    class: &BaselineClass<T, L>,
    inner: &mut Inner<T>,
    index: u32,
    why: Ended,
    after: &mut After<T>,
) {
    let s = &mut inner.slots[index as usize];
    debug_assert_eq!(s.stage, Stage::Queued);
    s.stage = Stage::Ended(why);
    inner.queued -= 1;
    // Under the lock, as in the grant above.
    class.rooms.freed(s.ticket.tenant);
    class
        .ledger
        .refund_queue_slot(TenantId(s.ticket.tenant), class.class);
    let counter = match why {
        Ended::Expired => &class.stats.expirations,
        Ended::Cancelled => &class.stats.cancellations,
        _ => &class.stats.rejections,
    };
    crate::stats::saturating_add(counter, 1);
    if s.pull {
        match s.content.take() {
            // Shut down (or the class died) before delivery: the payload goes back to the host
            // and the permit is refunded (a refund only touches the ledger's counters).
            Some((permit, payload)) if matches!(why, Ended::Shutdown | Ended::Quarantined) => {
                class.undelivered.keep(payload);
                drop(permit);
            }
            Some((permit, payload)) => {
                // A refund only touches the ledger's counters: fine under the lock.
                drop(permit);
                if let Err(c) = after.contents.try_push(payload) {
                    drop(c);
                }
            }
            None => {}
        }
        if let Some(live) = s.ticket.live {
            class.ids.remove(live);
        }
        s.owner_ref = false;
    } else if let Some(w) = s.waker.take() {
        if let Err(e) = after.wakes.try_push(w) {
            e.element().wake();
        }
    }
    inner.maybe_free(index);
}
