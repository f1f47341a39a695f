//! Roots: capture's lease on a root slot, its release (and the reclamation a last release asks
//! for), and the as-of lookup a root answers with.

use super::*;

/// A captured epoch of a [`VersionDirectory`] and a lease on every record it can see (SPEC V04).
///
/// Cloning a root takes another lease on the same epoch; dropping the last one lets the records
/// only it could see be reclaimed.
#[derive(Debug)]
pub struct Root<'d> {
    pub(super) dir: &'d VersionDirectory,
    pub(super) epoch: u64,
    pub(super) slot: u16,
}

impl VersionDirectory {
    /// Counts a new root on the current epoch's root slot; returns the epoch and the slot.
    pub(super) fn lease(&self) -> (u64, u16) {
        loop {
            // Acquire: pairs with the Release of the transition's swap, so every record of
            // that epoch is visible to this root's lookups.
            let cur = self.current.load(Ordering::Acquire);
            capture_step();
            let slot = CUR_SLOT.get(cur) as u16;
            // AcqRel RMW: pairs with the writer's `fetch_add(0)` on the same counter after it
            // moved `current` (see `transition`): either the writer's read sees this count, or
            // this RMW reads after the writer's and the load below sees the move.
            self.roots[slot as usize].fetch_add(1, Ordering::AcqRel);
            capture_step();
            // Acquire: pairs with the transition's swap of `current`.
            let again = self.current.load(Ordering::Acquire);
            capture_step();
            if again == cur {
                return (CUR_EPOCH.get(cur), slot);
            }
            self.release(slot);
        }
    }

    /// Takes back one count of `slot` (a dropped root or a capture that starts over); asks for
    /// a reclamation pass when that was the last root of an epoch no longer current.
    pub(super) fn release(&self, slot: u16) {
        // AcqRel RMW: Release so this root's reads happen before a reclaimer that sees the
        // count at zero; pairs with the writer's `fetch_add(0)` after its swap of `current`.
        if self.roots[slot as usize].fetch_sub(1, Ordering::AcqRel) != 1 {
            return;
        }
        // Acquire: pairs with the transition's swap. If the slot is still current, the writer
        // that moves off it will read the counter after this RMW and free the slot itself.
        if CUR_SLOT.get(self.current.load(Ordering::Acquire)) == u64::from(slot) {
            return;
        }
        // AcqRel RMW: pairs with the `fetch_add(0)` a lock holder makes after unlocking in
        // `serve_reclaim_requests`: one of the two sees the other (see there).
        self.want_reclaim.fetch_add(1, Ordering::AcqRel);
        self.serve_reclaim_requests();
    }

    /// What `key` reads at `epoch` (see [`Root::lookup`]).
    pub(super) fn lookup_at(&self, key: usize, epoch: u64) -> Lookup {
        'restart: loop {
            // Acquire: pairs with the writer's Release store of the head.
            let mut at = self.heads[key].load(Ordering::Acquire);
            loop {
                let Some((slot, tag)) = unlink(at) else {
                    return Lookup::Unknown;
                };
                let rec = &self.store[slot];
                // Acquire loads: pair with the writer's Release stores of the fields; a value
                // from a reuse of the slot brings the reuse's tag bump with it.
                let meta = rec.meta.load(Ordering::Acquire);
                let older = rec.older.load(Ordering::Acquire);
                let found = META_EPOCH.get(meta) <= epoch;
                let answer = if found {
                    let incarnation = rec.incarnation.load(Ordering::Acquire);
                    let generation = rec.generation.load(Ordering::Acquire);
                    match META_KIND.get(meta) {
                        KIND_PRESENT => Lookup::Present {
                            incarnation,
                            generation,
                            hash: rec.hash.load(Ordering::Acquire),
                        },
                        _ => Lookup::Absent {
                            incarnation,
                            generation,
                        },
                    }
                } else {
                    Lookup::Unknown
                };
                // Acquire: pairs with `free_record`'s Release store of the tag (a changed tag
                // brings the shortened link with it); ordered after the field loads above.
                if rec.tag.load(Ordering::Acquire) != tag {
                    continue 'restart;
                }
                if found {
                    return answer;
                }
                at = older;
            }
        }
    }

    /// [`lookup_at`](Self::lookup_at) of `key` after checking it is below the key capacity.
    fn lookup_checked(&self, key: u64, epoch: u64) -> Result<Lookup, Error> {
        let k = usize::try_from(key).map_err(|_| key_range())?;
        if k >= self.heads.len() {
            return Err(key_range());
        }
        Ok(self.lookup_at(k, epoch))
    }
}

impl Root<'_> {
    /// The epoch this root was captured at.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// What `key` was at this root's epoch (SPEC V02). Lock-free; O(number of records of the key
    /// newer than the root that are still retained).
    ///
    /// # Errors
    ///
    /// `invalid-argument / key-range` for a key at or past the key capacity.
    pub fn lookup(&self, key: u64) -> Result<Lookup, Error> {
        self.dir.lookup_checked(key, self.epoch)
    }
}

/// A [`Root`] that owns a reference to its directory ([`VersionDirectory::capture_owned`]).
#[derive(Debug)]
pub struct OwnedRoot {
    pub(super) dir: std::sync::Arc<VersionDirectory>,
    pub(super) epoch: u64,
    pub(super) slot: u16,
}

impl OwnedRoot {
    /// The epoch this root was captured at.
    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// What `key` was at this root's epoch; see [`Root::lookup`].
    ///
    /// # Errors
    ///
    /// `invalid-argument / key-range` for a key at or past the key capacity.
    pub fn lookup(&self, key: u64) -> Result<Lookup, Error> {
        self.dir.lookup_checked(key, self.epoch)
    }
}

impl Clone for OwnedRoot {
    fn clone(&self) -> Self {
        // AcqRel RMW: as in `Root::clone`.
        self.dir.roots[self.slot as usize].fetch_add(1, Ordering::AcqRel);
        OwnedRoot {
            dir: std::sync::Arc::clone(&self.dir),
            epoch: self.epoch,
            slot: self.slot,
        }
    }
}

impl Drop for OwnedRoot {
    fn drop(&mut self) {
        self.dir.release(self.slot);
    }
}

impl Clone for Root<'_> {
    fn clone(&self) -> Self {
        // AcqRel RMW: the slot already counts this root, so it stays held; pairs with the
        // reclaimer's Acquire load like any count.
        self.dir.roots[self.slot as usize].fetch_add(1, Ordering::AcqRel);
        Root {
            dir: self.dir,
            epoch: self.epoch,
            slot: self.slot,
        }
    }
}

impl Drop for Root<'_> {
    fn drop(&mut self) {
        self.dir.release(self.slot);
    }
}
