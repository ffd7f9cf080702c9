//! The Zarr format, v3 and v2: documents, data types, chunk grids, chunk
//! key encodings, codecs, and elements in memory. Uses nothing of the
//! engine's other layers.
//!
//! - `json`: reading extension points out of `zarr.json`;
//! - `time`: NumPy datetime units and ISO 8601 text ([`data_type`]'s
//!   datetimes); [`vlen`]: variable-length elements in memory;
//! - `data_type`, `chunk_grid`, `chunk_key_encoding`, [`codec`] (the
//!   spec's three codec kinds, one module per codec, sharding included),
//!   [`copy`] (strided block copies between C-order buffers);
//! - [`values`]: elements read as numbers or text;
//! - `metadata`: `zarr.json` parsed and validated, `metadata_v2`: Zarr
//!   v2's `.zarray`, `.zgroup` and `.zattrs`.

pub(crate) mod chunk_grid;
pub(crate) mod chunk_key_encoding;
/// Public for the micro-benchmarks (`bench/hot_paths.rs`), which time the real codec chain.
pub mod codec;
/// Public for the micro-benchmarks, which time the real block copy.
pub mod copy;
pub(crate) mod data_type;
pub(crate) mod json;
pub(crate) mod metadata;
pub(crate) mod metadata_v2;
pub(crate) mod time;
pub mod values;
pub mod vlen;
