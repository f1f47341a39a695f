//! Linking on the lock-free graph: attaching a dependent's edge to the producer of a key (or
//! counting it at once when the producer has ended, or parking it on a key without producer),
//! the cycle check under the topology lock, and undoing a submission refused after some of its
//! edges were linked. These are methods of [`LockFreeGraph`]; node and edge slots, releasing
//! and ending stay in the parent module.

use super::*;

impl LockFreeGraph {
    /// Links edge `e` (dependent `me`, dependency `d`) to the producer of key `ident` (slot
    /// `k`), or counts it at once if the producer has ended, or parks it on the key if there
    /// is no producer yet. A key removed since `k` was looked up is named again (a new
    /// incarnation). Returns the slot linked to. The caller holds a count of `me` (it cannot
    /// reach zero here).
    pub(super) fn link(
        &self,
        e: u32,
        k: KeyRef,
        ident: u64,
        d: &Dependency,
        me: NodeRef,
        work: &mut Work,
    ) -> KeyRef {
        let mut held = NIL;
        let pin = d.pin.map(Version::packed);
        let r = self.link_with(e, k, ident, d.gate, pin, me, work, &mut held, false);
        debug_assert_eq!(held, NIL, "a linking submitter holds a count");
        r
    }

    /// [`link`](Self::link), by a caller that already holds the topology lock if `locked`;
    /// `pin`: the packed version a pinned dependency names (SPEC D33). A count of `me` that
    /// this link takes to zero with a failed gate goes onto `failed`.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn link_with(
        &self,
        e: u32,
        mut k: KeyRef,
        ident: u64,
        gate: Gate,
        pin: Option<u64>,
        me: NodeRef,
        work: &mut Work,
        failed: &mut u32,
        locked: bool,
    ) -> KeyRef {
        let edge = self.edge(e);
        edge.target.store(me.packed(), Ordering::Relaxed);
        edge.gate
            .store(rules::gate_code(gate, pin.is_some()), Ordering::Relaxed);
        loop {
            let key = self.key(k);
            // Acquire: pairs with the Release stores of the key state (publication, end), so
            // the slot generation checked next is the one the state was written at.
            let st = key.state.load(Ordering::Acquire);
            if !self.state_valid(k, st) {
                // The key was removed since it was looked up: name it again.
                match self.lookup_or_insert(ident, locked) {
                    Some(r) => {
                        k = r;
                        continue;
                    }
                    None => {
                        // Every key slot in use: the dependency cannot be tracked; its gate
                        // fails (rare: a removal raced this link and the table filled).
                        self.push_edge(e);
                        self.release(me, false, work, failed);
                        return k;
                    }
                }
            }
            if pin.is_some() {
                // Read after the state: a state that follows an `advance`'s detach (AcqRel)
                // comes with the version that advance stored before it (Release/Acquire).
                let ver = key.ver.load(Ordering::Acquire);
                match rules::pin_state(pin, if self.key_valid(k) { ver } else { 0 }) {
                    rules::Pin::Current => {}
                    rules::Pin::Superseded => {
                        self.push_edge(e);
                        self.release_with(me, keys::pin_flags(gate), work, failed);
                        return k;
                    }
                    rules::Pin::Removed => {
                        self.push_edge(e);
                        self.release_with(me, FAILED | WAITED_REMOVED, work, failed);
                        return k;
                    }
                }
            }
            match st & 0xff {
                K_LIVE => {
                    let producer = NodeRef {
                        idx: (st as u32) >> 8,
                        gen: gen_of(st),
                    };
                    let p = self.node(producer.idx);
                    let head = if rules::on_admission_list(gate) {
                        &p.admit
                    } else {
                        &p.done
                    };
                    // Acquire: pairs with the seal swap (Release) or the slot's re-initialisation.
                    let mut h = head.load(Ordering::Acquire);
                    let linked = loop {
                        if gen_of(h) != producer.gen {
                            break false; // collected: the key says how it ended
                        }
                        let top = low_of(h);
                        if top == SEALED_SUPERSEDED {
                            // Superseded since the key was read: the key has moved on (the
                            // swap follows the detach), so read it again (SPEC D33).
                            break false;
                        }
                        if top == SEALED_OK || top == SEALED_FAIL || top == SEALED_RETIRED {
                            self.push_edge(e);
                            // A retired producer meets no gate (SPEC D21).
                            let met =
                                top != SEALED_RETIRED && rules::gate_met(gate, top == SEALED_OK);
                            self.release(me, met, work, failed);
                            break true;
                        }
                        if top == SEALED_CANCELLED {
                            // Cancelled before this link (SPEC D31): a failed gate fails the
                            // dependent `dependency-cancelled`.
                            self.push_edge(e);
                            self.release_with(me, gate_flags(gate, false, true), work, failed);
                            break true;
                        }
                        edge.next.store(top, Ordering::Relaxed);
                        // Release: publishes the edge's fields to the sealer (its AcqRel swap).
                        match head.compare_exchange_weak(
                            h,
                            word(producer.gen, e),
                            Ordering::Release,
                            Ordering::Acquire,
                        ) {
                            Ok(_) => break true,
                            Err(cur) => h = cur,
                        }
                    };
                    if linked {
                        return k;
                    }
                }
                K_DONE_CANCELLED_ADMITTED | K_DONE_CANCELLED_UNADMITTED => {
                    let admitted = st & 0xff == K_DONE_CANCELLED_ADMITTED;
                    let flags = if rules::on_admission_list(gate) {
                        gate_flags(gate, admitted, true)
                    } else {
                        gate_flags(gate, false, true)
                    };
                    self.push_edge(e);
                    self.release_with(me, flags, work, failed);
                    return k;
                }
                K_DONE_OK | K_DONE_FAIL_ADMITTED | K_DONE_FAIL_UNADMITTED => {
                    let t = st & 0xff;
                    let met = rules::gate_met_after_end(
                        gate,
                        t != K_DONE_FAIL_UNADMITTED,
                        t == K_DONE_OK,
                    );
                    self.push_edge(e);
                    self.release(me, met, work, failed);
                    return k;
                }
                _ => {
                    let _guard = (!locked).then(|| self.lock());
                    // Acquire: as the load above (a producer may have published meanwhile, or
                    // the key been removed).
                    let st = key.state.load(Ordering::Acquire);
                    if st & 0xff >= K_LIVE || gen_of(st) != k.gen {
                        continue;
                    }
                    // Relaxed: versions change under this lock only.
                    if pin.is_some_and(|p| key.ver.load(Ordering::Relaxed) != p) {
                        // Advanced since the check above: decide again.
                        continue;
                    }
                    // Relaxed: written under this lock.
                    if self.shut.load(Ordering::Relaxed) {
                        // Shut down: no producer will come; the gate fails at once.
                        self.push_edge(e);
                        self.release(me, false, work, failed);
                        return k;
                    }
                    if st & K_TAGS == K_NONE {
                        // Relaxed CAS is enough: a producer publishing concurrently CASes the
                        // same word and then takes the lock to adopt waiters.
                        if key
                            .state
                            .compare_exchange(
                                st,
                                key_word(k.gen, K_WAITING),
                                Ordering::Relaxed,
                                Ordering::Relaxed,
                            )
                            .is_err()
                        {
                            continue;
                        }
                    }
                    edge.next
                        .store(key.waiters.load(Ordering::Relaxed), Ordering::Relaxed);
                    key.waiters.store(e, Ordering::Relaxed);
                    return k;
                }
            }
        }
    }

    /// Under the topology lock: would a job with key `own` and dependency keys `deps` close a
    /// cycle? Walks published producers' dependency keys upstream.
    pub(super) fn closes_cycle(&self, own: u64, deps: impl Iterator<Item = u64>) -> bool {
        let mut stack: Vec<u64> = deps.collect();
        let mut seen: HashSet<u64> = HashSet::new();
        while let Some(ident) = stack.pop() {
            if ident == own {
                return true;
            }
            if !seen.insert(ident) {
                continue;
            }
            if let Some(found) = self.live_deps(ident) {
                stack.extend(found);
            }
        }
        false
    }

    /// The dependency keys of the live producer of key `ident`, if it has one.
    pub(super) fn live_deps(&self, ident: u64) -> Option<Vec<u64>> {
        let k = self.lookup_locked(ident)?;
        // Acquire: pairs with the producer's publication (Release), after which its
        // dependency keys are visible.
        let st = self.key(k).state.load(Ordering::Acquire);
        if st & 0xff != K_LIVE {
            return None;
        }
        let idx = (st as u32) >> 8;
        let gen = gen_of(st);
        let n = self.node(idx);
        // Acquire: as the key load; the count was written before the publication.
        let count = n.dep_count.load(Ordering::Acquire) as usize;
        let deps = self.dep_keys(idx);
        let mut found = Vec::with_capacity(count);
        for d in &deps[..count.min(self.bounds.max_deps as usize)] {
            found.push(d.load(Ordering::Relaxed));
        }
        // Acquire: if the node is still the same generation, the keys read belong to it.
        (gen_of(n.state.load(Ordering::Acquire)) == gen).then_some(found)
    }

    /// Undoes a submission refused after some edges were linked: the node's generation moves
    /// on (so linked edges are inert), its waiter edges are unparked.
    pub(super) fn retire_refused(&self, me: NodeRef, dep_slots: &[KeyRef]) {
        let guard = self.lock();
        self.unpark(me, dep_slots);
        drop(guard);
        self.free_slot(me);
    }

    /// Under the topology lock: takes the edges of `me` off the waiter lists of `dep_slots`
    /// (a slot freed since holds no edge of `me`: removal failed them).
    pub(super) fn unpark(&self, me: NodeRef, dep_slots: &[KeyRef]) {
        for &k in dep_slots {
            let key = self.key(k);
            let mut prev: Option<u32> = None;
            let mut e = key.waiters.load(Ordering::Relaxed);
            while e != NIL {
                let edge = self.edge(e);
                let next = edge.next.load(Ordering::Relaxed);
                if NodeRef::unpack(edge.target.load(Ordering::Relaxed)) == me {
                    match prev {
                        None => key.waiters.store(next, Ordering::Relaxed),
                        Some(p) => self.edge(p).next.store(next, Ordering::Relaxed),
                    }
                    self.push_edge(e);
                } else {
                    prev = Some(e);
                }
                e = next;
            }
        }
    }
}
