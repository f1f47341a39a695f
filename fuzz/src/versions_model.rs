//! A sequential model of the version directory, written from its documented contract: what each
//! transition does to a key, which errors a call may return, when the fixed stores refuse a
//! call, and how many records and root slots are in use after every call in a single-threaded
//! run (where a root's drop always finds the writer lock free and reclaims at once).
//!
//! The model keeps, per key, every record a live root or the current state can still see, and
//! the epochs of the live roots. It is a handful of vectors and a map, nothing like the
//! directory's packed words and tagged links, so agreeing with it says something.

use fairway::versions::{Lookup, Transition};
use fairway::{Code, Reason};
use std::collections::BTreeMap;

/// The sizes and counter limits a directory was built with.
#[derive(Debug, Clone, Copy)]
pub struct Config {
    pub keys: usize,
    pub versions: usize,
    pub root_epochs: usize,
    pub epoch_limit: u64,
    pub incarnation_limit: u64,
    pub generation_limit: u64,
    pub first_epoch: u64,
    pub first_incarnation: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Present,
    Pending,
    Removed,
}

#[derive(Debug, Clone, Copy)]
struct Record {
    kind: Kind,
    incarnation: u64,
    generation: u64,
    hash: u64,
    stamp: u64,
    /// The epoch of the call that superseded it, if one did.
    superseded: Option<u64>,
}

impl Record {
    fn lookup(&self) -> Lookup {
        match self.kind {
            Kind::Present => Lookup::Present {
                incarnation: self.incarnation,
                generation: self.generation,
                hash: self.hash,
            },
            Kind::Pending | Kind::Removed => Lookup::Absent {
                incarnation: self.incarnation,
                generation: self.generation,
            },
        }
    }
}

/// What a call may return: its new epoch, or one of these errors (several when the call has
/// several faults: the contract does not say which is reported).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    Epoch(u64),
    OneOf(Vec<(Code, Reason)>),
}

/// The store counts the directory must report.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Counts {
    pub named_keys: usize,
    pub versions_used: usize,
    pub retained: usize,
    pub root_epochs_used: usize,
    pub created: u64,
}

#[derive(Debug)]
pub struct Model {
    config: Config,
    epoch: u64,
    /// `None` once the counter passed `u64::MAX`.
    next_incarnation: Option<u64>,
    /// Per key, its records still visible to someone, oldest first; the last is current.
    records: Vec<Vec<Record>>,
    /// Live roots per epoch.
    roots: BTreeMap<u64, usize>,
    created: u64,
}

impl Model {
    pub fn new(config: Config) -> Self {
        Self {
            config,
            epoch: config.first_epoch,
            next_incarnation: Some(config.first_incarnation),
            records: vec![Vec::new(); config.keys],
            roots: BTreeMap::new(),
            created: 0,
        }
    }

    pub fn epoch(&self) -> u64 {
        self.epoch
    }

    /// A root captured now: its epoch.
    pub fn capture(&mut self) -> u64 {
        *self.roots.entry(self.epoch).or_default() += 1;
        self.epoch
    }

    /// A root of `epoch` dropped.
    pub fn drop_root(&mut self, epoch: u64) {
        let n = self.roots.get_mut(&epoch).expect("a live root");
        *n -= 1;
        if *n == 0 {
            self.roots.remove(&epoch);
        }
        self.prune();
    }

    /// What a root at `epoch` reads for `key`.
    pub fn lookup(&self, key: u64, epoch: u64) -> Result<Lookup, (Code, Reason)> {
        let recs = usize::try_from(key)
            .ok()
            .and_then(|k| self.records.get(k))
            .ok_or((Code::InvalidArgument, Reason::KeyRange))?;
        Ok(recs
            .iter()
            .rev()
            .find(|r| r.stamp <= epoch)
            .map_or(Lookup::Unknown, Record::lookup))
    }

    /// The old epochs held by live roots (the current epoch's roots use the current slot).
    fn held(&self) -> usize {
        self.roots.range(..self.epoch).count()
    }

    fn visible(&self, r: &Record) -> bool {
        match r.superseded {
            None => true,
            Some(until) => self.roots.range(r.stamp..until).next().is_some(),
        }
    }

    fn prune(&mut self) {
        let mut records = std::mem::take(&mut self.records);
        for recs in &mut records {
            recs.retain(|r| self.visible(r));
        }
        self.records = records;
    }

    pub fn counts(&self) -> Counts {
        let used: usize = self.records.iter().map(Vec::len).sum();
        let named = self.records.iter().filter(|r| !r.is_empty()).count();
        Counts {
            named_keys: named,
            versions_used: used,
            retained: used - named,
            root_epochs_used: 1 + self.held(),
            created: self.created,
        }
    }

    /// Applies `batch` as the directory must, and says what the call may return.
    pub fn apply(&mut self, batch: &[Transition]) -> Expected {
        if batch.is_empty() {
            return Expected::Epoch(self.epoch);
        }
        let epoch = match self.epoch.checked_add(1) {
            Some(e) if e <= self.config.epoch_limit => e,
            _ => return Expected::OneOf(vec![(Code::Unavailable, Reason::SequenceExhausted)]),
        };
        let mut faults = Vec::new();
        let mut planned = Vec::new();
        let mut new_incarnations = 0u64;
        for (i, t) in batch.iter().enumerate() {
            let key = match *t {
                Transition::Advance(k) | Transition::Remove(k) => k,
                Transition::Publish { key, .. } => key,
            };
            let Some(k) = usize::try_from(key).ok().filter(|&k| k < self.config.keys) else {
                faults.push((Code::InvalidArgument, Reason::KeyRange));
                continue;
            };
            if batch[..i].iter().any(|o| same_key(*o, key)) {
                faults.push((Code::InvalidArgument, Reason::DuplicateKey));
                continue;
            }
            let live = self.records[k]
                .last()
                .copied()
                .filter(|r| r.kind != Kind::Removed);
            let next = match (*t, live) {
                (Transition::Advance(_), Some(r)) => match r.generation.checked_add(1) {
                    Some(g) if g <= self.config.generation_limit => Record {
                        kind: Kind::Pending,
                        generation: g,
                        hash: 0,
                        ..r
                    },
                    _ => {
                        faults.push((Code::ResourceExhausted, Reason::GenerationExhausted));
                        continue;
                    }
                },
                (Transition::Remove(_), Some(r)) => Record {
                    kind: Kind::Removed,
                    ..r
                },
                (Transition::Advance(_) | Transition::Remove(_), None) => {
                    faults.push((Code::NotFound, Reason::UnknownKey));
                    continue;
                }
                (Transition::Publish { hash, .. }, Some(r)) if r.kind == Kind::Pending => Record {
                    kind: Kind::Present,
                    hash,
                    ..r
                },
                (Transition::Publish { .. }, Some(_)) => {
                    faults.push((Code::AlreadyExists, Reason::DuplicateKey));
                    continue;
                }
                (Transition::Publish { hash, .. }, None) => {
                    match self
                        .next_incarnation
                        .and_then(|n| n.checked_add(new_incarnations))
                    {
                        Some(inc) if inc <= self.config.incarnation_limit => {
                            new_incarnations += 1;
                            Record {
                                kind: Kind::Present,
                                incarnation: inc,
                                generation: 0,
                                hash,
                                stamp: 0,
                                superseded: None,
                            }
                        }
                        _ => {
                            faults.push((Code::Unavailable, Reason::SequenceExhausted));
                            continue;
                        }
                    }
                }
            };
            planned.push((k, next));
        }
        if !faults.is_empty() {
            return Expected::OneOf(faults);
        }
        // Room: the call's records beside every record someone can still see, and a root slot
        // for the new epoch (one is current; the held old epochs take the others).
        if self.counts().versions_used + batch.len() > self.config.versions {
            return Expected::OneOf(vec![(Code::ResourceExhausted, Reason::VersionsRetained)]);
        }
        if self.held() + 1 >= self.config.root_epochs {
            return Expected::OneOf(vec![(Code::ResourceExhausted, Reason::RootEpochs)]);
        }
        self.next_incarnation = self
            .next_incarnation
            .and_then(|n| n.checked_add(new_incarnations));
        for (k, mut r) in planned {
            if let Some(old) = self.records[k].last_mut() {
                old.superseded = Some(epoch);
            }
            r.stamp = epoch;
            r.superseded = None;
            self.records[k].push(r);
            self.created += 1;
        }
        self.epoch = epoch;
        self.prune();
        Expected::Epoch(epoch)
    }
}

fn same_key(t: Transition, key: u64) -> bool {
    match t {
        Transition::Advance(k) | Transition::Remove(k) => k == key,
        Transition::Publish { key: k, .. } => k == key,
    }
}
