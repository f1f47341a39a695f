//! The mutex baseline graph: the whole graph behind one `std::sync::Mutex`, deciding every gate
//! through the same rule functions as the lock-free engine. It is the comparison of the graph
//! benches and the oracle of the differential test.

use super::rules::{
    self, Pin, Urgency, CYCLE, DEPENDENCY_CANCELLED, DEPENDENCY_FAILED, DUPLICATE_KEY, SHUTDOWN,
    STALE, WITHDRAWN,
};
use super::{
    Admission, Bounds, Gate, GraphEngine, JobKey, JobOutcome, JobSpec, NodeRef, Occupancy, Ready,
};
use crate::error::Error;
use crate::ids::{ClassId, Priority, TenantId};
use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

#[cfg(all(test, not(loom)))]
mod d31_tests;
mod demand;
mod keys;

/// A dependent edge: the dependent, its gate, and whether it is pinned to the producer's
/// version (SPEC D33).
type Edge = (NodeRef, Gate, bool);

/// Why a gate was counted as it was: its producer's event, a removed key, a pinned
/// version that `advance` superseded, or a producer that was cancelled (they set the
/// dependent's failure, SPEC D11, D33, D31).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Why {
    Gate,
    Removed,
    Superseded,
    /// The producer's outcome is a cancellation (`rules::is_cancellation`): a failed gate
    /// fails the dependent `dependency-cancelled`; a met one (`Sequential`, or `OnAdmission`
    /// on an admitted producer) is just met.
    Cancelled,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum St {
    Free,
    Waiting,
    Ready,
    Queued,
    Running,
    /// Completed, waiting for gates discovered while it ran (SPEC D14).
    Completing,
    Done,
}

#[derive(Debug)]
struct MNode {
    gen: u32,
    st: St,
    remaining: u32,
    failed: bool,
    tenant: TenantId,
    class: ClassId,
    priority: Priority,
    job_key: JobKey,
    key: u64,
    deps: Vec<u64>,
    admit: Vec<Edge>,
    admit_sealed: Option<bool>,
    done: Vec<Edge>,
    outcome: Option<JobOutcome>,
    body: Option<JobOutcome>,
    /// The key version it was published at (SPEC D01).
    ver: u64,
    /// Superseded or removed (SPEC D20, D24): the error it ends with.
    retired: Option<Error>,
    /// A gate failed because a key it waited on was removed (outcome `removed`).
    waited_removed: bool,
    /// A gate failed because the version it was pinned to was superseded (`superseded`).
    waited_superseded: bool,
    /// A gate failed because its producer was cancelled (`dependency-cancelled`, SPEC D31).
    waited_cancelled: bool,
    /// Handles that have not given their claim back yet: the submitter's and one per joiner
    /// (SPEC D02, D03, D31). It may reach 0 before the job ends (dependents or `detached`
    /// keep it); an ended job is freed when it is 0.
    claims: u32,
    /// Detached by a release (SPEC D31): never cancelled for want of demand.
    detached: bool,
    /// Its own urgency, raised by joiners (SPEC D30).
    base: Urgency,
    /// Its effective urgency: `base` and that of every pending demander (SPEC D30).
    eff: Urgency,
    /// Its own absolute deadline (what its permit carries).
    deadline: u64,
    /// Not ended: its pending edges make it a demander of their producers.
    active: bool,
}

#[derive(Debug)]
enum MKey {
    None,
    Waiting(Vec<Edge>),
    Live(NodeRef),
    /// Its producer ended: whether it had been admitted, and its outcome (a late linker's
    /// gate needs success, and whether it was a cancellation, SPEC D31; a resubmission
    /// whether it was `withdrawn`).
    Done {
        admitted: bool,
        outcome: JobOutcome,
    },
}

/// Node slots backed at build and kept by a shrink (at most the configured maximum): the
/// first step of the node store's growth.
const FIRST_NODES: u32 = 64;
/// The step in which edges are reported backed (see [`State::edges_backing`]).
const EDGE_SEGMENT: u32 = 64;
/// Keys the key maps are sized for at build and keep through a shrink.
const FIRST_KEYS: u32 = 64;

#[derive(Debug)]
struct State {
    /// The node store: backed only as far as use has reached (SPEC D51); it grows by one slot
    /// when the free list is empty, up to `max_nodes`, and a shrink truncates its free tail.
    nodes: Vec<MNode>,
    free: Vec<u32>,
    /// The node store's maximum (SPEC D05): past it, submissions are refused `Backpressured`.
    max_nodes: u32,
    /// Node slots backed at build, which a shrink keeps.
    first_nodes: u32,
    /// The generation a new slot starts at: the configured first generation, raised by a
    /// shrink to the highest generation a truncated slot reached, so that a stale handle of a
    /// truncated slot never names a slot grown again in its place.
    gen_floor: u32,
    edges_used: u32,
    /// The most edges in use since build or the last shrink (what is reported backed).
    edges_peak: u32,
    keys: HashMap<u64, MKey>,
    waiting: u32,
    ready: u32,
    running: u32,
    /// Shut down: submissions and discoveries are refused.
    shut: bool,
    /// Closed (the shutdown's first step, before anything ends): submissions are refused.
    closed: bool,
    /// Key versions (incarnation and generation; absent or 0: none).
    vers: HashMap<u64, u64>,
    /// Completions refused as stale (SPEC D21).
    stale: u64,
    /// Jobs ended by the current operation, not swept yet (`sweep`, SPEC D31).
    ended: Vec<NodeRef>,
}

impl MNode {
    /// A free slot at generation `gen`.
    fn free_at(gen: u32) -> Self {
        MNode {
            gen,
            st: St::Free,
            remaining: 0,
            failed: false,
            tenant: TenantId(0),
            class: ClassId(0),
            priority: 0,
            job_key: JobKey::new(0),
            key: 0,
            deps: Vec::new(),
            admit: Vec::new(),
            admit_sealed: None,
            done: Vec::new(),
            outcome: None,
            body: None,
            claims: 0,
            detached: false,
            ver: 0,
            retired: None,
            waited_removed: false,
            waited_superseded: false,
            waited_cancelled: false,
            base: Urgency {
                priority: 0,
                deadline: rules::NO_DEADLINE,
            },
            eff: Urgency {
                priority: 0,
                deadline: rules::NO_DEADLINE,
            },
            deadline: rules::NO_DEADLINE,
            active: false,
        }
    }
}

/// The graph's mutex twin (the oracle's).
#[doc(hidden)]
#[derive(Debug)]
pub struct MutexGraph {
    state: Mutex<State>,
    bounds: Bounds,
}

/// Ready jobs found by one operation.
#[derive(Debug, Default)]
pub struct Work {
    ready: Vec<Ready>,
    /// Jobs whose effective urgency changed (SPEC D30).
    resync: Vec<NodeRef>,
    /// Queued jobs cancelled before an executor started them (SPEC D31).
    withdrawn: Vec<NodeRef>,
}

impl super::sealed::Sealed for MutexGraph {}

impl MutexGraph {
    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Why {
    /// How a dependency pinned to a version `advance` superseded counts for `gate` (SPEC
    /// D33): met for `Sequential`, otherwise failed `superseded`.
    fn pin_superseded(gate: Gate) -> (bool, Why) {
        let met = rules::gate_met_superseded(gate);
        (met, if met { Why::Gate } else { Why::Superseded })
    }

    /// What an end with `outcome` means for its dependents' failed gates.
    fn of_end(outcome: &JobOutcome) -> Why {
        if rules::is_cancellation(outcome) {
            Why::Cancelled
        } else {
            Why::Gate
        }
    }
}

impl MNode {
    /// Records how one gate was counted (the count itself is the caller's).
    fn count_flags(&mut self, met: bool, why: Why) {
        self.failed |= !met;
        self.waited_removed |= why == Why::Removed;
        self.waited_superseded |= why == Why::Superseded;
        // Only a gate the cancellation failed: `Sequential` on a cancelled producer holds.
        self.waited_cancelled |= !met && why == Why::Cancelled;
    }
}

impl State {
    /// Adds a claim to the job on `node` (SPEC D02, D03): `Backpressured` if its claims are
    /// at their bound, `stale-handle` if every handle of the job has taken its outcome.
    fn join(
        &mut self,
        node: NodeRef,
        urgency: Urgency,
        work: &mut Work,
    ) -> Result<Admission<NodeRef>, Error> {
        let n = self.node(node).ok_or(STALE)?;
        if n.retired == Some(WITHDRAWN) {
            // A cancelled job is never joined (SPEC D31): ended or still running flagged.
            return Err(STALE);
        }
        Ok(match n.claims.checked_add(1) {
            Some(c) => {
                n.claims = c;
                // The joiner demands the job for as long as it lives (SPEC D30, D31).
                if n.active && urgency.exceeds(n.base) {
                    n.base = n.base.max(urgency);
                    self.refresh(node, work);
                }
                Admission::DedupeJoined(node)
            }
            None => Admission::Backpressured,
        })
    }

    /// The job `r` names, `None` when it is gone: its slot is free or at another generation,
    /// or lies past the backed store (truncated by a shrink, SPEC D51).
    fn node(&mut self, r: NodeRef) -> Option<&mut MNode> {
        self.nodes
            .get_mut(r.idx as usize)
            .filter(|n| n.gen == r.gen && n.st != St::Free)
    }

    /// The node at `r`'s slot if the slot is still at `r`'s generation (free or not), `None`
    /// when it moved on or is no longer backed. An edge may outlive its dependent's job: a
    /// dependent that ended leaves its edges inert on the producer until the producer ends,
    /// and its slot may be freed and truncated meanwhile.
    pub(super) fn slot(&self, r: NodeRef) -> Option<&MNode> {
        self.nodes.get(r.idx as usize).filter(|n| n.gen == r.gen)
    }

    /// Node slots a submission may still take: free ones and those not backed yet.
    fn room_nodes(&self) -> usize {
        self.free.len() + (self.max_nodes as usize - self.nodes.len())
    }

    /// Takes a free slot, backing a new one at the store's end when none is free (SPEC D51).
    /// The caller checked [`room_nodes`](Self::room_nodes).
    fn take_slot(&mut self) -> u32 {
        if let Some(idx) = self.free.pop() {
            return idx;
        }
        debug_assert!(self.nodes.len() < self.max_nodes as usize);
        let idx = self.nodes.len() as u32;
        self.nodes.push(MNode::free_at(self.gen_floor));
        idx
    }

    /// One more edge in use.
    fn edge_linked(&mut self) {
        self.edges_used += 1;
        self.edges_peak = self.edges_peak.max(self.edges_used);
    }

    /// Edge slots reported backed. This engine keeps edges in per-node and per-key lists, not
    /// in a store of slots: it reports the high-water mark of edges in use since build or the
    /// last shrink, in steps of [`EDGE_SEGMENT`] (at least one), as a store grown in segments
    /// would back them; at most the maximum.
    fn edges_backing(&self, max: u32) -> u32 {
        let steps = self.edges_peak.div_ceil(EDGE_SEGMENT).max(1);
        steps.saturating_mul(EDGE_SEGMENT).min(max)
    }

    /// Gives back the node store's free tail and the lists' spare capacity (SPEC D51). A slot
    /// is truncated only from the end, above the slots backed at build, and only if it is on
    /// the free list: a slot in use stays, and so does a retired one (its last generation was
    /// used; it stays counted as used and is never allocated again).
    fn shrink(&mut self, keys_kept: u32) {
        let len = self.nodes.len();
        let mut listed = vec![false; len];
        for &i in &self.free {
            listed[i as usize] = true;
        }
        let mut keep = len;
        while keep > self.first_nodes as usize && listed[keep - 1] {
            keep -= 1;
        }
        if keep < len {
            let floor = self.nodes[keep..].iter().map(|n| n.gen).max();
            self.gen_floor = self.gen_floor.max(floor.unwrap_or(0));
            self.free.retain(|&i| (i as usize) < keep);
            self.nodes.truncate(keep);
        }
        self.nodes.shrink_to_fit();
        self.free.shrink_to_fit();
        self.ended.shrink_to_fit();
        for n in &mut self.nodes {
            if n.st == St::Free {
                n.deps = Vec::new();
                n.admit = Vec::new();
                n.done = Vec::new();
            }
        }
        let keys = keys_kept as usize;
        self.keys.shrink_to(keys);
        self.vers.shrink_to(keys);
        self.edges_peak = self.edges_used;
    }

    /// Counts one gate of `target`; fires it when its count reaches zero.
    fn release(&mut self, target: NodeRef, met: bool, work: &mut Work, failed: &mut Vec<NodeRef>) {
        self.release_with(target, met, Why::Gate, work, failed);
    }

    /// As `release`; `why`: a removed key or a superseded pin sets the failure it ends with.
    fn release_with(
        &mut self,
        target: NodeRef,
        met: bool,
        why: Why,
        work: &mut Work,
        failed: &mut Vec<NodeRef>,
    ) {
        let Some(n) = self.node(target) else {
            return;
        };
        if n.remaining == 0 {
            return;
        }
        n.remaining -= 1;
        n.count_flags(met, why);
        if n.remaining == 0 {
            self.fire(target, work, failed);
        }
    }

    fn fire(&mut self, target: NodeRef, work: &mut Work, failed: &mut Vec<NodeRef>) {
        let n = &mut self.nodes[target.idx as usize];
        if n.failed || matches!(n.st, St::Running | St::Completing) {
            failed.push(target);
        } else {
            n.st = St::Ready;
            let item = Ready {
                node: target,
                key: n.job_key,
                tenant: n.tenant,
                class: n.class,
                priority: n.eff.priority,
                deadline: n.deadline,
            };
            self.waiting -= 1;
            self.ready += 1;
            work.ready.push(item);
        }
    }

    /// Releases one of a producer's lists; `why`: [`Why::of_end`] of its end (or `Gate`).
    fn release_list(
        &mut self,
        list: Vec<Edge>,
        ok: bool,
        why: Why,
        work: &mut Work,
        failed: &mut Vec<NodeRef>,
    ) {
        // Last linked first, as the lock-free engine's stacks.
        for (target, gate, _) in list.into_iter().rev() {
            self.edges_used -= 1;
            self.release_with(target, rules::gate_met(gate, ok), why, work, failed);
        }
    }

    fn end(&mut self, node: NodeRef, outcome: JobOutcome, admitted: bool, work: &mut Work) {
        let mut failed = Vec::new();
        self.end_one(node, outcome, admitted, work, &mut failed);
        self.end_failed(failed, work);
    }

    fn end_failed(&mut self, mut failed: Vec<NodeRef>, work: &mut Work) {
        while let Some(f) = failed.pop() {
            self.waiting -= 1;
            let n = &self.nodes[f.idx as usize];
            let ran = n.st == St::Completing;
            match (ran, n.retired) {
                (true, Some(WITHDRAWN)) => {
                    // A completed job held by gates it discovered, cancelled meanwhile (SPEC
                    // D31): it ends `withdrawn` whatever its body reported, published like a
                    // failure, and is not a stale completion.
                    self.end_one(f, JobOutcome::Failed(WITHDRAWN), true, work, &mut failed);
                    continue;
                }
                (true, Some(err)) => {
                    // A completed job held by gates it discovered, whose key moved on
                    // meanwhile: its result is stale (SPEC D21), as in the lock-free engine.
                    self.stale += 1;
                    self.retire_end(f, err, true, work, &mut failed);
                    continue;
                }
                _ => {}
            }
            // Precedence: removed > superseded (pin) > dependency-cancelled > dependency-failed
            // (SPEC D31 slots the cancellation in above a plain failed gate).
            let outcome = if n.waited_removed {
                JobOutcome::Failed(super::keys::REMOVED)
            } else if n.waited_superseded {
                JobOutcome::Failed(rules::PIN_SUPERSEDED)
            } else if n.waited_cancelled {
                JobOutcome::Failed(DEPENDENCY_CANCELLED)
            } else if n.failed {
                JobOutcome::Failed(DEPENDENCY_FAILED)
            } else {
                n.body.unwrap_or(JobOutcome::Failed(DEPENDENCY_FAILED))
            };
            self.end_one(f, outcome, ran, work, &mut failed);
        }
    }

    fn end_one(
        &mut self,
        node: NodeRef,
        outcome: JobOutcome,
        admitted: bool,
        work: &mut Work,
        failed: &mut Vec<NodeRef>,
    ) {
        self.depart(node, work);
        // Swept at the end of the operation: freed without claims, its producers checked.
        self.ended.push(node);
        let n = &mut self.nodes[node.idx as usize];
        n.outcome = Some(outcome);
        n.st = St::Done;
        let key = n.key;
        let admit = if admitted {
            Vec::new()
        } else {
            n.admit_sealed = Some(false);
            std::mem::take(&mut n.admit)
        };
        let done = std::mem::take(&mut n.done);
        // Only while the key still names this node: after `advance` or `remove` it names the
        // next generation (SPEC D20).
        if let Some(k) = self.keys.get_mut(&key) {
            if matches!(k, MKey::Live(p) if *p == node) {
                *k = MKey::Done { admitted, outcome };
            }
        }
        let why = Why::of_end(&outcome);
        self.release_list(admit, false, why, work, failed);
        self.release_list(done, outcome.is_success(), why, work, failed);
    }

    /// Whether the stores have room for `jobs` (nodes, edges, keys); claims the key entries.
    fn room_for(&mut self, jobs: &[JobSpec<'_>], bounds: &Bounds) -> bool {
        let edges: usize = jobs.iter().map(|j| j.deps.len()).sum();
        if self.room_nodes() < jobs.len()
            || self.edges_used as usize + edges > bounds.edges as usize
        {
            return false;
        }
        let cap = bounds.keys as usize;
        for j in jobs {
            for ident in core::iter::once(rules::ident(j.key))
                .chain(j.deps.iter().map(|d| rules::ident(d.key)))
            {
                if !self.keys.contains_key(&ident) {
                    if self.keys.len() >= cap {
                        return false;
                    }
                    self.keys.insert(ident, MKey::None);
                }
                self.ensure_version(ident);
            }
        }
        true
    }

    /// Sets up one checked job (room reserved) and links its edges, counting at once the gates
    /// of producers that have ended; `held` adds an atomic batch's count, given up by
    /// `seal_batch`. [`publish_one`](Self::publish_one) then publishes it.
    fn link_one(
        &mut self,
        spec: &JobSpec<'_>,
        deadline: u64,
        deps: Vec<u64>,
        held: bool,
    ) -> NodeRef {
        let own = rules::ident(spec.key);
        let idx = self.take_slot();
        let gen = self.nodes[idx as usize].gen;
        let me = NodeRef { idx, gen };
        {
            let n = &mut self.nodes[idx as usize];
            n.st = St::Waiting;
            n.remaining = spec.deps.len() as u32 + u32::from(held);
            n.failed = false;
            n.tenant = spec.tenant;
            n.class = spec.class;
            n.priority = spec.priority;
            n.key = own;
            n.job_key = spec.key;
            n.deps = deps;
            n.admit_sealed = None;
            n.outcome = None;
            n.retired = None;
            n.waited_removed = false;
            n.waited_superseded = false;
            n.waited_cancelled = false;
            n.claims = 1;
            n.detached = false;
            n.base = Urgency {
                priority: spec.priority,
                deadline,
            };
            n.eff = n.base;
            n.deadline = deadline;
            n.active = true;
        }
        self.waiting += 1;
        let mut immediate = Vec::new();
        for d in spec.deps {
            let pin = d.pin.map(super::Version::packed);
            match self.link_edge(me, rules::ident(d.key), d.gate, pin) {
                None => self.edge_linked(),
                Some(now) => immediate.push(now),
            }
        }
        {
            let n = &mut self.nodes[idx as usize];
            for (met, why) in immediate {
                n.remaining -= 1;
                n.count_flags(met, why);
            }
        }
        me
    }

    /// Links one dependent edge (`me`, `gate`, `pin`) on key `ident` (whose entry and version
    /// exist): onto its producer's list, or onto the key's waiter list if it has no producer.
    /// `Some((met, why))`: nothing was linked, the gate counts at once (its producer ended or
    /// was admitted, the pinned version is past, or the graph is shut down).
    fn link_edge(
        &mut self,
        me: NodeRef,
        ident: u64,
        gate: Gate,
        pin: Option<u64>,
    ) -> Option<(bool, Why)> {
        let current = self.vers.get(&ident).copied().unwrap_or(0);
        match rules::pin_state(pin, current) {
            Pin::Current => {}
            Pin::Superseded => return Some(Why::pin_superseded(gate)),
            Pin::Removed => return Some((false, Why::Removed)),
        }
        let edge = (me, gate, pin.is_some());
        let shut = self.shut;
        match self.keys.get_mut(&ident) {
            Some(MKey::Live(p)) => {
                let p = *p;
                let pn = &mut self.nodes[p.idx as usize];
                if rules::on_admission_list(gate) {
                    if let Some(ok) = pn.admit_sealed {
                        return Some((rules::gate_met(gate, ok), Why::Gate));
                    }
                    pn.admit.push(edge);
                } else {
                    pn.done.push(edge);
                }
                None
            }
            Some(MKey::Done { admitted, outcome }) => Some((
                rules::gate_met_after_end(gate, *admitted, outcome.is_success()),
                Why::of_end(outcome),
            )),
            // Shut down: no producer will come.
            _ if shut => Some((false, Why::Gate)),
            Some(MKey::Waiting(list)) => {
                list.push(edge);
                None
            }
            Some(k @ MKey::None) => {
                *k = MKey::Waiting(vec![edge]);
                None
            }
            None => {
                // Removed since: the key is named again (a new incarnation), as the lock-free
                // engine's link does.
                self.ensure_version(ident);
                self.keys.insert(ident, MKey::Waiting(vec![edge]));
                None
            }
        }
    }

    /// Publishes a linked job's key, adopting the key's waiters, and fires the job if every
    /// gate already holds (an atomic batch's jobs still hold their count here).
    fn publish_one(&mut self, me: NodeRef, work: &mut Work) {
        let idx = me.idx;
        let own = self.nodes[idx as usize].key;
        // The key version it runs at (SPEC D01).
        self.nodes[idx as usize].ver = self.ensure_version(own);
        if let Some(MKey::Waiting(list)) = self.keys.insert(own, MKey::Live(me)) {
            let n = &mut self.nodes[idx as usize];
            // Adopted in the lock-free engine's order: the first waiter is released first
            // among them, after the jobs that link later.
            for edge in list.into_iter().rev() {
                if rules::on_admission_list(edge.1) {
                    n.admit.push(edge);
                } else {
                    n.done.push(edge);
                }
            }
        }
        let mut failed = Vec::new();
        if self.nodes[idx as usize].remaining == 0 {
            self.fire(me, work, &mut failed);
        }
        self.end_failed(failed, work);
    }

    /// Whether `q`'s unreleased lists hold an edge of `x` (`x` then waits on `q`, SPEC D30).
    fn pending_on(&self, q: NodeRef, x: NodeRef) -> bool {
        let n = &self.nodes[q.idx as usize];
        n.done.iter().chain(n.admit.iter()).any(|e| e.0 == x)
    }

    /// The live producers that `x` has a pending edge on: its dependencies' keys' producers.
    fn producers(&self, x: NodeRef) -> Vec<NodeRef> {
        let mut out = Vec::new();
        for ident in &self.nodes[x.idx as usize].deps {
            if let Some(MKey::Live(q)) = self.keys.get(ident) {
                if !out.contains(q) && self.pending_on(*q, x) {
                    out.push(*q);
                }
            }
        }
        out
    }

    /// `q`'s base joined with the effective urgency of every demander still waiting on it
    /// through a pending edge (SPEC D30): what its effective urgency must be.
    fn pending_max(&self, q: NodeRef) -> Urgency {
        let n = &self.nodes[q.idx as usize];
        let mut v = n.base;
        for e in n.done.iter().chain(n.admit.iter()) {
            if let Some(t) = self.slot(e.0).filter(|t| t.active) {
                v = v.max(t.eff);
            }
        }
        v
    }

    /// Recomputes `q`'s effective urgency from its base and pending demanders, and settles
    /// its producers if it changed.
    fn refresh(&mut self, q: NodeRef, work: &mut Work) {
        let before = self.nodes[q.idx as usize].eff;
        let after = self.pending_max(q);
        if after != before {
            self.nodes[q.idx as usize].eff = after;
            work.resync.push(q);
            self.settle(q, Some(before), Some(after), work);
        }
    }

    /// `y`'s urgency as a demander went from `old` to `new` (`None`: it was not one, or is
    /// no more): recomputes every producer it may have lifted or now exceeds, transitively.
    fn settle(&mut self, y: NodeRef, old: Option<Urgency>, new: Option<Urgency>, work: &mut Work) {
        let mut stack = vec![(y, old, new)];
        while let Some((y, old, new)) = stack.pop() {
            for r in self.producers(y) {
                let rn = &self.nodes[r.idx as usize];
                let lifted = old.is_some_and(|o| o.may_lift(rn.eff, rn.base));
                if lifted || new.is_some_and(|v| v.exceeds(rn.eff)) {
                    let before = rn.eff;
                    let after = self.pending_max(r);
                    if after != before {
                        self.nodes[r.idx as usize].eff = after;
                        work.resync.push(r);
                        stack.push((r, Some(before), Some(after)));
                    }
                }
            }
        }
    }

    /// A job that arrived (submitted, or running with new dependencies): its adopted waiters
    /// count, and its urgency reaches its producers.
    fn arrive(&mut self, me: NodeRef, work: &mut Work) {
        self.refresh(me, work);
        let v = self.nodes[me.idx as usize].eff;
        self.settle(me, None, Some(v), work);
    }

    /// `x` ends: it demands nothing any more, and what it lifted drops back (SPEC D30).
    pub(super) fn depart(&mut self, x: NodeRef, work: &mut Work) {
        let n = &mut self.nodes[x.idx as usize];
        if !n.active {
            return;
        }
        n.active = false;
        let v = n.eff;
        self.settle(x, Some(v), None, work);
    }

    fn closes_cycle(&self, own: u64, deps: &[u64]) -> bool {
        let mut stack: Vec<u64> = deps.to_vec();
        let mut seen = HashSet::new();
        while let Some(ident) = stack.pop() {
            if ident == own {
                return true;
            }
            if !seen.insert(ident) {
                continue;
            }
            if let Some(MKey::Live(p)) = self.keys.get(&ident) {
                stack.extend_from_slice(&self.nodes[p.idx as usize].deps);
            }
        }
        false
    }
}

impl GraphEngine for MutexGraph {
    type Work = Work;

    fn with_bounds(bounds: Bounds) -> Self {
        // Only the first slots are backed now; the rest as use reaches them (SPEC D51).
        let first = FIRST_NODES.min(bounds.nodes).max(bounds.reserve.0);
        let nodes = (0..first)
            .map(|_| MNode::free_at(bounds.first_gen))
            .collect();
        let keys = FIRST_KEYS.min(bounds.keys).max(bounds.reserve.2) as usize;
        Self {
            state: Mutex::new(State {
                nodes,
                free: (0..first).rev().collect(),
                max_nodes: bounds.nodes,
                first_nodes: first,
                gen_floor: bounds.first_gen,
                edges_used: 0,
                edges_peak: 0,
                keys: HashMap::with_capacity(keys),
                waiting: 0,
                ready: 0,
                running: 0,
                shut: false,
                closed: false,
                vers: HashMap::with_capacity(keys),
                stale: 0,
                ended: Vec::new(),
            }),
            bounds,
        }
    }

    fn max_deps(&self) -> usize {
        self.bounds.max_deps as usize
    }

    fn submit(
        &self,
        spec: &JobSpec<'_>,
        deadline: u64,
        work: &mut Work,
    ) -> Result<Admission<NodeRef>, Error> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.shut || s.closed {
            return Err(SHUTDOWN);
        }
        let own = rules::ident(spec.key);
        // The key names a job cancelled by demand: the submission advances the key and is a
        // new job at the next generation (SPEC D31), never a join or `duplicate-key`.
        let renew = s.names_withdrawn(own);
        match s.keys.get(&own) {
            _ if renew => {}
            // A live job of the same identity: join it (SPEC D02).
            Some(MKey::Live(p)) => {
                let p = *p;
                let urgency = Urgency {
                    priority: spec.priority,
                    deadline,
                };
                return s.join(p, urgency, work);
            }
            Some(MKey::Done { .. }) => return Err(DUPLICATE_KEY),
            _ => {}
        }
        let deps: Vec<u64> = spec.deps.iter().map(|d| rules::ident(d.key)).collect();
        if renew {
            // Every refusal before the advance, so a refused submission changes nothing: the
            // advance's own error first, then the cycle check the key would need once the
            // advance has moved the cancelled job's followers onto it as waiters.
            let v = s.vers.get(&own).copied().unwrap_or(0);
            if super::keys::gen_of_version(v) >= self.bounds.max_gen {
                return Err(super::keys::EXHAUSTED);
            }
            let followers = matches!(s.keys.get(&own), Some(MKey::Live(p)) if s.has_followers(*p));
            if followers && s.closes_cycle(own, &deps) {
                return Err(CYCLE);
            }
        } else if matches!(s.keys.get(&own), Some(MKey::Waiting(_))) && s.closes_cycle(own, &deps) {
            // A key with waiters: refuse a cycle before anything else (as the lock-free engine).
            return Err(CYCLE);
        }
        if !s.room_for(core::slice::from_ref(spec), &self.bounds) {
            return Ok(Admission::Backpressured);
        }
        if renew {
            // As `advance` does: the key moves off the cancelled job (nothing else to retire:
            // it is ended or flagged), its dependents follow the key, its pinned ones see it
            // superseded. Cannot fail now: the key has a version below the bound.
            s.advance(own, self.bounds.max_gen, work)?;
        }
        // Linked with a hold, as the lock-free graph's submitter holds its node: inheritance
        // (SPEC D30) from the adopted waiters comes before the job may fire, so it becomes ready
        // with its effective urgency and one that ends at once keeps the values it inherited.
        let me = s.link_one(spec, deadline, deps, true);
        s.publish_one(me, work);
        s.arrive(me, work);
        let mut failed = Vec::new();
        s.release(me, true, work, &mut failed);
        s.end_failed(failed, work);
        s.sweep(work);
        Ok(Admission::Admitted(me))
    }

    fn submit_batch(
        &self,
        jobs: &[JobSpec<'_>],
        deadlines: &[u64],
        out: &mut Vec<NodeRef>,
        work: &mut Work,
    ) -> Result<Admission<()>, Error> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.shut || s.closed {
            return Err(SHUTDOWN);
        }
        for j in jobs {
            if matches!(
                s.keys.get(&rules::ident(j.key)),
                Some(MKey::Live(_) | MKey::Done { .. })
            ) {
                return Err(DUPLICATE_KEY);
            }
        }
        let in_batch: HashMap<u64, &[super::Dependency]> =
            jobs.iter().map(|j| (rules::ident(j.key), j.deps)).collect();
        if rules::batch_closes_cycle(&in_batch, |k| match s.keys.get(&k) {
            Some(MKey::Live(p)) => Some(s.nodes[p.idx as usize].deps.clone()),
            _ => None,
        }) {
            return Err(CYCLE);
        }
        if !s.room_for(jobs, &self.bounds) {
            return Ok(Admission::Backpressured);
        }
        // Link every job, then publish every key (a dependency inside the batch waits on its
        // key and is adopted), as the lock-free graph does.
        for (spec, &deadline) in jobs.iter().zip(deadlines) {
            let deps = spec.deps.iter().map(|d| rules::ident(d.key)).collect();
            out.push(s.link_one(spec, deadline, deps, true));
        }
        for &me in out.iter() {
            s.publish_one(me, work);
        }
        for &me in out.iter() {
            s.arrive(me, work);
        }
        s.sweep(work);
        Ok(Admission::Admitted(()))
    }

    fn seal_batch(&self, nodes: &[NodeRef], work: &mut Work) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        for &me in nodes {
            let mut failed = Vec::new();
            s.release(me, true, work, &mut failed);
            s.end_failed(failed, work);
        }
        s.sweep(work);
    }

    fn pop_ready(&self, work: &mut Work) -> Option<Ready> {
        work.ready.pop()
    }

    fn admitted(&self, node: NodeRef, work: &mut Work) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let Some(n) = s.node(node) else { return };
        n.st = St::Queued;
        n.admit_sealed = Some(true);
        let list = std::mem::take(&mut n.admit);
        // Its admission-gated demanders stop waiting on it (SPEC D30).
        if n.eff != n.base {
            s.refresh(node, work);
        }
        let mut failed = Vec::new();
        s.release_list(list, true, Why::Gate, work, &mut failed);
        // A dependent whose last gate this was may have failed another gate earlier.
        s.end_failed(failed, work);
        s.sweep(work);
    }

    fn fail_ready(&self, node: NodeRef, error: Error, admitted: bool, work: &mut Work) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        // Not if a key operation ended it meanwhile (SPEC D20).
        if !matches!(s.node(node), Some(n) if matches!(n.st, St::Ready | St::Queued)) {
            return;
        }
        // A job cancelled on its way to the scheduler ends `withdrawn` whichever way it ends
        // (SPEC D31: the flag decides its end, as at its completion), so its key keeps saying
        // it was cancelled and a resubmission advances it.
        let error = if s.nodes[node.idx as usize].retired == Some(WITHDRAWN) {
            WITHDRAWN
        } else {
            error
        };
        s.ready -= 1;
        s.end(node, JobOutcome::Failed(error), admitted, work);
        s.sweep(work);
    }

    fn start(&self, node: NodeRef) -> bool {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match s.node(node) {
            Some(n) if n.st == St::Queued => {
                n.st = St::Running;
                // The body holds one count; gates discovered while it runs add theirs.
                n.remaining = 1;
                n.body = None;
                s.ready -= 1;
                s.running += 1;
                true
            }
            _ => false,
        }
    }

    fn complete(&self, node: NodeRef, outcome: JobOutcome, work: &mut Work) -> Result<(), Error> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        match s.node(node) {
            Some(n) if n.st == St::Running => {}
            _ => return Err(STALE),
        }
        s.running -= 1;
        if let Some(e) = s.refuse_stale(node, work) {
            s.sweep(work);
            return Err(e);
        }
        s.waiting += 1;
        let n = &mut s.nodes[node.idx as usize];
        n.st = St::Completing;
        n.body = Some(outcome);
        let mut failed = Vec::new();
        s.release(node, true, work, &mut failed);
        s.end_failed(failed, work);
        s.sweep(work);
        Ok(())
    }

    fn discover(
        &self,
        node: NodeRef,
        deps: &[super::Dependency],
        work: &mut Work,
    ) -> Result<Admission<()>, Error> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        if s.shut {
            return Err(SHUTDOWN);
        }
        let n = match s.node(node) {
            Some(n) if n.st == St::Running => n,
            _ => return Err(STALE),
        };
        let own = n.key;
        let known = n.deps.clone();
        let fresh: Vec<(u64, Gate, Option<u64>)> = deps
            .iter()
            .enumerate()
            .filter(|(i, d)| {
                let ident = rules::ident(d.key);
                !known.contains(&ident) && !deps[..*i].iter().any(|e| e.key == d.key)
            })
            .map(|(_, d)| {
                (
                    rules::ident(d.key),
                    d.gate,
                    d.pin.map(super::Version::packed),
                )
            })
            .collect();
        if known.len() + fresh.len() > self.bounds.max_deps as usize {
            return Err(Error::new(
                crate::error::Code::InvalidArgument,
                crate::error::Reason::TooManyDependencies,
            ));
        }
        if fresh.is_empty() {
            return Ok(Admission::Admitted(()));
        }
        if s.edges_used as usize + fresh.len() > self.bounds.edges as usize {
            return Ok(Admission::Backpressured);
        }
        let cap = self.bounds.keys as usize;
        for d in deps {
            let ident = rules::ident(d.key);
            if !s.keys.contains_key(&ident) {
                if s.keys.len() >= cap {
                    return Ok(Admission::Backpressured);
                }
                s.keys.insert(ident, MKey::None);
            }
            s.ensure_version(ident);
        }
        let idents: Vec<u64> = fresh.iter().map(|f| f.0).collect();
        if s.closes_cycle(own, &idents) {
            return Err(CYCLE);
        }
        {
            let n = &mut s.nodes[node.idx as usize];
            n.deps.extend_from_slice(&idents);
            n.remaining += fresh.len() as u32;
        }
        let mut immediate = Vec::new();
        for (ident, gate, pin) in fresh {
            match s.link_edge(node, ident, gate, pin) {
                None => s.edge_linked(),
                Some(now) => immediate.push(now),
            }
        }
        let mut failed = Vec::new();
        for (met, why) in immediate {
            // The body's count keeps the job from ending here.
            s.release_with(node, met, why, work, &mut failed);
        }
        debug_assert!(failed.is_empty());
        // Its urgency reaches the producers it now waits on (SPEC D30).
        let v = s.nodes[node.idx as usize].eff;
        s.settle(node, None, Some(v), work);
        Ok(Admission::Admitted(()))
    }

    fn claims(&self, node: NodeRef) -> Option<u32> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.node(node).map(|n| n.claims).filter(|&c| c > 0)
    }

    fn release(&self, node: NodeRef, detach: bool, work: &mut Work) -> Result<bool, Error> {
        let mut s = self.lock();
        let n = s.node(node).ok_or(STALE)?;
        if n.claims == 0 {
            return Err(STALE);
        }
        n.claims -= 1;
        // Detachment is for good: a later release without it does not undo it.
        n.detached |= detach;
        let cancelled = if n.st == St::Done {
            if n.claims == 0 {
                s.free_slot(node.idx);
            }
            false
        } else {
            s.withdraw_if_undemanded(node, work)
        };
        s.sweep(work);
        Ok(cancelled)
    }

    fn pop_withdrawn(&self, work: &mut Work) -> Option<NodeRef> {
        work.withdrawn.pop()
    }

    fn signalled(&self, node: NodeRef) -> bool {
        // The retirement flag: set by a cancellation (SPEC D31), `advance` or `remove` (D20,
        // D24), and kept once the job ended; false for a stale node.
        self.lock().node(node).is_some_and(|n| n.retired.is_some())
    }

    fn outcome(&self, node: NodeRef, take: bool) -> Result<Option<JobOutcome>, Error> {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        let n = s.node(node).ok_or(STALE)?;
        if n.st != St::Done {
            return Ok(None);
        }
        let out = n.outcome;
        if take {
            // An ended job always has a claim: one ending without is freed at its end.
            n.claims -= 1;
            if n.claims > 0 {
                // Other handles of the job still have to take it.
                return Ok(out);
            }
            // An exhausted slot retires (never allocated again, still counted as used).
            s.free_slot(node.idx);
        }
        Ok(out)
    }

    fn close(&self) {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).closed = true;
    }

    fn shutdown(&self, work: &mut Work) {
        let mut s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        s.shut = true;
        let mut parked = Vec::new();
        for k in s.keys.values_mut() {
            if let MKey::Waiting(list) = k {
                parked.append(list);
                *k = MKey::None;
            }
        }
        let mut failed = Vec::new();
        for (target, _, _) in parked {
            s.edges_used -= 1;
            s.release(target, false, work, &mut failed);
        }
        s.end_failed(failed, work);
        // Frees what ended without claims; cancels nothing (shut down).
        s.sweep(work);
    }

    fn advance(&self, key: JobKey, work: &mut Work) -> Result<super::Version, Error> {
        let mut s = self.lock();
        let out = s.advance(rules::ident(key), self.bounds.max_gen, work);
        s.sweep(work);
        out
    }

    fn remove(&self, key: JobKey, work: &mut Work) -> Result<(), Error> {
        let mut s = self.lock();
        let out = s.remove(rules::ident(key), work);
        s.sweep(work);
        out
    }

    fn reset(&self, work: &mut Work) {
        let mut s = self.lock();
        s.reset(work);
        s.sweep(work);
    }

    fn shrink(&self) {
        // The key maps keep room for the keys backed at build.
        let keys = FIRST_KEYS.min(self.bounds.keys).max(self.bounds.reserve.2);
        self.lock().shrink(keys);
    }

    fn version(&self, key: JobKey) -> Option<super::Version> {
        self.lock().version(rules::ident(key))
    }

    fn join(
        &self,
        node: NodeRef,
        urgency: Urgency,
        work: &mut Work,
    ) -> Result<Admission<NodeRef>, Error> {
        self.lock().join(node, urgency, work)
    }

    fn effective(&self, node: NodeRef) -> Option<Urgency> {
        self.lock().node(node).map(|n| n.eff)
    }

    fn pop_resync(&self, work: &mut Work) -> Option<NodeRef> {
        work.resync.pop()
    }

    fn node_version(&self, node: NodeRef) -> Option<(JobKey, super::Version)> {
        let mut s = self.lock();
        let n = s.node(node)?;
        Some((n.job_key, super::Version::unpack(n.ver)))
    }

    fn witness_current(&self, witness: &super::Witness) -> bool {
        self.lock().witness_current(witness)
    }

    fn stale_completions(&self) -> u64 {
        self.lock().stale
    }

    fn occupancy(&self) -> Occupancy {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Occupancy {
            // A retired slot (its last generation used) is on no free list: counted as used.
            nodes_used: (s.nodes.len() - s.free.len()) as u32,
            nodes_total: self.bounds.nodes,
            edges_used: s.edges_used,
            edges_total: self.bounds.edges,
            keys_used: s.keys.len() as u32,
            keys_total: self.bounds.keys,
            waiting: s.waiting,
            ready: s.ready,
            running: s.running,
            nodes_backing: s.nodes.len() as u32,
            edges_backing: s.edges_backing(self.bounds.edges),
            // The key map's capacity: the entries it holds without growing, at most the
            // maximum (a map sized for the maximum reports it).
            keys_backing: (s.keys.capacity().min(self.bounds.keys as usize) as u32)
                .max(s.keys.len() as u32),
            // No index array: the key maps are hash maps.
            index_cells: 0,
            index_cells_max: 0,
        }
    }
}
