//! The lock-free graph's all-or-none batch (SPEC D04) and the node set-up it shares with
//! `submit`.
//!
//! A batch is the rare path: it runs under the topology lock. It first reserves every job's
//! key (`K_RESERVED`, which sends whoever meets the key to the lock), refuses a duplicate or a
//! cycle with nothing changed, takes every node and edge it needs (`Backpressured` otherwise,
//! nothing changed), then links and publishes every job while each node still holds the
//! batch's count. Nothing outside the lock can see a reserved key as anything but "ask the
//! lock", so the batch becomes visible as a whole when the lock is released; then
//! [`seal_batch`](LockFreeGraph::seal_batch) gives up every hold, and jobs whose gates hold
//! become ready.

use super::*;
use crate::graph::Dependency;
use std::collections::HashMap;

impl LockFreeGraph {
    /// Writes a reserved node's fields and publishes its words at generation `me.gen`, with
    /// `remaining` = dependencies + 1 (the submitter's hold).
    pub(super) fn init_node(&self, me: NodeRef, spec: &JobSpec<'_>, deadline: u64, own: KeyRef) {
        let NodeRef { idx, gen } = me;
        let n = self.node(idx);
        // Initialise the node; published by the key's Release store (or the edges' pushes).
        // SAFETY: the node is free and ours until published.
        n.info.with_mut(|p| unsafe {
            *p = Info {
                job: spec.key,
                tenant: spec.tenant,
                class: spec.class,
                priority: spec.priority,
                deadline,
                key: own,
            }
        });
        self.init_urgency(
            me,
            rules::Urgency {
                priority: spec.priority,
                deadline,
            },
        );
        // SAFETY: as above.
        n.outcome.with_mut(|p| unsafe { *p = None });
        let deps = self.dep_keys(idx);
        for (i, d) in spec.deps.iter().enumerate() {
            deps[i].store(rules::ident(d.key), Ordering::Relaxed);
        }
        n.dep_count.store(spec.deps.len() as u32, Ordering::Relaxed);
        // The submitter's claim. Relaxed: published by the key's Release store, before which
        // no joiner can name the node.
        n.claims.store(word(gen, 1), Ordering::Relaxed);
        // Release: a linker still holding the slot's previous generation (from the key table)
        // that loads these (Acquire) must then see that generation's end in its key; the free
        // list's Release/Acquire orders that end before this store.
        n.admit.store(word(gen, NIL), Ordering::Release);
        n.done.store(word(gen, NIL), Ordering::Release);
        // Release: the first RMW of `ctl`'s release sequence; readers of the info acquire it.
        n.ctl
            .store(word(gen, spec.deps.len() as u32 + 1), Ordering::Release);
        // Release: pairs with the generation check of the cycle walk.
        n.state.store(word(gen, S_WAITING), Ordering::Release);
        inc(&self.gauges.waiting);
    }

    /// Under the topology lock: moves the waiters of key `own` onto the lists of node `me`,
    /// which is about to be published as the key's producer.
    pub(super) fn adopt_waiters(&self, own: &KeySlot, me: NodeRef) {
        let n = self.node(me.idx);
        let mut w = own.waiters.swap(NIL, Ordering::Relaxed);
        while w != NIL {
            let edge = self.edge(w);
            let next = edge.next.load(Ordering::Relaxed);
            let gate = rules::gate_from(edge.gate.load(Ordering::Relaxed));
            let head = if rules::on_admission_list(gate) {
                &n.admit
            } else {
                &n.done
            };
            edge.next
                .store(low_of(head.load(Ordering::Relaxed)), Ordering::Relaxed);
            head.store(word(me.gen, w), Ordering::Relaxed);
            w = next;
        }
    }

    /// Under the topology lock: clears the reservation of each key slot in `slots`.
    fn unreserve(&self, slots: &[KeyRef]) {
        for &k in slots {
            let key = self.key(k);
            // Relaxed: no lock-free writer touches a reserved key; the lock orders the rest.
            let st = if key.waiters.load(Ordering::Relaxed) == NIL {
                K_NONE
            } else {
                K_WAITING
            };
            key.state.store(key_word(k.gen, st), Ordering::Relaxed);
        }
    }

    /// Admits every job of `jobs` (validated, distinct keys) or none (SPEC D04); on success
    /// `out` holds their nodes in input order, each still holding the batch's count until
    /// [`seal_batch`](Self::seal_batch).
    pub(super) fn batch(
        &self,
        jobs: &[JobSpec<'_>],
        deadlines: &[u64],
        out: &mut Vec<NodeRef>,
        work: &mut Work,
    ) -> Result<Admission<()>, Error> {
        let guard = self.lock();
        // Relaxed: written under this lock.
        if self.shut.load(Ordering::Relaxed) || self.is_closed() {
            return Err(rules::SHUTDOWN);
        }
        // Refusals first, before anything is claimed: a taken key, a cycle.
        for j in jobs {
            if let Some(k) = self.lookup_locked(rules::ident(j.key)) {
                // Acquire: pairs with the key's publication (Release).
                if self.key(k).state.load(Ordering::Acquire) & 0xff >= K_LIVE {
                    return Err(DUPLICATE_KEY);
                }
            }
        }
        let in_batch: HashMap<u64, &[Dependency]> =
            jobs.iter().map(|j| (rules::ident(j.key), j.deps)).collect();
        if rules::batch_closes_cycle(&in_batch, |k| self.live_deps(k)) {
            return Err(CYCLE);
        }
        // Nodes and edges for every job, then key slots (the single submit's order; a slot
        // claimed for a key stays claimed, as there).
        let dep_count: usize = jobs.iter().map(|j| j.deps.len()).sum();
        let mut edges = NIL;
        let give_back = |nodes: &mut Vec<NodeRef>, edges: u32| {
            self.give_back_edges(edges);
            for n in nodes.drain(..) {
                self.push_node(n.idx);
            }
        };
        for _ in 0..dep_count {
            let Some(e) = self.pop_edge() else {
                give_back(out, edges);
                return Ok(Admission::Backpressured);
            };
            self.edge(e).next.store(edges, Ordering::Relaxed);
            edges = e;
        }
        for _ in jobs {
            let Some(idx) = self.pop_node() else {
                give_back(out, edges);
                return Ok(Admission::Backpressured);
            };
            let gen = gen_of(self.node(idx).state.load(Ordering::Relaxed));
            out.push(NodeRef { idx, gen });
        }
        if self.is_closed() {
            // Shut down since the caller's check: the nodes may be ones the shutdown freed.
            give_back(out, edges);
            return Err(rules::SHUTDOWN);
        }
        let mut own_slots = Vec::with_capacity(jobs.len());
        let mut dep_slots = Vec::with_capacity(dep_count);
        for j in jobs {
            let Some(k) = self.lookup_or_insert(rules::ident(j.key), true) else {
                give_back(out, edges);
                return Ok(Admission::Backpressured);
            };
            own_slots.push(k);
            for d in j.deps {
                let Some(k) = self.lookup_or_insert(rules::ident(d.key), true) else {
                    give_back(out, edges);
                    return Ok(Admission::Backpressured);
                };
                dep_slots.push(k);
            }
        }
        // Reserve every key: a lock-free publisher of the same key now goes to the lock. One
        // may have published the key since the check above: refused then.
        let mut had_waiters = false;
        for (i, &k) in own_slots.iter().enumerate() {
            let key = self.key(k);
            loop {
                // Acquire: pairs with a lock-free publication (Release) of the same key.
                let st = key.state.load(Ordering::Acquire);
                if st & 0xff >= K_LIVE {
                    self.unreserve(&own_slots[..i]);
                    give_back(out, edges);
                    return Err(DUPLICATE_KEY);
                }
                // Relaxed: the reservation carries no data; a publisher racing on `K_NONE`
                // makes this fail and the loop see its key live.
                if key
                    .state
                    .compare_exchange(st, st | K_RESERVED, Ordering::Relaxed, Ordering::Relaxed)
                    .is_ok()
                {
                    had_waiters |= st & K_TAGS == K_WAITING;
                    break;
                }
            }
        }
        // Commit: set up, link (a dependency inside the batch parks on its reserved key, to be
        // adopted below), then publish.
        let mut e = edges;
        let mut at = 0;
        for (j, (spec, &me)) in jobs.iter().zip(out.iter()).enumerate() {
            self.init_node(me, spec, deadlines[j], own_slots[j]);
            for d in spec.deps {
                let next = self.edge(e).next.load(Ordering::Relaxed);
                let mut held = NIL;
                self.link_with(
                    e,
                    dep_slots[at],
                    rules::ident(d.key),
                    d.gate,
                    d.pin.map(Version::packed),
                    me,
                    work,
                    &mut held,
                    true,
                );
                debug_assert_eq!(held, NIL, "a batch job holds the batch's count");
                at += 1;
                e = next;
            }
        }
        // A key that had waiters before: a job published meanwhile without the lock may close
        // a cycle through it now that the edges are linked (the single submit's publication
        // check, see `closes_cycle`). Rare; the linked edges stay inert.
        if had_waiters && rules::batch_closes_cycle(&in_batch, |k| self.live_deps(k)) {
            let mut at = 0;
            for (spec, &me) in jobs.iter().zip(out.iter()) {
                self.unpark(me, &dep_slots[at..at + spec.deps.len()]);
                at += spec.deps.len();
            }
            self.unreserve(&own_slots);
            drop(guard);
            for &me in out.iter() {
                dec(&self.gauges.waiting);
                self.free_slot(me);
            }
            out.clear();
            return Err(CYCLE);
        }
        for (&k, &me) in own_slots.iter().zip(out.iter()) {
            let own = self.key(k);
            self.adopt_waiters(own, me);
            // Release: publishes the node and its adopted lists (pairs with linkers' Acquire).
            own.state.store(key_live(me), Ordering::Release);
            // The key version it runs at (exact: key operations take this lock too).
            self.node(me.idx)
                .ver
                .store(own.ver.load(Ordering::Relaxed), Ordering::Relaxed);
        }
        drop(guard);
        Ok(Admission::Admitted(()))
    }

    /// Gives up the batch's hold on each node of `nodes`: those whose gates all hold become
    /// ready (onto `work`), those with a failed gate end.
    pub(super) fn seal_batch(&self, nodes: &[NodeRef], work: &mut Work) {
        // Inheritance first (SPEC D30): each job's adopted waiters and its producers.
        for &me in nodes {
            let mut slots = super::dep_buf::DepBuf::new();
            self.dep_slots(me, &mut slots);
            self.arrive(me, slots.as_slice(), true);
        }
        for &me in nodes {
            let mut failed = NIL;
            self.release(me, true, work, &mut failed);
            self.end_failed(failed, work);
        }
    }
}
