//! Crate-private lock-free mechanisms. Each file documents its invariants and has a loom model.

pub(crate) mod idset;
pub(crate) mod pack;
pub(crate) mod pause;
pub(crate) mod scq;
