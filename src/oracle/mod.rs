//! The mutex twins of the scheduler and the graph: the same policy and graph rules under one
//! lock, never tuned (SPEC Q02). They are the differential tests' oracle and the benches'
//! comparison; a user never names them (`Scheduler<T>` and `Graph` are the engine's).
//!
//! Tests and benches pick a twin explicitly:
//!
//! ```
//! use fairway::admission::{ClassSpec, Ledger, LedgerConfig};
//! use fairway::oracle::{Baseline, SchedulerOn, StdMutex};
//!
//! let ledger = Ledger::new(LedgerConfig::new(vec![ClassSpec::new("cpu")], 4))?;
//! let twin: SchedulerOn<(), Baseline<StdMutex>> =
//!     fairway::Scheduler::builder(ledger).class(2, 64).build_with()?;
//! assert_eq!(twin.available_cells(fairway::ClassId(0))?, 2);
//! # Ok::<(), fairway::Error>(())
//! ```

pub(crate) mod mutex;

pub use crate::graph::{GraphEngine, GraphOn, LockFreeGraph, MutexGraph};
pub use crate::scheduler::{
    Baseline, DrainOn, EnqueueOn, Mechanism, NextOn, Ring, SchedulerOn, SubmitOn,
};
pub use mutex::{BaselineLock, ParkingLotMutex, StdMutex};
