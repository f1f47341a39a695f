//! Configuration: classes, their drop policy, and the builder.

use super::shared::next_scheduler_id;
use super::*;

/// What becomes of the cell of an [`Assignment`] dropped without
/// [`release`](Assignment::release) or [`quarantine`](Assignment::quarantine) (SPEC F44): a
/// panic in the job, a `timeout` or `abort` around it, an early return.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub enum DropPolicy {
    /// The cell is quarantined: it may hold guest state whose cleanup nobody vouched for. It
    /// stays out of service until the host cleans it and returns it with
    /// [`Scheduler::restore_cell`]. The default.
    #[default]
    Quarantine,
    /// The cell goes back to its pool as after [`Assignment::release`]: for cells that hold no
    /// state of their own (a concurrency slot, a connection the job does not touch).
    Release,
}

/// One class of cells.
///
/// # Examples
///
/// ```
/// use fairway::{ClassConfig, DropPolicy};
/// let c = ClassConfig::new(4, 1024).on_drop(DropPolicy::Release);
/// assert_eq!((c.cells, c.queue_capacity, c.on_drop), (4, 1024, DropPolicy::Release));
/// ```
///
/// # Validation
///
/// A `ClassConfig` is plain data: neither [`ClassConfig::new`] nor, with the `serde` feature,
/// deserialization checks it; [`Builder::build`] does, before allocating, and refuses a bad
/// value with `invalid-argument / configuration` naming the field (`cells`, `queue_capacity`).
/// With the `serde` feature `on_drop` may be left out ([`DropPolicy::Quarantine`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct ClassConfig {
    /// Number of cells (`1..=`[`ClassConfig::MAX_CELLS`]).
    pub cells: u32,
    /// Exact bound on queued requests (at most [`ClassConfig::MAX_QUEUE_CAPACITY`]); `0` denies
    /// every request (SPEC F06).
    pub queue_capacity: u32,
    /// What a dropped assignment does to its cell. Default: [`DropPolicy::Quarantine`].
    #[cfg_attr(feature = "serde", serde(default))]
    pub on_drop: DropPolicy,
}

impl ClassConfig {
    /// A class of `cells` cells and at most `queue_capacity` queued requests, quarantining the
    /// cells of dropped assignments.
    #[inline]
    pub const fn new(cells: u32, queue_capacity: u32) -> Self {
        Self {
            cells,
            queue_capacity,
            on_drop: DropPolicy::Quarantine,
        }
    }

    /// Sets what a dropped assignment does to its cell.
    #[inline]
    #[must_use]
    pub const fn on_drop(mut self, policy: DropPolicy) -> Self {
        self.on_drop = policy;
        self
    }
}

/// Builds a [`Scheduler`] from a validated configuration (SPEC F01, F07).
///
/// `T` is the pull-mode payload type: `()` from [`Scheduler::builder`], another one with
/// [`payload`](Self::payload).
///
/// # Panics
///
/// Never; a bad configuration is an error from [`build`](Self::build).
///
/// # Cancel safety
///
/// Not async: nothing to cancel. Building allocates every structure the scheduler will ever
/// use, once.
///
/// # Examples
///
/// ```
/// use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
/// use fairway::{ClassConfig, DropPolicy, Scheduler};
/// use std::time::Duration;
///
/// let classes = vec![ClassSpec::new("sandbox"), ClassSpec::new("io")];
/// let ledger = Ledger::new(LedgerConfig::new(classes, 64))?;
/// let scheduler = Scheduler::builder(ledger)
///     .payload::<Vec<u8>>()
///     .class(8, 4096) // class 0: sandboxes hold guest state; dropped ones are quarantined
///     .class_config(ClassConfig::new(32, 4096).on_drop(DropPolicy::Release)) // class 1
///     .starvation_after(Duration::from_millis(250))
///     .build()?;
/// assert_eq!(scheduler.class_count(), 2);
/// # Ok::<(), fairway::Error>(())
/// ```
pub struct Builder<T = ()> {
    pub(super) ledger: Ledger,
    pub(super) classes: Vec<ClassConfig>,
    pub(super) starvation_after: Duration,
    pub(super) pools: Option<Vec<Arc<dyn CellPool>>>,
    pub(super) _payload: PhantomData<fn() -> T>,
}

impl<T> fmt::Debug for Builder<T> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Builder")
            .field("classes", &self.classes)
            .field("starvation_after", &self.starvation_after)
            .finish_non_exhaustive()
    }
}

impl<T: Send + 'static> Builder<T> {
    /// Starts building a scheduler with pull-mode payload type `T` bound to `ledger` (SPEC
    /// F04); the same as `Scheduler::builder(ledger).payload::<T>()`.
    pub fn new(ledger: Ledger) -> Self {
        Builder {
            ledger,
            classes: Vec::new(),
            starvation_after: Duration::from_secs(1),
            pools: None,
            _payload: PhantomData,
        }
    }

    /// Sets the payload type of pull-mode submissions ([`Scheduler::submit`]).
    #[inline]
    pub fn payload<U: Send + 'static>(self) -> Builder<U> {
        Builder {
            ledger: self.ledger,
            classes: self.classes,
            starvation_after: self.starvation_after,
            pools: self.pools,
            _payload: PhantomData,
        }
    }

    /// Adds the next class (its [`ClassId`] is its position, matching the ledger's classes).
    #[inline]
    pub fn class(mut self, cells: u32, queue_capacity: u32) -> Self {
        self.classes.push(ClassConfig::new(cells, queue_capacity));
        self
    }

    /// Adds the next class with all its settings (the drop policy, ...).
    #[inline]
    pub fn class_config(mut self, class: ClassConfig) -> Self {
        self.classes.push(class);
        self
    }

    /// Sets all classes at once.
    #[inline]
    pub fn classes(mut self, classes: impl IntoIterator<Item = ClassConfig>) -> Self {
        self.classes = classes.into_iter().collect();
        self
    }

    /// How long a request may wait before it goes ahead of newer work of its tenant (SPEC F14).
    /// Default: 1 second.
    #[inline]
    pub fn starvation_after(mut self, after: Duration) -> Self {
        self.starvation_after = after;
        self
    }

    /// Host-supplied cell pools, one per class in any order (SPEC F07). Default: a
    /// [`FixedCellPool`] per class.
    #[inline]
    pub fn pools(mut self, pools: Vec<Arc<dyn CellPool>>) -> Self {
        self.pools = Some(pools);
        self
    }

    /// Builds the scheduler.
    ///
    /// # Errors
    ///
    /// `invalid-argument / configuration` naming the field (`classes`, `cells` — 0 or above
    /// [`ClassConfig::MAX_CELLS`] —, `queue_capacity` — above
    /// [`ClassConfig::MAX_QUEUE_CAPACITY`] —, `starvation_after`), or
    /// `invalid-argument / pool-topology`. The configuration is checked before anything is
    /// allocated; [`footprint`](Self::footprint) tells what a valid one will allocate.
    #[inline]
    pub fn build(self) -> Result<Scheduler<T>, Error> {
        self.build_with()
    }

    /// Builds over any mechanism: the engine or one of the oracle's mutex twins.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build).
    #[doc(hidden)]
    pub fn build_with<M: Mechanism>(self) -> Result<SchedulerOn<T, M>, Error> {
        // Every check before the first allocation (SPEC F01).
        self.validate()?;
        let starvation_after = u64::try_from(self.starvation_after.as_nanos()).unwrap_or(u64::MAX);
        let pools: Vec<ClassPool> = match self.pools {
            Some(pools) => {
                let expected: Vec<(ClassId, u32)> = self
                    .classes
                    .iter()
                    .enumerate()
                    .map(|(i, c)| (ClassId(i as u16), c.cells))
                    .collect();
                validate_pools(&expected, &pools)?;
                let mut ordered = Vec::with_capacity(pools.len());
                for i in 0..self.classes.len() {
                    let p = pools
                        .iter()
                        .find(|p| p.class() == ClassId(i as u16))
                        .expect("validated");
                    ordered.push(ClassPool::Host(
                        p.clone(),
                        crate::pool::QuarantineSet::new(p.capacity()),
                    ));
                }
                ordered
            }
            None => self
                .classes
                .iter()
                .enumerate()
                .map(|(i, c)| FixedCellPool::new(ClassId(i as u16), c.cells).map(ClassPool::Fixed))
                .collect::<Result<_, _>>()?,
        };
        let clock = self.ledger.clock().clone();
        // Every request that can be live at once: queued, or holding (or about to take) a cell.
        let live: u64 = self
            .classes
            .iter()
            .map(|c| u64::from(c.queue_capacity) + u64::from(c.cells))
            .sum();
        let ids = Arc::new(IdSet::new(
            usize::try_from(live.max(1)).map_err(|_| Error::configuration("queue_capacity"))?,
        )?);
        let classes = self
            .classes
            .iter()
            .zip(pools)
            .enumerate()
            .map(|(i, (c, pool))| {
                M::Class::<T>::new(ClassSetup {
                    class: ClassId(i as u16),
                    ledger: self.ledger.clone(),
                    ids: ids.clone(),
                    cells: c.cells,
                    queue_capacity: c.queue_capacity,
                    max_tenants: self.ledger.max_tenants(),
                    starvation_after,
                    pool,
                    clock: clock.clone(),
                })
            })
            .collect::<Result<Vec<_>, _>>()?
            .into_boxed_slice();
        Ok(SchedulerOn {
            shared: Arc::new(Shared {
                id: next_scheduler_id(),
                ids,
                ledger: self.ledger,
                classes,
                on_drop: self.classes.iter().map(|c| c.on_drop).collect(),
                shut: AtomicBool::new(false),
                closed: AtomicBool::new(false),
                clock,
            }),
        })
    }
}

impl Scheduler {
    /// Starts building a scheduler bound to `ledger` (SPEC F04), with no pull-mode payload
    /// (`T = ()`); [`Builder::payload`] picks another payload type.
    ///
    /// # Examples
    ///
    /// ```
    /// use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
    /// use fairway::Scheduler;
    ///
    /// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4))?;
    /// let scheduler = Scheduler::builder(ledger.clone()).class(2, 64).build()?;
    /// let pull = Scheduler::builder(ledger).payload::<String>().class(2, 64).build()?;
    /// # let _ = (scheduler, pull);
    /// # Ok::<(), fairway::Error>(())
    /// ```
    #[inline]
    pub fn builder(ledger: Ledger) -> Builder<()> {
        Builder::new(ledger)
    }
}
