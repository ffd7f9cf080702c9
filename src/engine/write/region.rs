//! Where a region's elements go: the chunks (or shards, and their inner
//! chunks) a rectangular selection touches, and for each the runs of
//! positions along every dimension, and the copy of a body's elements
//! into a chunk.

use crate::engine::error::{Error, Result};
use crate::engine::format::chunk_grid::Axis;
use crate::engine::query::selection::DimSelection;

/// The positions of one dimension a write puts into one chunk: body
/// positions `out..out + count` go to chunk positions `start + k * step`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Run {
    /// The chunk's index along the dimension.
    pub(crate) chunk: u64,
    /// The first position in the chunk.
    pub(crate) start: u64,
    /// The first position in the body.
    pub(crate) out: u64,
    pub(crate) count: u64,
    pub(crate) step: u64,
}

impl Run {
    /// Whether the run covers every position of a chunk holding `inside`
    /// positions inside the array.
    pub(crate) fn covers(&self, inside: u64) -> bool {
        self.start == 0 && self.count == inside && (self.step == 1 || self.count == 1)
    }
}

/// The runs of `dim` (a rectangular selection's) over the chunks of
/// `axis`, in order, for body positions `out_range`.
pub(crate) fn runs(dim: &DimSelection, axis: &Axis, out_range: std::ops::Range<u64>) -> Vec<Run> {
    dim.chunk_spans(axis, out_range)
        .into_iter()
        .map(|s| Run {
            chunk: s.chunk,
            start: s.start_in_chunk,
            out: s.out_start,
            count: s.count,
            step: s.step as u64,
        })
        .collect()
}

/// The runs of `run` (positions inside one shard) over inner chunks of
/// `inner` positions.
pub(crate) fn inner_runs(run: &Run, inner: u64) -> Vec<Run> {
    let dim = DimSelection::strided(run.start, run.step as i64, run.count);
    runs(&dim, &Axis::Regular(inner), 0..run.count)
        .into_iter()
        .map(|r| Run {
            out: r.out + run.out,
            ..r
        })
        .collect()
}

/// A selection a write can take: integers and slices with a positive step.
pub(crate) fn check_rectangular(dims: &[DimSelection]) -> Result<()> {
    for (d, dim) in dims.iter().enumerate() {
        if dim.list.is_some() {
            return Err(Error::InvalidRequest(format!(
                "a write takes a rectangular region: dimension {d} has an index list"
            )));
        }
        if dim.step <= 0 && dim.len > 1 {
            return Err(Error::InvalidRequest(format!(
                "a write takes a rectangular region: dimension {d} has step {} (only positive steps)",
                dim.step
            )));
        }
    }
    Ok(())
}

/// Every combination of one run per dimension, the last fastest.
pub(crate) fn combinations(runs: &[Vec<Run>]) -> Vec<Vec<Run>> {
    let count: usize = runs.iter().map(Vec::len).product();
    let mut out = Vec::with_capacity(count);
    let mut at = vec![0usize; runs.len()];
    for _ in 0..count {
        out.push(runs.iter().zip(&at).map(|(dim, &i)| dim[i]).collect());
        for d in (0..runs.len()).rev() {
            at[d] += 1;
            if at[d] < runs[d].len() {
                break;
            }
            at[d] = 0;
        }
    }
    out
}

fn c_strides(shape: &[u64]) -> Vec<usize> {
    let mut strides = vec![1usize; shape.len()];
    for d in (0..shape.len().saturating_sub(1)).rev() {
        strides[d] = strides[d + 1] * shape[d + 1] as usize;
    }
    strides
}

/// Copy the elements `runs` name from `body` (C order, shape `body_shape`)
/// into `chunk` (C order, shape `chunk_shape`); elements of `size` bytes.
pub(crate) fn scatter(
    body: &[u8],
    body_shape: &[u64],
    chunk: &mut [u8],
    chunk_shape: &[u64],
    runs: &[Run],
    size: usize,
) {
    let Some((last, outer)) = runs.split_last() else {
        chunk[..size].copy_from_slice(&body[..size]);
        return;
    };
    let (body_strides, chunk_strides) = (c_strides(body_shape), c_strides(chunk_shape));
    let rank = runs.len();
    let rows: u64 = outer.iter().map(|r| r.count).product();
    let mut at = vec![0u64; rank - 1];
    for _ in 0..rows {
        let mut from = (last.out as usize) * body_strides[rank - 1];
        let mut to = (last.start as usize) * chunk_strides[rank - 1];
        for (d, (run, &k)) in outer.iter().zip(&at).enumerate() {
            from += (run.out + k) as usize * body_strides[d];
            to += (run.start + k * run.step) as usize * chunk_strides[d];
        }
        let n = last.count as usize;
        if last.step == 1 {
            chunk[to * size..(to + n) * size].copy_from_slice(&body[from * size..(from + n) * size]);
        } else {
            let step = last.step as usize;
            for k in 0..n {
                let (f, t) = ((from + k) * size, (to + k * step) * size);
                chunk[t..t + size].copy_from_slice(&body[f..f + size]);
            }
        }
        for d in (0..rank - 1).rev() {
            at[d] += 1;
            if at[d] < outer[d].count {
                break;
            }
            at[d] = 0;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Scattering a body into chunks by the runs, then reading every
    /// selected position back, gives the body: for steps and edge chunks.
    #[test]
    fn scattered_elements_land_where_the_selection_says() {
        let shape = [7u64, 10];
        let chunk = [3u64, 4];
        let selections = [
            [(0u64, 1i64, 7u64), (0, 1, 10)],
            [(1, 2, 3), (2, 3, 3)],
            [(6, 1, 1), (3, 1, 5)],
        ];
        for sel in selections {
            let dims: Vec<DimSelection> = sel.iter().map(|&(s, st, n)| DimSelection::strided(s, st, n)).collect();
            let body_shape: Vec<u64> = dims.iter().map(|d| d.len).collect();
            let body: Vec<u8> = (0..body_shape.iter().product::<u64>() as u8).collect();
            let mut array = [255u8; 70];
            let per_dim: Vec<Vec<Run>> = dims
                .iter()
                .zip(chunk)
                .map(|(d, c)| runs(d, &Axis::Regular(c), 0..d.len))
                .collect();
            for unit in combinations(&per_dim) {
                let mut buf = vec![255u8; 12];
                scatter(&body, &body_shape, &mut buf, &chunk, &unit, 1);
                // Place the chunk into the array (its in-bounds part).
                for i in 0..3u64 {
                    for j in 0..4u64 {
                        let (gi, gj) = (unit[0].chunk * 3 + i, unit[1].chunk * 4 + j);
                        if gi < shape[0] && gj < shape[1] && buf[(i * 4 + j) as usize] != 255 {
                            array[(gi * 10 + gj) as usize] = buf[(i * 4 + j) as usize];
                        }
                    }
                }
            }
            let mut k = 0u8;
            for a in 0..dims[0].len {
                for b in 0..dims[1].len {
                    let (i, j) = (
                        dims[0].start + a * dims[0].step as u64,
                        dims[1].start + b * dims[1].step as u64,
                    );
                    assert_eq!(array[(i * 10 + j) as usize], k, "{sel:?} at ({i}, {j})");
                    k += 1;
                }
            }
            assert_eq!(
                array.iter().filter(|&&v| v != 255).count(),
                k as usize,
                "{sel:?}: nothing else written"
            );
        }
    }

    #[test]
    fn inner_runs_split_a_shard_run() {
        let run = Run {
            chunk: 1,
            start: 2,
            out: 5,
            count: 5,
            step: 2,
        };
        let inner = inner_runs(&run, 4);
        // Positions 2, 4, 6, 8, 10 of the shard: inner chunks 0 (2), 1 (4, 6), 2 (8, 10).
        let got: Vec<(u64, u64, u64, u64)> = inner.iter().map(|r| (r.chunk, r.start, r.out, r.count)).collect();
        assert_eq!(got, vec![(0, 2, 5, 1), (1, 0, 6, 2), (2, 0, 8, 2)]);
        assert!(Run {
            chunk: 0,
            start: 0,
            out: 0,
            count: 4,
            step: 1
        }
        .covers(4));
        assert!(!Run {
            chunk: 0,
            start: 0,
            out: 0,
            count: 2,
            step: 2
        }
        .covers(2));
    }
}
