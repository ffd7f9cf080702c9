//! A node of a hierarchy: its path, its parsed metadata and the version of
//! that metadata.

use std::sync::Arc;

use crate::engine::error::{Error, Result};
use crate::engine::format::metadata::{ArrayMetadata, NodeMetadata};
use crate::engine::query::geo::GeoGrid;
use crate::engine::query::labels::Coordinate;
use crate::storage::join;

/// The coordinates of an array's dimensions (`None`: no coordinate).
pub(crate) type Coordinates = Arc<[Option<Arc<Coordinate>>]>;

/// A node of the hierarchy.
#[derive(Debug)]
pub struct Node {
    /// Path without the leading `/` (`""` for the root).
    pub path: String,
    /// Its metadata; `None` for an implicit group.
    pub metadata: Option<NodeMetadata>,
    /// The ETag of its `zarr.json`.
    pub etag: Option<String>,
    /// A rendering of this node kept by the server for as long as the node
    /// is cached (the metadata TTL), so it is built once, not per request.
    pub(crate) rendered: tokio::sync::OnceCell<bytes::Bytes>,
    /// Its dimensions' coordinates, read when first needed.
    pub(crate) coordinates: tokio::sync::OnceCell<Coordinates>,
    /// Its geo grid (cell edges from the coordinates), found when first
    /// needed, so tiles do not rebuild it per request.
    pub(crate) geo: std::sync::OnceLock<Arc<GeoGrid>>,
}

impl Node {
    /// A node of `metadata` (`None`: an implicit group) at `path`.
    pub(crate) fn new(path: &str, metadata: Option<NodeMetadata>, etag: Option<String>) -> Self {
        Self {
            path: path.to_string(),
            metadata,
            etag,
            rendered: Default::default(),
            coordinates: Default::default(),
            geo: Default::default(),
        }
    }

    /// Its attributes (`None` for an implicit group).
    pub fn attributes(&self) -> Option<&serde_json::Value> {
        self.metadata.as_ref().map(|m| m.attributes())
    }

    /// A Zarr v2 array's `fill_value` (null otherwise): what xarray wrote
    /// as the variable's `_FillValue`.
    pub fn v2_fill_value(&self) -> serde_json::Value {
        match &self.metadata {
            Some(m) if m.zarr_format() == 2 => m.raw().get("fill_value").cloned().unwrap_or_default(),
            _ => serde_json::Value::Null,
        }
    }

    /// `"array"` or `"group"`.
    pub fn node_type(&self) -> &'static str {
        match self.metadata {
            Some(NodeMetadata::Array { .. }) => "array",
            _ => "group",
        }
    }

    /// The readable array at this node, or why there is none.
    pub fn array(&self) -> Result<&ArrayMetadata> {
        match &self.metadata {
            Some(NodeMetadata::Array { parsed: Ok(meta), .. }) => Ok(meta),
            Some(NodeMetadata::Array { parsed: Err(e), .. }) => Err(self.unreadable(e)),
            _ => Err(Error::InvalidRequest(format!(
                "node '/{}' is a group, not an array",
                self.path
            ))),
        }
    }

    /// Why the array cannot be read, naming this node (or its metadata key).
    fn unreadable(&self, error: &Error) -> Error {
        match error {
            Error::Unsupported(what) => Error::Unsupported(format!("array '/{}': {what}", self.path)),
            Error::Corrupt { reason, .. } => Error::corrupt(join(&self.path, "zarr.json"), reason.clone()),
            other => other.clone(),
        }
    }
}
