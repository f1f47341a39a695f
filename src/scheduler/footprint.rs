//! What a configuration allocates, read before building it (SPEC F01, F02).

use super::{Builder, ClassConfig, Mechanism, Ring};
use crate::error::Error;

impl ClassConfig {
    /// The most cells a class may have: 2^20 (1,048,576).
    pub const MAX_CELLS: u32 = crate::policy::MAX_CELLS;
    /// The largest `queue_capacity` of a class: 2^22 (4,194,304).
    pub const MAX_QUEUE_CAPACITY: u32 = crate::policy::MAX_QUEUE_CAPACITY;
}

/// The memory a [`Builder`]'s configuration allocates at build, estimated without allocating
/// (from [`Builder::footprint`]). Nothing is allocated after build (SPEC F02), so this is the
/// scheduler's whole footprint; the [`Ledger`](crate::admission::Ledger) it is bound to is
/// counted separately ([`LedgerConfig::footprint_bytes`](crate::admission::LedgerConfig::footprint_bytes)).
///
/// # Sizing
///
/// Per class, the scheduler allocates `2 * queue_capacity + cells` entry slots (live queued
/// requests, as many cancelled ones awaiting removal, and one per cell for grants not yet
/// taken), and:
///
/// | unit                         | bytes                                                 |
/// |------------------------------|-------------------------------------------------------|
/// | entry slot                   | [`BYTES_PER_SLOT`](Self::BYTES_PER_SLOT) + the pull-mode payload `T`, rounded up to 64, + one more `T` (the place kept for its payload should shutdown end it undelivered) |
/// | cell (besides its slot)      | [`BYTES_PER_CELL`](Self::BYTES_PER_CELL)              |
/// | tenant, in each class        | [`BYTES_PER_TENANT`](Self::BYTES_PER_TENANT)          |
/// | class (fixed part)           | [`BYTES_PER_CLASS`](Self::BYTES_PER_CLASS)            |
///
/// So one unit of `queue_capacity` costs two slots (about 670 bytes with `T = ()`), and a class
/// at the limits ([`ClassConfig::MAX_QUEUE_CAPACITY`], [`ClassConfig::MAX_CELLS`]) about 3.2
/// GB. The figures are upper bounds for both engines (the lock-free one is the larger), checked
/// against a counting allocator by the test suite.
///
/// # Examples
///
/// ```
/// use fairway::admission::{ClassSpec, Ledger, LedgerConfig, Limits};
/// use fairway::Scheduler;
///
/// let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 10_000))?;
/// let builder = Scheduler::<()>::builder(ledger).class(64, 100_000);
/// let footprint = builder.footprint()?;
/// assert_eq!(footprint.entry_slots, 2 * 100_000 + 64);
/// assert!(footprint.bytes < 256 << 20, "{footprint:?}"); // under 256 MiB: build it
/// let scheduler = builder.build()?;
/// # drop(scheduler);
/// # Ok::<(), fairway::Error>(())
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Footprint {
    /// Bytes allocated at build (an upper bound within a few percent for large configurations).
    pub bytes: u64,
    /// Entry slots over all classes.
    pub entry_slots: u64,
    /// Cells over all classes.
    pub cells: u64,
}

impl Footprint {
    /// Bytes per entry slot of the engine, besides the payload
    /// ([`Mechanism::BYTES_PER_SLOT`] gives each engine's).
    pub const BYTES_PER_SLOT: u64 = <Ring as Mechanism>::BYTES_PER_SLOT;
    /// Bytes per cell of the set of live request ids (SPEC F34), which has the next power of two
    /// at or above twice the requests that can be live at once (queue capacity plus cells, over
    /// all classes).
    pub const BYTES_PER_ID_CELL: u64 = 24;
    /// Bytes per cell, besides its entry slot (lease timestamp, pool bits, ready ring).
    pub const BYTES_PER_CELL: u64 = 28;
    /// Bytes per tenant in each class (its fairness state, ring position and notice stack).
    pub const BYTES_PER_TENANT: u64 = 36;
    /// Fixed bytes per class (counters, wait histogram, executor wakers).
    pub const BYTES_PER_CLASS: u64 = 8 << 10;

    /// The footprint of classes `classes` for `tenants` tenants and payload `T`.
    fn of<T, M: Mechanism>(classes: &[ClassConfig], tenants: u32) -> Footprint {
        // In the slot, and once more in the bin of payloads shutdown ends undelivered.
        let payload = (core::mem::size_of::<T>() as u64).next_multiple_of(64)
            + core::mem::size_of::<T>() as u64;
        let mut f = Footprint {
            bytes: 0,
            entry_slots: 0,
            cells: 0,
        };
        let live: u64 = classes
            .iter()
            .map(|c| u64::from(c.queue_capacity) + u64::from(c.cells))
            .sum();
        f.bytes += (2 * live.max(1)).next_power_of_two().max(8) * Self::BYTES_PER_ID_CELL;
        for c in classes {
            let slots = (2 * u64::from(c.queue_capacity) + u64::from(c.cells)).max(1);
            f.entry_slots += slots;
            f.cells += u64::from(c.cells);
            f.bytes += Self::BYTES_PER_CLASS
                + slots * (M::BYTES_PER_SLOT + payload)
                + u64::from(c.cells) * Self::BYTES_PER_CELL
                + u64::from(tenants) * Self::BYTES_PER_TENANT;
        }
        f
    }
}

impl<T: Send + 'static> Builder<T> {
    /// Validates the configuration as [`build`](Self::build) does (except host pools, which it
    /// does not look at) and returns what building it would allocate, allocating nothing.
    ///
    /// # Errors
    ///
    /// As [`build`](Self::build): `invalid-argument / configuration` naming the field.
    pub fn footprint(&self) -> Result<Footprint, Error> {
        self.footprint_with::<Ring>()
    }

    /// [`footprint`](Self::footprint) of a scheduler built with mechanism `M`
    /// ([`build_with`](Self::build_with)).
    ///
    /// # Errors
    ///
    /// As [`footprint`](Self::footprint).
    #[doc(hidden)]
    pub fn footprint_with<M: Mechanism>(&self) -> Result<Footprint, Error> {
        self.validate()?;
        Ok(Footprint::of::<T, M>(
            &self.classes,
            self.ledger.max_tenants(),
        ))
    }

    /// The configuration checks of [`build_with`](Self::build_with), made before it allocates
    /// anything (SPEC F01).
    pub(super) fn validate(&self) -> Result<(), Error> {
        if self.classes.is_empty()
            || self.classes.len() != self.ledger.class_count()
            || self.classes.len() > usize::from(u16::MAX) + 1
        {
            return Err(Error::configuration("classes"));
        }
        for c in &self.classes {
            if c.cells == 0 || c.cells > ClassConfig::MAX_CELLS {
                return Err(Error::configuration("cells"));
            }
            if c.queue_capacity > ClassConfig::MAX_QUEUE_CAPACITY {
                return Err(Error::configuration("queue_capacity"));
            }
        }
        if self.starvation_after.is_zero() {
            return Err(Error::configuration("starvation_after"));
        }
        Ok(())
    }
}
