//! Key versions, witnesses, and the key operations of a [`Graph`]: `advance`, `remove`,
//! `reset` (SPEC D01, D20–D24).
//!
//! A key (a [`JobKey`]: work key and stage) exists from the first time a job or a dependency
//! names it until it is removed. It has a process-unique **incarnation**, given when it is
//! created, and a **generation**, 0 at creation, which [`Graph::advance`] bumps. A key removed
//! and named again is a new incarnation at generation 0. [`Version`]s order
//! incarnation-first.
//!
//! Both engines keep a key's version in one word: the incarnation in the high 40 bits, the
//! generation in the low 24 ([`Version::MAX_GENERATION`]); 0 means "no incarnation" (never
//! named, or removed).

use super::*;

/// Bits of a packed version word holding the generation.
pub(crate) const GEN_BITS: u32 = 24;
const GEN_MASK: u64 = (1 << GEN_BITS) - 1;

/// `cancelled / superseded`: the outcome of a job of an older generation (SPEC D20, D21).
pub(crate) const SUPERSEDED: Error = Error::new(Code::Cancelled, Reason::Superseded);
/// `cancelled / removed`: the outcome of the job of a removed key (SPEC D24).
pub(crate) const CANCELLED_REMOVED: Error = Error::new(Code::Cancelled, Reason::Removed);
/// `unavailable / removed`: the outcome of a job that waited on a removed key (SPEC D24).
pub(crate) const REMOVED: Error = Error::new(Code::Unavailable, Reason::Removed);
/// `not-found / unknown-key`.
pub(crate) const UNKNOWN_KEY: Error = Error::new(Code::NotFound, Reason::UnknownKey);
/// `resource-exhausted / generation-exhausted` (SPEC D22).
pub(crate) const EXHAUSTED: Error =
    Error::new(Code::ResourceExhausted, Reason::GenerationExhausted);
/// `not-found / stale-witness` (SPEC D23).
pub(crate) const STALE_WITNESS: Error = Error::new(Code::NotFound, Reason::StaleWitness);

/// A key's version (SPEC D01): ordered incarnation first, then generation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Version {
    /// Process-unique: every creation of a key (the first, and each after a removal) draws a
    /// new one.
    pub incarnation: u64,
    /// Bumped by [`Graph::advance`]; 0 at creation.
    pub generation: u32,
}

impl Version {
    /// The largest generation a key can reach (24 bits); a graph may set a lower bound with
    /// [`GraphBuilder::max_generation`].
    pub const MAX_GENERATION: u32 = (1 << GEN_BITS) - 1;

    /// The packed word: incarnation high, generation low.
    #[inline]
    pub(crate) fn packed(self) -> u64 {
        self.incarnation << GEN_BITS | u64::from(self.generation)
    }

    #[inline]
    pub(crate) fn unpack(v: u64) -> Self {
        Self {
            incarnation: v >> GEN_BITS,
            generation: (v & GEN_MASK) as u32,
        }
    }
}

/// The generation of a packed version word.
#[inline]
pub(crate) fn gen_of_version(v: u64) -> u32 {
    (v & GEN_MASK) as u32
}

/// A packed version word of a fresh incarnation at generation 0. Never 0.
pub(crate) fn fresh_incarnation() -> u64 {
    let inc = crate::sync::unique::next(&crate::sync::unique::INCARNATIONS);
    // 2^40 creations of keys in one process: about 35 years at one per microsecond.
    assert!(
        inc < 1 << (64 - GEN_BITS),
        "graph key incarnations exhausted"
    );
    inc << GEN_BITS
}

/// Proof that a job ran at a key version (SPEC D23), minted by the graph for a running job
/// ([`Graph::witness`]). A result is published only while its witness is current
/// ([`Graph::check_witness`]): a witness of a superseded job, of an older generation, or of a
/// removed or re-created key (even at the same generation) is refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Witness {
    pub(super) graph: u64,
    pub(super) node: NodeRef,
    pub(super) key: JobKey,
    pub(super) version: Version,
}

impl Witness {
    /// The key the job ran for.
    #[inline]
    pub fn key(&self) -> JobKey {
        self.key
    }

    /// The key's version when the job was admitted.
    #[inline]
    pub fn version(&self) -> Version {
        self.version
    }
}

impl<E: GraphEngine> GraphOn<E> {
    /// Bumps `key`'s generation and, in the same step, supersedes its older work (SPEC D20):
    /// a waiting or queued job of the key ends `cancelled / superseded`; a running one is
    /// signalled — its completion will be refused as stale (SPEC D21;
    /// [`is_current`](Self::is_current) tells the body). Its dependents follow the key (SPEC
    /// D33): those on the key's current producer keep waiting, now for the new generation's
    /// job, as do jobs that waited on the key with no producer; those pinned to the superseded
    /// version ([`Dependency::pinned`]) count it as ended `superseded` without admission (a
    /// `Sequential` gate holds, any other fails the dependent `cancelled / superseded`). The
    /// sweep looks only backward: the key's newer work does not exist yet.
    ///
    /// Returns the key's new version.
    ///
    /// # Errors
    ///
    /// `not-found / unknown-key` for a key never named or removed; `resource-exhausted /
    /// generation-exhausted` when the generation is at the graph's maximum (SPEC D22: it
    /// never wraps). Nothing changed then.
    ///
    /// # Example
    ///
    /// ```
    /// use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
    /// use fairway::graph::{Admission, Graph, JobKey, JobOutcome, JobSpec};
    /// use fairway::{ClassId, Reason, TenantId};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
    /// let graph = Graph::builder(ledger).class(1).build()?;
    /// let spec = JobSpec {
    ///     key: JobKey::new(7),
    ///     tenant: TenantId(0),
    ///     class: ClassId(0),
    ///     priority: 0,
    ///     deadline: None,
    ///     deps: &[],
    /// };
    /// let Admission::Admitted(old) = graph.submit(&spec)? else { unreachable!() };
    /// // The input changed before the job ran: supersede it and submit the next generation.
    /// assert_eq!(graph.advance(JobKey::new(7))?.generation, 1);
    /// let Admission::Admitted(new) = graph.submit(&spec)? else { unreachable!() };
    /// while let Some(job) = graph.try_next(ClassId(0)) {
    ///     graph.complete(job, JobOutcome::Succeeded)?;
    /// }
    /// assert!(matches!(old.outcome(), Some(JobOutcome::Failed(e))
    ///     if matches!(e.reason(), Reason::Superseded)));
    /// assert_eq!(graph.outcome(&new)?, Some(JobOutcome::Succeeded));
    /// # Ok::<(), fairway::Error>(())
    /// ```
    pub fn advance(&self, key: JobKey) -> Result<Version, Error> {
        let _pin = self.inner.engine.pin();
        let mut work = E::Work::default();
        let r = self.inner.engine.advance(key, &mut work);
        self.hand_off(&mut work);
        self.wake_waiters();
        r
    }

    /// Retires `key` (SPEC D24): its waiting or queued job ends `cancelled / removed`, a
    /// running one is signalled (its completion is stale), jobs waiting on the key fail
    /// `unavailable / removed`, and their edges are freed. Naming the key again creates a new
    /// incarnation at generation 0.
    ///
    /// # Errors
    ///
    /// `not-found / unknown-key` for a key never named or already removed.
    pub fn remove(&self, key: JobKey) -> Result<(), Error> {
        let _pin = self.inner.engine.pin();
        let mut work = E::Work::default();
        let r = self.inner.engine.remove(key, &mut work);
        self.hand_off(&mut work);
        self.wake_waiters();
        r
    }

    /// Removes every key (SPEC D24), as [`remove`](Self::remove) for each; then gives back
    /// the stores' backing memory that is no longer in use, as
    /// [`shrink_to_fit`](Self::shrink_to_fit) does (SPEC D51).
    pub fn reset(&self) {
        let _pin = self.inner.engine.pin();
        let mut work = E::Work::default();
        self.inner.engine.reset(&mut work);
        self.hand_off(&mut work);
        self.wake_waiters();
        self.inner.engine.shrink();
    }

    /// Gives back backing memory after a burst (SPEC D51): every store's segments (node,
    /// edge and key stores, and the key index's array) whose slots are all free go back, so
    /// [`occupancy`](Self::occupancy)'s `*_backing` falls back towards what is in use. Anything
    /// in use is kept: a live job's node, a pending edge, a key still named. Handles of jobs
    /// freed before the shrink keep reading `not-found / stale-handle`, also once their slots
    /// are backed again.
    ///
    /// The stores shrink only here and in [`reset`](Self::reset), never automatically: a
    /// shrink is a rare path that takes the stores' growth lock, and the host knows when a
    /// burst is over; growth itself happens only at a new high-water mark, so a steady state
    /// neither grows nor shrinks.
    ///
    /// # Example
    ///
    /// ```
    /// use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
    /// use fairway::graph::{Admission, Graph, JobKey, JobOutcome, JobSpec};
    /// use fairway::{ClassId, TenantId};
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
    /// let graph = Graph::builder(ledger).class(1).nodes(100_000).build()?;
    /// let fresh = graph.occupancy();
    /// assert!(fresh.nodes_backing <= fresh.nodes_total);
    /// // A burst of 2,000 jobs: the node store is backed at least that far.
    /// let burst: Vec<_> = (0..2_000)
    ///     .map(|k| {
    ///         let spec = JobSpec {
    ///             key: JobKey::new(k),
    ///             tenant: TenantId(0),
    ///             class: ClassId(0),
    ///             priority: 0,
    ///             deadline: None,
    ///             deps: &[],
    ///         };
    ///         match graph.submit(&spec) {
    ///             Ok(Admission::Admitted(h)) => h,
    ///             other => panic!("{other:?}"),
    ///         }
    ///     })
    ///     .collect();
    /// let peak = graph.occupancy();
    /// assert_eq!(peak.nodes_used, 2_000);
    /// assert!(peak.nodes_backing >= 2_000);
    /// while let Some(job) = graph.try_next(ClassId(0)) {
    ///     graph.complete(job, JobOutcome::Succeeded)?;
    /// }
    /// // The last handles gone, every node is free again; the burst's segments go back.
    /// drop(burst);
    /// graph.shrink_to_fit();
    /// let after = graph.occupancy();
    /// assert_eq!(after.nodes_used, 0);
    /// assert_eq!(after.nodes_backing, fresh.nodes_backing);
    /// # Ok::<(), fairway::Error>(())
    /// ```
    pub fn shrink_to_fit(&self) {
        let _pin = self.inner.engine.pin();
        self.inner.engine.shrink();
    }

    /// Compactions of the key table so far: the lock-free graph compacts its index of keys
    /// under the topology lock once removals have left enough tombstones; the mutex graph
    /// never does. An observation, for measurements.
    #[doc(hidden)]
    pub fn key_compactions(&self) -> u64 {
        self.inner.engine.key_compactions()
    }

    /// `key`'s current version; `None` if it was never named or was removed.
    pub fn version(&self, key: JobKey) -> Option<Version> {
        let _pin = self.inner.engine.pin();
        self.inner.engine.version(key)
    }

    /// Mints the witness of a running job: its key and the version it was admitted at.
    pub fn witness(&self, job: &RunningJob) -> Witness {
        let _pin = self.inner.engine.pin();
        let (key, version) = self
            .inner
            .engine
            .node_version(job.id.node)
            .unwrap_or((job.key, Version::unpack(0)));
        Witness {
            graph: self.inner.id,
            node: job.id.node,
            key,
            version,
        }
    }

    /// Whether a result carrying `witness` may be published now (SPEC D23): its key still has
    /// that incarnation and generation and its job was not superseded or removed.
    ///
    /// # Errors
    ///
    /// `not-found / stale-witness` otherwise; `permission-denied / foreign-handle` for a
    /// witness of another graph.
    pub fn check_witness(&self, witness: &Witness) -> Result<(), Error> {
        let _pin = self.inner.engine.pin();
        if witness.graph != self.inner.id {
            return Err(Error::new(Code::PermissionDenied, Reason::ForeignHandle));
        }
        if self.inner.engine.witness_current(witness) {
            Ok(())
        } else {
            Err(STALE_WITNESS)
        }
    }

    /// Whether a running job is still current: `false` once its key advanced or was removed
    /// (the signal of SPEC D20 to a running body; its completion will be refused).
    pub fn is_current(&self, job: &RunningJob) -> bool {
        self.check_witness(&self.witness(job)).is_ok()
    }

    /// Completions refused because their job was superseded or its key removed (SPEC D21).
    pub fn stale_completions(&self) -> u64 {
        self.inner.engine.stale_completions()
    }
}
