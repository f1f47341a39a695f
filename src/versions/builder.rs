//! The directory's builder: sizes and counter limits, checked before anything is allocated.

use super::*;

/// Sizes of a [`VersionDirectory`], fixed at build.
#[derive(Debug, Clone, Copy)]
pub struct VersionsBuilder {
    keys: usize,
    versions: usize,
    root_epochs: usize,
    epoch_limit: u64,
    incarnation_limit: u64,
    generation_limit: u64,
    first_epoch: u64,
    first_incarnation: u64,
}

impl Default for VersionsBuilder {
    fn default() -> Self {
        Self {
            keys: 1024,
            versions: 4096,
            root_epochs: 64,
            epoch_limit: EPOCH_MAX,
            incarnation_limit: u64::MAX,
            generation_limit: u64::MAX,
            first_epoch: 0,
            first_incarnation: 1,
        }
    }
}

impl VersionsBuilder {
    /// Key capacity: keys are `0..keys` (default 1,024; at least 1, at most 2^32).
    pub fn keys(mut self, keys: usize) -> Self {
        self.keys = keys;
        self
    }

    /// Version store capacity: current records plus those retained for live roots (default
    /// 4,096; at least 1, less than 2^32 - 1).
    pub fn versions(mut self, versions: usize) -> Self {
        self.versions = versions;
        self
    }

    /// Root slots: at most `root_epochs - 1` distinct old epochs can be held by live roots at
    /// once (default 64; from 2 to 65,535).
    pub fn root_epochs(mut self, root_epochs: usize) -> Self {
        self.root_epochs = root_epochs;
        self
    }

    /// Lowers the last epoch, incarnation and generation the counters may reach, so tests can
    /// reach exhaustion without 2^48 transitions. Not for production use.
    #[doc(hidden)]
    pub fn counter_limits(mut self, epoch: u64, incarnation: u64, generation: u64) -> Self {
        self.epoch_limit = epoch.min(EPOCH_MAX);
        self.incarnation_limit = incarnation;
        self.generation_limit = generation;
        self
    }

    /// Starts the epoch and incarnation counters at these values instead of 0 and 1, so tests
    /// can run next to the counters' real ends. Not for production use.
    #[doc(hidden)]
    pub fn first_counters(mut self, epoch: u64, incarnation: u64) -> Self {
        self.first_epoch = epoch;
        self.first_incarnation = incarnation;
        self
    }

    /// Builds the directory, allocating every store.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` naming the field (`keys`, `versions`, `root_epochs`)
    /// that is out of range.
    pub fn build(self) -> Result<VersionDirectory, Error> {
        // A directory that can name no key is a configuration mistake, refused like the rest.
        if self.keys == 0 || self.keys > u32::MAX as usize + 1 {
            return Err(Error::configuration("keys"));
        }
        if self.versions == 0 || self.versions > VERSIONS_MAX {
            return Err(Error::configuration("versions"));
        }
        if self.root_epochs < 2 || self.root_epochs > ROOT_SLOTS_MAX {
            return Err(Error::configuration("root_epochs"));
        }
        if self.first_epoch > self.epoch_limit {
            return Err(Error::configuration("first_epoch"));
        }
        let root_slots = self.root_epochs;
        Ok(VersionDirectory {
            current: CachePadded::new(AtomicU64::new(pack_current(0, self.first_epoch))),
            heads: (0..self.keys).map(|_| AtomicU64::new(NO_LINK)).collect(),
            store: (0..self.versions).map(|_| Record::new()).collect(),
            roots: (0..root_slots)
                .map(|_| CachePadded::new(AtomicU64::new(0)))
                .collect(),
            want_reclaim: AtomicU32::new(0),
            writer: Mutex::new(Writer {
                // Slot 0 is the current one; pop from the end hands out 1, 2, ...
                free_slots: (1..root_slots as u16).rev().collect(),
                held: Vec::with_capacity(root_slots),
                free_versions: (0..self.versions as u32).rev().collect(),
                newer: vec![NIL; self.versions],
                tags: vec![0; self.versions],
                retired: Vec::with_capacity(self.versions),
                batch_mark: vec![0; self.keys],
                new_links: Vec::new(),
                next_incarnation: Some(self.first_incarnation),
                named_keys: 0,
                created: 0,
                reclaimed: 0,
            }),
            limits: Limits {
                epoch: self.epoch_limit,
                incarnation: self.incarnation_limit,
                generation: self.generation_limit,
            },
        })
    }
}

/// The counters' limits (the largest value each may take).
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) epoch: u64,
    pub(super) incarnation: u64,
    pub(super) generation: u64,
}
