//! Demand on the lock-free graph (SPEC D31): handles give their claims back, and a job that
//! nothing wants any more is cancelled, upstream transitively.
//!
//! A job's demanders are its handles (the count in its claim word), a detach (a bit there)
//! and its pending dependents (not ended, with an edge on one of its unsealed lists: the
//! demanders the D30 urgency walk already finds). Two events can take the last demand:
//!
//! - the last handle goes while the job has not ended (`release_claim`);
//! - a dependent ends without having run (failed, cancelled, superseded, removed, refused,
//!   shut down) while its producer still waits for it (`demand_departs`). A dependent that
//!   ran had every gate counted: none of its edges is pending any more.
//!
//! Both decide under the topology lock: the count is zero and the job not detached, a walk of
//! its lists finds no active dependent, and one CAS sets `C_DOOMED` in its claim word; then
//! the job is flagged `RETIRED_CANCELLED` as `advance` flags a superseded one (`mark_retired`).
//! A waiting or queued job is ended by this operation (`withdrawn`, which publishes the end in
//! its key and seals its lists as a cancellation); a running one (or one on its way to the
//! scheduler) is told through its flag and ends `withdrawn` at its completion.
//!
//! Races, and why each is consistent:
//!
//! - A joiner (a submission of the same identity, or a hook's join) adds a claim by CAS while
//!   another handle holds the job; at a count of zero it joins under the topology lock, after
//!   the decision: it joins a job that stays, or finds `C_DOOMED` and starts a new job at the
//!   key's next generation. It never joins a cancelled job.
//! - A dependent linking without the lock pushes its edge onto a list the walk has already
//!   passed: the cancellation's seal then releases that edge (or, pushed after the seal, the
//!   linker reads the seal or the key's end) as on a cancelled producer, and the dependent
//!   fails `dependency-cancelled`. The cancellation linearises at the `C_DOOMED` CAS, before
//!   the link.
//! - The job ending meanwhile (its completion) wins the count word first: `mark_retired`
//!   leaves a completed job alone, and the end keeps its own outcome.
//!
//! After [`Graph::shutdown`](crate::graph::Graph::shutdown) nothing is cancelled for want of
//! demand: every job ends by the shutdown's rules.
//!
//! A cascade is iterative: an operation keeps the jobs it must end on an intrusive list in
//! its `Work` (through the nodes' `next`, which the ending thread owns), and ends them one by
//! one; each end may add its own producers. Nothing allocates.

use super::*;
use crate::graph::rules::STALE;

/// Queued jobs an operation ended (SPEC D31): a few inline, more spill to the heap (one
/// operation ends more than eight queued jobs only in a wide cancellation).
#[derive(Debug, Default)]
pub struct Withdrawn {
    inline: arrayvec::ArrayVec<NodeRef, 8>,
    spill: Vec<NodeRef>,
}

impl Withdrawn {
    pub(super) fn push(&mut self, n: NodeRef) {
        if self.inline.try_push(n).is_err() {
            self.spill.push(n);
        }
    }

    pub(super) fn pop(&mut self) -> Option<NodeRef> {
        self.spill.pop().or_else(|| self.inline.pop())
    }
}

impl LockFreeGraph {
    /// Gives back one handle's claim (SPEC D31); see [`GraphEngine::release`].
    pub(super) fn release_claim(
        &self,
        node: NodeRef,
        detach: bool,
        work: &mut Work,
    ) -> Result<bool, Error> {
        let n = self.nodes.get(node.idx).ok_or(STALE)?;
        let mut guard = None;
        // Relaxed: the CAS below decides; its AcqRel orders what matters.
        let mut c = n.claims.load(Ordering::Relaxed);
        let left = loop {
            if gen_of(c) != node.gen || c & C_COUNT == 0 {
                return Err(STALE);
            }
            let last_live = c & C_COUNT == 1 && c & C_ENDED == 0;
            if last_live && !detach && guard.is_none() {
                // The last handle of a job that has not ended: decide under the lock, where a
                // joiner of a job no handle holds joins (see the module docs).
                guard = Some(self.lock());
                c = n.claims.load(Ordering::Relaxed);
                continue;
            }
            let new = (c - 1) | if detach { C_DETACHED } else { 0 };
            // AcqRel: the claims' RMWs form one release sequence, so whoever frees the slot
            // sees every other holder's reads of the outcome before it.
            match n
                .claims
                .compare_exchange_weak(c, new, Ordering::AcqRel, Ordering::Relaxed)
            {
                Ok(_) => break new,
                Err(cur) => c = cur,
            }
        };
        if left & C_COUNT != 0 {
            return Ok(false);
        }
        if left & C_ENDED != 0 {
            // The job ended and this was its last handle: the slot is this thread's.
            drop(guard);
            self.free_slot(node);
            return Ok(false);
        }
        let Some(guard) = guard else {
            // Detached: kept for good.
            return Ok(false);
        };
        let doomed = self.doom_locked(node, work);
        drop(guard);
        self.drain_doomed(work);
        Ok(doomed)
    }

    /// Under the topology lock: cancels the job on `q` if nothing demands it (SPEC D31). A
    /// waiting or queued job goes onto `work.doomed`, for this thread to end; a running one is
    /// flagged. Whether it cancelled.
    fn doom_locked(&self, q: NodeRef, work: &mut Work) -> bool {
        if self.shut.load(Ordering::Relaxed) || self.is_closed() {
            return false;
        }
        let n = self.node(q.idx);
        // Acquire: pairs with the RMWs of the claims' release sequence.
        let c = n.claims.load(Ordering::Acquire);
        if gen_of(c) != q.gen || c & (C_COUNT | C_ENDED | C_DETACHED | C_DOOMED) != 0 {
            return false;
        }
        // Acquire: the state as `outcome` reads it; an ending job keeps its own outcome.
        let st = n.state.load(Ordering::Acquire);
        if gen_of(st) != q.gen || low_of(st) == S_DONE || low_of(st) == S_FREE {
            return false;
        }
        if low_of(st) == S_ENDING {
            // Ending now keeps its own outcome; only a completed job that waits for gates it
            // discovered while it ran (its count still holds them) is flagged, and ends
            // `withdrawn` when they are counted.
            // Relaxed: decides nothing but this check; `mark_retired` re-reads it by CAS.
            let c = n.ctl.load(Ordering::Relaxed);
            if c & RUNNING == 0 || c & REMAINING == 0 || c & RETIRED != 0 {
                return false;
            }
        }
        if self.has_pending_dependent(q) {
            return false;
        }
        // The linearisation point: a joiner that comes later (under this lock) sees it.
        // Relaxed: ordered by the lock for joiners; an end that sets `C_ENDED` first makes it
        // fail.
        if n.claims
            .compare_exchange(c, c | C_DOOMED, Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return false;
        }
        let r = self.mark_retired(q, RETIRED_CANCELLED);
        if let Some(admitted) = r.end {
            let list = if admitted {
                &mut work.doomed_queued
            } else {
                &mut work.doomed
            };
            n.next.store(*list, Ordering::Relaxed);
            *list = q.idx;
        }
        r.flagged
    }

    /// Under the topology lock: whether a dependent that has not ended has a pending edge on
    /// `q` (one of its unsealed lists).
    fn has_pending_dependent(&self, q: NodeRef) -> bool {
        self.walk_until(q, |t| matches!(self.urgency(t), Some((_, _, true))))
    }

    /// `x` ended (SPEC D31): if it ended without running, the producers it was still waiting
    /// for lose it as a demander, and those left with none are cancelled.
    pub(super) fn demand_departs(&self, x: NodeRef, work: &mut Work) {
        let n = self.node(x.idx);
        // Relaxed: written by this operation's owner of the node (its end), or before.
        let c = n.ctl.load(Ordering::Relaxed);
        if c & RUNNING != 0 || self.is_closed() {
            return;
        }
        // Acquire: pairs with the count's Release store (submit, discover).
        if n.dep_count.load(Ordering::Acquire) == 0 {
            return;
        }
        let mut producers = urgency::Producers::new();
        let _g = self.lock();
        self.producers(x, &mut producers);
        for &q in producers.as_slice() {
            self.doom_locked(q, work);
        }
    }

    /// Ends the jobs this operation cancelled (`work.doomed`), and what their ends cancel in
    /// turn.
    #[inline]
    pub(super) fn drain_doomed(&self, work: &mut Work) {
        // The common case, nothing doomed: two compares inlined into the caller.
        if work.doomed != NIL || work.doomed_queued != NIL {
            self.drain_doomed_lists(work);
        }
    }

    #[inline(never)]
    fn drain_doomed_lists(&self, work: &mut Work) {
        loop {
            let admitted = work.doomed_queued != NIL;
            let list = if admitted {
                &mut work.doomed_queued
            } else {
                &mut work.doomed
            };
            let idx = *list;
            if idx == NIL {
                return;
            }
            let n = self.node(idx);
            *list = n.next.load(Ordering::Relaxed);
            let gen = gen_of(n.ctl.load(Ordering::Relaxed));
            let node = NodeRef { idx, gen };
            if admitted {
                work.withdrawn.push(node);
            }
            let mut failed = NIL;
            self.retire_end(node, RETIRED_CANCELLED, admitted, work, &mut failed);
            if !admitted {
                self.unpark_retired(node);
            }
            self.end_failed(failed, work);
        }
    }

    /// Whether the job on `node` was cancelled for want of demand and has not ended.
    pub(super) fn is_doomed_unended(&self, node: NodeRef) -> bool {
        let n = self.node(node.idx);
        // Acquire: as `is_signalled`.
        let c = n.ctl.load(Ordering::Acquire);
        let st = n.state.load(Ordering::Acquire);
        gen_of(c) == node.gen
            && c & RETIRED == RETIRED_CANCELLED
            && gen_of(st) == node.gen
            && low_of(st) != S_DONE
            && low_of(st) != S_FREE
    }

    /// Whether the started job on `node` is told to stop (SPEC D20, D24, D31).
    pub(super) fn is_signalled(&self, node: NodeRef) -> bool {
        self.nodes.get(node.idx).is_some_and(|n| {
            // Acquire: pairs with the CAS of `mark_retired`.
            let c = n.ctl.load(Ordering::Acquire);
            gen_of(c) == node.gen && c & RETIRED != 0
        })
    }
}
