//! The scheduler's events for `tracing` (SPEC X05; the `tracing` cargo feature).
//!
//! Every function here is called where the event happens and is empty without the feature, so
//! the hot path compiles to what it was (the instruction counts are identical). With the feature
//! and no subscriber, each event costs tracing's check of the global level filter: one load and
//! a compare. Events go to the target `fairway` with these fields:
//!
//! | event | level | fields |
//! |---|---|---|
//! | a cell granted | `TRACE` | `class`, `tenant`, `cell`, `waited_ns` (0 on the fast path) |
//! | a request refused at enqueue | `DEBUG` | `class`, `tenant`, `code`, `reason` |
//! | a queued request ended without a grant | `DEBUG` | `class`, `tenant`, `reason` |
//! | a cell quarantined | `WARN` | `class`, `tenant`, `cell`, `reason` |
//! | a cell restored | `INFO` | `class`, `cell` |
//!
//! A refusal whose code is `deadline-exceeded` is an expiry and one whose code is `cancelled`
//! a cancellation; a queued request ends with reason `cancelled`, `expired`, `shutdown`,
//! `quarantined` (every cell of its class) or `failed` (its pool refused the lease).
#![cfg_attr(not(feature = "tracing"), allow(unused_variables))]

use crate::{CellId, ClassId, Error};

/// A cell of `class` was granted to a request of `tenant` that waited `waited_ns`.
#[inline(always)]
pub(crate) fn granted(class: ClassId, tenant: u32, cell: CellId, waited_ns: u64) {
    #[cfg(feature = "tracing")]
    tracing::trace!(
        target: "fairway",
        class = class.0,
        tenant,
        cell = cell.0,
        waited_ns,
        "granted"
    );
}

/// A request of `tenant` was refused before it was queued.
#[inline(always)]
pub(crate) fn refused(class: ClassId, tenant: u32, error: &Error) {
    #[cfg(feature = "tracing")]
    tracing::debug!(
        target: "fairway",
        class = class.0,
        tenant,
        code = error.code().as_str(),
        reason = %error.reason(),
        "refused"
    );
}

/// A queued request of `tenant` ended without a grant, for `reason`.
#[inline(always)]
pub(crate) fn ended(class: ClassId, tenant: u32, reason: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::debug!(target: "fairway", class = class.0, tenant, reason, "ended while queued");
}

/// `cell`, last leased by a request of `tenant`, was quarantined for `reason`.
#[inline(always)]
pub(crate) fn quarantined(class: ClassId, tenant: u32, cell: CellId, reason: &'static str) {
    #[cfg(feature = "tracing")]
    tracing::warn!(
        target: "fairway",
        class = class.0,
        tenant,
        cell = cell.0,
        reason,
        "cell quarantined"
    );
}

/// `cell` was returned to service.
#[inline(always)]
pub(crate) fn restored(class: ClassId, cell: CellId) {
    #[cfg(feature = "tracing")]
    tracing::info!(target: "fairway", class = class.0, cell = cell.0, "cell restored");
}
