//! What a ledger is built from: its classes, their limits and the tenants' limits.

use super::*;

/// Upper bounds on what is reserved at once, for one tenant (across all classes) or one class
/// (across all tenants).
///
/// Each admitted request holds one queue slot (until it is granted or ends), one unit of
/// concurrency and its CPU and memory units (until it ends). A limit of 0 refuses every request
/// that needs that resource.
///
/// # Examples
///
/// ```
/// use fairway::admission::Limits;
/// let l = Limits::UNLIMITED.concurrency(4);
/// assert_eq!(l.queue_slots, u32::MAX);
/// assert_eq!(Limits::default(), Limits::UNLIMITED);
/// ```
///
/// With the `serde` feature, a field left out of the serialized form is unlimited (the field of
/// [`Limits::UNLIMITED`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(default))]
#[non_exhaustive]
pub struct Limits {
    /// Requests queued (admitted and not yet granted) at once.
    pub queue_slots: u32,
    /// Requests admitted and not yet ended (queued or executing) at once.
    pub concurrency: u32,
    /// Sum of the CPU units of the requests held.
    pub cpu_units: u64,
    /// Sum of the memory units of the requests held.
    pub memory_units: u64,
}

impl Limits {
    /// These limits with at most `n` requests queued at once.
    #[inline]
    pub const fn queue_slots(mut self, n: u32) -> Self {
        self.queue_slots = n;
        self
    }

    /// These limits with at most `n` requests admitted and not ended at once.
    #[inline]
    pub const fn concurrency(mut self, n: u32) -> Self {
        self.concurrency = n;
        self
    }

    /// These limits with at most `n` CPU units held at once.
    #[inline]
    pub const fn cpu_units(mut self, n: u64) -> Self {
        self.cpu_units = n;
        self
    }

    /// These limits with at most `n` memory units held at once.
    #[inline]
    pub const fn memory_units(mut self, n: u64) -> Self {
        self.memory_units = n;
        self
    }

    /// No limit on anything.
    pub const UNLIMITED: Limits = Limits {
        queue_slots: u32::MAX,
        concurrency: u32::MAX,
        cpu_units: u64::MAX,
        memory_units: u64::MAX,
    };

    /// The limits as counter bounds, by resource index.
    pub(super) const fn as_array(&self) -> [u64; KINDS] {
        [
            self.queue_slots as u64,
            self.concurrency as u64,
            self.cpu_units,
            self.memory_units,
        ]
    }
}

impl Default for Limits {
    /// [`Limits::UNLIMITED`].
    fn default() -> Self {
        Limits::UNLIMITED
    }
}

/// One class of cells as the ledger sees it.
///
/// With the `serde` feature, `explicit_only` and `limits` may be left out (`false`, unlimited).
/// The name is a `&'static str`, so deserializing a `ClassSpec` from data that is not itself
/// `'static` leaks the name's bytes (one small allocation per class, meant for a configuration
/// read once at start-up, not in a loop). Uniqueness of names is checked by [`Ledger::new`].
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize))]
#[non_exhaustive]
pub struct ClassSpec {
    /// A unique name (for diagnostics and [`Ledger::class_by_name`]).
    pub name: &'static str,
    /// Chosen only when a request names it in [`ClassChoice::OneOf`], never for
    /// [`ClassChoice::Any`] (F52).
    pub explicit_only: bool,
    /// Limits over all tenants' requests in this class.
    pub limits: Limits,
}

/// The serialized form of a [`ClassSpec`], with an owned name.
#[cfg(feature = "serde")]
#[derive(serde::Deserialize)]
struct ClassSpecRepr {
    name: String,
    #[serde(default)]
    explicit_only: bool,
    #[serde(default)]
    limits: Limits,
}

// Written by hand: serde's derive would tie the input's lifetime to the name's `'static`.
#[cfg(feature = "serde")]
impl<'de> serde::Deserialize<'de> for ClassSpec {
    /// Leaks the name into the `&'static str` that [`ClassSpec::name`] holds.
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> core::result::Result<Self, D::Error> {
        let r = ClassSpecRepr::deserialize(d)?;
        Ok(ClassSpec {
            name: Box::leak(r.name.into_boxed_str()),
            explicit_only: r.explicit_only,
            limits: r.limits,
        })
    }
}

impl ClassSpec {
    /// A class named `name`, not explicit-only, without limits.
    #[inline]
    pub const fn new(name: &'static str) -> Self {
        Self {
            name,
            explicit_only: false,
            limits: Limits::UNLIMITED,
        }
    }

    /// This class, chosen only when a request names it (F52) if `explicit_only`.
    #[inline]
    pub const fn explicit_only(mut self, explicit_only: bool) -> Self {
        self.explicit_only = explicit_only;
        self
    }

    /// This class with `limits` over all tenants' requests in it.
    #[inline]
    pub const fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }
}

/// What a ledger is built from.
///
/// # Capacity
///
/// The ledger allocates, once, one 32-byte counter group per tenant (`max_tenants` of them, at
/// most [`LedgerConfig::MAX_TENANTS`]) and one cache-line-padded group per class;
/// [`LedgerConfig::footprint_bytes`] gives the total before building. Tenant groups are not padded: there may be many, and a
/// tenant's counters are contended only by that tenant's own concurrent admissions.
///
/// # Validation
///
/// A `LedgerConfig` is plain data: neither [`LedgerConfig::new`] nor, with the `serde` feature,
/// deserialization checks it. [`Ledger::new`] (and [`Ledger::with_clock`]) checks every field
/// before allocating and refuses a bad one with `invalid-argument / configuration` naming the
/// field, so a deserialized configuration goes through exactly the checks of a hand-built one.
/// With the `serde` feature `tenant_limits` may be left out (unlimited).
#[derive(Debug, Clone, PartialEq, Eq)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[non_exhaustive]
pub struct LedgerConfig {
    /// The classes, in the order that defines [`ClassId`]s and the "smallest class first" rule
    /// of F52.
    pub classes: Vec<ClassSpec>,
    /// Tenants are `TenantId(0..max_tenants)`.
    pub max_tenants: u32,
    /// Limits applied to each tenant, totalled across classes.
    #[cfg_attr(feature = "serde", serde(default))]
    pub tenant_limits: Limits,
}

impl LedgerConfig {
    /// `classes` (in [`ClassId`] order) for tenants `TenantId(0..max_tenants)`, with no limits
    /// per tenant.
    #[inline]
    pub fn new(classes: Vec<ClassSpec>, max_tenants: u32) -> Self {
        Self {
            classes,
            max_tenants,
            tenant_limits: Limits::UNLIMITED,
        }
    }

    /// This configuration with `limits` applied to each tenant, totalled across classes.
    #[inline]
    pub fn tenant_limits(mut self, limits: Limits) -> Self {
        self.tenant_limits = limits;
        self
    }

    /// The most tenants a ledger may be built for: 2^24 (16,777,216). The ledger allocates 32
    /// bytes per tenant (512 MiB at the limit), and each class of a scheduler bound to it 32
    /// more (see [`Footprint`](crate::Footprint)).
    pub const MAX_TENANTS: u32 = crate::policy::MAX_TENANTS;

    /// The bytes [`Ledger::new`] allocates for this configuration (the tenants' counters and the
    /// classes' padded counters), without building it.
    pub fn footprint_bytes(&self) -> u64 {
        let per_class = core::mem::size_of::<Class>() as u64;
        let per_tenant = core::mem::size_of::<Counters>() as u64;
        // The shared `Inner` with its reference counts, and the default clock.
        let fixed = core::mem::size_of::<Inner>() as u64 + 64;
        (self.classes.len() as u64) * per_class + u64::from(self.max_tenants) * per_tenant + fixed
    }
}
