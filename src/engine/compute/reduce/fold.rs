//! Folding blocks of a result into a reduction's cells: which output cell
//! each element falls in (kept, coarsened or reduced dimensions, trailing
//! partial blocks trimmed), walked as runs of consecutive elements.

use super::cells::{Cells, PIECE};
use super::{Kind, Reduction};
use crate::engine::format::data_type::DataType;

/// Folds slabs of a result into the output cells.
pub(super) struct Folder {
    reduction: Reduction,
    input: DataType,
    pub(super) cells: Cells,
    /// Output strides over input dimensions (0 for dropped ones).
    out_strides: Vec<u64>,
    /// Trimmed extent: elements at or past it along a dimension are dropped.
    limits: Vec<u64>,
}

impl Folder {
    pub(super) fn new(reduction: Reduction, input: DataType) -> Self {
        let lengths = reduction.out_lengths();
        let mut out_strides = vec![0u64; lengths.len()];
        let mut stride = 1;
        for d in (0..lengths.len()).rev() {
            if !reduction.dropped[d] {
                out_strides[d] = stride;
                stride *= lengths[d];
            }
        }
        let limits = reduction
            .input_shape
            .iter()
            .zip(&reduction.blocks)
            .zip(&reduction.dropped)
            .map(|((&n, &b), &drop)| if drop { n } else { n / b * b })
            .collect();
        let cells = Cells::new(reduction.op, Kind::of(input) == Some(Kind::Float), stride as usize);
        Self {
            reduction,
            input,
            cells,
            out_strides,
            limits,
        }
    }

    /// Fold a block of the result: its elements, C order over `shape`,
    /// placed at `origin` (both in result dimensions).
    pub(super) fn fold(&mut self, data: &[u8], shape: &[u64], origin: &[u64]) {
        // Each run's elements of type $t, converted by $conv, folded by $add.
        macro_rules! runs {
            ($t:ty, $conv:expr, $add:ident) => {{
                const SIZE: usize = std::mem::size_of::<$t>();
                self.walk(shape, origin, |cells, cell, run| {
                    let bytes = &data[run.start * SIZE..run.end * SIZE];
                    let values = bytes
                        .chunks_exact(SIZE)
                        .map(|b| $conv(<$t>::from_le_bytes(b.try_into().expect("element size"))));
                    cells.$add(cell, values);
                });
            }};
        }
        macro_rules! ints {
            ($t:ty, $acc:ty) => {
                runs!($t, <$acc>::from, add_ints)
            };
        }
        macro_rules! floats {
            ($t:ty, $conv:expr) => {
                runs!($t, $conv, add_floats)
            };
        }
        match self.input {
            DataType::Bool => self.walk(shape, origin, |cells, cell, run| {
                cells.add_ints(cell, data[run].iter().map(|b| i64::from(*b != 0)));
            }),
            DataType::Int8 => ints!(i8, i64),
            DataType::Int16 => ints!(i16, i64),
            DataType::Int32 => ints!(i32, i64),
            DataType::Int64 => ints!(i64, i128),
            DataType::UInt8 => ints!(u8, i64),
            DataType::UInt16 => ints!(u16, i64),
            DataType::UInt32 => ints!(u32, i64),
            DataType::UInt64 => ints!(u64, i128),
            DataType::Float16 => floats!(half::f16, |v: half::f16| v.to_f64()),
            DataType::Float32 => floats!(f32, f64::from),
            DataType::Float64 => floats!(f64, |v: f64| v),
            _ => unreachable!("checked by output_type"),
        }
    }

    /// The block's axes for [`Self::walk`]: trailing dimensions that are
    /// reduced away whole and lie inside the extent are merged into one,
    /// so a block reduced entirely is one run (not one per row).
    fn axes(&self, shape: &[u64], origin: &[u64]) -> Axes {
        let rank = shape.len();
        let whole = |d: usize| self.out_strides[d] == 0 && origin[d] + shape[d] <= self.limits[d];
        let mut split = rank;
        while split > 0 && whole(split - 1) {
            split -= 1;
        }
        let mut axes = Axes {
            shape: shape.to_vec(),
            origin: origin.to_vec(),
            blocks: self.reduction.blocks.clone(),
            strides: self.out_strides.clone(),
            limits: self.limits.clone(),
        };
        if rank - split >= 2 {
            let merged = shape[split..].iter().product();
            for v in [
                &mut axes.shape,
                &mut axes.origin,
                &mut axes.blocks,
                &mut axes.strides,
                &mut axes.limits,
            ] {
                v.truncate(split);
            }
            axes.shape.push(merged);
            axes.origin.push(0);
            axes.blocks.push(u64::MAX);
            axes.strides.push(0);
            axes.limits.push(u64::MAX);
        }
        axes
    }

    /// Visit the elements of the block inside the trimmed extent as runs of
    /// consecutive elements (at most [`PIECE`]) that share an output cell.
    fn walk(
        &mut self,
        shape: &[u64],
        origin: &[u64],
        mut visit: impl FnMut(&mut Cells, usize, std::ops::Range<usize>),
    ) {
        let rank = shape.len();
        if shape.contains(&0) {
            return;
        }
        if rank == 0 {
            visit(&mut self.cells, 0, 0..1);
            return;
        }
        let Axes {
            shape,
            origin,
            blocks,
            strides,
            limits,
        } = self.axes(shape, origin);
        let rank = shape.len();
        let offset = |d: usize, i: u64| i + origin[d];
        let cell_of = |d: usize, i: u64, strides: &[u64]| (offset(d, i) / blocks[d]) * strides[d];
        let last = rank - 1;
        let row = shape[last];
        let (first, block, step) = (offset(last, 0), blocks[last], strides[last]);
        let mut index = vec![0u64; rank];
        let mut element = 0usize;
        loop {
            // Leading dimensions inside the trimmed extent?
            let inside = (0..last).all(|d| offset(d, index[d]) < limits[d]);
            if inside {
                let base: u64 = (0..last).map(|d| cell_of(d, index[d], &strides)).sum();
                let end = row.min(limits[last].saturating_sub(first));
                let mut j = 0;
                while j < end {
                    // A run: to the end of the row (the last dimension is
                    // reduced) or of its block, at most PIECE elements.
                    let cell = base + ((first + j) / block) * step;
                    let run_end = match step {
                        0 => end,
                        _ => end.min(((first + j) / block + 1) * block - first),
                    }
                    .min(j + PIECE as u64);
                    visit(
                        &mut self.cells,
                        cell as usize,
                        element + j as usize..element + run_end as usize,
                    );
                    j = run_end;
                }
            }
            element += row as usize;
            // Next row.
            let mut d = last;
            loop {
                if d == 0 {
                    return;
                }
                d -= 1;
                index[d] += 1;
                if index[d] < shape[d] {
                    break;
                }
                index[d] = 0;
            }
        }
    }
}

/// A block's extent and, per dimension, its reduction block length, output
/// stride and trimmed extent (see [`Folder::axes`]).
struct Axes {
    shape: Vec<u64>,
    origin: Vec<u64>,
    blocks: Vec<u64>,
    strides: Vec<u64>,
    limits: Vec<u64>,
}
