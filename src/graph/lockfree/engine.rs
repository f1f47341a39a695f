//! The lock-free graph as a [`GraphEngine`]: submit, link, complete, hand off.

use super::dep_buf::DepBuf;
use super::*;

impl LockFreeGraph {
    /// Joins the producer that key state word `st` (tag `K_LIVE`, loaded with Acquire) names
    /// (SPEC D02). If every handle of that job took its outcome since, the key has moved on:
    /// the submission starts again and sees what the key says now. Rare, and bounded: a key
    /// names a new producer only after a key operation moved its generation on.
    fn join_live(
        &self,
        st: u64,
        spec: &JobSpec<'_>,
        deadline: u64,
        work: &mut Work,
    ) -> Result<Admission<NodeRef>, Error> {
        let node = NodeRef {
            idx: low_of(st) >> 8,
            gen: gen_of(st),
        };
        match self.join_node(node) {
            Join::Joined => {
                let u = rules::Urgency {
                    priority: spec.priority,
                    deadline,
                };
                self.join_urgency(node, u);
                Ok(Admission::DedupeJoined(node))
            }
            Join::Full => Ok(Admission::Backpressured),
            Join::Gone => self.submit(spec, deadline, work),
            Join::Doomed => {
                // Cancelled for want of demand (SPEC D31): a new job, at the next generation.
                if !self.has_room(spec.deps) {
                    return Ok(Admission::Backpressured);
                }
                self.renew(spec.key, |now| now == st || is_cancelled_tag(now), work)?;
                self.submit(spec, deadline, work)
            }
        }
    }
}

impl LockFreeGraph {
    /// Whether a node, an edge per dependency and a key slot per new dependency key are free now (a hint: the reservation decides). A
    /// submission that would renew a withdrawn key checks it first, so a full graph refuses
    /// it with nothing changed, as the mutex graph does.
    fn has_room(&self, deps: &[crate::graph::Dependency]) -> bool {
        // Relaxed: gauges (observations).
        let new_keys = deps
            .iter()
            .enumerate()
            .filter(|&(i, d)| {
                !deps[..i].iter().any(|e| e.key == d.key)
                    && !matches!(self.find(rules::ident(d.key)), Found::Key(_))
            })
            .count();
        self.gauges.nodes.load(Ordering::Relaxed) < self.bounds.nodes
            && self.gauges.edges.load(Ordering::Relaxed) as usize + deps.len()
                <= self.bounds.edges as usize
            && self.gauges.keys.load(Ordering::Relaxed) as usize + new_keys
                <= self.bounds.keys as usize
    }
}

impl GraphEngine for LockFreeGraph {
    type Work = Work;

    fn with_bounds(bounds: Bounds) -> Self {
        Self::new(bounds)
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
        let own_ident = rules::ident(spec.key);
        // One probe of the index for the job's own key: `claim` below uses what it found.
        let seen = self.find(own_ident);
        if let Found::Key(r) = seen {
            // Acquire: pairs with the key's publication (Release).
            let st = self.key(r).state.load(Ordering::Acquire);
            if self.state_valid(r, st) {
                // A live job of the same identity: join it, before anything is reserved
                // (SPEC D02).
                if st & 0xff == K_LIVE {
                    return self.join_live(st, spec, deadline, work);
                }
                // A job cancelled for want of demand (SPEC D31): a submission of its identity
                // starts a new job, at the key's next generation.
                if is_cancelled_tag(st) {
                    if !self.has_room(spec.deps) {
                        // Refused without a change: the key is renewed only by a submission
                        // that will take its place.
                        return Ok(Admission::Backpressured);
                    }
                    self.renew(spec.key, |now| now == st, work)?;
                    return self.submit(spec, deadline, work);
                }
                // Fast refusal of a key whose job at this generation has ended.
                if st & 0xff > K_LIVE {
                    return Err(DUPLICATE_KEY);
                }
                // A key with waiters already: refuse a cycle before anything is reserved or
                // linked. The check is repeated at publication, for waiters that arrive
                // meanwhile.
                if st == key_word(r.gen, K_WAITING) {
                    let _g = self.lock();
                    if self.closes_cycle(own_ident, spec.deps.iter().map(|d| rules::ident(d.key))) {
                        return Err(CYCLE);
                    }
                }
            }
        }
        // Reserve: node, edges (chained through their `next`), key slots.
        let Some(idx) = self.pop_node() else {
            return Ok(Admission::Backpressured);
        };
        if self.is_closed() {
            // Shut down since the caller's check: the node may be one the shutdown freed.
            self.push_node(idx);
            return Err(rules::SHUTDOWN);
        }
        let mut edges = NIL;
        for _ in 0..spec.deps.len() {
            match self.pop_edge() {
                Some(e) => {
                    self.edge(e).next.store(edges, Ordering::Relaxed);
                    edges = e;
                }
                None => {
                    while edges != NIL {
                        let next = self.edge(edges).next.load(Ordering::Relaxed);
                        self.push_edge(edges);
                        edges = next;
                    }
                    self.push_node(idx);
                    return Ok(Admission::Backpressured);
                }
            }
        }
        let n = self.node(idx);
        let gen = gen_of(n.state.load(Ordering::Relaxed));
        let me = NodeRef { idx, gen };
        let undo = |edges: u32| {
            let mut e = edges;
            while e != NIL {
                let next = self.edge(e).next.load(Ordering::Relaxed);
                self.push_edge(e);
                e = next;
            }
            self.push_node(idx);
        };
        let Some(mut own) = self.claim(own_ident, seen, false) else {
            undo(edges);
            return Ok(Admission::Backpressured);
        };
        // On the stack up to the largest `max_deps`: no allocation (SPEC D05's fixed bounds).
        let mut dep_slots = DepBuf::new();
        for d in spec.deps {
            let Some(k) = self.lookup_or_insert(rules::ident(d.key), false) else {
                undo(edges);
                return Ok(Admission::Backpressured);
            };
            dep_slots.push(k);
        }
        let slots = dep_slots.as_mut_slice();
        self.init_node(me, spec, deadline, own);

        // Link every edge first, then publish: the last job of a would-be cycle to publish finds
        // waiters on its key and checks for the cycle under the topology lock (see `closes_cycle`).
        let mut guard = None;
        let mut e = edges;
        for (i, d) in spec.deps.iter().enumerate() {
            let next = self.edge(e).next.load(Ordering::Relaxed);
            // The slot actually linked to (a key removed meanwhile is named again).
            slots[i] = self.link(e, slots[i], rules::ident(d.key), d, me, work);
            e = next;
        }
        let slots: &[KeyRef] = slots;
        // Publish: the key names this node.
        loop {
            let own_key = self.key(own);
            // Acquire: pairs with the key's publication and end (Release) and with a key
            // operation's `detach` (AcqRel).
            let st = own_key.state.load(Ordering::Acquire);
            if !self.state_valid(own, st) {
                // The key was removed while this job linked: name it again (a new
                // incarnation); the job is published after the removal.
                match self.lookup_or_insert(own_ident, guard.is_some()) {
                    Some(r) => {
                        own = r;
                        self.set_node_key(me, r);
                        continue;
                    }
                    None => {
                        drop(guard);
                        dec(&self.gauges.waiting);
                        self.retire_refused(me, slots);
                        return Ok(Admission::Backpressured);
                    }
                }
            }
            if st & 0xff >= K_LIVE {
                // Another submit of the key published first while this one linked.
                drop(guard);
                dec(&self.gauges.waiting);
                self.retire_refused(me, slots);
                if st & 0xff == K_LIVE {
                    return self.join_live(st, spec, deadline, work);
                }
                if is_cancelled_tag(st) {
                    self.renew(spec.key, |now| now == st, work)?;
                    return self.submit(spec, deadline, work);
                }
                return Err(DUPLICATE_KEY);
            }
            let none = key_word(own.gen, K_NONE);
            if st == none {
                // Release: publishes the node's initialisation to linkers (their Acquire load).
                // Acquire: pairs with the AcqRel RMW of a key operation's `detach` that this
                // CAS follows, so the version read below is the one it stored (SPEC D20). The
                // slot's generation in the expected word makes it fail on a freed slot.
                if own_key
                    .state
                    .compare_exchange(none, key_live(me), Ordering::AcqRel, Ordering::Relaxed)
                    .is_ok()
                {
                    break;
                }
                continue;
            }
            if guard.is_none() {
                // Waiters appeared while linking: check for a cycle now.
                let g = self.lock();
                if self.closes_cycle(own_ident, spec.deps.iter().map(|d| rules::ident(d.key))) {
                    drop(g);
                    dec(&self.gauges.waiting);
                    self.retire_refused(me, slots);
                    return Err(CYCLE);
                }
                guard = Some(g);
                continue;
            }
            // Under the lock: adopt the key's waiters into this node's lists, then publish.
            self.adopt_waiters(own_key, me);
            // Release: publishes the node and the adopted lists (pairs with linkers' Acquire).
            own_key.state.store(key_live(me), Ordering::Release);
            break;
        }
        let adopted = guard.is_some();
        drop(guard);
        // The version the node runs at: read after publication, so an `advance` that the
        // publication followed is seen; one that preceded it retired the node (SPEC D20). A
        // removal since then retired it too (its version reads 0).
        // Acquire: pairs with the version's Release stores.
        let v = self.key(own).ver.load(Ordering::Acquire);
        n.ver
            .store(if self.key_valid(own) { v } else { 0 }, Ordering::Relaxed);
        // Inheritance (SPEC D30): before the hold is given up, so the node is still waiting.
        self.arrive(me, slots, adopted);
        // Give up the submitter's hold: the node may fire now.
        let mut failed = NIL;
        self.release(me, true, work, &mut failed);
        // The hold was the last count and a gate had failed: end it here.
        self.end_failed(failed, work);
        Ok(Admission::Admitted(me))
    }

    fn join(
        &self,
        node: NodeRef,
        urgency: rules::Urgency,
        _work: &mut Work,
    ) -> Result<Admission<NodeRef>, Error> {
        match self.join_node(node) {
            Join::Joined => {
                self.join_urgency(node, urgency);
                Ok(Admission::DedupeJoined(node))
            }
            Join::Full => Ok(Admission::Backpressured),
            Join::Gone | Join::Doomed => Err(STALE),
        }
    }

    fn submit_batch(
        &self,
        jobs: &[JobSpec<'_>],
        deadlines: &[u64],
        out: &mut Vec<NodeRef>,
        work: &mut Work,
    ) -> Result<Admission<()>, Error> {
        self.batch(jobs, deadlines, out, work)
    }

    fn effective(&self, node: NodeRef) -> Option<rules::Urgency> {
        self.effective_of(node)
    }

    #[inline]
    fn pop_resync(&self, _work: &mut Work) -> Option<NodeRef> {
        self.take_resync()
    }

    fn seal_batch(&self, nodes: &[NodeRef], work: &mut Work) {
        LockFreeGraph::seal_batch(self, nodes, work);
    }

    #[inline]
    fn pop_ready(&self, work: &mut Work) -> Option<Ready> {
        // Jobs this operation cancelled end first (SPEC D31): their ends may release others.
        self.drain_doomed(work);
        self.flush(work);
        let idx = work.ready;
        if idx == NIL {
            return None;
        }
        let n = self.node(idx);
        work.ready = n.next.load(Ordering::Relaxed);
        let gen = gen_of(n.ctl.load(Ordering::Relaxed));
        // SAFETY: written before publication; the zero-reaching RMW on `ctl` acquired it.
        let info = n.info.with(|p| unsafe { *p });
        let node = NodeRef { idx, gen };
        Some(Ready {
            node,
            key: info.job,
            tenant: info.tenant,
            class: info.class,
            // Its effective priority as it enters the scheduler (SPEC D12, D30).
            priority: self
                .urgency(node)
                .map_or(info.priority, |(eff, _, _)| eff.priority),
            deadline: info.deadline,
        })
    }

    fn admitted(&self, node: NodeRef, work: &mut Work) {
        let n = self.node(node.idx);
        // Release: pairs with the Acquire load in `start`.
        n.state.store(word(node.gen, S_QUEUED), Ordering::Release);
        let mut failed = NIL;
        self.seal(&n.admit, node.gen, true, work, &mut failed);
        // Its admission-gated demanders stop waiting on it (SPEC D30).
        self.admitted_urgency(node);
        // A dependent whose last gate this was may have failed another gate earlier.
        self.end_failed(failed, work);
    }

    fn fail_ready(&self, node: NodeRef, error: Error, admitted: bool, work: &mut Work) {
        let n = self.node(node.idx);
        // A queued node may have been taken by a key operation meanwhile (SPEC D20), which
        // ended it: decide on the count word, as `start` does. Rare (a refusal or a shutdown).
        // Relaxed: only arbitrates; the node's set-up was acquired by the caller.
        let mut c = n.ctl.load(Ordering::Relaxed);
        loop {
            if gen_of(c) != node.gen || c & (TAKEN | RUNNING) != 0 {
                return;
            }
            match n
                .ctl
                .compare_exchange_weak(c, c | TAKEN, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(cur) => c = cur,
            }
        }
        self.gauges
            .ready_running
            .fetch_sub(READY_ONE, Ordering::Relaxed);
        n.state.store(word(node.gen, S_ENDING), Ordering::Relaxed);
        // A job cancelled for want of demand on its way here ends `withdrawn`, whatever the
        // hand-off met (SPEC D31): its key then says so, and a new submission starts afresh.
        let error = if c & RETIRED_CANCELLED != 0 && c & (RETIRED_SUPERSEDED | RETIRED_REMOVED) == 0
        {
            rules::WITHDRAWN
        } else {
            error
        };
        self.end(node, JobOutcome::Failed(error), admitted, work);
    }

    fn start(&self, node: NodeRef) -> bool {
        let n = self.node(node.idx);
        // Acquire: pairs with the Release store in `admitted`.
        if n.state.load(Ordering::Acquire) != word(node.gen, S_QUEUED) {
            return false;
        }
        // The count word decides between this executor and a key operation retiring the
        // queued job (SPEC D20): whoever moves it first owns the node. Only the executor
        // holding the job's one scheduler payload gets here, and a key operation writes a
        // queued node's state only after winning this word (`TAKEN`), so the state itself
        // takes a load and a store. A retirement flag without `TAKEN` (set while the job was
        // on its way to the scheduler) is kept: the job runs and its completion is stale.
        let mut c = n.ctl.load(Ordering::Relaxed);
        loop {
            if gen_of(c) != node.gen || c & (TAKEN | RUNNING) != 0 {
                return false;
            }
            // Nothing else touches the count now: every gate was counted when it fired. The
            // body holds one.
            let new = (c & RETIRED) | word(node.gen, 0) | RUNNING | 1;
            // Relaxed: the state's Acquire load above ordered the node's set-up; the RMW only
            // arbitrates with `mark_retired`.
            match n
                .ctl
                .compare_exchange_weak(c, new, Ordering::Relaxed, Ordering::Relaxed)
            {
                Ok(_) => break,
                Err(cur) => c = cur,
            }
        }
        n.state.store(word(node.gen, S_RUNNING), Ordering::Relaxed);
        // Ready to running in one RMW (the flush that counted it ready came before the hand-off).
        self.gauges
            .ready_running
            .fetch_add(RUNNING_ONE - READY_ONE, Ordering::Relaxed);
        true
    }

    fn complete(&self, node: NodeRef, outcome: JobOutcome, work: &mut Work) -> Result<(), Error> {
        let n = self.node(node.idx);
        // Acquire: orders the body's outcome after what `start` saw (the Release store in
        // `admitted`), for a completer on another thread than the starter.
        n.state
            .compare_exchange(
                word(node.gen, S_RUNNING),
                word(node.gen, S_ENDING),
                Ordering::Acquire,
                Ordering::Relaxed,
            )
            .map_err(|_| STALE)?;
        self.gauges
            .ready_running
            .fetch_sub(RUNNING_ONE, Ordering::Relaxed);
        // SAFETY: the executor owns the running node's outcome cell; it is read by whoever
        // ends the node, after the hold is given up below (AcqRel).
        n.outcome.with_mut(|p| unsafe { *p = Some(outcome) });
        // No gate discovered while it ran and not retired (the common case): the body's count
        // is the last, and the job ends here.
        let body_only = word(node.gen, 0) | RUNNING | 1;
        // AcqRel: as the RMWs of `release` (the count's release sequence).
        if n.ctl
            .compare_exchange(
                body_only,
                body_only - 1,
                Ordering::AcqRel,
                Ordering::Relaxed,
            )
            .is_ok()
        {
            self.end(node, outcome, true, work);
            return Ok(());
        }
        // Not the plain case: a retirement flag (the job was superseded or its key removed,
        // SPEC D21) or gates discovered while it ran.
        if let Some(e) = self.refuse_stale(node, work) {
            return Err(e);
        }
        inc(&self.gauges.waiting);
        let mut failed = NIL;
        // Give up the body's hold: ends the node now unless discovered gates are pending.
        self.release(node, true, work, &mut failed);
        self.end_failed(failed, work);
        Ok(())
    }

    fn discover(
        &self,
        node: NodeRef,
        deps: &[crate::graph::Dependency],
        work: &mut Work,
    ) -> Result<Admission<()>, Error> {
        let n = self.node(node.idx);
        if n.state.load(Ordering::Relaxed) != word(node.gen, S_RUNNING) {
            return Err(STALE);
        }
        // SAFETY: written before publication; read-only since.
        let own_key = n.info.with(|p| unsafe { *p }).job;
        let own_ident = rules::ident(own_key);
        let recorded = self.dep_keys(node.idx);
        let known = n.dep_count.load(Ordering::Relaxed) as usize;
        // Union: a key already depended on keeps its first edge.
        let is_new = |i: usize, d: &crate::graph::Dependency| {
            let ident = rules::ident(d.key);
            !recorded[..known]
                .iter()
                .any(|k| k.load(Ordering::Relaxed) == ident)
                && !deps[..i].iter().any(|e| e.key == d.key)
        };
        let fresh = deps
            .iter()
            .enumerate()
            .filter(|(i, d)| is_new(*i, d))
            .count();
        if known + fresh > self.bounds.max_deps as usize {
            return Err(Error::new(
                crate::error::Code::InvalidArgument,
                crate::error::Reason::TooManyDependencies,
            ));
        }
        if fresh == 0 {
            return Ok(Admission::Admitted(()));
        }
        // Reserve the edges and key slots first: a refusal changes nothing.
        let mut edges = NIL;
        for _ in 0..fresh {
            match self.pop_edge() {
                Some(e) => {
                    self.edge(e).next.store(edges, Ordering::Relaxed);
                    edges = e;
                }
                None => {
                    self.give_back_edges(edges);
                    return Ok(Admission::Backpressured);
                }
            }
        }
        for d in deps {
            if self.lookup_or_insert(rules::ident(d.key), false).is_none() {
                self.give_back_edges(edges);
                return Ok(Admission::Backpressured);
            }
        }
        {
            // The cycle check and the new keys' record under the topology lock, so every later
            // cycle check sees them.
            let _g = self.lock();
            let new = deps
                .iter()
                .enumerate()
                .filter(|(i, d)| is_new(*i, d))
                .map(|(_, d)| rules::ident(d.key));
            if self.closes_cycle(own_ident, new) {
                drop(_g);
                self.give_back_edges(edges);
                return Err(CYCLE);
            }
            let mut at = known;
            for (i, d) in deps.iter().enumerate() {
                if is_new(i, d) {
                    recorded[at].store(rules::ident(d.key), Ordering::Relaxed);
                    at += 1;
                }
            }
            // Release: pairs with the cycle walk's Acquire load of the count.
            n.dep_count.store(at as u32, Ordering::Release);
        }
        // The body's hold keeps the count above zero while linking.
        n.ctl.fetch_add(fresh as u64, Ordering::Relaxed);
        let mut e = edges;
        for (i, d) in deps.iter().enumerate() {
            // New against the keys known before this call (the record above added them).
            let repeated = deps[..i].iter().any(|x| x.key == d.key)
                || recorded[..known]
                    .iter()
                    .any(|k| k.load(Ordering::Relaxed) == rules::ident(d.key));
            if !repeated {
                let next = self.edge(e).next.load(Ordering::Relaxed);
                let ident = rules::ident(d.key);
                match self.lookup_or_insert(ident, false) {
                    Some(k) => {
                        self.link(e, k, ident, d, node, work);
                    }
                    None => {
                        // The key was removed since it was claimed above and the table is
                        // full now: the dependency cannot be tracked, its gate fails.
                        self.push_edge(e);
                        let mut failed = NIL;
                        self.release(node, false, work, &mut failed);
                        self.end_failed(failed, work);
                    }
                }
                e = next;
            }
        }
        // Its urgency reaches the producers it now waits on (SPEC D30).
        let mut slots = DepBuf::new();
        self.dep_slots(node, &mut slots);
        self.arrive(node, slots.as_slice(), false);
        Ok(Admission::Admitted(()))
    }

    fn claims(&self, node: NodeRef) -> Option<u32> {
        // Acquire: as a join's load of the claims word.
        let c = self.node(node.idx).claims.load(Ordering::Acquire);
        (gen_of(c) == node.gen && c & C_COUNT > 0).then_some((c & C_COUNT) as u32)
    }

    fn release(&self, node: NodeRef, detach: bool, work: &mut Work) -> Result<bool, Error> {
        self.release_claim(node, detach, work)
    }

    #[inline]
    fn pop_withdrawn(&self, work: &mut Work) -> Option<NodeRef> {
        self.drain_doomed(work);
        work.withdrawn.pop()
    }

    fn signalled(&self, node: NodeRef) -> bool {
        self.is_signalled(node)
    }

    fn outcome(&self, node: NodeRef, take: bool) -> Result<Option<JobOutcome>, Error> {
        let n = self.nodes.get(node.idx).ok_or(STALE)?;
        // Acquire: pairs with the Release store of `done` in `end_one`.
        let st = n.state.load(Ordering::Acquire);
        if gen_of(st) != node.gen || low_of(st) == S_FREE {
            return Err(STALE);
        }
        if low_of(st) != S_DONE {
            return Ok(None);
        }
        // SAFETY: the outcome was written before `done` was published and is not written again
        // until the slot is reused, which needs the caller's claim, given up only by the CAS
        // below (a caller holding no claim is a stale handle).
        let out = n.outcome.with(|p| unsafe { *p });
        if take {
            // Give up one claim (SPEC D02: every handle of the job takes the one outcome).
            // AcqRel: the claims' RMWs form one release sequence, so whoever takes the last
            // one sees every other taker's outcome read before it frees the slot.
            let mut c = n.claims.load(Ordering::Relaxed);
            loop {
                if gen_of(c) != node.gen || c & C_COUNT == 0 {
                    return Err(STALE);
                }
                match n
                    .claims
                    .compare_exchange_weak(c, c - 1, Ordering::AcqRel, Ordering::Relaxed)
                {
                    Ok(_) => break,
                    Err(cur) => c = cur,
                }
            }
            if c & C_COUNT == 1 && c & C_ENDED != 0 {
                // The last claim: this thread owns the slot now.
                let g = NodeRef::next_gen(node.gen);
                // Release: pairs with a later `outcome`'s Acquire load, which then sees the
                // slot free; the free list's push (Release) publishes it for reuse.
                n.state
                    .store(word(g.unwrap_or(node.gen), S_FREE), Ordering::Release);
                self.recycle(node, g);
            }
        }
        Ok(out)
    }

    fn advance(&self, key: JobKey, work: &mut Work) -> Result<crate::graph::Version, Error> {
        self.advance_key(key, work)
    }

    fn remove(&self, key: JobKey, work: &mut Work) -> Result<(), Error> {
        self.remove_key(key, work)
    }

    fn reset(&self, work: &mut Work) {
        self.reset_keys(work);
    }

    fn version(&self, key: JobKey) -> Option<crate::graph::Version> {
        self.key_version(key)
    }

    fn node_version(&self, node: NodeRef) -> Option<(JobKey, crate::graph::Version)> {
        self.version_of_node(node)
    }

    fn witness_current(&self, witness: &crate::graph::Witness) -> bool {
        self.is_witness_current(witness)
    }

    fn stale_completions(&self) -> u64 {
        self.stale.load(Ordering::Relaxed)
    }

    fn key_compactions(&self) -> u64 {
        self.index.compactions.load(Ordering::Relaxed)
    }

    fn close(&self) {
        LockFreeGraph::close(self);
    }

    fn shutdown(&self, work: &mut Work) {
        self.shut_down(work);
    }

    fn occupancy(&self) -> Occupancy {
        let g = &self.gauges;
        let ready_running = g.ready_running.load(Ordering::Relaxed);
        Occupancy {
            nodes_used: g.nodes.load(Ordering::Relaxed),
            nodes_total: self.bounds.nodes,
            edges_used: g.edges.load(Ordering::Relaxed),
            edges_total: self.bounds.edges,
            keys_used: g.keys.load(Ordering::Relaxed),
            keys_total: self.bounds.keys,
            waiting: g.waiting.load(Ordering::Relaxed),
            ready: ready_running as u32,
            running: (ready_running >> 32) as u32,
            nodes_backing: self.nodes.backing(),
            edges_backing: self.edges.backing(),
            keys_backing: self.keys.backing(),
            index_cells: self.index_cells(),
            index_cells_max: self.index_cells_max(),
        }
    }

    fn shrink(&self) {
        self.shrink_stores();
    }

    fn pin(&self) -> crate::graph::Pinned {
        crate::graph::Pinned(Some(epoch::pin()))
    }
}
