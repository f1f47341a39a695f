//! Dispatch: the try-only token, the bounded pass, and taking ended entries out of the policy.
//!
//! Whoever takes the token (a bit of `ctl`) owns the sequential [`Policy`] for one bounded pass:
//! drain the inbox, expire, grant up to the free cells. A thread that finds the token taken sets
//! `DIRTY` and leaves — the holder re-runs before letting go. No thread ever spins or parks on
//! the token.

use super::ctl::Ctl;
use super::entry::{Stage, State, HREF, QREF};
use super::LockFreeClass;
use crate::engine::Ended;
use crate::policy::{EntryMeta, Judge, Policy, Verdict};
use crate::pool::Lease;
use crate::raw::arena::Key;
use crate::stats::saturating_add;
use crate::sync::Ordering;
use crate::{Error, Reason};
use arrayvec::ArrayVec;
use core::task::Waker;

/// Candidates one pass may grant or reject (SPEC F19).
pub const PASS_BUDGET: u32 = 64;

/// Work collected during a pass and finished after the token is released (SPEC F35).
pub(super) struct After<T> {
    pub(super) wakes: ArrayVec<Waker, { PASS_BUDGET as usize + 1 }>,
    /// Payloads of ended pull-mode entries, dropped after the token is released (host code).
    /// Their permits are refunded when taken, before the entry leaves the `QUEUED` count.
    pub(super) contents: ArrayVec<T, { PASS_BUDGET as usize + 1 }>,
    pub(super) pulled: bool,
    /// An entry left the queue (granted or ended) under the token: once admissions have
    /// stopped, a drainer may be waiting for exactly that.
    pub(super) left: bool,
}

impl<T> After<T> {
    pub(super) fn new() -> Self {
        Self {
            wakes: ArrayVec::new(),
            contents: ArrayVec::new(),
            pulled: false,
            left: false,
        }
    }

    /// Wakes `w` after the token is released (or now, if the list is full).
    fn wake_later(&mut self, w: Waker) {
        if let Err(e) = self.wakes.try_push(w) {
            e.element().wake();
        }
    }
}

impl<T: Send + 'static> LockFreeClass<T> {
    /// Makes sure a pass runs if one is needed: runs it here, or, if another thread holds the
    /// token, marks `DIRTY` so that thread runs again. Never waits.
    pub(super) fn kick(&self) {
        self.kick_from(false, None);
    }

    /// `kick`, also running a compaction pass if `force` is set (even with nothing to grant).
    pub(super) fn kick_with(&self, force: bool) {
        self.kick_from(force, None);
    }

    /// `kick_with`, starting from `seen`: the value the caller's own read-modify-write of `ctl`
    /// just left there (which orders the caller exactly as the read-modify-write below would).
    pub(super) fn kick_from(&self, mut force: bool, mut seen: Option<Ctl>) {
        loop {
            // An RMW, not a load: a caller that has just published work outside `ctl` (a
            // producer's inbox push) must not conclude "no pass needed" from a stale `ctl`.
            // Being an RMW, this read takes a place in `ctl`'s modification order relative to a
            // releaser's `fetch_add`: either it sees the returned credit, or the releaser's later
            // Acquire reads of `ctl` (its token CAS) read from our release sequence, so its pass
            // drains our push. A plain load allows the store-buffering outcome where the
            // producer reads the old `FREE == 0` while the releaser's pass finds the inbox
            // empty, stranding the request with a free cell.
            // AcqRel: Release for the above; Acquire pairs with the Release token release in
            // `with_token`, so a new holder sees the previous holder's policy writes.
            let mut cur = match seen.take() {
                Some(v) => v,
                None => self.ctl.touch(Ordering::AcqRel),
            };
            loop {
                if cur.token() {
                    if cur.dirty() {
                        return;
                    }
                    // Release: our inbox push / count change happens-before the holder's re-run;
                    // pairs with the Acquire of the holder's token-release RMW.
                    match self.ctl.compare_exchange_weak(
                        cur,
                        cur.mark_dirty(),
                        Ordering::AcqRel,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => {
                            // Relaxed: read by the models after joining the threads.
                            #[cfg(all(test, loom))]
                            self.dirty_marks.fetch_add(1, Ordering::Relaxed);
                            return;
                        }
                        Err(actual) => cur = actual,
                    }
                } else if !force && !cur.wants_pass() {
                    return;
                } else {
                    // Acquire: taking the token; pairs with the Release that gave it up.
                    match self.ctl.compare_exchange_weak(
                        cur,
                        cur.take_token(),
                        Ordering::Acquire,
                        Ordering::Acquire,
                    ) {
                        Ok(_) => break,
                        Err(actual) => cur = actual,
                    }
                }
            }
            let again = self.pass(force, Kept::Nothing);
            force = false;
            if !again {
                return;
            }
        }
    }

    /// One bounded pass. The caller holds the token; it is released before returning. Returns
    /// whether another pass may be needed. `kept`: a cell credit the caller holds (taken out of
    /// `FREE` with the token, see `pass_kept`), with the cell itself for the built-in pool, which
    /// the pass grants first or gives back.
    fn pass(&self, compact: bool, kept: Kept) -> bool {
        let mut budget = PASS_BUDGET;
        let prev = self.with_token(|policy, after| {
            let mut kept = kept;
            self.run_pass(policy, &mut budget, compact, after, &mut kept);
            let unused = match kept {
                Kept::Nothing => false,
                Kept::Credit => true,
                Kept::Cell(lease) => {
                    // The pool holds the cell again before its credit is visible.
                    self.give_back_unused(lease);
                    true
                }
            };
            if unused {
                // Not used: back before the token goes (a thread that sees it and finds the
                // token held marks DIRTY, and this holder runs again).
                self.unreserve_cell();
                // Relaxed: read by the models after joining the threads.
                #[cfg(all(test, loom))]
                self.credit_passes[1].fetch_add(1, Ordering::Relaxed);
            }
        });
        prev.dirty() || budget == 0
    }

    /// Runs a pass for a caller that took the token together with a cell credit in one RMW
    /// (`release_then`: a released cell with work queued goes to the pass that grants it,
    /// without its credit being published and taken back, and with the built-in pool without
    /// the cell going back to the pool and out again), then kicks as long as passes are due.
    pub(super) fn pass_kept(&self, kept: Kept) {
        // Relaxed: read by the models after joining the threads.
        #[cfg(all(test, loom))]
        self.credit_passes[0].fetch_add(1, Ordering::Relaxed);
        if self.pass(false, kept) {
            self.kick();
        }
    }

    /// Runs `f` on the policy, then releases the dispatch token (consuming `DIRTY`, and setting
    /// `LAZY` as the policy now requires) and only then wakes and drops what `f` collected. The
    /// caller holds the token. Returns `ctl` as it was just before the release.
    pub(super) fn with_token(&self, f: impl FnOnce(&mut Policy, &mut After<T>)) -> Ctl {
        let mut after = After::new();
        let lazy = self.policy.with_mut(|p| {
            // SAFETY: we hold the dispatch token, which makes us the only user of the policy.
            let policy = unsafe { &mut *p };
            crate::raw::pause::point("lockfree.token_held");
            f(policy, &mut after);
            // Relaxed: an observation for snapshots.
            self.queued_tenants
                .store(policy.queued_tenants() as u32, Ordering::Relaxed);
            policy.holds_emptied_tenants()
        });
        // Release the token. Release: publishes our policy writes to the next holder (pairs with
        // the Acquire token take in `kick_from` / `unqueue_now`); Acquire: sees what the threads
        // that set DIRTY published.
        let prev = self.ctl.release_token(lazy, Ordering::AcqRel);
        // `drain` and `clear` work in place: moving the vectors out by value would copy their
        // whole inline storage (kilobytes with the contents) on every pass.
        for w in after.wakes.drain(..) {
            w.wake();
        }
        after.contents.clear();
        // Once admissions have stopped, a pass's grants and ends may be what a drain waits for.
        // Only a pass that moved an entry wakes: one that changed nothing must not wake the
        // executor or drainer whose own poll ran it, or that poll would run it again and again.
        if after.pulled || (after.left && prev.stopped()) {
            self.exec.wake_all();
        }
        prev
    }

    fn run_pass(
        &self,
        policy: &mut Policy,
        budget: &mut u32,
        compact: bool,
        after: &mut After<T>,
        kept: &mut Kept,
    ) {
        self.flush_overflow(after);
        self.drain_inbox(policy, after);
        // Acquire: pairs with the Release RMWs of releasers and producers.
        let cur = self.ctl.load(Ordering::Acquire);
        if cur.closed() {
            let why = if cur.shut() {
                Ended::Shutdown
            } else {
                Ended::Quarantined
            };
            // Executors waiting for the class to drain must hear when it has (`poll_next`).
            after.pulled = true;
            let mut judge = EndJudge {
                class: self,
                why,
                after,
            };
            while policy.select(0, &mut judge, budget).is_some() {}
            return;
        }
        if compact {
            // A compaction pass only removes tombstones; expiry and grants are left to the
            // passes that run when there is work (as in the baseline, which compacts in place).
            self.compact(policy);
            return;
        }
        if policy.is_empty() {
            return;
        }
        let now = self.clock.now();
        // Relaxed: an observation for lease ages.
        self.recent_now.store(now, Ordering::Relaxed);
        policy.expire(
            now,
            &mut EndJudge {
                class: self,
                why: Ended::Expired,
                after,
            },
            budget,
        );
        // A credit (and cell) the caller kept goes first; each credit is granted or given back
        // below.
        while *budget > 0 {
            let held = match core::mem::replace(kept, Kept::Nothing) {
                Kept::Nothing if self.reserve_cell() => None,
                Kept::Nothing => break,
                Kept::Credit => None,
                Kept::Cell(lease) => Some(lease),
            };
            let mut judge = GrantJudge {
                class: self,
                now,
                after,
                stop: false,
                keep_credit: false,
                held,
            };
            let granted = policy.select(now, &mut judge, budget);
            if let Some(lease) = judge.held.take() {
                // The kept cell was not granted: the pool holds it again before its credit
                // goes back (below) or serves the next select.
                self.give_back_unused(lease);
            }
            if granted.is_none() {
                if !judge.keep_credit {
                    self.unreserve_cell();
                }
                break;
            }
        }
    }

    /// Moves newly published entries into the policy, in publication order. Returns how many it
    /// found already ended (cancelled or withdrawn while in the inbox) and took straight out
    /// again.
    pub(super) fn drain_inbox(&self, policy: &mut Policy, after: &mut After<T>) -> usize {
        let mut ended = 0;
        for index in self.inbox.take_all() {
            let key = self.arena.key_at(index);
            let e = self.entry(key);
            // SAFETY: the producer wrote `ticket`/`enqueued_at` before its Release inbox push;
            // `take_all` is Acquire; they are read-only from then on.
            let (t, at) = unsafe { (e.ticket.with(|t| *t), e.enqueued_at.with(|a| *a)) };
            let meta = EntryMeta {
                tenant: t.tenant,
                priority: t.priority,
                deadline: t.deadline,
                enqueued_at: at,
                weight: t.weight,
            };
            if let Err(err) = policy.insert(index, meta) {
                // SAFETY: only the winner of the QUEUED → FAILED CAS below lets anyone read it,
                // and nobody else writes `error`.
                e.error.with_mut(|x| unsafe { *x = Some(err) });
                self.end_queued(key, Stage::Failed, after);
            } else if self.state(key).is_some_and(|s| !s.is_queued()) {
                // Cancelled or withdrawn while in the inbox: out again at once, as `unqueue_now`
                // does for an entry already in the policy. Inserting first keeps what the insert
                // decides (the sequence number, the tenant's place in the ring) the same as in
                // the baseline, which inserts at enqueue and removes at cancel.
                if policy.remove(index) {
                    self.drop_ref(key, QREF);
                    ended += 1;
                }
            }
        }
        ended
    }

    /// Moves a queued entry that the policy no longer holds into an ended stage and drops the
    /// queue's reference. Returns whether this call ended it.
    pub(super) fn end_queued(&self, key: Key, stage: Stage, after: &mut After<T>) -> bool {
        // Read while the queue's reference still holds the slot (see `left_queue`).
        let tenant = self.tenant_of(key);
        // The queue keeps its reference through the CAS and until the owner's waker or the
        // content is taken: the owner may see the ended stage and drop its own reference at once.
        let moved = self.arena.update(key, |s| State(s).end_by_owner(stage));
        let won = moved.is_ok();
        if let Ok((old, _)) = moved {
            // Pull mode: refund the permit and set the payload aside before the count below, so
            // a drainer that sees the queue empty also sees the quota refunded and the payload
            // kept.
            self.take_content(key, stage, after);
            self.left_queue(tenant);
            after.left = true;
            match stage {
                Stage::Expired => saturating_add(&self.stats.expirations, 1),
                Stage::Cancelled => saturating_add(&self.stats.cancellations, 1),
                _ => saturating_add(&self.stats.rejections, 1),
            }
            self.collect_ended(key, stage, State(old), after);
            // The owner still holds HREF (pull: we took the content and dropped HREF for it).
        }
        self.drop_ref(key, QREF);
        won
    }

    /// After an entry was ended by us (our CAS found `old`): wake its owner, or for pull mode
    /// take the content (to be dropped after the pass) and drop the content's reference.
    pub(super) fn collect_ended(&self, key: Key, stage: Stage, old: State, after: &mut After<T>) {
        let e = self.entry(key);
        if old.is_pull() {
            self.take_content(key, stage, after);
            // SAFETY: read-only after publication; we hold HREF until the line below.
            if let Some(live) = e.ticket.with(|t| unsafe { (*t).live }) {
                self.ids.remove(live);
            }
            self.drop_ref(key, HREF);
        } else if let Some(w) = self.take_waker(key, old) {
            after.wake_later(w);
        }
    }

    /// For a pull entry we moved out of QUEUED into `stage`: refunds its permit now (a refund
    /// only touches the ledger's counters) and sets its payload aside: kept for the host if
    /// shutdown (or the death of the class) ended it, else dropped after the pass (host code).
    /// A no-op if the content was taken already, or for a future-mode entry.
    fn take_content(&self, key: Key, stage: Stage, after: &mut After<T>) {
        // SAFETY: we moved the entry out of QUEUED, which makes us the content's owner.
        let content = self.entry(key).content.with_mut(|c| unsafe { (*c).take() });
        let Some((permit, payload)) = content else {
            return;
        };
        drop(permit);
        if matches!(stage, Stage::Closed | Stage::Dead) {
            // Moving `T` into the bin runs no host code.
            self.undelivered.keep(payload);
        } else if let Err(e) = after.contents.try_push(payload) {
            drop(e.element());
        }
    }

    /// Takes an entry that just left the queued stage (cancelled, withdrawn) out of the policy
    /// at once if the dispatch token is free — try-only, like every use of the token — and drops
    /// the policy's reference (draining the inbox first, so an entry not yet in the policy is
    /// handled too). The slot is then reused while its lines are still in cache, and
    /// no tombstone waits for a pass or a compaction (PERF P7). With the token busy the entry
    /// stays a tombstone and a pass removes it later (F11's lazy removal), as before.
    pub(super) fn unqueue_now(&self, key: Key) {
        self.try_with_token(|policy, after| {
            // The entry may still be in the inbox (no pass ran since it was pushed, as while
            // every cell is held): drain it first, which takes ended entries straight out again.
            // Each entry is drained once, so this is amortised O(1) per enqueue.
            let drained_ended = self.drain_inbox(policy, after);
            // Relaxed: read by the models after joining the threads.
            #[cfg(all(test, loom))]
            self.unqueued_now
                .fetch_add(drained_ended, Ordering::Relaxed);
            #[cfg(not(all(test, loom)))]
            let _ = drained_ended;
            // Under the token nobody else drops `QREF`, so while the key is live with `QREF` set
            // the slot cannot be freed and reused: if its index is in the policy, it is this
            // entry. (A stale key — the entry was dropped and the slot reused — reads `None`.)
            if self.state(key).is_some_and(State::queue_holds) && policy.remove(key.index) {
                self.drop_ref(key, QREF);
                // Relaxed: read by the models after joining the threads.
                #[cfg(all(test, loom))]
                self.unqueued_now.fetch_add(1, Ordering::Relaxed);
            }
        });
    }

    /// Runs `f` under the dispatch token if it is free — try-only, never waiting — then runs
    /// whatever the threads that set `DIRTY` asked for (or a pass that became due meanwhile), as
    /// the holder's re-run would. Returns whether `f` ran.
    pub(super) fn try_with_token(&self, f: impl FnOnce(&mut Policy, &mut After<T>)) -> bool {
        // Relaxed: the CAS below orders.
        let mut cur = self.ctl.load(Ordering::Relaxed);
        loop {
            if cur.token() {
                return false;
            }
            // Acquire: taking the token; pairs with the Release that gave it up, so we see the
            // previous holder's policy writes.
            match self.ctl.compare_exchange_weak(
                cur,
                cur.take_token(),
                Ordering::Acquire,
                Ordering::Relaxed,
            ) {
                Ok(_) => break,
                Err(actual) => cur = actual,
            }
        }
        let prev = self.with_token(f);
        if prev.dirty() || prev.wants_pass() {
            self.kick();
        }
        true
    }

    /// Closes the rotation's books before a fast-path grant while `LAZY` is set: tenants whose
    /// work was all removed leave now, since this grant is their turn (SPEC F11). Try-only;
    /// returns whether `LAZY` is clear afterwards.
    pub(super) fn retire_lazy(&self) -> bool {
        self.try_with_token(|policy, _| {
            if policy.holds_emptied_tenants() {
                policy.retire_emptied_tenants();
            }
        });
        // Acquire: pairs with the Release token release that cleared LAZY.
        !self.ctl.load(Ordering::Acquire).lazy()
    }

    /// Takes one cell credit if a cell is free and work is queued.
    fn reserve_cell(&self) -> bool {
        // Acquire: pairs with the Release `fetch_add` in `release`, so the returned cell's pool
        // state is visible before we acquire it from the pool.
        self.ctl
            .update(Ordering::Acquire, |cur| {
                if cur.free() == 0 || cur.queued() == 0 {
                    Err(())
                } else {
                    Ok((cur.take_credit(), ()))
                }
            })
            .is_ok()
    }

    pub(super) fn unreserve_cell(&self) {
        // Release: pairs with the Acquire in `reserve_cell` / the fast path.
        self.ctl.give_credit(Ordering::Release);
    }

    /// Gives back a lease nobody will use (a grant lost to a canceller): the pool first, with
    /// the cell's lease age cleared, so snapshots never show a free cell as leased.
    pub(super) fn give_back_unused(&self, lease: Lease) {
        self.lease_ages.returned(lease.cell());
        self.pool.release(lease);
    }

    /// Removes every tombstone from the policy and frees its slot (rare: the arena ran out
    /// of slots because tombstones outnumber live entries).
    fn compact(&self, policy: &mut Policy) {
        for index in 0..self.arena.capacity() as u32 {
            let key = self.arena.key_at(index);
            let Some(s) = self.state(key) else {
                continue;
            };
            if s.queue_holds() && !s.is_queued() && policy.remove(index) {
                self.drop_ref(key, QREF);
            }
        }
    }
}

/// Grants candidates; the pass holds one reserved cell credit per call of `select`.
struct GrantJudge<'a, T> {
    class: &'a LockFreeClass<T>,
    now: u64,
    after: &'a mut After<T>,
    stop: bool,
    /// The credit was consumed by a cell that left service; do not give it back.
    keep_credit: bool,
    /// A released cell the caller kept for this credit (built-in pool): granted before the pool
    /// is asked.
    held: Option<Lease>,
}

/// What a caller of `pass` holds besides the token.
pub(super) enum Kept {
    Nothing,
    /// One cell credit, taken out of `FREE` with the token.
    Credit,
    /// One cell credit and its cell, released by its last holder and not yet back in the pool
    /// (the built-in pool only: the cell goes from one request to the next).
    Cell(Lease),
}

impl<T: Send + 'static> Judge for GrantJudge<'_, T> {
    fn judge(&mut self, index: u32) -> Verdict {
        let c = self.class;
        if self.stop {
            return Verdict::Keep;
        }
        let key = c.arena.key_at(index);
        match c.state(key) {
            Some(s) if s.is_queued() => {}
            _ => {
                c.drop_ref(key, QREF);
                return Verdict::Drop;
            }
        }
        let e = c.entry(key);
        // A pull-mode request whose token was cancelled fails `cancelled` here, before selection,
        // as a waiting future would (SPEC F32, F46).
        if c.pull_token_cancelled(key) {
            c.end_queued(key, Stage::Cancelled, self.after);
            return Verdict::Drop;
        }
        // SAFETY: read-only after publication (see `Entry`).
        let (ticket, at) = unsafe { (e.ticket.with(|t| *t), e.enqueued_at.with(|a| *a)) };
        let held = self.held.take();
        let lease = match held.map_or_else(
            || c.acquire(&ticket, self.now),
            |l| Ok(c.reuse(l, &ticket, self.now)),
        ) {
            Ok(l) => l,
            Err(err) => {
                self.stop = true;
                self.keep_credit = matches!(err.reason(), Reason::PoolLeaseMismatch);
                return Verdict::Keep;
            }
        };
        let waited = self.now.saturating_sub(at);
        // SAFETY: outside GRANTED only the dispatcher (token holder) touches `lease`/`waited`.
        e.lease.with_mut(|l| unsafe { *l = Some(lease) });
        // SAFETY: as above.
        e.waited.with_mut(|w| unsafe { *w = waited });
        // AcqRel inside `update`: Release publishes `lease`/`waited` to the owner, which reads
        // them after an Acquire load that sees GRANTED.
        // A pull entry's slot is held by its content (HREF) until an executor takes it, so the
        // queue's reference goes in the same CAS. A future-mode owner may see GRANTED, take the
        // lease and free the slot at once, so the queue keeps its reference until the waker is
        // taken: otherwise the take could reach the slot's next owner.
        match c.arena.update(key, |s| {
            let s = State(s);
            if s.is_pull() {
                s.end_by_queue(Stage::Granted)
            } else {
                s.end_by_owner(Stage::Granted)
            }
        }) {
            Ok((old, _)) => {
                c.left_queue(ticket.tenant);
                self.after.left = true;
                // The token holder is the only writer of the wait counters.
                c.stats.record_grant_exclusive(waited);
                if State(old).is_pull() {
                    c.publish_ready(key.to_u64(), self.after);
                } else {
                    // The waker hand-off was part of the CAS: no RMW of its own.
                    if let Some(w) = c.take_waker(key, State(old)) {
                        self.after.wake_later(w);
                    }
                    c.drop_ref(key, QREF);
                }
                Verdict::Take
            }
            Err(_) => {
                // Lost to a canceller: take the lease back, keep the credit for the next one.
                // Relaxed: read by the models after joining the threads.
                #[cfg(all(test, loom))]
                c.lost_grants.fetch_add(1, Ordering::Relaxed);
                // SAFETY: the entry is not GRANTED, so the lease is still ours.
                if let Some(l) = e.lease.with_mut(|l| unsafe { (*l).take() }) {
                    c.give_back_unused(l);
                }
                c.drop_ref(key, QREF);
                Verdict::Drop
            }
        }
    }
}

/// Ends every candidate it is shown with `why` (expiry, shutdown, quarantine).
struct EndJudge<'a, 'b, T> {
    class: &'a LockFreeClass<T>,
    why: Ended,
    after: &'b mut After<T>,
}

impl<T: Send + 'static> Judge for EndJudge<'_, '_, T> {
    fn judge(&mut self, index: u32) -> Verdict {
        if self.after.wakes.is_full() || self.after.contents.is_full() {
            return Verdict::Keep;
        }
        let key = self.class.arena.key_at(index);
        self.class
            .end_queued(key, Stage::ended(self.why), self.after);
        Verdict::Drop
    }
}

/// The error an entry ended in `Failed` carries, for its owner.
pub(super) fn failure(e: Option<Error>) -> Error {
    e.unwrap_or(Error::new(crate::Code::Internal, Reason::Failed))
}
