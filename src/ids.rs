//! Identifiers shared by every layer.
//!
//! With the `serde` feature each id (de)serializes as its bare number (`RequestId(7)` is `7`).

/// Identifies a request for its whole life (admission, queueing, execution). Chosen by the host;
/// at most one live request per id per scheduler (SPEC F34).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct RequestId(pub u64);

/// A tenant: whoever the host wants to be fair between.
///
/// # Capacity
///
/// Tenants are dense indices `0..max_tenants` chosen by the host (which keeps its own directory
/// of names); fairway sizes every per-tenant table from `max_tenants` at build time and keeps no
/// catalogue of tenants it has seen (SPEC F20, F61).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct TenantId(pub u32);

/// A class of interchangeable cells: its index in the configuration's class list.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct ClassId(pub u16);

/// One cell of a class's pool.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "serde", derive(serde::Serialize, serde::Deserialize))]
#[cfg_attr(feature = "serde", serde(transparent))]
pub struct CellId(pub u32);

/// Scheduling priority inside a tenant: higher runs first (SPEC F13).
pub type Priority = u8;
