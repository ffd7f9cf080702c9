//! Encoders: a read's result (little-endian elements of an engine data
//! type, slab after slab) turned into the bytes a protocol sends. They know
//! the engine's data types and element layouts, nothing of HTTP, storage
//! or codecs.
//!
//! - [`xdr`]: OPeNDAP DAP2's XDR (big-endian, the DAP2 type of each
//!   Zarr data type, array lengths and padding).

pub mod xdr;
