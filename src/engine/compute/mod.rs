//! Answers computed from a read: reductions and coarsening ([`reduce`]),
//! pictures ([`render`]). Uses format, query and read; not the view.

pub(crate) mod exact;
pub mod reduce;
pub mod render;
