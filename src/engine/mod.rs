//! The Zarr engine: metadata, data types, chunk grid and keys, codecs,
//! sharding, selections, read planning and region reads. It knows nothing
//! of HTTP and reaches storage only through [`crate::storage::Store`].
//!
//! # Layout
//! Each module depends only on those listed before it:
//! - [`error`]: the engine's error enum;
//! - `json`: reading extension points out of `zarr.json`;
//! - [`data_type`], [`chunk_grid`], [`chunk_key_encoding`], [`codec`] (the
//!   spec's three codec kinds, one module per codec, sharding included),
//!   `copy` (strided block copies between C-order buffers);
//! - [`metadata`]: `zarr.json` parsed and validated, `metadata_v2`: Zarr
//!   v2's `.zarray`, `.zgroup` and `.zattrs`; [`node`]: a node with
//!   its metadata; [`selection`]: NumPy basic indexing;
//! - [`plan`]: which chunks a selection touches and how the result is cut
//!   into slabs;
//! - `cache`, `decode_pool` and [`resources`]: every limit, pool and cache
//!   of the process, built once from config;
//! - [`hierarchy`]: datasets, opening nodes, listing children;
//! - [`read`]: fetching, the sharding partial decoder, slab assembly and
//!   slab streams;
//! - `v2_view`: the whole dataset as a read-only Zarr v2 store;
//! - [`reduce`] and [`render`]: answers computed from a read (reductions,
//!   coarsening, pictures).

mod cache;
mod cf;
mod chunk_grid;
mod chunk_key_encoding;
/// Public for the micro-benchmarks (`bench/hot_paths.rs`), which time the real codec chain.
pub mod codec;
mod coordinate;
/// Public for the micro-benchmarks, which time the real block copy.
pub mod copy;
mod data_type;
mod decode_pool;
mod error;
mod exact;
mod hierarchy;
mod json;
pub mod labels;
mod metadata;
mod metadata_v2;
mod node;
mod plan;
mod read;
pub mod reduce;
pub mod render;
mod resources;
mod selection;
mod time;
mod v2_view;
pub mod values;
pub mod vlen;

pub use cache::{CacheOptions, CacheStats, Caches};
pub use data_type::{BytesName, DataType};
pub use error::{Error, Result};
pub use hierarchy::{Child, Dataset};
pub use metadata::{ArrayMetadata, NodeMetadata};
pub(crate) use metadata_v2::{codecs_document as v2_codecs_document, data_type_document as v2_data_type_document};
pub use node::Node;
pub use plan::{ReadOptions, ReadPlan};
pub use read::{ReadQuery, Versions};
pub use resources::{ResourceOptions, Resources};
pub use selection::{SelectValue, Selection};
pub use time::{TimeUnit, Unit, NAT};
pub use v2_view::{Listing, ViewValue};
