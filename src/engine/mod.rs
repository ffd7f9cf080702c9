//! The Zarr engine: metadata, data types, chunk grid and keys, codecs,
//! sharding, selections, read planning and region reads. It knows nothing
//! of HTTP and reaches storage only through [`crate::storage::Store`].
//!
//! # Layout
//! Layers, each using only those before it (`scripts/module-graph.py`
//! checks it):
//! - `error`: the engine's error enum, below every layer;
//! - `format`: the Zarr format: `zarr.json` and v2 metadata, data types,
//!   chunk grid and key encodings, the codecs (sharding included), block
//!   copies, elements as values;
//! - `query`: selections, CF conventions, labels, nodes and read plans;
//!   [`geo`]: grids and their CRSs, tile matrix sets, map frames, regions
//!   (geometry to cells);
//! - `read`: the process's caches, pools and limits, datasets and their
//!   hierarchy, coordinates, fetching, the sharding partial decoder, slab
//!   assembly and slab streams, geo reads (rasters, cells);
//! - `compute`: answers computed from a read ([`reduce`]: reductions and
//!   coarsening; [`render`]: pictures and default colour ranges);
//! - `view`: the whole dataset as a read-only Zarr v2 store.
//!
//! The paths below are the engine's API for the HTTP layer, the tests, the
//! benchmarks and the fuzz targets.

mod compute;
mod error;
mod format;
mod query;
mod read;
mod view;
mod write;

pub use compute::{reduce, render};
pub use error::{Error, Result};
pub use format::data_type::{BytesName, DataType};
pub use format::metadata::{ArrayMetadata, NodeMetadata};
pub(crate) use format::metadata_v2::{
    codecs_document as v2_codecs_document, data_type_document as v2_data_type_document,
};
pub use format::time::{epoch_seconds, format_epoch_seconds, TimeUnit, Unit, NAT};
pub use format::{codec, copy, values, vlen};
pub(crate) use query::cf::attribute_number;
pub use query::geo;
pub use query::labels;
pub use query::node::Node;
pub use query::plan::{ReadOptions, ReadPlan};
pub use query::selection::{DimSelection, SelectValue, Selection};
pub use read::cache::{CacheOptions, CacheStats, Caches};
pub use read::cell_parts::{CellPart, PartSize};
pub use read::coordinate::{ColumnLabels, CoordinateValues, LabelColumn, ResultDimension};
pub use read::geo::{Along, AxisPick, CellRead, GeoVariable, Raster, RasterPlacement};
pub use read::hierarchy::{Child, Dataset};
pub use read::resources::{ResourceOptions, Resources};
pub use read::{ReadQuery, Versions};
pub use view::v2::{Listing, ViewChunk, ViewValue};
pub use write::{Appended, Commit, InMemory, Items, RegionBody, RegionWrite, Repeated, WriteOptions, WriteOutcome};
