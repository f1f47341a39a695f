//! Inheritance of urgency on the lock-free graph (SPEC D30).
//!
//! Each node keeps its urgency in three words: `urg` (`gen << 32 | ACTIVE | base priority <<
//! 8 | effective priority`), `eff_deadline` and `base_deadline`. Every change of an effective
//! or base value happens under the topology lock; the lock-free paths only read them, to
//! decide whether the lock is needed at all:
//!
//! - a job that links edges (submit, discovery) compares its effective urgency with each
//!   producer's and takes the lock only if it exceeds one;
//! - a job that ends clears `ACTIVE` and takes the lock only if it may have lifted a live
//!   producer above that producer's base ([`Urgency::may_lift`]);
//! - a producer admitted with an effective urgency above its base recomputes it (its
//!   admission-gated demanders stop waiting on it).
//!
//! Each of these changes list membership or `ACTIVE` first, then issues a SeqCst fence, then
//! reads the producer's values. A recomputation under the lock walks the producer's lists,
//! stores the result, issues a SeqCst fence and walks again, repeating until two walks agree.
//! Between the two fences, either the walk sees the change or the lock-free reader sees the
//! stored value (and takes the lock), so no arrival or departure is missed.

//!
//! Nothing here allocates in a steady state: a job's producers are collected in a fixed buffer
//! on the stack (at most `max_deps`), and the walk's stack and the list of jobs to re-order in
//! the scheduler live in [`Scratch`], kept across calls, growing only at a new high-water mark
//! of one propagation's size.

use super::*;
use crate::graph::rules::Urgency;
use crate::sync::fence;

/// In `urg`: the job has not ended, so its pending edges make it a demander.
pub(super) const ACTIVE: u64 = 1 << 16;

/// The propagation's buffers, behind their own mutex (taken under the topology lock, or alone
/// by [`LockFreeGraph::take_resync`]).
#[derive(Debug, Default)]
pub(super) struct Scratch {
    /// The walk upstream: (job, its urgency as a demander before, after).
    stack: Vec<(NodeRef, Option<Urgency>, Option<Urgency>)>,
    /// Jobs whose effective urgency changed, for the scheduler's in-place re-order.
    resync: Vec<NodeRef>,
}

/// Up to `max_deps` producers of one job, on the stack (no memset), filled in place.
pub(super) type Producers = super::dep_buf::DepBuf<NodeRef>;

impl LockFreeGraph {
    /// Sets up a node's urgency before publication.
    pub(super) fn init_urgency(&self, me: NodeRef, own: Urgency) {
        let n = self.node(me.idx);
        n.eff_deadline.store(own.deadline, Ordering::Relaxed);
        n.base_deadline.store(own.deadline, Ordering::Relaxed);
        let p = u64::from(own.priority);
        // Relaxed: published with the node (the count's Release store, the key's).
        n.urg.store(
            word(me.gen, (ACTIVE | p << 8 | p) as u32),
            Ordering::Relaxed,
        );
    }

    /// The effective and base urgency of `node`, and whether it is still active; `None` if
    /// the slot moved on.
    pub(super) fn urgency(&self, node: NodeRef) -> Option<(Urgency, Urgency, bool)> {
        let n = self.nodes.get(node.idx)?;
        // Acquire: pairs with the Release stores under the lock.
        let w = n.urg.load(Ordering::Acquire);
        if gen_of(w) != node.gen {
            return None;
        }
        let eff = Urgency {
            priority: w as u8,
            deadline: n.eff_deadline.load(Ordering::Acquire),
        };
        let base = Urgency {
            priority: (w >> 8) as u8,
            deadline: n.base_deadline.load(Ordering::Acquire),
        };
        Some((eff, base, w & ACTIVE != 0))
    }

    /// Under the lock: stores `node`'s effective (and, if given, base) urgency.
    fn store_urgency(&self, node: NodeRef, eff: Urgency, base: Option<Urgency>) {
        let n = self.node(node.idx);
        // Release: pairs with the Acquire loads in `urgency`.
        n.eff_deadline.store(eff.deadline, Ordering::Release);
        if let Some(b) = base {
            n.base_deadline.store(b.deadline, Ordering::Release);
        }
        let mut w = n.urg.load(Ordering::Relaxed);
        loop {
            if gen_of(w) != node.gen {
                return;
            }
            let bp = base.map_or((w >> 8) & 0xff, |b| u64::from(b.priority));
            let new = (w & !0xffff) | bp << 8 | u64::from(eff.priority);
            // Release: as above; an RMW, so a concurrent clearing of `ACTIVE` is kept.
            match n
                .urg
                .compare_exchange_weak(w, new, Ordering::Release, Ordering::Relaxed)
            {
                Ok(_) => return,
                Err(cur) => w = cur,
            }
        }
    }

    /// Calls `f` with the target of every edge in `q`'s unsealed lists. Edges of an unsealed
    /// list are not freed while it stays unsealed; a walk that a seal overtook may read
    /// recycled edges, which is why [`pending_max`](Self::pending_max) walks until two walks
    /// agree. Bounded by the edge arena.
    pub(super) fn walk(&self, q: NodeRef, mut f: impl FnMut(NodeRef)) {
        self.walk_until(q, |t| {
            f(t);
            false
        });
    }

    /// [`walk`](Self::walk) that stops at the first edge for which `f` is true; whether one
    /// was.
    pub(super) fn walk_until(&self, q: NodeRef, mut f: impl FnMut(NodeRef) -> bool) -> bool {
        let n = self.node(q.idx);
        for head in [&n.admit, &n.done] {
            // Acquire: pairs with the linkers' Release pushes (the edges' fields).
            let h = head.load(Ordering::Acquire);
            if gen_of(h) != q.gen {
                continue;
            }
            let mut e = low_of(h);
            let mut steps = 0;
            while e < SEALED_MIN && steps < self.bounds.edges as usize {
                let edge = self.edge(e);
                // Relaxed: published by the push acquired above.
                if f(NodeRef::unpack(edge.target.load(Ordering::Relaxed))) {
                    return true;
                }
                e = edge.next.load(Ordering::Relaxed);
                steps += 1;
            }
        }
        false
    }

    /// Under the lock: `q`'s base joined with every active demander that has a pending edge
    /// on it, in one walk of its lists.
    fn pending_once(&self, q: NodeRef, base: Urgency) -> Urgency {
        let mut v = base;
        self.walk(q, |t| {
            if let Some((eff, _, true)) = self.urgency(t) {
                v = v.max(eff);
            }
        });
        v
    }

    /// Under the lock: whether `q`'s unsealed lists hold an edge of `x`.
    fn pending_on(&self, q: NodeRef, x: NodeRef) -> bool {
        self.walk_until(q, |t| t == x)
    }

    /// Under the lock: the live producers `x` has a pending edge on, into `out` (filled in
    /// place: the buffer is a few KiB, not to be moved per call).
    pub(super) fn producers(&self, x: NodeRef, out: &mut Producers) {
        out.clear();
        let n = self.node(x.idx);
        // Acquire: pairs with the count's Release store (submit, discover).
        let count =
            (n.dep_count.load(Ordering::Acquire) as usize).min(self.bounds.max_deps as usize);
        let deps = self.dep_keys(x.idx);
        for d in &deps[..count] {
            let Some(k) = self.lookup_locked(d.load(Ordering::Relaxed)) else {
                continue;
            };
            if let Some(q) = self.live_producer(k) {
                if !out.as_slice().contains(&q) && self.pending_on(q, x) {
                    out.push(q);
                }
            }
        }
    }

    /// The producer key slot `k` names, if any.
    fn live_producer(&self, k: KeyRef) -> Option<NodeRef> {
        // Acquire: pairs with the key's publication.
        let st = self.key(k).state.load(Ordering::Acquire);
        (self.state_valid(k, st) && st & 0xff == K_LIVE).then(|| NodeRef {
            idx: (st as u32) >> 8,
            gen: gen_of(st),
        })
    }

    /// Under the lock: recomputes `q` (its base, and `base` first if given) until two walks
    /// agree; returns the value before and after, or `None` if `q` ended or is gone.
    fn recompute(&self, q: NodeRef, base: Option<Urgency>) -> Option<(Urgency, Urgency)> {
        let (before, b, active) = self.urgency(q)?;
        if !active {
            return None;
        }
        let b = base.unwrap_or(b);
        let mut v = self.pending_once(q, b);
        loop {
            self.store_urgency(q, v, base);
            // SeqCst fence: pairs with the fence of a lock-free linker, leaver or admitter
            // (see the module docs): this walk sees its change, or it sees the value stored.
            fence(Ordering::SeqCst);
            let again = self.pending_once(q, b);
            if again == v {
                return Some((before, v));
            }
            v = again;
        }
    }

    /// Under the lock: `y`'s urgency as a demander went from `old` to `new` (`None`: it was
    /// not one, or is no more); recomputes every producer it may have lifted or now exceeds,
    /// transitively. Changed jobs go onto the re-order list.
    fn settle(&self, y: NodeRef, old: Option<Urgency>, new: Option<Urgency>) {
        let mut s = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let Scratch { stack, resync } = &mut *s;
        stack.push((y, old, new));
        let mut producers = Producers::new();
        while let Some((y, old, new)) = stack.pop() {
            self.producers(y, &mut producers);
            for &r in producers.as_slice() {
                let Some((eff, base, _)) = self.urgency(r) else {
                    continue;
                };
                let lifted = old.is_some_and(|o| o.may_lift(eff, base));
                if lifted || new.is_some_and(|v| v.exceeds(eff)) {
                    if let Some((before, after)) = self.recompute(r, None) {
                        if after != before {
                            resync.push(r);
                            stack.push((r, Some(before), Some(after)));
                        }
                    }
                }
            }
        }
        // Relaxed: a hint for `take_resync`; the list itself is read under the mutex.
        self.resync_len
            .store(resync.len() as u32, Ordering::Relaxed);
    }

    /// Under the lock: recomputes `q` itself (with a new base if given) and settles upstream.
    fn refresh_locked(&self, q: NodeRef, base: Option<Urgency>) {
        if let Some((before, after)) = self.recompute(q, base) {
            if after != before {
                self.scratch
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .resync
                    .push(q);
                self.settle(q, Some(before), Some(after));
            }
        }
    }

    /// A job whose effective urgency changed, for the graph to re-order in the scheduler
    /// (SPEC D30, F36); `None` if none is listed. One load when the list is empty.
    #[inline]
    pub(super) fn take_resync(&self) -> Option<NodeRef> {
        // Relaxed: a hint; a job listed by another thread meanwhile is taken by that thread's
        // own hand-off.
        if self.resync_len.load(Ordering::Relaxed) == 0 {
            return None;
        }
        let mut s = self.scratch.lock().unwrap_or_else(|e| e.into_inner());
        let next = s.resync.pop();
        // Relaxed: as above.
        self.resync_len
            .store(s.resync.len() as u32, Ordering::Relaxed);
        next
    }

    /// A job that linked edges (submitted, or running with new dependencies on `slots`):
    /// takes the lock only if it exceeds one of its producers, or `adopted` (its key had
    /// waiters, whose urgency it inherits).
    pub(super) fn arrive(&self, me: NodeRef, slots: &[KeyRef], adopted: bool) {
        let Some((mine, _, _)) = self.urgency(me) else {
            return;
        };
        // The common case: a job of the least urgency raises nobody, and a recomputation that
        // misses its edge loses nothing, so it needs neither the fence nor the reads. (A
        // joiner that raises it meanwhile settles upstream itself, under the lock.)
        if mine.is_least() && !adopted {
            return;
        }
        // SeqCst fence: after the pushes of its edges, before reading its producers' values.
        fence(Ordering::SeqCst);
        let Some((mine, _, _)) = self.urgency(me) else {
            return;
        };
        let exceeds = slots.iter().any(|&k| {
            self.live_producer(k)
                .and_then(|q| self.urgency(q))
                .is_some_and(|(eff, _, _)| mine.exceeds(eff))
        });
        if !exceeds && !adopted {
            return;
        }
        let _g = self.lock();
        if adopted {
            self.refresh_locked(me, None);
        }
        if let Some((mine, _, _)) = self.urgency(me) {
            self.settle(me, None, Some(mine));
        }
    }

    /// The dependency key slots of `x`, looked up without the lock.
    pub(super) fn dep_slots(&self, x: NodeRef, out: &mut super::dep_buf::DepBuf) {
        let n = self.node(x.idx);
        // Acquire: pairs with the count's Release store.
        let count =
            (n.dep_count.load(Ordering::Acquire) as usize).min(self.bounds.max_deps as usize);
        let deps = self.dep_keys(x.idx);
        for d in &deps[..count] {
            if let Some(k) = self.lookup(d.load(Ordering::Relaxed)) {
                out.push(k);
            }
        }
    }

    /// `x` ends (SPEC D30): it demands nothing any more. Takes the lock only if it may have
    /// lifted one of its live producers above that producer's base.
    pub(super) fn depart(&self, x: NodeRef) {
        let n = self.node(x.idx);
        // SeqCst: the leaver's half of the fence pairing (see the module docs).
        let w = n.urg.fetch_and(!ACTIVE, Ordering::SeqCst);
        if gen_of(w) != x.gen || w & ACTIVE == 0 {
            return;
        }
        let mine = Urgency {
            priority: w as u8,
            deadline: n.eff_deadline.load(Ordering::Relaxed),
        };
        // A least-urgent job lifted nobody: its departure changes nothing.
        if mine.is_least() {
            return;
        }
        fence(Ordering::SeqCst);
        let mut slots = super::dep_buf::DepBuf::new();
        self.dep_slots(x, &mut slots);
        let lifted = slots.as_slice().iter().any(|&k| {
            self.live_producer(k)
                .and_then(|q| self.urgency(q))
                .is_some_and(|(eff, base, _)| mine.may_lift(eff, base))
        });
        if lifted {
            let _g = self.lock();
            self.settle(x, Some(mine), None);
        }
    }

    /// `q` was admitted: its admission-gated demanders stop waiting on it. Takes the lock only
    /// if its effective urgency is above its base.
    pub(super) fn admitted_urgency(&self, q: NodeRef) {
        // SeqCst fence: after the seal of its admission list.
        fence(Ordering::SeqCst);
        if let Some((eff, base, true)) = self.urgency(q) {
            if eff != base {
                let _g = self.lock();
                self.refresh_locked(q, None);
            }
        }
    }

    /// A joiner of urgency `u` demands `q` for as long as it lives (SPEC D30, D31): raises its
    /// base, under the lock only if `u` exceeds it.
    pub(super) fn join_urgency(&self, q: NodeRef, u: Urgency) {
        let Some((_, base, true)) = self.urgency(q) else {
            return;
        };
        if !u.exceeds(base) {
            return;
        }
        let _g = self.lock();
        if let Some((_, base, true)) = self.urgency(q) {
            self.refresh_locked(q, Some(base.max(u)));
        }
    }

    /// The effective urgency of the job on `node`, for a node that is in use.
    pub(super) fn effective_of(&self, node: NodeRef) -> Option<Urgency> {
        let n = self.nodes.get(node.idx)?;
        // Acquire: the slot's state, as `outcome` reads it.
        let st = n.state.load(Ordering::Acquire);
        if gen_of(st) != node.gen || low_of(st) == S_FREE {
            return None;
        }
        self.urgency(node).map(|(eff, _, _)| eff)
    }
}
