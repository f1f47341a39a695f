#![doc = include_str!("../README.md")]
#![deny(
    unsafe_op_in_unsafe_fn,
    clippy::undocumented_unsafe_blocks,
    clippy::missing_safety_doc
)]

pub(crate) mod sync;

mod block;
mod stats;

pub mod admission;
mod cancel;
mod clock;
mod engine;
mod error;
pub mod graph;
mod ids;
#[cfg(feature = "metrics")]
pub mod metrics;
mod observe;
pub(crate) mod policy;
pub mod pool;
pub(crate) mod raw;
mod scheduler;
#[cfg(feature = "tower")]
pub mod tower;
pub mod versions;

pub use cancel::{CancellationToken, Cancelled};
pub use clock::{Clock, ManualClock, MonotonicClock};
pub use error::{Code, Error, Reason, Result};
pub use graph::Graph;
pub use ids::{CellId, ClassId, Priority, RequestId, TenantId};
pub use scheduler::{
    AdmittedRequest, Assignment, Builder, ClassConfig, ClassSnapshot, Drain, DropPolicy, Enqueue,
    Footprint, Job, Next, QuarantinedCells, RequestHandle, Scheduler, Submit, SubmitError,
    TryEnqueueError,
};

/// The `hdrhistogram` crate, whose `Histogram` is [`ClassSnapshot::wait_histogram`]'s type:
/// name it as `fairway::hdrhistogram::Histogram<u64>` to be sure of the same version.
pub use hdrhistogram;

/// The `arrayvec` crate, whose `ArrayVec` holds the classes of
/// [`ClassChoice::OneOf`](admission::ClassChoice::OneOf): name it as `fairway::arrayvec::ArrayVec`
/// to be sure of the same version.
pub use arrayvec;

#[doc(hidden)]
pub mod internals;
#[doc(hidden)]
pub mod oracle;
