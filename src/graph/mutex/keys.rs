//! Key versions on the mutex baseline graph: `advance`, `remove`, `reset`, stale completions
//! and witnesses (SPEC D01, D20–D24), with the lock-free engine's semantics and order.

use super::{Edge, MKey, NodeRef, St, State, Why, Work};
use crate::error::Error;
use crate::graph::keys::{
    fresh_incarnation, gen_of_version, CANCELLED_REMOVED, EXHAUSTED, SUPERSEDED, UNKNOWN_KEY,
};
use crate::graph::rules::WITHDRAWN;
use crate::graph::{JobOutcome, Version, Witness};

/// Waiter edges of a key: dependent and gate.
type Waiters = Vec<Edge>;

/// A producer a key operation retired; `end`: `Some(admitted)` when it is ended now.
#[derive(Clone, Copy)]
struct Retired {
    node: NodeRef,
    error: Error,
    end: Option<bool>,
    /// This operation flagged it (it was live and not retired yet).
    flagged: bool,
}

impl State {
    /// The key's version, creating an incarnation if it has none (SPEC D01).
    pub(super) fn ensure_version(&mut self, ident: u64) -> u64 {
        let v = self.vers.entry(ident).or_insert(0);
        if *v == 0 {
            *v = fresh_incarnation();
        }
        *v
    }

    /// Moves the key off its producer (waiters stay unless `remove`); returns the producer.
    fn detach(&mut self, ident: u64, remove: bool) -> (Option<NodeRef>, Waiters) {
        let Some(k) = self.keys.get_mut(&ident) else {
            return (None, Vec::new());
        };
        match k {
            MKey::Waiting(_) if !remove => (None, Vec::new()),
            _ => match std::mem::replace(k, MKey::None) {
                MKey::Live(p) => (Some(p), Vec::new()),
                MKey::Waiting(list) => (None, list),
                _ => (None, Vec::new()),
            },
        }
    }

    /// Flags a producer retired; a waiting or queued one is ended by the caller (`finish`).
    fn mark_retired(&mut self, node: NodeRef, error: Error) -> Retired {
        let mut r = Retired {
            node,
            error,
            end: None,
            flagged: false,
        };
        let Some(n) = self.node(node) else { return r };
        if n.retired.is_some() {
            return r;
        }
        n.retired = Some(error);
        r.flagged = true;
        match n.st {
            St::Waiting => {
                n.remaining = 0;
                self.waiting -= 1;
                r.end = Some(false);
            }
            St::Queued => {
                self.ready -= 1;
                r.end = Some(true);
            }
            _ => {}
        }
        r
    }

    fn finish(&mut self, r: Retired, work: &mut Work, failed: &mut Vec<NodeRef>) {
        if let Some(admitted) = r.end {
            self.retire_end(r.node, r.error, admitted, work, failed);
            if !admitted {
                self.unpark(r.node);
            }
        }
    }

    /// Frees the edges a retired node still has parked on keys without a producer.
    pub(super) fn unpark(&mut self, me: NodeRef) {
        let deps = self.nodes[me.idx as usize].deps.clone();
        for ident in deps {
            if let Some(MKey::Waiting(list)) = self.keys.get_mut(&ident) {
                let before = list.len();
                list.retain(|(t, _, _)| *t != me);
                self.edges_used -= (before - list.len()) as u32;
            }
        }
    }

    /// Ends a retired node with `error` and publishes nothing in its key (SPEC D21): a
    /// removed node's dependents see no gate hold; a superseded one's follow the key (D33).
    pub(super) fn retire_end(
        &mut self,
        node: NodeRef,
        error: crate::error::Error,
        admitted: bool,
        work: &mut Work,
        failed: &mut Vec<NodeRef>,
    ) {
        self.depart(node, work);
        // Swept at the end of the operation (SPEC D31), as `end_one`'s ends.
        self.ended.push(node);
        let n = &mut self.nodes[node.idx as usize];
        n.outcome = Some(JobOutcome::Failed(error));
        n.st = St::Done;
        if error == SUPERSEDED {
            self.follow(node, admitted, work, failed);
            return;
        }
        let admit = if admitted {
            Vec::new()
        } else {
            n.admit_sealed = Some(false);
            std::mem::take(&mut n.admit)
        };
        let done = std::mem::take(&mut n.done);
        for list in [admit, done] {
            for (target, _, _) in list.into_iter().rev() {
                self.edges_used -= 1;
                self.release(target, false, work, failed);
            }
        }
    }

    /// Takes the lists of `node`, superseded by `advance` (SPEC D33), in the lock-free
    /// engine's order: its admission list unless `admitted` or sealed, then its end list,
    /// newest edge first. A pinned edge counts as on a producer that ended `superseded`
    /// unadmitted; any other edge of a dependent still counting is linked again on the key.
    fn follow(
        &mut self,
        node: NodeRef,
        admitted: bool,
        work: &mut Work,
        failed: &mut Vec<NodeRef>,
    ) {
        let n = &mut self.nodes[node.idx as usize];
        let ident = n.key;
        let admit = if admitted || n.admit_sealed.is_some() {
            Vec::new()
        } else {
            std::mem::take(&mut n.admit)
        };
        let done = std::mem::take(&mut n.done);
        for list in [admit, done] {
            for (target, gate, pinned) in list.into_iter().rev() {
                if pinned {
                    self.edges_used -= 1;
                    let (met, why) = Why::pin_superseded(gate);
                    self.release_with(target, met, why, work, failed);
                } else if self.node(target).is_some_and(|t| t.remaining > 0) {
                    if let Some((met, why)) = self.link_edge(target, ident, gate, None) {
                        self.edges_used -= 1;
                        self.release_with(target, met, why, work, failed);
                    }
                } else {
                    // The dependent ended already: the edge is inert.
                    self.edges_used -= 1;
                }
            }
        }
    }

    /// Takes the waiter edges of key `ident` pinned to a version `advance` just superseded,
    /// newest first (the lock-free engine's stack order).
    fn take_pinned_waiters(&mut self, ident: u64) -> Waiters {
        let Some(MKey::Waiting(list)) = self.keys.get_mut(&ident) else {
            return Vec::new();
        };
        let mut pinned = Vec::new();
        let mut kept = Vec::new();
        for e in std::mem::take(list).into_iter().rev() {
            if e.2 {
                pinned.push(e);
            } else {
                kept.push(e);
            }
        }
        kept.reverse();
        *list = kept;
        pinned
    }

    fn fail_waiters(&mut self, list: Waiters, work: &mut Work, failed: &mut Vec<NodeRef>) {
        // Newest first, as the lock-free engine's waiter stack.
        for (target, _, _) in list.into_iter().rev() {
            self.edges_used -= 1;
            self.release_with(target, false, Why::Removed, work, failed);
        }
    }

    /// A completion of a retired job is stale (SPEC D21). `None`: not retired. A job
    /// cancelled by demand (SPEC D31) is refused `withdrawn` too, but is no stale completion
    /// and ends like a failure (published in its key, its dependents released per gate).
    pub(super) fn refuse_stale(&mut self, node: NodeRef, work: &mut Work) -> Option<Error> {
        let n = &mut self.nodes[node.idx as usize];
        let err = n.retired?;
        // Gates it discovered and still waits on count no more: it ends now.
        n.remaining = 0;
        let mut failed = Vec::new();
        if err == WITHDRAWN {
            self.end_one(node, JobOutcome::Failed(WITHDRAWN), true, work, &mut failed);
        } else {
            self.stale += 1;
            self.retire_end(node, err, true, work, &mut failed);
        }
        self.unpark(node);
        self.end_failed(failed, work);
        Some(err)
    }

    pub(super) fn advance(
        &mut self,
        ident: u64,
        max_gen: u32,
        work: &mut Work,
    ) -> Result<Version, Error> {
        let v = self.vers.get(&ident).copied().unwrap_or(0);
        if v == 0 {
            return Err(UNKNOWN_KEY);
        }
        if gen_of_version(v) >= max_gen {
            return Err(EXHAUSTED);
        }
        self.vers.insert(ident, v + 1);
        let (live, _) = self.detach(ident, false);
        // A live producer already cancelled by demand (SPEC D31), flagged and still running:
        // it keeps its `withdrawn` end, but its dependents (linked after the cancellation)
        // follow the key as a superseded producer's do.
        let withdrawn = live.is_some_and(|p| {
            let n = &self.nodes[p.idx as usize];
            n.retired == Some(WITHDRAWN) && n.st != St::Done
        });
        let retired = live.map(|p| self.mark_retired(p, SUPERSEDED));
        let pinned = self.take_pinned_waiters(ident);
        let mut failed = Vec::new();
        // Waiters pinned to the version just superseded (no producer ever came).
        for (target, gate, _) in pinned {
            self.edges_used -= 1;
            let (met, why) = Why::pin_superseded(gate);
            self.release_with(target, met, why, work, &mut failed);
        }
        match retired {
            Some(r) if r.end.is_some() => self.finish(r, work, &mut failed),
            // Running or on its way to the scheduler: its dependents follow the key now.
            Some(r) if r.flagged || withdrawn => self.follow(r.node, false, work, &mut failed),
            _ => {}
        }
        self.end_failed(failed, work);
        Ok(Version::unpack(v + 1))
    }

    fn remove_one(&mut self, ident: u64) -> Option<(Option<Retired>, Waiters)> {
        if self.vers.get(&ident).copied().unwrap_or(0) == 0 {
            return None;
        }
        self.vers.remove(&ident);
        let (live, waiters) = self.detach(ident, true);
        // The key's entry goes: its room serves another key (SPEC D24).
        self.keys.remove(&ident);
        Some((
            live.map(|p| self.mark_retired(p, CANCELLED_REMOVED)),
            waiters,
        ))
    }

    pub(super) fn remove(&mut self, ident: u64, work: &mut Work) -> Result<(), Error> {
        let (r, waiters) = self.remove_one(ident).ok_or(UNKNOWN_KEY)?;
        let mut failed = Vec::new();
        if let Some(r) = r {
            self.finish(r, work, &mut failed);
        }
        self.fail_waiters(waiters, work, &mut failed);
        self.end_failed(failed, work);
        Ok(())
    }

    /// Every producer is flagged before any is ended, as on the lock-free engine.
    pub(super) fn reset(&mut self, work: &mut Work) {
        let idents: Vec<u64> = self.vers.keys().copied().collect();
        let taken: Vec<_> = idents
            .into_iter()
            .filter_map(|i| self.remove_one(i))
            .collect();
        let mut failed = Vec::new();
        let mut lists = Vec::new();
        for (r, waiters) in taken {
            if let Some(r) = r {
                self.finish(r, work, &mut failed);
            }
            lists.push(waiters);
        }
        for waiters in lists {
            self.fail_waiters(waiters, work, &mut failed);
        }
        self.end_failed(failed, work);
    }

    pub(super) fn version(&self, ident: u64) -> Option<Version> {
        match self.vers.get(&ident).copied().unwrap_or(0) {
            0 => None,
            v => Some(Version::unpack(v)),
        }
    }

    pub(super) fn witness_current(&mut self, w: &Witness) -> bool {
        let ident = crate::graph::rules::ident(w.key);
        if self.vers.get(&ident).copied().unwrap_or(0) != w.version.packed() {
            return false;
        }
        !matches!(self.node(w.node), Some(n) if n.retired.is_some())
    }
}
