//! The tenant-ring engine, in progress (docs/ring-engine.md; SPEC F24, F25).
//!
//! * [`turns`]: the turn protocol, the words that decide which thread may grant for which
//!   tenant, with no lock and no dispatch token;
//! * [`tenant`]: the per-tenant records (inbox, order heap and FIFO, DRR deficit) that the
//!   holder of a tenant's turn owns;
//! * [`grant`]: the grant path that drives both over a class's entry slots.
//!
//! Compiled for its unit tests and loom models, and for P14's row with the `pause-points`
//! feature (through `internals::RingCore`), until the engine built on [`grant`] implements
//! [`ClassEngine`](crate::engine::ClassEngine) and passes the rule suite.

#![cfg_attr(not(test), allow(dead_code))]

mod engine;
pub(crate) mod grant;
pub(crate) mod tenant;
pub(crate) mod turns;

pub use engine::RingClass;

#[cfg(all(test, loom))]
mod loom_engine;
