//! The Zarr v3 engine: metadata, data types, chunk grid and keys, codecs,
//! sharding, selections and read planning. It knows nothing of HTTP and
//! reaches storage only through [`crate::storage::Store`].

pub mod cache;
pub mod chunk_grid;
pub mod chunk_key_encoding;
pub mod codec;
pub mod copy;
pub mod data_type;
pub mod decode_pool;
pub mod error;
pub mod hierarchy;
pub mod metadata;
pub mod read;
pub mod selection;

pub use cache::{CacheOptions, Caches};
pub use data_type::DataType;
pub use error::{Error, Result};
pub use hierarchy::{Child, Dataset, Node};
pub use metadata::{ArrayMetadata, NodeMetadata};
pub use read::{ReadOptions, ReadPlan, Versions};
pub use selection::Selection;
