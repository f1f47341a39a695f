//! Key versions on the lock-free graph: `advance`, `remove`, `reset`, stale completions and
//! witnesses (SPEC D01, D20–D24).
//!
//! A key's version word changes under the topology lock only (save its creation, one CAS from
//! 0). `advance` and `remove` first store the new version, then detach the key's state word
//! (one CAS, the linearisation point) from the producer it named, and retire that producer:
//! a flag in its `ctl` word. A publication that precedes the detach is retired by it; one that
//! follows it reads the new version (see `submit`). A retired node that was waiting (its count
//! zeroed by the same CAS) or queued (`TAKEN` set by the same CAS, which the executor's `start`
//! then refuses) is ended by the retiring thread; a running one — or one caught on its way to
//! the scheduler — is ended by its completion, refused as stale.

use super::*;
use crate::graph::keys::{gen_of_version, CANCELLED_REMOVED, EXHAUSTED, SUPERSEDED, UNKNOWN_KEY};
use crate::graph::{Version, Witness};

/// A node found live on a key that a key operation retired, and what ending it needs.
#[derive(Clone, Copy)]
pub(super) struct Retired {
    pub(super) node: NodeRef,
    pub(super) why: u64,
    /// `Some(admitted)` when this thread owns ending it now; `None` when it runs (its
    /// completion ends it) or was already ending.
    pub(super) end: Option<bool>,
    /// This operation flagged it (it was live at its generation and not retired yet).
    pub(super) flagged: bool,
}

/// The flags a dependent's count takes when its dependency, pinned to a version that
/// `advance` superseded, is counted (SPEC D33).
pub(super) fn pin_flags(gate: Gate) -> u64 {
    if rules::gate_met_superseded(gate) {
        0
    } else {
        FAILED | WAITED_SUPERSEDED
    }
}

pub(super) fn retired_error(why: u64) -> Error {
    if why & RETIRED_CANCELLED != 0 {
        rules::WITHDRAWN
    } else if why & RETIRED_REMOVED != 0 {
        CANCELLED_REMOVED
    } else {
        SUPERSEDED
    }
}

impl LockFreeGraph {
    /// Under the topology lock, after the key's new version was stored: moves the key's state
    /// off its producer. Waiters stay unless `remove`, which also moves the word to the slot's
    /// next generation (the slot is freed next), so a publication still holding this one fails.
    /// Returns the producer it named, if one.
    ///
    /// Always one RMW, even when the state stays: an RMW reads the latest state, so a
    /// publication either precedes it (and is retired here) or follows it and, acquiring this
    /// RMW's release, reads the new version.
    fn detach(&self, r: KeyRef, remove: bool) -> Option<NodeRef> {
        let slot = self.key(r);
        // Acquire: pairs with the publication (Release) of the node it may name.
        let mut st = slot.state.load(Ordering::Acquire);
        loop {
            let tag = st & 0xff;
            let new = if !remove {
                key_word(r.gen, if tag == K_WAITING { K_WAITING } else { K_NONE })
            } else {
                match r.gen.checked_add(1) {
                    Some(g) => key_word(g, K_NONE),
                    None => key_word(r.gen, K_GONE),
                }
            };
            // AcqRel: Acquire as the load; Release publishes the detach (and the version stored
            // before it) to linkers and to a publication CAS that follows it.
            match slot
                .state
                .compare_exchange(st, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => {
                    return (tag == K_LIVE).then(|| NodeRef {
                        idx: (st as u32) >> 8,
                        gen: gen_of(st),
                    })
                }
                Err(cur) => st = cur,
            }
        }
    }

    /// Flags `node` retired (`why`). A waiting node's count is zeroed in the same CAS (so no
    /// gate fires it any more) and a queued one is taken from its executor by a CAS of its
    /// state: this thread ends those (`finish`).
    pub(super) fn mark_retired(&self, node: NodeRef, why: u64) -> Retired {
        let n = self.node(node.idx);
        let mut r = Retired {
            node,
            why,
            end: None,
            flagged: false,
        };
        // Acquire/AcqRel: the RMWs on `ctl` form one release sequence (see `release`).
        let mut c = n.ctl.load(Ordering::Acquire);
        let (waiting, queued) = loop {
            if gen_of(c) != node.gen || c & RETIRED != 0 {
                return r;
            }
            if c & (RUNNING | REMAINING) == RUNNING {
                // Completed, nothing pending: its completer is ending it with its outcome
                // (that completion came first), and its dependents take that outcome.
                return r;
            }
            let waiting = c & RUNNING == 0 && c & REMAINING != 0;
            // Fired and not started: if it is in the scheduler already, take it from its
            // executor (`start` refuses a `TAKEN` node). On its way there (ready, the hand-off
            // still running) it is only flagged: it will run, and its completion is stale.
            // Acquire: pairs with the Release store of `admitted`.
            // `TAKEN` already: a refusal or a shutdown is ending it.
            let queued = !waiting
                && c & (RUNNING | TAKEN) == 0
                && n.state.load(Ordering::Acquire) == word(node.gen, S_QUEUED);
            let new = if waiting {
                (c & !REMAINING) | why
            } else if queued {
                c | why | TAKEN
            } else {
                c | why
            };
            match n
                .ctl
                .compare_exchange_weak(c, new, Ordering::AcqRel, Ordering::Acquire)
            {
                Ok(_) => break (waiting, queued),
                Err(cur) => c = cur,
            }
        };
        r.flagged = true;
        if waiting {
            n.state.store(word(node.gen, S_ENDING), Ordering::Relaxed);
            dec(&self.gauges.waiting);
            r.end = Some(false);
        } else if queued {
            // This thread won the count word: the executor's `start` will refuse the node.
            n.state.store(word(node.gen, S_ENDING), Ordering::Relaxed);
            self.gauges
                .ready_running
                .fetch_sub(READY_ONE, Ordering::Relaxed);
            r.end = Some(true);
        }
        r
    }

    /// Ends a node `mark_retired` handed to this thread.
    pub(super) fn finish(&self, r: Retired, work: &mut Work, failed: &mut u32) {
        if let Some(admitted) = r.end {
            self.retire_end(r.node, r.why, admitted, work, failed);
            if !admitted {
                self.unpark_retired(r.node);
            }
        }
    }

    /// Frees the edges a retired node still has parked on keys without a producer (its other
    /// edges are inert and freed when their producers end). Takes the topology lock.
    pub(super) fn unpark_retired(&self, me: NodeRef) {
        let n = self.node(me.idx);
        // Acquire: pairs with the Release store of the count (submit, discover).
        let count =
            (n.dep_count.load(Ordering::Acquire) as usize).min(self.bounds.max_deps as usize);
        let deps = self.dep_keys(me.idx);
        // On the stack up to the largest `max_deps`: no allocation.
        let mut slots = super::dep_buf::DepBuf::new();
        for d in &deps[..count] {
            if let Some(k) = self.lookup(d.load(Ordering::Relaxed)) {
                slots.push(k);
            }
        }
        let _guard = self.lock();
        self.unpark(me, slots.as_slice());
    }

    /// Ends a retired node this thread owns (state `ending`): records its outcome
    /// (`superseded` or `removed`, per `why`) and publishes nothing in its key (SPEC D21). A
    /// removed node's lists are sealed so that no dependent's gate holds; a superseded one's
    /// dependents follow the key (SPEC D33, see [`follow`](Self::follow)).
    pub(super) fn retire_end(
        &self,
        node: NodeRef,
        why: u64,
        admitted: bool,
        work: &mut Work,
        failed: &mut u32,
    ) {
        if why & RETIRED_CANCELLED != 0 && why & (RETIRED_SUPERSEDED | RETIRED_REMOVED) == 0 {
            // Cancelled for want of demand (SPEC D31): it ends like a failure that flows
            // downstream, published in its key.
            self.end_one(
                node,
                JobOutcome::Failed(rules::WITHDRAWN),
                admitted,
                work,
                failed,
            );
            return;
        }
        // It demands nothing any more (SPEC D30).
        self.depart(node);
        let n = self.node(node.idx);
        let outcome = JobOutcome::Failed(retired_error(why));
        // SAFETY: the caller owns the node's `ending` transition; readers wait for `done`.
        n.outcome.with_mut(|p| unsafe { *p = Some(outcome) });
        if why & RETIRED_REMOVED == 0 {
            // SAFETY: written before publication by the submitter; read-only since, and the
            // slot is not collected before this owner stores `done` below.
            let info = n.info.with(|p| unsafe { *p });
            let ident = rules::ident(info.job);
            self.follow(node, info.key, ident, admitted, work, failed);
        } else {
            if !admitted {
                self.seal_retired(&n.admit, node.gen, work, failed);
            }
            self.seal_retired(&n.done, node.gen, work, failed);
        }
        // Release: pairs with the Acquire load in `outcome`.
        n.state.store(word(node.gen, S_DONE), Ordering::Release);
        self.ended(node);
        self.demand_departs(node, work);
    }

    /// Takes the lists of `node`, superseded by `advance` (SPEC D33): its admission list
    /// unless `admitted` (sealed then), and its end list. An edge pinned to the node's version
    /// counts as on a producer that ended `superseded` without being admitted; every other
    /// edge follows the key: it is linked again, to whatever the key names now (its next
    /// generation's job, or no producer yet). A list sealed already is left as it is: the node
    /// ended or was admitted first, and its dependents saw that. Takes the topology lock only
    /// to park an edge on a key without producer. `key` and `ident`: the node's key slot and
    /// identity, which the caller knows (the node may be collected meanwhile: its lists' words
    /// then carry another generation and nothing is taken).
    pub(super) fn follow(
        &self,
        node: NodeRef,
        key: KeyRef,
        ident: u64,
        admitted: bool,
        work: &mut Work,
        failed: &mut u32,
    ) {
        let n = self.node(node.idx);
        for head in [(!admitted).then_some(&n.admit), Some(&n.done)]
            .into_iter()
            .flatten()
        {
            // Acquire: pairs with the slot's re-initialisation (Release), as a linker's load.
            let mut h = head.load(Ordering::Acquire);
            let old = loop {
                if gen_of(h) != node.gen || (low_of(h) != NIL && low_of(h) >= SEALED_MIN) {
                    break NIL;
                }
                // AcqRel: Acquire pairs with the linkers' Release pushes (their edge fields);
                // Release pairs with a late linker's Acquire load, which then reads the key
                // again and sees the detach that came before this (SPEC D33).
                match head.compare_exchange_weak(
                    h,
                    word(node.gen, SEALED_SUPERSEDED),
                    Ordering::AcqRel,
                    Ordering::Acquire,
                ) {
                    Ok(_) => break low_of(h),
                    Err(cur) => h = cur,
                }
            };
            let mut e = old;
            while e < SEALED_MIN {
                let edge = self.edge(e);
                // Relaxed: published by the Release push, acquired by the CAS.
                let next = edge.next.load(Ordering::Relaxed);
                let target = NodeRef::unpack(edge.target.load(Ordering::Relaxed));
                let code = edge.gate.load(Ordering::Relaxed);
                let gate = rules::gate_from(code);
                if rules::pinned_from(code) {
                    self.push_edge(e);
                    self.release_with(target, pin_flags(gate), work, failed);
                } else if self.still_counting(target) {
                    self.link_with(e, key, ident, gate, None, target, work, failed, false);
                } else {
                    // The dependent ended already (another gate failed): the edge is inert.
                    self.push_edge(e);
                }
                e = next;
            }
        }
    }

    /// Whether `target` still counts gates (its count is live at its generation).
    fn still_counting(&self, target: NodeRef) -> bool {
        // Relaxed: a hint; a dependent that ends after it leaves an inert edge on the key,
        // freed when the key's producer ends.
        let c = self.node(target.idx).ctl.load(Ordering::Relaxed);
        gen_of(c) == target.gen && c & REMAINING != 0
    }

    fn seal_retired(&self, head: &AtomicU64, gen: u32, work: &mut Work, failed: &mut u32) {
        // AcqRel: as in `seal`.
        let old = head.swap(word(gen, SEALED_RETIRED), Ordering::AcqRel);
        let mut e = low_of(old);
        while e < SEALED_MIN {
            let edge = self.edge(e);
            // Relaxed: published by the Release push, acquired by the swap.
            let next = edge.next.load(Ordering::Relaxed);
            let target = NodeRef::unpack(edge.target.load(Ordering::Relaxed));
            self.push_edge(e);
            self.release(target, false, work, failed);
            e = next;
        }
    }

    /// Under the topology lock, after `advance` stored the key's new version: takes the
    /// key's waiter edges pinned to an older version off its list (SPEC D33); returns them
    /// as a chain in list order, for [`release_pinned`](Self::release_pinned).
    fn take_pinned_waiters(&self, k: KeyRef) -> u32 {
        let key = self.key(k);
        let (mut first, mut last) = (NIL, NIL);
        let mut prev: Option<u32> = None;
        // Relaxed: the list changes under this lock only.
        let mut e = key.waiters.load(Ordering::Relaxed);
        while e != NIL {
            let edge = self.edge(e);
            let next = edge.next.load(Ordering::Relaxed);
            if rules::pinned_from(edge.gate.load(Ordering::Relaxed)) {
                match prev {
                    None => key.waiters.store(next, Ordering::Relaxed),
                    Some(p) => self.edge(p).next.store(next, Ordering::Relaxed),
                }
                edge.next.store(NIL, Ordering::Relaxed);
                if last == NIL {
                    first = e;
                } else {
                    self.edge(last).next.store(e, Ordering::Relaxed);
                }
                last = e;
            } else {
                prev = Some(e);
            }
            e = next;
        }
        first
    }

    /// Counts each pinned waiter edge of the chain `e` as on a superseded version.
    fn release_pinned(&self, mut e: u32, work: &mut Work, failed: &mut u32) {
        while e != NIL {
            let edge = self.edge(e);
            // Relaxed: the chain was built under the topology lock, which this thread held.
            let next = edge.next.load(Ordering::Relaxed);
            let target = NodeRef::unpack(edge.target.load(Ordering::Relaxed));
            let gate = rules::gate_from(edge.gate.load(Ordering::Relaxed));
            self.push_edge(e);
            self.release_with(target, pin_flags(gate), work, failed);
            e = next;
        }
    }

    /// Fails every waiter edge of a removed key's list `e` with `unavailable / removed`.
    fn fail_waiters(&self, mut e: u32, work: &mut Work, failed: &mut u32) {
        while e != NIL {
            let edge = self.edge(e);
            // Relaxed: the list was built and taken under the topology lock.
            let next = edge.next.load(Ordering::Relaxed);
            let target = NodeRef::unpack(edge.target.load(Ordering::Relaxed));
            self.push_edge(e);
            self.release_with(target, FAILED | WAITED_REMOVED, work, failed);
            e = next;
        }
    }

    /// After a running node's state moved to `ending` in `complete`: if it was retired, the
    /// completion is stale (SPEC D21) — it publishes nothing, releases no dependent, ends
    /// the node `superseded` (or `removed`) and is counted. `None`: not retired.
    pub(super) fn refuse_stale(&self, node: NodeRef, work: &mut Work) -> Option<Error> {
        let n = self.node(node.idx);
        // Acquire: pairs with the AcqRel CAS of `mark_retired`.
        let mut c = n.ctl.load(Ordering::Acquire);
        loop {
            if c & RETIRED == 0 {
                return None;
            }
            // Zero the count: edges of dependencies discovered while it ran become inert.
            match n.ctl.compare_exchange_weak(
                c,
                c & !REMAINING,
                Ordering::AcqRel,
                Ordering::Acquire,
            ) {
                Ok(_) => break,
                Err(cur) => c = cur,
            }
        }
        if c & RETIRED_CANCELLED == 0 {
            self.stale.fetch_add(1, Ordering::Relaxed);
        }
        let err = retired_error(c);
        let mut failed = NIL;
        self.retire_end(node, c, true, work, &mut failed);
        self.unpark_retired(node);
        self.end_failed(failed, work);
        Some(err)
    }

    pub(super) fn advance_key(&self, key: JobKey, work: &mut Work) -> Result<Version, Error> {
        self.advance_if(key, |_| true, work)
    }

    /// A submission met its identity's job cancelled for want of demand (SPEC D31): advances
    /// the key, so the submission starts a new job at the next generation — unless the key's
    /// state no longer passes `still` (another submission renewed it first). The caller then
    /// submits again.
    pub(super) fn renew(
        &self,
        key: JobKey,
        still: impl Fn(u64) -> bool,
        work: &mut Work,
    ) -> Result<(), Error> {
        match self.advance_if(key, still, work) {
            // Removed meanwhile: the caller's next try names it again (a new incarnation).
            Err(e) if e.reason() == crate::error::Reason::UnknownKey => Ok(()),
            r => r.map(|_| ()),
        }
    }

    /// [`advance_key`](Self::advance_key) if the key's state passes `cond`, under the lock.
    fn advance_if(
        &self,
        key: JobKey,
        cond: impl Fn(u64) -> bool,
        work: &mut Work,
    ) -> Result<Version, Error> {
        let ident = rules::ident(key);
        let (v, retired, k) = {
            let _g = self.lock();
            let k = self.lookup_locked(ident).ok_or(UNKNOWN_KEY)?;
            let slot = self.key(k);
            let v = slot.ver.load(Ordering::Acquire);
            if v == 0 {
                return Err(UNKNOWN_KEY);
            }
            // Acquire: as any reader of the key's state.
            if !cond(slot.state.load(Ordering::Acquire)) {
                return Ok(Version::unpack(v));
            }
            if gen_of_version(v) >= self.bounds.max_gen {
                return Err(EXHAUSTED);
            }
            // Release: pairs with the Acquire load of a submitter after its publication.
            slot.ver.store(v + 1, Ordering::Release);
            let live = self.detach(k, false);
            (
                v + 1,
                (
                    live.map(|n| self.mark_retired(n, RETIRED_SUPERSEDED)),
                    self.take_pinned_waiters(k),
                ),
                k,
            )
        };
        let (retired, pinned) = retired;
        let mut failed = NIL;
        // Waiters pinned to the version just superseded (no producer ever came).
        self.release_pinned(pinned, work, &mut failed);
        match retired {
            // Waiting or queued: this thread ends it, and its dependents follow the key.
            Some(r) if r.end.is_some() => self.finish(r, work, &mut failed),
            // Running (its completion will be stale) or on its way to the scheduler: its
            // dependents follow the key now, not when it completes (SPEC D33).
            Some(r) if r.flagged => self.follow(r.node, k, ident, false, work, &mut failed),
            // Cancelled for want of demand and still running (SPEC D31): dependents that
            // linked since follow the key, as a superseded job's do; it still ends `withdrawn`.
            Some(r) if self.is_doomed_unended(r.node) => {
                self.follow(r.node, k, ident, false, work, &mut failed)
            }
            _ => {}
        }
        self.end_failed(failed, work);
        Ok(Version::unpack(v))
    }

    /// Under the topology lock: removes key `ident` (slot `k`) and frees its slot; returns the
    /// retired producer and the waiter list taken.
    pub(super) fn remove_locked(&self, ident: u64, k: KeyRef) -> (Option<Retired>, u32) {
        let slot = self.key(k);
        self.unindex_key(ident, k);
        // Release: as in `advance_key`.
        slot.ver.store(0, Ordering::Release);
        let live = self.detach(k, true);
        let waiters = slot.waiters.swap(NIL, Ordering::Relaxed);
        self.release_key_slot(k);
        (live.map(|n| self.mark_retired(n, RETIRED_REMOVED)), waiters)
    }

    pub(super) fn remove_key(&self, key: JobKey, work: &mut Work) -> Result<(), Error> {
        let ident = rules::ident(key);
        let (retired, waiters) = {
            let _g = self.lock();
            let k = self.lookup_locked(ident).ok_or(UNKNOWN_KEY)?;
            let taken = self.remove_locked(ident, k);
            self.maybe_compact();
            taken
        };
        let mut failed = NIL;
        if let Some(r) = retired {
            self.finish(r, work, &mut failed);
        }
        self.fail_waiters(waiters, work, &mut failed);
        self.end_failed(failed, work);
        Ok(())
    }

    /// Removes every key. Every producer is flagged before any is ended, so no outcome
    /// depends on the order of the table.
    pub(super) fn reset_keys(&self, work: &mut Work) {
        let mut taken = Vec::new();
        {
            let _g = self.lock();
            self.for_each_key(|ident, k| taken.push(self.remove_locked(ident, k)));
            self.maybe_compact();
        }
        let mut failed = NIL;
        for &(r, _) in &taken {
            if let Some(r) = r {
                self.finish(r, work, &mut failed);
            }
        }
        for &(_, waiters) in &taken {
            self.fail_waiters(waiters, work, &mut failed);
        }
        self.end_failed(failed, work);
    }

    pub(super) fn key_version(&self, key: JobKey) -> Option<Version> {
        let k = self.lookup(rules::ident(key))?;
        // Acquire: pairs with the version's Release stores.
        let v = self.key(k).ver.load(Ordering::Acquire);
        // A slot freed since the lookup: the key was removed.
        if v == 0 || !self.key_valid(k) {
            return None;
        }
        Some(Version::unpack(v))
    }

    pub(super) fn version_of_node(&self, node: NodeRef) -> Option<(JobKey, Version)> {
        let n = self.nodes.get(node.idx)?;
        // Acquire: pairs with the release sequence of `ctl`, after which `ver` and the info
        // written before the submitter gave up its hold are visible.
        if gen_of(n.ctl.load(Ordering::Acquire)) != node.gen {
            return None;
        }
        // SAFETY: written before publication; read-only until the slot is collected, which
        // needs the job to end, and a running job's owner is the caller.
        let key = n.info.with(|p| unsafe { (*p).job });
        Some((key, Version::unpack(n.ver.load(Ordering::Relaxed))))
    }

    pub(super) fn is_witness_current(&self, w: &Witness) -> bool {
        let Some(k) = self.lookup(rules::ident(w.key)) else {
            return false;
        };
        // Acquire: pairs with the version's Release stores.
        if self.key(k).ver.load(Ordering::Acquire) != w.version.packed() || !self.key_valid(k) {
            return false;
        }
        match self.nodes.get(w.node.idx) {
            Some(n) => {
                // Acquire: pairs with the CAS of `mark_retired`.
                let c = n.ctl.load(Ordering::Acquire);
                !(gen_of(c) == w.node.gen && c & RETIRED != 0)
            }
            None => false,
        }
    }
}
