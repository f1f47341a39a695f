//! The writer's side, under the writer lock: a transition call (plan, link, move the epoch),
//! the reclamation pass and the freeing of a record, and serving the reclamation requests of
//! dropped roots.

use super::*;

/// The writer lock, held. Dropping it releases the lock and then serves the reclamation
/// requests that dropped roots left while it was held ([`serve_reclaim_requests`]), so every
/// holder of the lock — a transition, a pass, an occupancy read — serves them, and a record no
/// root can see is freed without any further call (SPEC V04).
///
/// [`serve_reclaim_requests`]: VersionDirectory::serve_reclaim_requests
pub(super) struct WriterLock<'a> {
    dir: &'a VersionDirectory,
    guard: Option<MutexGuard<'a, Writer>>,
}

impl core::ops::Deref for WriterLock<'_> {
    type Target = Writer;
    fn deref(&self) -> &Writer {
        self.guard.as_ref().expect("held until drop")
    }
}

impl core::ops::DerefMut for WriterLock<'_> {
    fn deref_mut(&mut self) -> &mut Writer {
        self.guard.as_mut().expect("held until drop")
    }
}

impl Drop for WriterLock<'_> {
    fn drop(&mut self) {
        // Unlock first: `serve_reclaim_requests` takes the lock with `try_lock`.
        drop(self.guard.take());
        self.dir.serve_reclaim_requests();
    }
}

impl VersionDirectory {
    pub(super) fn lock(&self) -> WriterLock<'_> {
        let guard = self
            .writer
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        WriterLock {
            dir: self,
            guard: Some(guard),
        }
    }

    /// Runs passes while reclamation requests are pending and the writer lock is free; never
    /// waits. A request made while another thread holds the lock is served by that thread, which
    /// calls this after unlocking: its RMW on `want_reclaim` either reads after the request (and
    /// sees it) or before it, and then its unlock happened before the requester's `try_lock`,
    /// which therefore finds the lock free or taken by a later holder that will check in turn.
    pub(super) fn serve_reclaim_requests(&self) {
        loop {
            // AcqRel RMW (a read that orders like a write): pairs with `release`'s fetch_add.
            if self.want_reclaim.fetch_add(0, Ordering::AcqRel) == 0 {
                return;
            }
            let mut w = match self.writer.try_lock() {
                Ok(w) => w,
                // A poisoned lock is taken over, as `lock` does.
                Err(std::sync::TryLockError::Poisoned(p)) => p.into_inner(),
                Err(std::sync::TryLockError::WouldBlock) => return,
            };
            // AcqRel: pairs with `release`'s fetch_add; the pass below starts after every
            // request this swap consumed.
            self.want_reclaim.swap(0, Ordering::AcqRel);
            self.reclaim_pass(&mut w);
        }
    }

    pub(super) fn transition(&self, w: &mut Writer, batch: &[Transition]) -> Result<u64, Error> {
        // Relaxed: only the writer stores `current`, and it holds the lock.
        let cur = self.current.load(Ordering::Relaxed);
        let old_epoch = CUR_EPOCH.get(cur);
        let old_slot = CUR_SLOT.get(cur) as u16;
        if batch.is_empty() {
            return Ok(old_epoch);
        }
        let epoch = match old_epoch.checked_add(1) {
            Some(e) if e <= self.limits.epoch => e,
            _ => return Err(Error::new(Code::Unavailable, Reason::SequenceExhausted)),
        };
        // Plan: check every transition before changing anything.
        let planned = self.plan(w, batch, epoch).and_then(|new_incarnations| {
            // Room: one record per transition and a root slot for the new epoch.
            if w.free_versions.len() < batch.len() || w.free_slots.is_empty() {
                self.reclaim_pass(w);
            }
            if w.free_versions.len() < batch.len() {
                return Err(Error::new(
                    Code::ResourceExhausted,
                    Reason::VersionsRetained,
                ));
            }
            match w.free_slots.pop() {
                Some(slot) => Ok((new_incarnations, slot)),
                None => Err(Error::new(Code::ResourceExhausted, Reason::RootEpochs)),
            }
        });
        let (new_incarnations, new_slot) = match planned {
            Ok(p) => p,
            Err(e) => {
                // A refused call leaves no mark behind (the next call reuses this epoch).
                for t in batch {
                    if let Some(m) = usize::try_from(t.key())
                        .ok()
                        .and_then(|k| w.batch_mark.get_mut(k))
                    {
                        if *m == epoch {
                            *m = 0;
                        }
                    }
                }
                return Err(e);
            }
        };
        w.next_incarnation = w
            .next_incarnation
            .and_then(|n| n.checked_add(new_incarnations));
        // Link every new record in. Roots at older epochs skip them (stamp > their epoch); no
        // root sees the new epoch before `current` moves below.
        let first_retired = w.retired.len();
        for i in 0..w.new_links.len() {
            let (key, d) = w.new_links[i];
            let slot = w.free_versions.pop().expect("room checked above");
            let rec = &self.store[slot as usize];
            // Relaxed: the head is written only by the writer, under the lock.
            let old_head = self.heads[key].load(Ordering::Relaxed);
            // Release stores: a reader that loads any of them (Acquire) before checking the
            // tag sees the tag bump of the slot's previous free (see the module docs).
            rec.meta.store(
                META_EPOCH.set(META_KIND.set(0, d.kind), epoch),
                Ordering::Release,
            );
            rec.incarnation.store(d.incarnation, Ordering::Release);
            rec.generation.store(d.generation, Ordering::Release);
            rec.hash.store(d.hash, Ordering::Release);
            rec.older.store(old_head, Ordering::Release);
            // Release: pairs with the lookup's Acquire load of the head; publishes the fields.
            self.heads[key].store(link(slot, w.tags[slot as usize]), Ordering::Release);
            w.newer[slot as usize] = NIL;
            w.created += 1;
            match unlink(old_head) {
                Some((old, _)) => {
                    w.newer[old] = slot;
                    // Relaxed: the writer's own earlier store.
                    let from = META_EPOCH.get(self.store[old].meta.load(Ordering::Relaxed));
                    w.retired.push(Retired {
                        slot: old as u32,
                        from,
                        until: epoch,
                    });
                }
                None => w.named_keys += 1,
            }
        }
        // Publish the epoch. AcqRel: Release publishes the records linked above to captures
        // that load `current` (Acquire); the RMW orders it before the counter read below.
        self.current
            .swap(pack_current(new_slot, epoch), Ordering::AcqRel);
        // AcqRel RMW: pairs with `capture`'s fetch_add and `release`'s fetch_sub (see there):
        // a root that validated against the old epoch is counted here.
        if self.roots[old_slot as usize].fetch_add(0, Ordering::AcqRel) == 0 {
            w.free_slots.push(old_slot);
        } else {
            w.held.push(Held {
                slot: old_slot,
                epoch: old_epoch,
            });
        }
        // Records superseded now that no held epoch can see go at once.
        self.free_unseen(w, first_retired);
        Ok(epoch)
    }

    /// Checks every transition of `batch` against the keys' current records and fills
    /// `w.new_links` with the records to create. Returns the number of new incarnations.
    pub(super) fn plan(
        &self,
        w: &mut Writer,
        batch: &[Transition],
        epoch: u64,
    ) -> Result<u64, Error> {
        let mut new_incarnations = 0u64;
        w.new_links.clear();
        for t in batch {
            let key = usize::try_from(t.key()).map_err(|_| key_range())?;
            if key >= self.heads.len() {
                return Err(key_range());
            }
            if w.batch_mark[key] == epoch {
                return Err(Error::new(Code::InvalidArgument, Reason::DuplicateKey));
            }
            w.batch_mark[key] = epoch;
            let live = self.head_of(key).filter(|h| h.kind != KIND_REMOVED);
            let next = match (*t, live) {
                (Transition::Advance(_), Some(h)) => match h.generation.checked_add(1) {
                    Some(generation) if generation <= self.limits.generation => Decoded {
                        kind: KIND_PENDING,
                        generation,
                        hash: 0,
                        ..h
                    },
                    _ => {
                        return Err(Error::new(
                            Code::ResourceExhausted,
                            Reason::GenerationExhausted,
                        ))
                    }
                },
                (Transition::Remove(_), Some(h)) => Decoded {
                    kind: KIND_REMOVED,
                    ..h
                },
                (Transition::Advance(_) | Transition::Remove(_), None) => {
                    return Err(Error::new(Code::NotFound, Reason::UnknownKey))
                }
                (Transition::Publish { hash, .. }, Some(h)) if h.kind == KIND_PENDING => Decoded {
                    kind: KIND_PRESENT,
                    hash,
                    ..h
                },
                (Transition::Publish { .. }, Some(_)) => {
                    return Err(Error::new(Code::AlreadyExists, Reason::DuplicateKey))
                }
                (Transition::Publish { hash, .. }, None) => {
                    match w
                        .next_incarnation
                        .and_then(|n| n.checked_add(new_incarnations))
                    {
                        Some(incarnation) if incarnation <= self.limits.incarnation => {
                            new_incarnations += 1;
                            Decoded {
                                kind: KIND_PRESENT,
                                incarnation,
                                generation: 0,
                                hash,
                            }
                        }
                        _ => return Err(Error::new(Code::Unavailable, Reason::SequenceExhausted)),
                    }
                }
            };
            w.new_links.push((key, next));
        }
        Ok(new_incarnations)
    }

    /// The writer's view of a key's newest record.
    pub(super) fn head_of(&self, key: usize) -> Option<Decoded> {
        // Relaxed: heads and records are written only by the writer, which holds the lock.
        let (slot, _) = unlink(self.heads[key].load(Ordering::Relaxed))?;
        let rec = &self.store[slot];
        Some(Decoded {
            kind: META_KIND.get(rec.meta.load(Ordering::Relaxed)),
            incarnation: rec.incarnation.load(Ordering::Relaxed),
            generation: rec.generation.load(Ordering::Relaxed),
            hash: rec.hash.load(Ordering::Relaxed),
        })
    }

    /// Drops held root slots whose roots are all gone, then frees every retired record no
    /// remaining held epoch can see. Returns the number of records freed.
    pub(super) fn reclaim_pass(&self, w: &mut Writer) -> usize {
        let Writer {
            held, free_slots, ..
        } = w;
        held.retain(|h| {
            // Acquire: pairs with `release`'s fetch_sub, so the dropped roots' reads happened
            // before any slot freed below is reused.
            let live = self.roots[h.slot as usize].load(Ordering::Acquire) != 0;
            if !live {
                free_slots.push(h.slot);
            }
            live
        });
        self.free_unseen(w, 0)
    }

    /// Unlinks a superseded record from its key's chain and returns its slot to the free list.
    pub(super) fn free_record(&self, w: &mut Writer, slot: u32) {
        let s = slot as usize;
        let newer = w.newer[s];
        debug_assert_ne!(newer, NIL, "only superseded records are freed");
        // Relaxed: the writer's own earlier store.
        let older = self.store[s].older.load(Ordering::Relaxed);
        // Release: a reader that follows the shortened link sees the older record's fields.
        self.store[newer as usize]
            .older
            .store(older, Ordering::Release);
        if let Some((o, _)) = unlink(older) {
            w.newer[o] = newer;
        }
        w.newer[s] = NIL;
        let tag = w.tags[s].wrapping_add(1);
        w.tags[s] = tag;
        // Release: pairs with the lookup's Acquire load of the tag, so a reader that sees the
        // new tag (and starts over) also sees the newer neighbour's shortened link above and
        // walks around this record. It is also ordered before the slot's next field stores,
        // which are Release (see the module docs: a reader that sees any of those sees this
        // tag).
        self.store[s].tag.store(tag, Ordering::Release);
        w.free_versions.push(slot);
        w.reclaimed += 1;
    }
    /// Frees every retired record from index `from` of the retired list on that no held epoch
    /// can see; returns how many.
    fn free_unseen(&self, w: &mut Writer, from: usize) -> usize {
        let mut freed = 0;
        let mut i = from;
        while i < w.retired.len() {
            let r = w.retired[i];
            if held_in(&w.held, r.from, r.until) {
                i += 1;
            } else {
                w.retired.swap_remove(i);
                self.free_record(w, r.slot);
                freed += 1;
            }
        }
        freed
    }
}

/// Whether some held epoch lies in `from..until` (`held` is ordered by epoch).
fn held_in(held: &[Held], from: u64, until: u64) -> bool {
    let i = held.partition_point(|h| h.epoch < from);
    held.get(i).is_some_and(|h| h.epoch < until)
}
