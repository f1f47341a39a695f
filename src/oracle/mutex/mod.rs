//! The scheduler's mutex twin: the same policy under one lock per class (SPEC Q02).
//!
//! This is a competent implementation, not a strawman: every operation is one short critical
//! section, wakers are woken and cancelled payloads dropped only after the lock is released
//! (SPEC F35), and nothing allocates after build. It is the comparison in every bench and the
//! oracle of the differential tests. Cancelled entries stay in the policy as tombstones until
//! their turn, exactly as in the engine (SPEC F11's lazy removal), so both
//! rotate tenants identically; a compaction removes them when they fill the slots.
//!
//! # Locks
//!
//! One mutex per class ([`std::sync::Mutex`] or [`parking_lot::Mutex`], chosen by the
//! [`BaselineLock`] type), held for every operation.

mod judges;
pub(crate) mod key;
mod lock;

use judges::{end_queued, unqueue, After, EndJudge, GrantJudge};
pub use lock::{BaselineLock, ParkingLotMutex, StdMutex};

use crate::engine::{
    is_refusal, ClassEngine, ClassSetup, Ended, Enqueued, Polled, Pulled, Ticket, Undelivered,
};

/// Candidates one critical section may grant or reject (SPEC F19).
pub(crate) const PASS_BUDGET: u32 = 64;
use crate::admission::{ExecutionPermit, Ledger, Permit};
use crate::cancel::CancellationToken;
use crate::clock::Clock;
use crate::engine::rooms::RoomWaiters;
use crate::error::Reason;
use crate::error::{Code, Error};
use crate::ids::{CellId, ClassId, TenantId};
use crate::policy::{EntryMeta, Judge, Policy, Verdict};
use crate::pool::{ClassPool, Lease};
use crate::raw::idset::IdSet;
use crate::stats::ClassStats;
use arrayvec::ArrayVec;
use core::task::{Context, Poll, Waker};
use key::Key;
use std::collections::VecDeque;
use std::sync::Arc;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Stage {
    Free,
    Queued,
    Granted,
    Ended(Ended),
}

struct Slot<T> {
    generation: u64,
    stage: Stage,
    /// The policy holds the index.
    queued_ref: bool,
    /// The owner (future, or the pull content) holds the index.
    owner_ref: bool,
    pull: bool,
    ticket: Ticket,
    enqueued_at: u64,
    lease: Option<Lease>,
    waited: u64,
    content: Option<(ExecutionPermit, T)>,
    /// A pull-mode request's token, checked before selection and at delivery (SPEC F32, F46).
    token: Option<CancellationToken>,
    waker: Option<Waker>,
}

/// Executors (and drainers) waiting: 64 slots, then an overflow list whose entries are named
/// by ids from 64 up, so that any number of idle executors park instead of polling (SPEC F22).
struct ExecWaiters {
    claimed: u64,
    wakers: [Option<Waker>; 64],
    overflow: Vec<(usize, Waker)>,
    next: usize,
}

impl ExecWaiters {
    /// Registers `waker` for the waiter whose slot (or overflow id) is `*slot`, claiming a slot
    /// or an overflow entry if it has none (or its overflow entry was woken meanwhile).
    fn register(&mut self, slot: &mut Option<usize>, waker: &Waker) {
        if let Some(i) = *slot {
            if i < 64 {
                self.wakers[i] = Some(waker.clone());
                return;
            }
            if let Some((_, w)) = self.overflow.iter_mut().find(|(x, _)| *x == i) {
                w.clone_from(waker);
                return;
            }
        }
        let free = !self.claimed;
        if free != 0 {
            let i = free.trailing_zeros() as usize;
            self.claimed |= 1 << i;
            if let Some(o) = slot.replace(i) {
                self.forget(o);
            }
            self.wakers[i] = Some(waker.clone());
            return;
        }
        let id = 64 + self.next;
        self.next = (self.next + 1) % (usize::MAX - 64);
        self.overflow.push((id, waker.clone()));
        *slot = Some(id);
    }

    fn forget(&mut self, slot: usize) {
        if slot < 64 {
            self.claimed &= !(1 << slot);
            self.wakers[slot] = None;
        } else {
            self.overflow.retain(|(x, _)| *x != slot);
        }
    }
}

/// Executor wakers collected under the lock, woken after it: the slots' inline, the
/// overflow's moved out whole (it allocates only when waiters are past the slots).
#[derive(Default)]
pub(super) struct ExecWakes {
    slots: ArrayVec<Waker, 64>,
    overflow: Vec<(usize, Waker)>,
}

impl ExecWakes {
    pub(super) fn wake(&mut self) {
        for w in self.slots.drain(..) {
            w.wake();
        }
        for (_, w) in self.overflow.drain(..) {
            w.wake();
        }
    }
}

/// What the lock protects: the policy, and everything else (split so judges can borrow both).
struct Locked<T> {
    policy: Policy,
    inner: Inner<T>,
}

struct Inner<T> {
    slots: Vec<Slot<T>>,
    free_slots: Vec<u32>,
    free_cells: u32,
    queued: u32,
    usable: u32,
    shut: bool,
    dead: bool,
    /// Being drained: no new admissions, queued work is still granted.
    draining: bool,
    ready: VecDeque<u64>,
    exec: ExecWaiters,
    recent_now: u64,
    lease_since: Vec<u64>,
}

/// The mutex baseline engine for one class.
pub struct BaselineClass<T: Send, L: BaselineLock> {
    inner: L::Mutex<Locked<T>>,
    class: ClassId,
    queue_capacity: u32,
    pool: ClassPool,
    clock: Arc<dyn Clock>,
    stats: ClassStats,
    /// Payloads of pull-mode requests that shutdown ended before delivery (SPEC F47).
    undelivered: Undelivered<T>,
    /// Queued entries refund their queue slot here when they leave the queue (SPEC F45).
    ledger: Ledger,
    /// The scheduler's live request ids (SPEC F34).
    ids: Arc<IdSet>,
    /// Producers waiting for room (SPEC F23), told of every departure under the lock.
    rooms: RoomWaiters,
}

impl<T: Send> Inner<T> {
    /// Admissions have stopped: shut down, dead or being drained.
    fn stopped(&self) -> bool {
        self.shut || self.dead || self.draining
    }

    /// Admissions have stopped and everything admitted has finished.
    fn drained(&self) -> bool {
        self.stopped()
            && self.queued == 0
            && self.ready.is_empty()
            && self.free_cells >= self.usable
    }

    /// Wakes every waiting executor and drainer (after the lock is released) if admissions have
    /// stopped: the change the caller just made may be the last one a drain waits for.
    fn wake_if_stopped(&mut self, out: &mut ExecWakes) {
        if self.stopped() {
            self.exec_wakers(out);
        }
    }

    fn slot(&mut self, raw: u64) -> Option<(u32, &mut Slot<T>)> {
        let key = Key::from_u64(raw);
        let s = self.slots.get_mut(key.index as usize)?;
        (s.generation == key.generation && s.stage != Stage::Free).then_some((key.index, s))
    }

    fn maybe_free(&mut self, index: u32) {
        let s = &mut self.slots[index as usize];
        if !s.queued_ref && !s.owner_ref {
            s.stage = Stage::Free;
            s.waker = None;
            s.token = None;
            // A slot whose generation is exhausted is retired, never reused (SPEC F21).
            let next = s.generation.checked_add(1);
            if let Some(g) = next.filter(|&g| g <= key::MAX_GENERATION) {
                s.generation = g;
                self.free_slots.push(index);
            }
        }
    }

    /// Removes every tombstone from the policy and frees its slot (rare: the slots ran out
    /// because cancelled entries outnumber live ones).
    fn compact(&mut self, policy: &mut Policy) {
        for index in 0..self.slots.len() as u32 {
            let s = &mut self.slots[index as usize];
            if s.queued_ref && s.stage != Stage::Queued && policy.remove(index) {
                s.queued_ref = false;
                self.maybe_free(index);
            }
        }
    }

    /// Hands the oldest granted pull-mode job to an executor.
    fn take_ready(&mut self) -> Option<Pulled<T>> {
        let raw = self.ready.pop_front()?;
        let (index, s) = self.slot(raw).expect("ready entries are live");
        let pulled = Pulled::from_parts(
            s.content.take(),
            s.lease.take(),
            s.waited,
            s.token.take().and_then(|t| t.reason()),
            s.ticket.live,
        );
        s.owner_ref = false;
        self.maybe_free(index);
        Some(pulled)
    }

    fn exec_wakers(&mut self, out: &mut ExecWakes) {
        let mut bits = self.exec.claimed;
        while bits != 0 {
            let i = bits.trailing_zeros() as usize;
            bits &= bits - 1;
            if let Some(w) = self.exec.wakers[i].take() {
                out.slots.push(w);
            }
        }
        if !self.exec.overflow.is_empty() {
            // Woken entries leave the list; each woken call parks again if it still waits.
            out.overflow.append(&mut self.exec.overflow);
        }
    }
}

impl<T: Send + 'static, L: BaselineLock> BaselineClass<T, L> {
    fn with<R>(&self, f: impl FnOnce(&mut Policy, &mut Inner<T>) -> R) -> R {
        L::with(&self.inner, |l| {
            crate::raw::pause::point("baseline.locked");
            f(&mut l.policy, &mut l.inner)
        })
    }

    fn acquire(&self, inner: &mut Inner<T>, ticket: &Ticket, now: u64) -> Result<Lease, Error> {
        let req = ticket.lease_request(self.class);
        match self.pool.acquire_checked(&req)? {
            Ok(lease) => {
                if let Some(s) = inner.lease_since.get_mut(lease.cell().0 as usize) {
                    *s = now;
                }
                Ok(lease)
            }
            Err(lease) => {
                self.quarantine_locked(inner, lease, Reason::PoolLeaseMismatch.as_str());
                Err(Error::new(Code::Internal, Reason::PoolLeaseMismatch))
            }
        }
    }

    fn quarantine_locked(&self, inner: &mut Inner<T>, lease: Lease, reason: &'static str) {
        if let Some(s) = inner.lease_since.get_mut(lease.cell().0 as usize) {
            *s = u64::MAX;
        }
        self.pool.quarantine(lease, reason);
        inner.usable = inner.usable.saturating_sub(1);
        if inner.usable == 0 {
            inner.dead = true;
            self.rooms.wake_all();
        }
    }

    /// Ends the queued requests whose deadline has passed, as a pass would, even when no pass
    /// runs (every cell busy): a waiting owner checks only its permit's deadline, and a
    /// pull-mode request has no owner waiting, so a deadline tightened in place (SPEC F36)
    /// would otherwise wait for a free cell. What the engine's sweep does on the same calls.
    /// Reads the clock only when a deadline is queued.
    fn expire_due(&self, policy: &mut Policy, inner: &mut Inner<T>, after: &mut After<T>) {
        if inner.shut || inner.dead {
            return;
        }
        let Some(next) = policy.next_deadline() else {
            return;
        };
        let now = self.clock.now();
        if next > now {
            return;
        }
        self.expire(policy, inner, now, after, &mut { PASS_BUDGET });
    }

    /// Ends the queued requests whose deadline is at or before `now` (F46), within `budget`.
    fn expire(
        &self,
        policy: &mut Policy,
        inner: &mut Inner<T>,
        now: u64,
        after: &mut After<T>,
        budget: &mut u32,
    ) {
        policy.expire(
            now,
            &mut EndJudge {
                class: self,
                inner,
                why: Ended::Expired,
                after,
            },
            budget,
        );
    }

    fn wants_pass(inner: &Inner<T>) -> bool {
        inner.queued > 0 && (inner.free_cells > 0 || inner.shut || inner.dead)
    }

    /// Runs bounded passes, releasing the lock between them to wake the granted waiters.
    fn dispatch(&self) {
        loop {
            let mut after = After::new();
            self.with(|policy, inner| {
                if Self::wants_pass(inner) {
                    self.pass(policy, inner, &mut after);
                }
            });
            if !after.finish() {
                return;
            }
        }
    }

    fn pass(&self, policy: &mut Policy, inner: &mut Inner<T>, after: &mut After<T>) {
        let mut budget = PASS_BUDGET;
        let mut pulled = false;
        if inner.shut || inner.dead {
            let why = if inner.shut {
                Ended::Shutdown
            } else {
                Ended::Quarantined
            };
            // Executors waiting for the class to drain must hear when it has (`poll_next`).
            pulled = true;
            let mut judge = EndJudge {
                class: self,
                inner,
                why,
                after,
            };
            while policy.select(0, &mut judge, &mut budget).is_some() {}
        } else if !policy.is_empty() {
            let now = self.clock.now();
            inner.recent_now = now;
            self.expire(policy, inner, now, after, &mut budget);
            while budget > 0 && inner.free_cells > 0 && inner.queued > 0 {
                inner.free_cells -= 1;
                let mut judge = GrantJudge {
                    class: self,
                    inner,
                    now,
                    after,
                    stop: false,
                    keep_credit: false,
                    pulled: &mut pulled,
                };
                let granted = policy.select(now, &mut judge, &mut budget);
                if granted.is_none() {
                    if !judge.keep_credit {
                        judge.inner.free_cells += 1;
                    }
                    break;
                }
            }
        }
        if pulled || inner.stopped() {
            inner.exec_wakers(&mut after.exec);
        }
        after.more = budget == 0;
    }
}

#[allow(private_interfaces)]
impl<T: Send + 'static, L: BaselineLock> ClassEngine<T> for BaselineClass<T, L> {
    fn new(s: ClassSetup) -> Result<Self, Error> {
        let (policy, slots) = s.policy()?;
        let inner = Inner {
            slots: (0..slots)
                .map(|_| Slot {
                    generation: key::first_generation(),
                    stage: Stage::Free,
                    queued_ref: false,
                    owner_ref: false,
                    pull: false,
                    ticket: Ticket::BLANK,
                    enqueued_at: 0,
                    lease: None,
                    waited: 0,
                    content: None,
                    token: None,
                    waker: None,
                })
                .collect(),
            free_slots: (0..slots as u32).rev().collect(),
            free_cells: s.cells,
            queued: 0,
            usable: s.cells,
            shut: false,
            dead: false,
            draining: false,
            ready: VecDeque::with_capacity(s.cells as usize),
            exec: ExecWaiters {
                claimed: 0,
                wakers: [const { None }; 64],
                overflow: Vec::new(),
                next: 0,
            },
            recent_now: s.clock.now(),
            lease_since: vec![u64::MAX; s.cells as usize],
        };
        Ok(Self {
            inner: L::new(Locked { policy, inner }),
            class: s.class,
            queue_capacity: s.queue_capacity,
            pool: s.pool,
            clock: s.clock,
            stats: ClassStats::new(),
            undelivered: Undelivered::new(slots),
            ledger: s.ledger,
            ids: s.ids,
            rooms: RoomWaiters::new(64),
        })
    }

    fn enqueue(
        &self,
        ticket: Ticket,
        pull: Option<(Permit, T)>,
        token: Option<&CancellationToken>,
    ) -> Result<Enqueued, (Error, Option<(Permit, T)>)> {
        if self.queue_capacity == 0 {
            let e = Error::new(Code::ResourceExhausted, Reason::QueueFull);
            self.stats.count_refused_at_enqueue(false);
            return Err((e, pull));
        }
        let now = if pull.is_some() {
            self.clock.now()
        } else {
            u64::MAX
        };
        let mut expired = After::new();
        let res = self.with(|policy, inner| {
            if inner.shut || inner.draining {
                return Err((Error::new(Code::Unavailable, Reason::Shutdown), pull));
            }
            if inner.dead {
                return Err((
                    Error::new(Code::Unavailable, Reason::AllCellsQuarantined),
                    pull,
                ));
            }
            if pull.is_none() && inner.queued == 0 && inner.free_cells > 0 {
                if policy.holds_emptied_tenants() {
                    policy.retire_emptied_tenants();
                }
                inner.free_cells -= 1;
                let at = inner.recent_now;
                return match self.acquire(inner, &ticket, at) {
                    Ok(lease) => {
                        // Under the class lock: the only writer.
                        self.stats.record_grant_exclusive(0);
                        Ok((Enqueued::Granted(lease), None))
                    }
                    Err(e) => {
                        if !matches!(e.reason(), Reason::PoolLeaseMismatch) {
                            inner.free_cells += 1;
                        }
                        Err((e, pull))
                    }
                };
            }
            if inner.queued >= self.queue_capacity {
                return Err((Error::new(Code::ResourceExhausted, Reason::QueueFull), pull));
            }
            if inner.free_slots.is_empty() {
                inner.compact(policy);
            }
            let Some(index) = inner.free_slots.pop() else {
                return Err((Error::new(Code::ResourceExhausted, Reason::QueueFull), pull));
            };
            // As the engine: a request that got a slot sweeps the due deadlines.
            self.expire_due(policy, inner, &mut expired);
            let at = if now == u64::MAX {
                self.clock.now()
            } else {
                now
            };
            let meta = EntryMeta {
                tenant: ticket.tenant,
                priority: ticket.priority,
                deadline: ticket.deadline,
                enqueued_at: at,
                weight: ticket.weight,
            };
            let s = &mut inner.slots[index as usize];
            s.stage = Stage::Queued;
            s.queued_ref = true;
            s.owner_ref = true;
            s.pull = pull.is_some();
            s.ticket = ticket;
            s.enqueued_at = at;
            s.token = if pull.is_some() { token.cloned() } else { None };
            // From here on the entry owns the queue slot's refund.
            s.content = pull.map(|(permit, payload)| (permit.detach_queue_slot(), payload));
            let key = Key {
                index,
                generation: s.generation,
            }
            .to_u64();
            inner.queued += 1;
            if let Err(err) = policy.insert(index, meta) {
                let mut after = After::new();
                end_queued(self, inner, index, Ended::Failed(err), &mut after);
                inner.slots[index as usize].queued_ref = false;
                inner.maybe_free(index);
                return Ok((Enqueued::Queued(key), Some(after)));
            }
            Ok((Enqueued::Queued(key), None))
        });
        expired.finish();
        let (enqueued, after) = res.inspect_err(|(e, _)| {
            if is_refusal(e) {
                self.stats.count_refused_at_enqueue(false);
            }
        })?;
        if let Some(mut a) = after {
            a.finish();
        }
        if matches!(enqueued, Enqueued::Queued(_)) {
            self.dispatch();
        }
        Ok(enqueued)
    }

    fn try_grant_now(&self, ticket: &Ticket) -> Result<Option<Lease>, Error> {
        if self.queue_capacity == 0 {
            return Err(Error::new(Code::ResourceExhausted, Reason::QueueFull));
        }
        self.with(|policy, inner| {
            if inner.shut || inner.draining {
                return Err(Error::new(Code::Unavailable, Reason::Shutdown));
            }
            if inner.dead {
                return Err(Error::new(Code::Unavailable, Reason::AllCellsQuarantined));
            }
            if inner.queued != 0 || inner.free_cells == 0 {
                return Ok(None);
            }
            if policy.holds_emptied_tenants() {
                policy.retire_emptied_tenants();
            }
            inner.free_cells -= 1;
            let at = inner.recent_now;
            match self.acquire(inner, ticket, at) {
                Ok(lease) => {
                    // Under the class lock: the only writer.
                    self.stats.record_grant_exclusive(0);
                    Ok(Some(lease))
                }
                Err(e) => {
                    if !matches!(e.reason(), Reason::PoolLeaseMismatch) {
                        inner.free_cells += 1;
                    }
                    Err(e)
                }
            }
        })
    }

    fn poll(&self, raw: u64, cx: &mut Context<'_>) -> Polled {
        let mut after = After::new();
        let polled = self.with(|policy, inner| {
            self.expire_due(policy, inner, &mut after);
            let Some((index, s)) = inner.slot(raw) else {
                return Polled::Ended(Ended::Failed(Error::new(
                    Code::Internal,
                    Reason::StaleHandle,
                )));
            };
            let out = match s.stage {
                Stage::Queued => {
                    match &mut s.waker {
                        Some(w) if w.will_wake(cx.waker()) => {}
                        w => *w = Some(cx.waker().clone()),
                    }
                    return Polled::Pending;
                }
                Stage::Granted => match s.lease.take() {
                    Some(l) => Polled::Granted(l, s.waited),
                    None => Polled::Ended(Ended::Failed(Error::new(
                        Code::Internal,
                        Reason::LeaseMissing,
                    ))),
                },
                Stage::Ended(why) => Polled::Ended(why),
                Stage::Free => unreachable!("`slot` filters free slots"),
            };
            s.owner_ref = false;
            inner.maybe_free(index);
            out
        });
        after.finish();
        polled
    }

    fn withdraw_refunding(
        &self,
        raw: u64,
        why: Ended,
        permit: &mut Option<ExecutionPermit>,
    ) -> Option<Lease> {
        let mut after = After::new();
        let lease = self.with(|policy, inner| {
            let (index, s) = inner.slot(raw)?;
            let lease = match s.stage {
                Stage::Queued => {
                    // Refunded before the request leaves the count (see `withdraw_refunding`);
                    // a refund only touches the ledger's counters: fine under the lock.
                    drop(permit.take());
                    end_queued(self, inner, index, why, &mut after);
                    unqueue(policy, inner, index);
                    None
                }
                Stage::Granted => s.lease.take(),
                _ => None,
            };
            let s = &mut inner.slots[index as usize];
            s.owner_ref = false;
            s.waker = None;
            inner.maybe_free(index);
            inner.wake_if_stopped(&mut after.exec);
            lease
        });
        // Our own waker is not among them (it was cleared above only after `end_queued` took it);
        // waking the withdrawing owner is harmless.
        after.finish();
        lease
    }

    fn cancel(&self, raw: u64) -> Result<(), Error> {
        let mut after = After::new();
        let found = self.with(|policy, inner| match inner.slot(raw) {
            Some((index, s)) if s.stage == Stage::Queued => {
                end_queued(self, inner, index, Ended::Cancelled, &mut after);
                unqueue(policy, inner, index);
                inner.wake_if_stopped(&mut after.exec);
                true
            }
            _ => false,
        });
        after.finish();
        if found {
            Ok(())
        } else {
            Err(Error::new(Code::NotFound, Reason::UnknownRequest))
        }
    }

    fn change(
        &self,
        raw: u64,
        priority: Option<u8>,
        deadline: Option<Option<u64>>,
    ) -> Result<(), Error> {
        let now = deadline
            .is_some_and(|d| d != Some(u64::MAX))
            .then(|| self.clock.now());
        let mut after = After::new();
        let found = self.with(|policy, inner| match inner.slot(raw) {
            Some((index, s)) if s.stage == Stage::Queued => {
                let own = s.ticket.deadline;
                if let Some(p) = priority {
                    policy.set_priority(index, p);
                }
                if let Some(d) = deadline.map(|d| d.map_or(own, |d| d.min(own))) {
                    policy.set_deadline(index, d);
                    if now.is_some_and(|now| d <= now) {
                        // Tightened into the past: expires now, as on the engine.
                        end_queued(self, inner, index, Ended::Expired, &mut after);
                        unqueue(policy, inner, index);
                        inner.wake_if_stopped(&mut after.exec);
                    }
                }
                Ok(())
            }
            // Granted, ended, or its slot reused: too late, whichever (see the engine's).
            _ => Err(()),
        });
        after.finish();
        found.map_err(|()| Error::new(Code::NotFound, Reason::TooLate))
    }

    fn release_then(&self, lease: Lease, then: impl FnOnce()) {
        let mut exec = ExecWakes::default();
        let work = self.with(|_, inner| {
            if let Some(s) = inner.lease_since.get_mut(lease.cell().0 as usize) {
                *s = u64::MAX;
            }
            self.pool.release(lease);
            // A quota refund touches only the ledger's counters: fine under the lock.
            then();
            inner.free_cells += 1;
            inner.wake_if_stopped(&mut exec);
            Self::wants_pass(inner)
        });
        exec.wake();
        if work {
            self.dispatch();
        }
    }

    fn quarantine_then(&self, lease: Lease, reason: &'static str, then: impl FnOnce()) {
        let mut exec = ExecWakes::default();
        let dead = self.with(|_, inner| {
            self.quarantine_locked(inner, lease, reason);
            // A quota refund touches only the ledger's counters: fine under the lock.
            then();
            // A dead class, or a drain waiting for this cell: waiters must look again.
            inner.wake_if_stopped(&mut exec);
            inner.dead
        });
        exec.wake();
        if dead {
            self.dispatch();
        }
    }

    fn try_next(&self) -> Option<Pulled<T>> {
        let mut after = After::new();
        let next = self.with(|policy, inner| {
            // As the engine: the due deadlines are swept only when nothing is ready.
            inner.take_ready().or_else(|| {
                self.expire_due(policy, inner, &mut after);
                inner.take_ready()
            })
        });
        after.finish();
        next
    }

    fn poll_next(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<Option<Pulled<T>>> {
        // One critical section: the ready check and the registration cannot be split by a
        // dispatch that grants a job and finds no executor registered.
        self.with(|_, inner| {
            if let Some(p) = inner.take_ready() {
                return Poll::Ready(Some(p));
            }
            // A dead class is not the end: a restore reopens it (SPEC F22), so executors wait.
            if (inner.shut || inner.draining) && inner.queued == 0 {
                return Poll::Ready(None);
            }
            inner.exec.register(slot, cx.waker());
            Poll::Pending
        })
    }

    fn forget_waiter(&self, slot: usize) {
        self.with(|_, inner| inner.exec.forget(slot));
    }

    fn count_refused(&self, expired: bool) {
        self.stats.count_refused_at_enqueue(expired);
    }

    fn count_refused_after_grant(&self) {
        self.stats.count_refused_at_acceptance();
    }

    fn shutdown(&self) {
        let mut exec = ExecWakes::default();
        self.with(|_, inner| {
            inner.shut = true;
            inner.exec_wakers(&mut exec);
        });
        exec.wake();
        self.rooms.wake_all();
        self.dispatch();
    }

    fn close(&self) {
        let mut exec = ExecWakes::default();
        self.with(|_, inner| {
            inner.draining = true;
            inner.exec_wakers(&mut exec);
        });
        exec.wake();
        self.rooms.wake_all();
        self.dispatch();
    }

    fn poll_drained(&self, cx: &mut Context<'_>, slot: &mut Option<usize>) -> Poll<()> {
        self.with(|_, inner| {
            if inner.drained() {
                return Poll::Ready(());
            }
            inner.exec.register(slot, cx.waker());
            Poll::Pending
        })
    }

    fn queue_depth(&self) -> u32 {
        self.with(|_, inner| inner.queued)
    }

    fn available_cells(&self) -> u32 {
        self.with(|_, inner| inner.free_cells)
    }

    fn pool(&self) -> &ClassPool {
        &self.pool
    }

    fn restore_cell(&self, cell: CellId) -> Result<(), Error> {
        let mut exec = ExecWakes::default();
        let work = self.with(|_, inner| {
            self.pool.restore(cell)?;
            inner.usable += 1;
            inner.free_cells += 1;
            // A class that died reopens (SPEC F22): its executors, parked meanwhile, look again.
            if inner.dead {
                inner.dead = false;
                inner.exec_wakers(&mut exec);
            }
            inner.wake_if_stopped(&mut exec);
            Ok(Self::wants_pass(inner))
        })?;
        exec.wake();
        if work {
            self.dispatch();
        }
        Ok(())
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

    fn rooms(&self) -> &RoomWaiters {
        &self.rooms
    }

    fn order_room_waiter(&self) {
        // The lock, taken and given back: a departure changes the count under it and then reads
        // the waiter count (see `engine::rooms`).
        self.with(|_, _| ());
    }

    fn clock(&self) -> &Arc<dyn Clock> {
        &self.clock
    }
}

impl<T: Send + 'static, L: BaselineLock> BaselineClass<T, L> {
    /// Samples for a snapshot: the pool's split, the queue depth, the tenants in rotation and
    /// the oldest lease's age.
    fn sample(&self) -> crate::stats::Samples {
        let (queued, tenants, oldest) = self.with(|policy, inner| {
            let oldest = inner
                .lease_since
                .iter()
                .copied()
                .filter(|&s| s != u64::MAX)
                .min();
            (inner.queued, policy.queued_tenants() as u32, oldest)
        });
        let pool = self.pool.counters();
        let now = self.clock.now();
        crate::stats::Samples {
            pool,
            queue_depth: queued,
            queued_tenants: tenants,
            oldest_lease_age: oldest.map(|s| now.saturating_sub(s)),
            // Every grant is recorded under the lock, in the counters.
            fast_grants: 0,
        }
    }
}
