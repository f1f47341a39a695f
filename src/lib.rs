#![doc = include_str!("../README.md")]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

pub(crate) mod sync;

pub mod admission;
mod clock;
mod error;
mod ids;
#[allow(dead_code)]
pub(crate) mod policy;
pub mod pool;
#[allow(dead_code)]
pub(crate) mod raw;

pub use clock::{Clock, ManualClock, MonotonicClock};
pub use error::{Code, Error, Result};
pub use ids::{CellId, ClassId, Priority, RequestId, TenantId};

/// Not part of the public API; exposed for fairway's own benches and perf harness; no semver
/// guarantees.
#[doc(hidden)]
pub mod internals {
    pub use crate::raw::ring::Ring;
}
