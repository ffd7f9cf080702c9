//! Read planning: which chunks a selection touches and which slabs the
//! result is cut into.
//!
//! A read is split into *slabs* along the first dimension with more than
//! one selected position (so each slab is a contiguous part of the C-order
//! output), aligned to read-chunk boundaries so no chunk is decoded twice
//! unless one chunk row alone exceeds the slab size. The HTTP layer streams
//! slab by slab with bounded memory.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::ops::Range;
use std::sync::Arc;

use crate::engine::error::Result;
use crate::engine::format::chunk_grid::Axis;
use crate::engine::format::copy::{copy_block_to, source_prefix_elements, Block, Destination};
use crate::engine::format::data_type::DataType;
use crate::engine::format::metadata::ArrayMetadata;
use crate::engine::query::cf::MaskAndScale;
use crate::engine::query::node::Node;
use crate::engine::query::selection::{output_shape, ChunkSpan, DimSelection, Selection};

/// Tuning of region reads.
#[derive(Debug, Clone)]
pub struct ReadOptions {
    /// Target bytes of one output slab (a slab holds at least one chunk row).
    pub slab_bytes: u64,
    /// Chunks or shards fetched and decoded at once per read.
    pub concurrency: usize,
    /// Decoded bytes of one decoding job, and of one fetch of a shard's
    /// inner chunks: the encoded bytes a read holds are about
    /// `2 * concurrency` of these.
    pub batch_bytes: usize,
}

impl Default for ReadOptions {
    fn default() -> Self {
        Self {
            slab_bytes: 16 << 20,
            concurrency: 8,
            batch_bytes: 1 << 20,
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
    /// A vectorized selection: each point's positions (then `dims` is empty).
    pub(crate) points: Option<Arc<[Vec<u64>]>>,
    /// CF decoding (`decode=cf`): the result is `float64`.
    pub(crate) cf: Option<Arc<MaskAndScale>>,
    /// The result's elements big-endian (for protocols that send them so).
    pub(crate) big_endian: bool,
}

impl ReadPlan {
    /// Plan `selection` on the array at `node`.
    pub fn new(node: Arc<Node>, selection: &Selection, options: &ReadOptions) -> Result<Self> {
        let meta = node.array()?;
        // Unsharded chunks of a rectilinear grid differ in shape: then there
        // is no one read shape (empty), and each chunk's is its codecs'.
        let read_shape = match meta.codecs.partial_sharding() {
            Some(codec) => codec.inner_shape().to_vec(),
            None if meta.chunk_grid.is_regular() => meta.chunk_grid.first_chunk_shape(),
            None => Vec::new(),
        };
        if selection.point_list().is_some() {
            let points: Arc<[Vec<u64>]> = selection.resolve_points(&meta.shape)?.into();
            return Ok(Self {
                node,
                dims: Vec::new(),
                slab_dim: None,
                slabs: std::iter::once(0..points.len() as u64).collect(),
                read_shape,
                whole_unit: false,
                points: Some(points),
                cf: None,
                big_endian: false,
            });
        }
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
                let unit = match read_shape.get(s) {
                    Some(&n) => Axis::Regular(n),
                    None => meta.chunk_grid.axes[s].clone(),
                };
                let mut slabs: Vec<Range<u64>> = Vec::new();
                for span in dims[s].chunk_spans(&unit, 0..dims[s].len) {
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
        let whole_unit = slabs.len() == 1
            && !read_shape.is_empty()
            && dims
                .iter()
                .zip(&read_shape)
                .all(|(d, &n)| !d.is_list() && d.step == 1 && d.len == n && d.start % n == 0);
        Ok(Self {
            node,
            dims,
            slab_dim,
            slabs,
            read_shape,
            whole_unit,
            points: None,
            cf: None,
            big_endian: false,
        })
    }

    /// Decode the result as CF packed data (into `float64`).
    pub(crate) fn with_cf(mut self, cf: MaskAndScale) -> Self {
        self.cf = Some(Arc::new(cf));
        self
    }

    /// Give the result's elements big-endian, swapped as each slab is
    /// assembled (variable-length elements are left as they are).
    pub fn with_big_endian(mut self) -> Self {
        self.big_endian = true;
        self
    }

    /// Whether the values are CF-decoded (`float64`, NaN where missing).
    pub fn cf_decoded(&self) -> bool {
        self.cf.is_some()
    }

    /// The data type of the result: the array's, or `float64` when CF-decoded.
    pub fn data_type(&self) -> DataType {
        match self.cf {
            Some(_) => DataType::Float64,
            None => self.meta().data_type,
        }
    }

    pub(crate) fn meta(&self) -> &ArrayMetadata {
        self.node.array().expect("checked at planning")
    }

    /// The resolved selection as text: equal for selections that pick the
    /// same elements in the same layout, however they were written.
    pub(crate) fn selection_key(&self) -> String {
        let key = self.positions_key();
        if self.cf.is_some() {
            format!("{key};cf")
        } else {
            key
        }
    }

    fn positions_key(&self) -> String {
        let list = |l: &[u64]| l.iter().map(u64::to_string).collect::<Vec<_>>().join(" ");
        if let Some(points) = &self.points {
            let points: Vec<String> = points.iter().map(|p| list(p)).collect();
            return format!("points:{}", points.join(";"));
        }
        self.dims
            .iter()
            .map(|d| match &d.list {
                Some(l) => format!("[{}]", list(l)),
                None => format!("{}:{}:{}:{}", d.start, d.step, d.len, u8::from(d.dropped)),
            })
            .collect::<Vec<_>>()
            .join(",")
    }

    /// Shape of the result (dropped dimensions removed; `[n]` for points).
    pub fn output_shape(&self) -> Vec<u64> {
        match &self.points {
            Some(points) => vec![points.len() as u64],
            None => output_shape(&self.dims),
        }
    }

    /// The result's dimension names (`None` when unnamed; one unnamed
    /// dimension for points).
    pub fn result_dimension_names(&self) -> Vec<Option<String>> {
        if self.points.is_some() {
            return vec![None];
        }
        let names = self.meta().dimension_names.clone().unwrap_or_default();
        self.dims
            .iter()
            .enumerate()
            .filter(|(_, d)| !d.dropped)
            .map(|(i, _)| names.get(i).cloned().flatten())
            .collect()
    }

    /// The result dimension slabs are cut along, if any.
    pub(crate) fn slab_result_dim(&self) -> Option<usize> {
        let d = self.slab_dim?;
        Some(self.dims[..d].iter().filter(|s| !s.dropped).count())
    }

    /// Slab `i`'s extent in result dimensions.
    pub(crate) fn slab_result_shape(&self, slab: usize) -> Vec<u64> {
        if self.points.is_some() {
            return self.slab_shape(slab);
        }
        self.slab_shape(slab)
            .into_iter()
            .zip(&self.dims)
            .filter(|(_, d)| !d.dropped)
            .map(|(n, _)| n)
            .collect()
    }

    /// Where slab `i` starts along the slab dimension.
    pub(crate) fn slab_result_start(&self, slab: usize) -> u64 {
        self.slabs[slab].start
    }

    /// Elements of the whole result.
    pub(crate) fn output_elements(&self) -> u64 {
        self.output_shape().iter().product()
    }

    /// Bytes of the whole result.
    pub(crate) fn output_bytes(&self) -> u64 {
        self.output_elements() * self.data_type().size() as u64
    }

    /// The array's metadata.
    pub fn array(&self) -> &ArrayMetadata {
        self.meta()
    }

    /// The node read.
    pub fn node(&self) -> &Node {
        &self.node
    }

    /// Bytes of the read units (inner chunks when sharded, else chunks)
    /// this read decodes, each counted once: what a decoding budget
    /// (`tile_read_limit_bytes`) measures, known before reading.
    pub fn decoded_bytes(&self) -> u64 {
        let meta = self.meta();
        let unit_elements = match self.read_shape.is_empty() {
            false => self.read_shape.iter().product::<u64>(),
            true => meta
                .chunk_grid
                .distinct_shapes()
                .iter()
                .map(|s| s.iter().product::<u64>())
                .max()
                .unwrap_or(0),
        };
        let unit_bytes = unit_elements * meta.data_type.size() as u64;
        if self.points.is_some() {
            return self.units(0).len() as u64 * unit_bytes;
        }
        let units: u64 = self
            .dims
            .iter()
            .enumerate()
            .map(|(d, sel)| {
                let axis = match self.read_shape.get(d) {
                    Some(&n) => Axis::Regular(n),
                    None => meta.chunk_grid.axes[d].clone(),
                };
                let mut chunks: Vec<u64> = sel.chunk_spans(&axis, 0..sel.len).iter().map(|s| s.chunk).collect();
                chunks.sort_unstable();
                chunks.dedup();
                chunks.len() as u64
            })
            .product();
        units * unit_bytes
    }

    /// Bytes of the largest slab.
    pub(crate) fn max_slab_bytes(&self) -> u64 {
        let size = self.data_type().size() as u64;
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

    /// The read units (shards or chunks) slab `i` needs, each once, with
    /// the part of it the slab takes.
    pub(crate) fn units(&self, slab: usize) -> Vec<Unit> {
        match &self.points {
            Some(points) => point_units(
                points.iter().enumerate().map(|(k, p)| (k as u64, &p[..])),
                &self.meta().chunk_grid.axes,
            ),
            None => units(&self.unit_spans(slab)),
        }
    }

    /// Per-dimension spans over the read units (shards or chunks) for slab `i`.
    fn unit_spans(&self, slab: usize) -> Vec<Vec<ChunkSpan>> {
        let axes = &self.meta().chunk_grid.axes;
        self.dims
            .iter()
            .enumerate()
            .map(|(d, sel)| {
                let range = if Some(d) == self.slab_dim {
                    self.slabs[slab].clone()
                } else {
                    0..sel.len
                };
                sel.chunk_spans(&axes[d], range)
            })
            .collect()
    }

    /// The shape of slab `i`'s buffer in array rank (dropped dimensions
    /// have length 1); `[n]` for points.
    pub(crate) fn slab_shape(&self, slab: usize) -> Vec<u64> {
        if let Some(points) = &self.points {
            return vec![points.len() as u64];
        }
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

/// One chunk or shard of the grid and the part of it a slab needs.
pub(crate) struct Unit {
    pub(crate) coords: Vec<u64>,
    pub(crate) part: Part,
}

/// The elements of a unit a read takes.
pub(crate) enum Part {
    /// Per dimension, every span of the selection inside the unit (several
    /// when an index list comes back to the unit).
    Spans(Vec<Vec<ChunkSpan>>),
    /// Points inside the unit: (output position, position within the unit).
    Points(Vec<(u64, Vec<u64>)>),
}

/// Where a decoded chunk's elements go in the output.
#[derive(Debug, Clone)]
pub(crate) enum Placement {
    /// Strided blocks (basic and orthogonal selections).
    Blocks(Vec<Block>),
    /// Single elements: (element offset in the chunk, output position).
    Points(Vec<(u64, u64)>),
}

impl Part {
    /// The placement of this part from a decoded unit of `shape`.
    pub(crate) fn placement(&self, shape: &[u64]) -> Placement {
        match self {
            Part::Spans(dims) => {
                let count = dims.iter().map(Vec::len).product();
                let mut blocks = Vec::with_capacity(count);
                let mut at = vec![0; dims.len()];
                for _ in 0..count {
                    let spans = || dims.iter().zip(&at).map(|(dim, &i)| &dim[i]);
                    blocks.push(Block {
                        src_start: spans().map(|s| s.start_in_chunk).collect(),
                        src_step: spans().map(|s| s.step).collect(),
                        dst_start: spans().map(|s| s.out_start).collect(),
                        count: spans().map(|s| s.count).collect(),
                    });
                    next_combination(&mut at, |d| dims[d].len());
                }
                Placement::Blocks(blocks)
            }
            Part::Points(points) => {
                let strides = c_strides(shape);
                let offset = |p: &[u64]| p.iter().zip(&strides).map(|(i, s)| i * s).sum::<u64>();
                Placement::Points(points.iter().map(|(out, p)| (offset(p), *out)).collect())
            }
        }
    }
}

fn c_strides(shape: &[u64]) -> Vec<u64> {
    let mut strides = vec![1u64; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1];
    }
    strides
}

impl Placement {
    /// How many leading elements of a decoded chunk of `shape` the copy
    /// reads: one past the last.
    pub(crate) fn prefix_elements(&self, shape: &[u64]) -> u64 {
        match self {
            Placement::Blocks(blocks) => blocks
                .iter()
                .map(|b| source_prefix_elements(b, shape))
                .max()
                .unwrap_or(0),
            Placement::Points(points) => points.iter().map(|(src, _)| src + 1).max().unwrap_or(0),
        }
    }

    /// Shift the output positions back by `start` along `dim` (a slab's
    /// place in the whole result).
    pub(crate) fn shift(&mut self, dim: usize, start: u64) {
        if let Placement::Blocks(blocks) = self {
            for b in blocks {
                b.dst_start[dim] -= start;
            }
        }
    }

    /// Copy the placed elements of `src` (a decoded chunk of `src_shape`;
    /// `None`: every element is `fill`) into `dst` (shape `dst_shape`).
    pub(crate) fn copy(&self, src: Option<&[u8]>, src_shape: &[u64], dst: &mut [u8], dst_shape: &[u64], fill: &[u8]) {
        // SAFETY: `dst` is borrowed exclusively for the whole copy.
        unsafe { self.copy_to(src, src_shape, Destination::of(dst), dst_shape, fill) }
    }

    /// [`Placement::copy`] into a [`Destination`].
    ///
    /// # Safety
    /// `dst` must be valid for writes, and no other thread may touch the
    /// elements this placement writes while it runs.
    pub(crate) unsafe fn copy_to(
        &self,
        src: Option<&[u8]>,
        src_shape: &[u64],
        dst: Destination,
        dst_shape: &[u64],
        fill: &[u8],
    ) {
        match self {
            Placement::Blocks(blocks) => {
                for b in blocks {
                    // SAFETY: the caller's promise, block by block.
                    unsafe { copy_block_to(src, src_shape, dst, dst_shape, b, fill) };
                }
            }
            Placement::Points(points) => {
                let size = fill.len();
                for &(from, to) in points {
                    let (from, to) = (from as usize * size, to as usize * size);
                    let element = src.map_or(fill, |s| &s[from..from + size]);
                    // SAFETY: the caller's promise, element by element.
                    let out = unsafe { dst.slice(to, size) };
                    out.copy_from_slice(element);
                    dst.finish(out);
                }
            }
        }
    }
}

/// Units from per-dimension spans: each dimension's spans grouped by
/// chunk, then every combination of chunks, so each unit is read once.
pub(crate) fn units(spans: &[Vec<ChunkSpan>]) -> Vec<Unit> {
    let sorted: Vec<Cow<[ChunkSpan]>> = spans.iter().map(|dim| in_chunk_order(dim)).collect();
    let grouped: Vec<Vec<&[ChunkSpan]>> = sorted
        .iter()
        .map(|dim| dim.chunk_by(|a, b| a.chunk == b.chunk).collect())
        .collect();
    let count = grouped.iter().map(Vec::len).product();
    let mut out = Vec::with_capacity(count);
    let mut at = vec![0; grouped.len()];
    for _ in 0..count {
        let groups = || grouped.iter().zip(&at).map(|(dim, &i)| dim[i]);
        out.push(Unit {
            coords: groups().map(|g| g[0].chunk).collect(),
            part: Part::Spans(groups().map(<[ChunkSpan]>::to_vec).collect()),
        });
        next_combination(&mut at, |d| grouped[d].len());
    }
    out
}

/// Step `at`, one index per dimension below `len(d)`, to the next
/// combination, the last dimension fastest (back to all zeros after the last).
fn next_combination(at: &mut [usize], len: impl Fn(usize) -> usize) {
    for d in (0..at.len()).rev() {
        at[d] += 1;
        if at[d] < len(d) {
            return;
        }
        at[d] = 0;
    }
}

/// `spans` in chunk order, each chunk's in the order given: as they are
/// unless an index list comes back to a chunk.
fn in_chunk_order(spans: &[ChunkSpan]) -> Cow<'_, [ChunkSpan]> {
    if spans.is_sorted_by_key(|s| s.chunk) {
        return Cow::Borrowed(spans);
    }
    let mut sorted = spans.to_vec();
    sorted.sort_by_key(|s| s.chunk);
    Cow::Owned(sorted)
}

/// Units from points: grouped by the unit of the grid `axes` each lies in.
pub(crate) fn point_units<'a>(points: impl IntoIterator<Item = (u64, &'a [u64])>, axes: &[Axis]) -> Vec<Unit> {
    let mut by_unit: BTreeMap<Vec<u64>, Vec<(u64, Vec<u64>)>> = BTreeMap::new();
    for (out, p) in points {
        let (coords, within) = p.iter().zip(axes).map(|(&i, axis)| axis.locate(i)).unzip();
        by_unit.entry(coords).or_default().push((out, within));
    }
    by_unit
        .into_iter()
        .map(|(coords, points)| Unit {
            coords,
            part: Part::Points(points),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    fn span(chunk: u64, out_start: u64) -> ChunkSpan {
        ChunkSpan {
            chunk,
            start_in_chunk: 0,
            out_start,
            count: 1,
            step: 1,
        }
    }

    proptest! {
        /// One block per combination of spans, in order (the last
        /// dimension fastest), each made of its spans.
        #[test]
        fn placements_are_the_combinations_of_spans(lens in prop::collection::vec(0usize..4, 0..4)) {
            let dims: Vec<Vec<ChunkSpan>> = lens
                .iter()
                .enumerate()
                .map(|(d, &n)| (0..n as u64).map(|i| ChunkSpan { start_in_chunk: i, step: d as i64 + 1, ..span(0, 10 * i) }).collect())
                .collect();
            let Placement::Blocks(blocks) = Part::Spans(dims.clone()).placement(&[]) else { panic!("blocks expected") };
            prop_assert_eq!(blocks.len(), lens.iter().product::<usize>());
            prop_assert!(blocks.windows(2).all(|w| w[0].src_start < w[1].src_start));
            for block in &blocks {
                for (d, dim) in dims.iter().enumerate() {
                    let s = &dim[block.src_start[d] as usize];
                    prop_assert_eq!((block.src_step[d], block.dst_start[d], block.count[d]), (s.step, s.out_start, s.count));
                }
            }
        }

        /// Every combination of chunks once, in order (the last dimension
        /// fastest), each with exactly its spans in the order given.
        #[test]
        fn units_are_the_combinations_of_chunks(chunks in prop::collection::vec(prop::collection::vec(0u64..4, 0..6), 0..4)) {
            let spans: Vec<Vec<ChunkSpan>> = chunks
                .iter()
                .map(|dim| dim.iter().enumerate().map(|(i, &c)| span(c, i as u64)).collect())
                .collect();
            let distinct: Vec<std::collections::BTreeSet<u64>> = chunks.iter().map(|d| d.iter().copied().collect()).collect();
            let units = units(&spans);
            prop_assert_eq!(units.len(), distinct.iter().map(std::collections::BTreeSet::len).product::<usize>());
            prop_assert!(units.windows(2).all(|w| w[0].coords < w[1].coords));
            for unit in &units {
                let Part::Spans(parts) = &unit.part else { panic!("spans expected") };
                for (d, part) in parts.iter().enumerate() {
                    let expected: Vec<ChunkSpan> = spans[d].iter().filter(|s| s.chunk == unit.coords[d]).copied().collect();
                    prop_assert_eq!(part, &expected);
                }
            }
        }
    }
}
