//! The positions one dimension selects ([`DimSelection`]), and how they
//! fall into the chunks of an axis ([`ChunkSpan`]).

use std::sync::Arc;

use super::{normalize, SelectItem};
use crate::engine::error::{Error, Result};
use crate::engine::format::chunk_grid::Axis;

/// The positions selected along one dimension: `len` indices `start + k*step`,
/// or the positions of a list.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DimSelection {
    /// First index (meaningless when `len == 0` or for a list).
    pub start: u64,
    /// Step between indices; negative walks backwards.
    pub(crate) step: i64,
    /// Number of indices.
    pub len: u64,
    /// Whether an integer index selected it (the dimension is dropped).
    pub dropped: bool,
    /// An index list (orthogonal selection): the positions, in order.
    pub(crate) list: Option<Arc<[u64]>>,
}

impl DimSelection {
    /// `len` positions from `start` by `step`.
    pub(crate) fn strided(start: u64, step: i64, len: u64) -> Self {
        Self {
            start,
            step,
            len,
            dropped: false,
            list: None,
        }
    }

    pub(super) fn new(item: &SelectItem, n: u64, dim: usize) -> Result<Self> {
        let n_i = n as i64;
        match item {
            SelectItem::List(list) => {
                let positions = list
                    .iter()
                    .map(|&i| {
                        normalize(i, n).ok_or_else(|| {
                            Error::InvalidRequest(format!(
                                "index {i} in a list is out of bounds for dimension {dim} with size {n}"
                            ))
                        })
                    })
                    .collect::<Result<Vec<u64>>>()?;
                Ok(Self {
                    start: 0,
                    step: 1,
                    len: positions.len() as u64,
                    dropped: false,
                    list: Some(positions.into()),
                })
            }
            &SelectItem::Index(i) => {
                let idx = if i < 0 { i + n_i } else { i };
                if idx < 0 || idx >= n_i {
                    return Err(Error::InvalidRequest(format!(
                        "index {i} is out of bounds for dimension {dim} with size {n}"
                    )));
                }
                Ok(Self {
                    start: idx as u64,
                    step: 1,
                    len: 1,
                    dropped: true,
                    list: None,
                })
            }
            &SelectItem::Slice(start, stop, step) => {
                let step = step.unwrap_or(1);
                // Python's slice.indices().
                let (lower, upper) = if step < 0 { (-1, n_i - 1) } else { (0, n_i) };
                let clamp = |v: Option<i64>, default: i64| match v {
                    None => default,
                    Some(v) if v < 0 => (v.saturating_add(n_i)).max(lower),
                    Some(v) => v.min(upper),
                };
                let start = clamp(start, if step < 0 { upper } else { lower });
                let stop = clamp(stop, if step < 0 { lower } else { upper });
                let len = if step > 0 {
                    if stop > start {
                        (stop - start - 1) / step + 1
                    } else {
                        0
                    }
                } else if start > stop {
                    (start - stop - 1) / (-step) + 1
                } else {
                    0
                };
                Ok(Self::strided(if len == 0 { 0 } else { start as u64 }, step, len as u64))
            }
            SelectItem::Ellipsis => unreachable!("expanded by resolve"),
        }
    }

    /// The positions `0..len`.
    pub fn all(len: u64) -> Self {
        Self::strided(0, 1, len)
    }

    /// These positions, in order.
    pub fn listed(positions: Vec<u64>) -> Self {
        Self {
            start: 0,
            step: 1,
            len: positions.len() as u64,
            dropped: false,
            list: Some(positions.into()),
        }
    }

    /// The `k`-th selected index.
    pub fn index(&self, k: u64) -> u64 {
        match &self.list {
            Some(list) => list[k as usize],
            None => (self.start as i64 + k as i64 * self.step) as u64,
        }
    }

    /// Whether this is an index list.
    pub(crate) fn is_list(&self) -> bool {
        self.list.is_some()
    }
}

/// The shape of the result: selected lengths of the dimensions not dropped.
pub(crate) fn output_shape(dims: &[DimSelection]) -> Vec<u64> {
    dims.iter().filter(|d| !d.dropped).map(|d| d.len).collect()
}

/// A contiguous run of output positions that fall in one chunk along one dimension.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChunkSpan {
    /// The chunk's index along the dimension.
    pub chunk: u64,
    /// First index within the chunk.
    pub(crate) start_in_chunk: u64,
    /// First output position.
    pub(crate) out_start: u64,
    /// Number of positions.
    pub count: u64,
    /// Step between the positions within the chunk (never 0).
    pub(crate) step: i64,
}

impl DimSelection {
    /// Split the positions `out_range` of this selection by the chunks of
    /// `axis`: runs of consecutive output positions inside one chunk whose
    /// indices step evenly (a list makes a run of each such stretch).
    pub(crate) fn chunk_spans(&self, axis: &Axis, out_range: std::ops::Range<u64>) -> Vec<ChunkSpan> {
        if let Some(list) = &self.list {
            return list_spans(list, axis, out_range);
        }
        let mut spans = Vec::new();
        let mut k = out_range.start;
        while k < out_range.end {
            let idx = self.index(k);
            let (chunk, within) = axis.locate(idx);
            let chunk_len = axis.len(chunk);
            // How many further positions stay in this chunk.
            let room = if self.step > 0 {
                (chunk_len - 1 - within) / self.step as u64 + 1
            } else {
                within / self.step.unsigned_abs() + 1
            };
            let count = room.min(out_range.end - k);
            spans.push(ChunkSpan {
                chunk,
                start_in_chunk: within,
                out_start: k,
                count,
                step: self.step,
            });
            k += count;
        }
        spans
    }
}

/// The spans of `list[out_range]`: a run grows while the next index lies in
/// the same chunk at the run's step (repeats start a new run).
fn list_spans(list: &[u64], axis: &Axis, out_range: std::ops::Range<u64>) -> Vec<ChunkSpan> {
    let mut spans: Vec<ChunkSpan> = Vec::new();
    for k in out_range {
        let idx = list[k as usize];
        let (chunk, within) = axis.locate(idx);
        if let Some(last) = spans.last_mut() {
            let last_idx = (last.start_in_chunk as i64 + (last.count as i64 - 1) * last.step) as u64;
            let step = within as i64 - last_idx as i64;
            let joins = last.chunk == chunk && step != 0 && (last.count == 1 || step == last.step);
            if joins {
                last.step = step;
                last.count += 1;
                continue;
            }
        }
        spans.push(ChunkSpan {
            chunk,
            start_in_chunk: within,
            out_start: k,
            count: 1,
            step: 1,
        });
    }
    spans
}
