//! Chunk grids: `regular` (the core spec) and `rectilinear`
//! (zarr-extensions).
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v3/core/v3.0.html#chunk-grids>,
//! <https://github.com/zarr-developers/zarr-extensions/tree/main/chunk-grids/rectilinear>.
//! Examples: `{"name": "regular", "configuration": {"chunk_shape": [64, 64]}}`;
//! `{"name": "rectilinear", "configuration": {"kind": "inline",
//! "chunk_shapes": [[3, 7, 10], [[4, 3], 8, 10], 5]}}`: per dimension the
//! chunk edge lengths, each a length or a run `[length, count]`, or one
//! bare length repeated to cover the dimension. Chunks at the array's end
//! are stored at their full size in both grids; chunks are numbered (and
//! keyed) along each dimension from 0 either way.

use std::sync::Arc;

use serde_json::Value;

use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::json::{name_and_configuration, u64_list};

/// The most chunks a rectilinear dimension may declare.
const MAX_EDGES: u64 = 1 << 24;

/// How one dimension is cut into chunks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Axis {
    /// Every chunk has this length.
    Regular(u64),
    /// Chunk `i` covers `starts[i]..starts[i + 1]`.
    Edges(Arc<[u64]>),
}

impl Axis {
    /// The chunk holding index `idx`, and `idx`'s place in it.
    #[inline]
    pub(crate) fn locate(&self, idx: u64) -> (u64, u64) {
        match self {
            Axis::Regular(len) => (idx / len, idx % len),
            Axis::Edges(starts) => {
                let chunk = starts.partition_point(|&s| s <= idx).saturating_sub(1);
                (chunk as u64, idx - starts[chunk])
            }
        }
    }

    /// The length of chunk `chunk`.
    #[inline]
    pub(crate) fn len(&self, chunk: u64) -> u64 {
        match self {
            Axis::Regular(len) => *len,
            Axis::Edges(starts) => starts[chunk as usize + 1] - starts[chunk as usize],
        }
    }

    /// Number of chunks covering `extent` elements.
    fn count(&self, extent: u64) -> u64 {
        match self {
            Axis::Regular(len) => extent.div_ceil(*len),
            Axis::Edges(starts) => starts.partition_point(|&s| s < extent) as u64,
        }
    }

    /// The distinct chunk lengths.
    fn lengths(&self) -> Vec<u64> {
        match self {
            Axis::Regular(len) => vec![*len],
            Axis::Edges(starts) => {
                let mut lengths: Vec<u64> = starts.windows(2).map(|w| w[1] - w[0]).collect();
                lengths.sort_unstable();
                lengths.dedup();
                lengths
            }
        }
    }

    /// The edge lengths as the node document shows them.
    fn edges(&self) -> Value {
        match self {
            Axis::Regular(len) => Value::from(*len),
            Axis::Edges(starts) => starts.windows(2).map(|w| w[1] - w[0]).collect(),
        }
    }
}

/// A chunk grid: one [`Axis`] per dimension.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChunkGrid {
    /// How each dimension is cut.
    pub axes: Vec<Axis>,
}

impl ChunkGrid {
    /// A regular grid of chunks of `shape`.
    pub fn regular(shape: &[u64]) -> Self {
        Self {
            axes: shape.iter().map(|&n| Axis::Regular(n)).collect(),
        }
    }

    /// Parse `chunk_grid` for an array of `shape`.
    pub fn from_json(value: &Value, shape: &[u64]) -> Result<Self> {
        let (name, config) = name_and_configuration(value, "chunk_grid")?;
        let rank = shape.len();
        let field = |key: &str| {
            config
                .and_then(|c| c.get(key))
                .ok_or_else(|| Error::Unsupported(format!("chunk_grid: {name} grid without configuration.{key}")))
        };
        let grid = match name {
            "regular" => {
                let chunk_shape = u64_list(field("chunk_shape")?, "chunk_grid.configuration.chunk_shape")?;
                if chunk_shape.len() != rank {
                    return Err(Error::Unsupported(format!(
                        "chunk_grid.configuration.chunk_shape {chunk_shape:?} has {} dimensions, the array has {rank}",
                        chunk_shape.len()
                    )));
                }
                Self::regular(&chunk_shape)
            }
            "rectilinear" => {
                match field("kind")?.as_str() {
                    Some("inline") => {}
                    _ => {
                        return Err(Error::Unsupported(format!(
                            "chunk_grid rectilinear kind {}",
                            field("kind")?
                        )))
                    }
                }
                let dims = field("chunk_shapes")?
                    .as_array()
                    .filter(|d| d.len() == rank)
                    .ok_or_else(|| corrupt(format!("chunk_grid chunk_shapes is not a list of {rank} dimensions")))?;
                let axes = dims
                    .iter()
                    .zip(shape)
                    .map(|(dim, &extent)| rectilinear_axis(dim, extent))
                    .collect::<Result<_>>()?;
                Self { axes }
            }
            other => return Err(Error::Unsupported(format!("chunk_grid \"{other}\""))),
        };
        if grid.axes.iter().any(|a| a.lengths().contains(&0)) {
            return Err(Error::Unsupported(format!(
                "chunk_grid {value} has a zero-length chunk"
            )));
        }
        Ok(grid)
    }

    /// Whether every chunk has the same shape.
    pub fn is_regular(&self) -> bool {
        self.axes.iter().all(|a| matches!(a, Axis::Regular(_)))
    }

    /// The shape of the chunk at grid `coords`.
    pub fn chunk_shape(&self, coords: &[u64]) -> Vec<u64> {
        self.axes.iter().zip(coords).map(|(a, &c)| a.len(c)).collect()
    }

    /// The shape of the first chunk (of every chunk, in a regular grid).
    pub fn first_chunk_shape(&self) -> Vec<u64> {
        self.chunk_shape(&vec![0; self.axes.len()])
    }

    /// Every distinct chunk shape (each dimension's lengths combined).
    pub(crate) fn distinct_shapes(&self) -> Vec<Vec<u64>> {
        let mut shapes = vec![Vec::new()];
        for axis in &self.axes {
            let lengths = axis.lengths();
            shapes = shapes
                .into_iter()
                .flat_map(|s: Vec<u64>| {
                    lengths.iter().map(move |&n| {
                        let mut s = s.clone();
                        s.push(n);
                        s
                    })
                })
                .collect();
        }
        shapes
    }

    /// Number of chunks along each dimension of an array of `shape`.
    pub fn grid_shape(&self, shape: &[u64]) -> Vec<u64> {
        self.axes.iter().zip(shape).map(|(a, &n)| a.count(n)).collect()
    }

    /// The chunk edges per dimension as the node document shows them for
    /// an array of `shape`: the chunk shape for a regular grid, one list of
    /// edge lengths per dimension for a rectilinear one (as declared, every
    /// form expanded; a bare length repeated to cover the dimension).
    pub fn document(&self, shape: &[u64]) -> Value {
        if self.is_regular() {
            return self.first_chunk_shape().into();
        }
        self.axes
            .iter()
            .zip(shape)
            .map(|(a, &extent)| match a {
                Axis::Regular(len) => vec![*len; extent.div_ceil(*len).max(1) as usize].into(),
                Axis::Edges(_) => a.edges(),
            })
            .collect()
    }
}

/// One dimension of `chunk_shapes`: a bare length repeated to cover
/// `extent`, or a list of lengths and `[length, count]` runs (whose sum
/// must reach `extent`).
fn rectilinear_axis(dim: &Value, extent: u64) -> Result<Axis> {
    let bad = || corrupt(format!("chunk_grid chunk_shapes entry {dim}"));
    if let Some(len) = dim.as_u64() {
        if len == 0 {
            return Err(bad());
        }
        return Ok(Axis::Regular(len));
    }
    let mut starts = vec![0u64];
    for item in dim.as_array().ok_or_else(bad)? {
        let (len, count) = match item {
            Value::Array(run) => match run.as_slice() {
                [len, count] => (len.as_u64().ok_or_else(bad)?, count.as_u64().ok_or_else(bad)?),
                _ => return Err(bad()),
            },
            other => (other.as_u64().ok_or_else(bad)?, 1),
        };
        if len == 0 || count == 0 || starts.len() as u64 + count > MAX_EDGES {
            return Err(bad());
        }
        for _ in 0..count {
            let end = starts.last().expect("starts at 0").checked_add(len).ok_or_else(bad)?;
            starts.push(end);
        }
    }
    if *starts.last().expect("starts at 0") < extent {
        return Err(corrupt(format!(
            "chunk_grid chunk_shapes entry {dim} covers {} of {extent} elements",
            starts.last().expect("starts at 0")
        )));
    }
    Ok(Axis::Edges(starts.into()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn rectilinear(shapes: Value, shape: &[u64]) -> Result<ChunkGrid> {
        ChunkGrid::from_json(
            &json!({"name": "rectilinear", "configuration": {"kind": "inline", "chunk_shapes": shapes}}),
            shape,
        )
    }

    #[test]
    fn rectilinear_forms_expand_alike() {
        let mixed = rectilinear(json!([[3, 7, 10], [[4, 3], 8, 10], 5]), &[20, 30, 12]).unwrap();
        let bare = rectilinear(json!([[3, 7, 10], [4, 4, 4, 8, 10], 5]), &[20, 30, 12]).unwrap();
        assert_eq!(mixed, bare);
        assert_eq!(mixed.grid_shape(&[20, 30, 12]), vec![3, 5, 3]);
        assert_eq!(mixed.chunk_shape(&[1, 3, 2]), vec![7, 8, 5]);
        assert_eq!(
            mixed.document(&[20, 30, 12]),
            json!([[3, 7, 10], [4, 4, 4, 8, 10], [5, 5, 5]])
        );
        let Axis::Edges(_) = &mixed.axes[0] else { panic!() };
        assert_eq!(mixed.axes[0].locate(9), (1, 6));
        assert_eq!(mixed.axes[0].locate(10), (2, 0));
        assert_eq!(mixed.axes[2].locate(11), (2, 1));
        assert_eq!(mixed.distinct_shapes().len(), 3 * 3);
        // Edges past the extent are allowed, and not counted as chunks.
        let over = rectilinear(json!([[3, 7, 10, 4, [5, 2]]]), &[20]).unwrap();
        assert_eq!(over.grid_shape(&[20]), vec![3]);
        for bad in [
            json!([[3, 7]]),
            json!([[0, 20]]),
            json!([[[3, 0], 20]]),
            json!([[3, "x"]]),
            json!([]),
        ] {
            assert!(rectilinear(bad.clone(), &[20]).is_err(), "{bad}");
        }
        let kind = ChunkGrid::from_json(
            &json!({"name": "rectilinear", "configuration": {"kind": "file", "chunk_shapes": [[20]]}}),
            &[20],
        );
        assert!(matches!(kind, Err(Error::Unsupported(_))));
    }

    #[test]
    fn regular_grids_count_edge_chunks() {
        let grid = ChunkGrid::from_json(
            &json!({"name": "regular", "configuration": {"chunk_shape": [4, 5]}}),
            &[13, 17],
        )
        .unwrap();
        assert!(grid.is_regular());
        assert_eq!(grid.grid_shape(&[13, 17]), vec![4, 4]);
        assert_eq!(grid.document(&[13, 17]), json!([4, 5]));
        assert_eq!(grid.axes[1].locate(16), (3, 1));
    }
}
