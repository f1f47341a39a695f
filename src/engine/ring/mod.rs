//! The tenant-ring engine (docs/ring-engine.md; SPEC F24, F25).
//!
//! * `turns`: the turn protocol, the words that decide which thread may grant for which
//!   tenant, with no lock and no dispatch token;
//! * `tenant`: the per-tenant records (inbox, order heap and FIFO, DRR deficit) that the
//!   holder of a tenant's turn owns;
//! * `grant`: the grant path that drives both over a class's entry slots.
//!
//! * `engine`: the [`ClassEngine`](crate::engine::ClassEngine) around them, registered as the
//!   `fairway::Ring` mechanism.

#![cfg_attr(not(test), allow(dead_code))]

mod engine;
pub(crate) mod grant;
pub(crate) mod tenant;
pub(crate) mod turns;

pub use engine::RingClass;

#[cfg(all(test, loom))]
mod loom_engine;
#[cfg(all(test, not(loom)))]
mod test_rng;
