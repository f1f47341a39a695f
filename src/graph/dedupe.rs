//! Deduplication of submissions (SPEC D02, D03, D32); the rules are in the module docs of
//! `graph`, "Deduplication".

use super::*;

/// The identity a submission is deduplicated on (SPEC D02, D03): a key and its current
/// version (`None` for a key the graph has never named, or has removed).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Identity {
    /// The job's key (work key and stage).
    pub key: JobKey,
    /// The key's version: at the probe, the one the submission would run at; in a notice,
    /// the one the admitted or joined job runs at.
    pub version: Option<Version>,
}

/// A caller-side deduplication hook (SPEC D03), consulted by [`Graph::submit_with`] before
/// admission.
///
/// `probe` returns the [`JobId`] of a job of this graph to join instead of submitting; the
/// graph then adds a claim to that job (see
/// [Deduplication](crate::graph#deduplication-spec-d02-d03-d32)) and returns
/// [`Admission::DedupeJoined`] with a new handle of it. The notices tell the hook what the
/// submission did, so it can record job ids for later probes. An id holds nothing: a probe
/// that names a job which was freed (it ended and its last handle was dropped) or withdrawn
/// is refused (SPEC D31). Every method runs on the submitting thread, outside any lock of the
/// graph (D32): it may call back into the graph.
///
/// # Example
///
/// A hook that treats two keys as one piece of work:
///
/// ```
/// use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
/// use fairway::graph::{Admission, DedupeHook, Graph, Identity, JobId, JobKey, JobOutcome, JobSpec};
/// use fairway::{ClassId, TenantId};
/// use std::cell::Cell;
///
/// /// Keys 1 and 2 name the same content: the first submitted runs, the other joins it.
/// #[derive(Default)]
/// struct SameContent(Cell<Option<JobId>>);
///
/// impl DedupeHook for SameContent {
///     fn probe(&self, _: &Identity) -> Option<JobId> {
///         self.0.get()
///     }
///     fn admitted(&self, _: &Identity, job: JobId) {
///         self.0.set(Some(job));
///     }
/// }
///
/// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 1))?;
/// let graph = Graph::builder(ledger).class(1).build()?;
/// let job = |key| JobSpec {
///     key: JobKey::new(key),
///     tenant: TenantId(0),
///     class: ClassId(0),
///     priority: 0,
///     deadline: None,
///     deps: &[],
/// };
/// let hook = SameContent::default();
/// let Admission::Admitted(first) = graph.submit_with(&job(1), &hook)? else { unreachable!() };
/// let Admission::DedupeJoined(joiner) = graph.submit_with(&job(2), &hook)? else {
///     unreachable!()
/// };
/// assert_eq!(joiner, first);
/// let running = graph.try_next(ClassId(0)).expect("one job");
/// graph.complete(running, JobOutcome::Succeeded)?;
/// assert!(graph.try_next(ClassId(0)).is_none(), "key 2 never ran");
/// // Both handles see the one outcome; the job's slot is freed with the last one dropped.
/// assert_eq!(first.outcome(), Some(JobOutcome::Succeeded));
/// assert_eq!(graph.outcome(&joiner)?, Some(JobOutcome::Succeeded));
/// drop(first);
/// assert_eq!(graph.occupancy().nodes_used, 1);
/// drop(joiner);
/// assert_eq!(graph.occupancy().nodes_used, 0);
/// # Ok::<(), fairway::Error>(())
/// ```
pub trait DedupeHook {
    /// A job to join instead of submitting one for `identity`, or `None` to submit.
    fn probe(&self, identity: &Identity) -> Option<JobId>;

    /// The submission admitted a new job (`job`, its id). Default: nothing.
    fn admitted(&self, identity: &Identity, job: JobId) {
        let _ = (identity, job);
    }

    /// The submission joined a job, through [`probe`](Self::probe) or the graph's own
    /// deduplication of a live identity (D02); `job` is the joined job's id. Default: nothing.
    fn joined(&self, identity: &Identity, job: JobId) {
        let _ = (identity, job);
    }
}

/// The hook that never dedupes (SPEC D03): every probe is `None`. [`Graph::submit`] behaves
/// as [`Graph::submit_with`] with it; the graph's own deduplication of a live identity (D02)
/// still applies.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct NoDedupeHook;

impl DedupeHook for NoDedupeHook {
    #[inline]
    fn probe(&self, _: &Identity) -> Option<JobId> {
        None
    }
}

impl<E: GraphEngine> GraphOn<E> {
    /// [`submit`](Self::submit), consulting `hook` first (SPEC D03): if
    /// [`probe`](DedupeHook::probe) names a job, nothing is submitted; the job gains a claim
    /// and a new handle of it comes back as [`Admission::DedupeJoined`]. Otherwise the job is
    /// submitted as by `submit` (which may still join a live job of the same identity, D02).
    /// The hook's notice for what happened runs before this returns, outside any lock (D32).
    ///
    /// # Errors
    ///
    /// As [`submit`](Self::submit), checked before the probe; for a probed id,
    /// `permission-denied / foreign-handle` if it is another graph's job and `not-found /
    /// stale-handle` if its job was freed (it ended and its last handle was dropped) or was
    /// withdrawn (SPEC D31), even while a withdrawn job still runs (nothing is submitted then
    /// either: the hook's record is out of date).
    pub fn submit_with<H: DedupeHook + ?Sized>(
        &self,
        spec: &JobSpec<'_>,
        hook: &H,
    ) -> Result<Admission<JobHandle<E>>, Error> {
        let _pin = self.inner.engine.pin();
        self.validate(spec)?;
        self.check_open()?;
        let probed = Identity {
            key: spec.key,
            version: self.version(spec.key),
        };
        if let Some(h) = hook.probe(&probed) {
            let node = self.node_of(h)?;
            let mut work = E::Work::default();
            let joined = self
                .inner
                .engine
                .join(node, self.urgency_of(spec), &mut work);
            self.hand_off(&mut work);
            return Ok(match joined? {
                Admission::DedupeJoined(n) => {
                    hook.joined(&self.identity_of(n, probed), self.id_of(n));
                    Admission::DedupeJoined(self.handle(n))
                }
                _ => Admission::Backpressured,
            });
        }
        let out = self.submit_checked(spec)?;
        match &out {
            Admission::Admitted(h) => hook.admitted(&self.identity_of(h.node, probed), h.id()),
            Admission::DedupeJoined(h) => hook.joined(&self.identity_of(h.node, probed), h.id()),
            Admission::Backpressured => {}
        }
        Ok(out)
    }

    /// The identity of the held job on `node`; `probed` if its version cannot be read (a
    /// removed key).
    fn identity_of(&self, node: NodeRef, probed: Identity) -> Identity {
        match self.inner.engine.node_version(node) {
            Some((key, v)) => Identity {
                key,
                version: Some(v),
            },
            None => probed,
        }
    }
}
