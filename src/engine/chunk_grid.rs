//! The `regular` chunk grid.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/core/v3.0.html#chunk-grids>.
//! Example: `{"name": "regular", "configuration": {"chunk_shape": [64, 64]}}`.

use serde_json::Value;

use super::error::{Error, Result};
use super::json::{name_and_configuration, u64_list};

/// A regular grid: every chunk has `chunk_shape`; edge chunks are stored at full size.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RegularChunkGrid {
    /// The shape of every chunk.
    pub chunk_shape: Vec<u64>,
}

impl RegularChunkGrid {
    /// Parse `chunk_grid` for an array of rank `rank`.
    pub fn from_json(value: &Value, rank: usize) -> Result<Self> {
        let (name, config) = name_and_configuration(value, "chunk_grid")?;
        if name != "regular" {
            return Err(Error::Unsupported(format!("chunk_grid \"{name}\"")));
        }
        let chunk_shape = config
            .and_then(|c| c.get("chunk_shape"))
            .ok_or_else(|| Error::Unsupported("chunk_grid: regular grid without configuration.chunk_shape".into()))
            .and_then(|v| u64_list(v, "chunk_grid.configuration.chunk_shape"))?;
        if chunk_shape.len() != rank {
            return Err(Error::Unsupported(format!(
                "chunk_grid.configuration.chunk_shape {chunk_shape:?} has {} dimensions, the array has {rank}",
                chunk_shape.len()
            )));
        }
        if chunk_shape.contains(&0) {
            return Err(Error::Unsupported(format!(
                "chunk_grid.configuration.chunk_shape {chunk_shape:?} has a zero-length chunk"
            )));
        }
        Ok(Self { chunk_shape })
    }

    /// Number of chunks along each dimension of an array of `shape`.
    pub fn grid_shape(&self, shape: &[u64]) -> Vec<u64> {
        shape
            .iter()
            .zip(&self.chunk_shape)
            .map(|(s, c)| s.div_ceil(*c))
            .collect()
    }
}
