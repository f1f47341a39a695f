//! The tenant-ring engine, in progress (docs/ring-engine.md; SPEC F24, F25).
//!
//! Only its turn protocol exists so far ([`turns`]): the words that decide which thread may
//! grant for which tenant, with no lock and no dispatch token. It is compiled for its unit tests
//! and loom models only, until the engine that drives it is built.

pub(crate) mod tenant;
pub(crate) mod turns;
