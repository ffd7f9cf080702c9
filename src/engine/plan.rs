//! Read planning: which chunks a selection touches and which slabs the
//! result is cut into.
//!
//! A read is split into *slabs* along the first dimension with more than
//! one selected position (so each slab is a contiguous part of the C-order
//! output), aligned to read-chunk boundaries so no chunk is decoded twice
//! unless one chunk row alone exceeds the slab size. The HTTP layer streams
//! slab by slab with bounded memory.

use std::ops::Range;
use std::sync::Arc;

use super::copy::Block;
use super::error::Result;
use super::metadata::ArrayMetadata;
use super::node::Node;
use super::selection::{output_shape, ChunkSpan, DimSelection, Selection};

/// Tuning of region reads.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Target bytes of one output slab (a slab holds at least one chunk row).
    pub slab_bytes: u64,
    /// Chunks or shards fetched and decoded at once per read.
    pub concurrency: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            slab_bytes: 16 << 20,
            concurrency: 8,
        }
    }
}

/// A planned region read of one array.
#[derive(Debug, Clone)]
pub struct ReadPlan {
    pub(crate) node: Arc<Node>,
    pub(crate) dims: Vec<DimSelection>,
    /// The dimension slabs are cut along, if any.
    pub(crate) slab_dim: Option<usize>,
    /// Ranges of output positions along `slab_dim`, one per slab.
    pub(crate) slabs: Vec<Range<u64>>,
    /// Shape of the decoded units copied from: inner chunks when read
    /// partially from shards, else chunks.
    pub(crate) read_shape: Vec<u64>,
    /// The selection is exactly one whole read unit (a tile): its decoded
    /// bytes are the result as they are, with no copy.
    pub(crate) whole_unit: bool,
}

impl ReadPlan {
    /// Plan `selection` on the array at `node`.
    pub fn new(node: Arc<Node>, selection: &Selection, options: &ReadOptions) -> Result<Self> {
        let meta = node.array()?;
        let dims = selection.resolve(&meta.shape)?;
        let slab_dim = dims.iter().position(|d| d.len > 1);
        let slabs = match slab_dim {
            None => {
                let single = 0..dims.iter().map(|d| d.len).product::<u64>().min(1);
                vec![single]
            }
            Some(s) => {
                let row_bytes: u64 =
                    dims[s + 1..].iter().map(|d| d.len).product::<u64>() * meta.data_type.size() as u64;
                let unit = meta.codecs.read_chunk_shape()[s];
                let mut slabs: Vec<Range<u64>> = Vec::new();
                for span in dims[s].chunk_spans(unit, 0..dims[s].len) {
                    match slabs.last_mut() {
                        Some(last) if (last.end - last.start + span.count) * row_bytes <= options.slab_bytes => {
                            last.end += span.count
                        }
                        _ => slabs.push(span.out_start..span.out_start + span.count),
                    }
                }
                slabs
            }
        };
        let read_shape = match meta.codecs.partial_sharding() {
            Some(codec) => codec.inner_shape().to_vec(),
            None => meta.chunk_grid.chunk_shape.clone(),
        };
        let whole_unit = slabs.len() == 1
            && dims
                .iter()
                .zip(&read_shape)
                .all(|(d, &n)| d.step == 1 && d.len == n && d.start % n == 0);
        Ok(Self {
            node,
            dims,
            slab_dim,
            slabs,
            read_shape,
            whole_unit,
        })
    }

    pub(crate) fn meta(&self) -> &ArrayMetadata {
        self.node.array().expect("checked at planning")
    }

    /// The resolved selection as text: equal for selections that pick the
    /// same elements in the same layout, however they were written.
    pub(crate) fn selection_key(&self) -> String {
        self.dims
            .iter()
            .map(|d| format!("{}:{}:{}:{}", d.start, d.step, d.len, u8::from(d.dropped)))
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Shape of the result (dropped dimensions removed).
    pub fn output_shape(&self) -> Vec<u64> {
        output_shape(&self.dims)
    }

    /// Bytes of the whole result.
    pub(crate) fn output_bytes(&self) -> u64 {
        self.dims.iter().map(|d| d.len).product::<u64>() * self.meta().data_type.size() as u64
    }

    /// The array's metadata.
    pub fn array(&self) -> &ArrayMetadata {
        self.meta()
    }

    /// The node read.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Bytes of the largest slab.
    pub(crate) fn max_slab_bytes(&self) -> u64 {
        let size = self.meta().data_type.size() as u64;
        (0..self.slabs.len())
            .map(|i| self.slab_shape(i).iter().product::<u64>() * size)
            .max()
            .unwrap_or(0)
    }

    /// Number of slabs (0 when the result is empty).
    pub(crate) fn slab_count(&self) -> usize {
        if self.output_bytes() == 0 {
            0
        } else {
            self.slabs.len()
        }
    }

    /// Per-dimension spans over the read units (shards or chunks) for slab `i`.
    pub(crate) fn unit_spans(&self, slab: usize) -> Vec<Vec<ChunkSpan>> {
        let chunk_shape = &self.meta().chunk_grid.chunk_shape;
        self.dims
            .iter()
            .enumerate()
            .map(|(d, sel)| {
                let range = if Some(d) == self.slab_dim {
                    self.slabs[slab].clone()
                } else {
                    0..sel.len
                };
                sel.chunk_spans(chunk_shape[d], range)
            })
            .collect()
    }

    /// The shape of slab `i`'s buffer in array rank (dropped dimensions have length 1).
    pub(crate) fn slab_shape(&self, slab: usize) -> Vec<u64> {
        self.dims
            .iter()
            .enumerate()
            .map(|(d, sel)| {
                if Some(d) == self.slab_dim {
                    self.slabs[slab].end - self.slabs[slab].start
                } else {
                    sel.len
                }
            })
            .collect()
    }
}

/// One chunk or shard of the grid and the spans of it that a slab needs.
pub(crate) struct Unit {
    pub(crate) coords: Vec<u64>,
    pub(crate) spans: Vec<ChunkSpan>,
}

/// The cartesian product of per-dimension spans, as units with grid coordinates.
pub(crate) fn units(spans: &[Vec<ChunkSpan>]) -> Vec<Unit> {
    let mut out = vec![Unit {
        coords: vec![],
        spans: vec![],
    }];
    for dim in spans {
        out = out
            .into_iter()
            .flat_map(|u| {
                dim.iter().map(move |s| {
                    let mut coords = u.coords.clone();
                    coords.push(s.chunk);
                    let mut spans = u.spans.clone();
                    spans.push(*s);
                    Unit { coords, spans }
                })
            })
            .collect();
    }
    out
}

/// Where the part of one chunk that `spans` cover goes in the output.
pub(crate) fn block_for(spans: &[ChunkSpan], dims: &[DimSelection]) -> Block {
    Block {
        src_start: spans.iter().map(|s| s.start_in_chunk).collect(),
        src_step: dims.iter().map(|d| d.step).collect(),
        dst_start: spans.iter().map(|s| s.out_start).collect(),
        count: spans.iter().map(|s| s.count).collect(),
    }
}
