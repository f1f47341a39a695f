//! Not part of the public API; exposed for fairway's own benches, perf harness and allocation
//! tests; no semver guarantees.

pub use crate::raw::scq::Scq;

/// Test-only pause points (SPEC F24); present with the `pause-points` feature.
#[cfg(all(feature = "pause-points", not(loom)))]
pub mod pause {
    pub use crate::raw::pause::Gate;
}

/// The tenant-ring engine's grant path (docs/ring-engine.md), for P14 only: built with the
/// `pause-points` feature. Requests carry no payload, lease or waker; a waiting caller polls
/// [`is_granted`](RingCore::is_granted) and [`help`](RingCore::help)s.
#[cfg(all(feature = "pause-points", not(loom)))]
#[derive(Debug)]
pub struct RingCore(crate::engine::grant::Core);

#[cfg(all(feature = "pause-points", not(loom)))]
impl RingCore {
    /// `cells` cells, `slots` entry slots, tenants `0..tenants` (all below 2^24).
    pub fn new(cells: u32, slots: u32, tenants: u32) -> Self {
        Self(crate::engine::grant::Core::new(
            cells,
            slots,
            tenants,
            1_000_000_000,
        ))
    }

    /// Queues a request of `tenant` (priority 0, no deadline, weight 1); its slot, or `None`
    /// when every slot is in use. It may be granted at once (by this call or another thread's).
    pub fn enqueue(&self, tenant: u32) -> Option<u32> {
        let meta = crate::engine::tenant::Meta {
            priority: 0,
            deadline: crate::policy::NO_DEADLINE,
            enqueued_at: 0,
            weight: 1,
        };
        self.0.enqueue(tenant, meta, 0, &mut |_| {}).ok()
    }

    /// Runs a turn another call handed back at its bound on helping (SPEC F25), if one waits:
    /// what a waiting request's poll does. Returns whether it ran one.
    pub fn help(&self) -> bool {
        self.0.help(0, &mut |_| {})
    }

    /// Whether the request in `slot` has been granted (and not yet taken).
    pub fn is_granted(&self, slot: u32) -> bool {
        self.0.state(slot) == crate::engine::grant::GRANTED
    }

    /// Takes a granted request, freeing its slot; the caller now holds a cell. `false` if
    /// `slot` is not granted.
    pub fn take(&self, slot: u32) -> bool {
        self.0.take(slot)
    }

    /// Returns a cell, granting the next ready tenant's request if one waits.
    pub fn release(&self) {
        self.0.release(0, &mut |_| {});
    }
}
