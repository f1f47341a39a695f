//! Demand-counted cancellation on the mutex baseline graph (SPEC D31): claims, detachment,
//! the cancellation of a job nobody demands any more, the cascade upstream, and the freeing
//! of ended jobs without claims. The semantics are the two engines' shared ones
//! (`d31-semantics`); this engine is the differential oracle, so it follows them literally.

use super::{MKey, NodeRef, St, State, Work};
use crate::graph::rules::WITHDRAWN;
use crate::graph::JobOutcome;

impl State {
    /// Whether the job on `q` (not ended) is demanded (SPEC D31): a claim, detached, or a
    /// dependent that has not ended with a pending edge on it. Its lists hold exactly its
    /// pending edges (the admission list is emptied at admission, both at the end), and an
    /// edge whose dependent ended, or whose slot moved on, is inert: the same test as D30's
    /// `pending_max`.
    pub(super) fn demanded(&self, q: NodeRef) -> bool {
        let n = &self.nodes[q.idx as usize];
        n.claims > 0
            || n.detached
            || n.done
                .iter()
                .chain(n.admit.iter())
                .any(|e| self.slot(e.0).is_some_and(|t| t.active))
    }

    /// Cancels the job on `q` if it has not ended, is not retired already and nobody demands
    /// it; never once the graph is closed or shut down (the shutdown rules end jobs then).
    /// `true` if this call cancelled it.
    pub(super) fn withdraw_if_undemanded(&mut self, q: NodeRef, work: &mut Work) -> bool {
        if self.shut || self.closed {
            return false;
        }
        let Some(n) = self.slot(q) else {
            return false;
        };
        if matches!(n.st, St::Free | St::Done) || n.retired.is_some() {
            return false;
        }
        if self.demanded(q) {
            return false;
        }
        self.withdraw(q, work)
    }

    /// Cancels the job on `q` (`cancelled / withdrawn`). The flag is the `retired` error the
    /// key operations use, so `start`, `complete`, `signalled` and the witness treat it as
    /// they treat a superseded job; unlike those, its end goes through `end_one` and so is
    /// published in its key like a failure (late linkers see it, admitted or not).
    fn withdraw(&mut self, q: NodeRef, work: &mut Work) -> bool {
        let Some(n) = self.node(q) else { return false };
        if n.st == St::Done || n.retired.is_some() {
            // The first retirement wins: a superseded or removed job keeps its own end.
            return false;
        }
        n.retired = Some(WITHDRAWN);
        let st = n.st;
        if st == St::Waiting {
            // Gates counted from now on find nothing to count.
            n.remaining = 0;
        }
        let mut failed = Vec::new();
        match st {
            St::Waiting => {
                self.waiting -= 1;
                self.end_one(q, JobOutcome::Failed(WITHDRAWN), false, work, &mut failed);
                // Its edges parked on keys without a producer go with it.
                self.unpark(q);
            }
            St::Queued => {
                self.ready -= 1;
                self.end_one(q, JobOutcome::Failed(WITHDRAWN), true, work, &mut failed);
                // The caller withdraws its scheduler request (returns the permit); an executor
                // that gets the payload first finds it ended (`start` refuses).
                work.withdrawn.push(q);
            }
            // Ready (on its way to the scheduler), running, or completed and held by gates it
            // discovered: flagged only; its end (at completion) is `withdrawn`.
            _ => {}
        }
        self.end_failed(failed, work);
        true
    }

    /// Gives the slot of an ended job without claims back, as the last `take_outcome` does:
    /// generation bumped, or retired (never allocated again) at the last generation.
    pub(super) fn free_slot(&mut self, idx: u32) {
        let n = &mut self.nodes[idx as usize];
        debug_assert!(n.st == St::Done && n.claims == 0);
        n.st = St::Free;
        n.deps.clear();
        if let Some(g) = NodeRef::next_gen(n.gen) {
            n.gen = g;
            self.free.push(idx);
        }
    }

    /// The end of every operation that may have ended jobs: each job ended in it is freed if
    /// it has no claim, and each producer it was pending on that it leaves without demand is
    /// cancelled, whose end is swept in turn (a work list: no recursion, however long the
    /// chain). Deferred to here, not done inside `end_one`, because callers still read an
    /// ended node (`unpark` reads its dependency keys) after ending it.
    pub(super) fn sweep(&mut self, work: &mut Work) {
        while let Some(x) = self.ended.pop() {
            // Before the free: `producers` reads its dependency keys and matches its edges
            // by generation. After a shutdown no demand is cancelled, so there is nothing to
            // look for.
            let producers = if self.shut || self.closed {
                Vec::new()
            } else {
                self.producers(x)
            };
            let n = &self.nodes[x.idx as usize];
            if n.gen == x.gen && n.st == St::Done && n.claims == 0 {
                self.free_slot(x.idx);
            }
            for q in producers {
                self.withdraw_if_undemanded(q, work);
            }
        }
    }

    /// Whether the key `ident` names a job cancelled by demand: ended `withdrawn`, or
    /// flagged and still on its way or running. A submission of its identity advances the
    /// key instead of joining it or being refused `duplicate-key`.
    pub(super) fn names_withdrawn(&self, ident: u64) -> bool {
        match self.keys.get(&ident) {
            Some(MKey::Live(p)) => self.nodes[p.idx as usize].retired == Some(WITHDRAWN),
            Some(MKey::Done { outcome, .. }) => crate::graph::rules::is_cancellation(outcome),
            _ => false,
        }
    }

    /// Whether `advance` would move some dependent of the key's live producer `p` onto the
    /// key's waiter list (the condition `follow` relinks an edge on), so that the next job
    /// published on the key adopts it: then a submission there needs the cycle check a key
    /// with waiters gets.
    pub(super) fn has_followers(&self, p: NodeRef) -> bool {
        let n = &self.nodes[p.idx as usize];
        let admit: &[super::Edge] = if n.admit_sealed.is_some() {
            &[]
        } else {
            &n.admit
        };
        admit.iter().chain(n.done.iter()).any(|&(t, _, pinned)| {
            !pinned
                && self
                    .slot(t)
                    .is_some_and(|tn| tn.st != St::Free && tn.remaining > 0)
        })
    }
}
