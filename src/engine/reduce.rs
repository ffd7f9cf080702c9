//! Reductions and coarsening of a read's result (contract 2.5), folded
//! as the read's chunks are decoded, so the input may be far larger than
//! memory: `reduce=min|max|sum|mean|std|count` over some axes, or over the
//! blocks of `coarsen=`.
//!
//! Both are one mechanism: each result dimension has a block length (1
//! keeps it, its whole length reduces it away, `f` coarsens it, trailing
//! partial blocks dropped). NaN is skipped (NumPy's `nanmin` ... `nanstd`,
//! `ddof=0`). Float sums are compensated (Neumaier), integer sums exact
//! (`i128`, wrapped to 64 bits like NumPy), and the standard deviation is
//! Welford's. Each decoded chunk's part is folded into one set of
//! accumulators on the decoding thread that decoded it (under a lock), so
//! no slab is assembled; points are folded slab by slab.

use bytes::Bytes;
use std::sync::{Arc, Mutex};

use futures::{StreamExt, TryStreamExt};

use super::cf::MaskAndScale;
use super::data_type::DataType;
use super::error::{Error, Result};
use super::exact;
use super::hierarchy::Dataset;
use super::plan::ReadPlan;
use super::read::{BlockSink, Versions};

/// A reduction operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Op {
    /// `min`
    Min,
    /// `max`
    Max,
    /// `sum`
    Sum,
    /// `mean`
    Mean,
    /// `std` (population, `ddof=0`)
    Std,
    /// `count` of non-NaN elements
    Count,
}

impl Op {
    /// The operator named in `reduce=`.
    pub fn parse(name: &str) -> Result<Self> {
        Ok(match name {
            "min" => Op::Min,
            "max" => Op::Max,
            "sum" => Op::Sum,
            "mean" => Op::Mean,
            "std" => Op::Std,
            "count" => Op::Count,
            other => {
                return Err(Error::InvalidRequest(format!(
                    "reduce '{other}' is not known: use min, max, sum, mean, std or count"
                )))
            }
        })
    }

    fn name(self) -> &'static str {
        match self {
            Op::Min => "min",
            Op::Max => "max",
            Op::Sum => "sum",
            Op::Mean => "mean",
            Op::Std => "std",
            Op::Count => "count",
        }
    }
}

/// Which result dimensions a reduction folds, and how.
#[derive(Debug, Clone, PartialEq)]
pub struct Reduction {
    op: Op,
    /// Per result dimension, the block length (1: kept as it is).
    blocks: Vec<u64>,
    /// Per result dimension, whether the output drops it (reduced axes).
    dropped: Vec<bool>,
    /// The result (input) shape.
    input_shape: Vec<u64>,
}

/// What `reduce`, `axis` and `coarsen` asked, before the result shape is known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReduceRequest {
    /// `reduce=`, if given.
    pub op: Option<String>,
    /// `axis=` items: indices or dimension names.
    pub axis: Option<Vec<String>>,
    /// `coarsen=` items: `F` or `DIM:F`.
    pub coarsen: Option<Vec<String>>,
}

impl ReduceRequest {
    /// The request as text, for ETags.
    pub fn key(&self) -> String {
        format!("{:?}/{:?}/{:?}", self.op, self.axis, self.coarsen)
    }

    /// Whether anything was asked.
    pub fn is_empty(&self) -> bool {
        self.op.is_none() && self.axis.is_none() && self.coarsen.is_none()
    }

    /// The reduction of a result of `shape` whose dimensions are `names`.
    pub fn resolve(&self, shape: &[u64], names: &[Option<String>]) -> Result<Option<Reduction>> {
        if self.is_empty() {
            return Ok(None);
        }
        let bad = |m: String| Error::InvalidRequest(m);
        let op = match (&self.op, &self.coarsen) {
            (Some(name), _) => Op::parse(name)?,
            (None, Some(_)) => Op::Mean,
            (None, None) => return Err(bad("axis is given without reduce".into())),
        };
        let rank = shape.len();
        let dim_of = |item: &str| -> Result<usize> {
            let item = item.trim();
            if let Ok(i) = item.parse::<i64>() {
                let d = if i < 0 { i + rank as i64 } else { i };
                return usize::try_from(d)
                    .ok()
                    .filter(|d| *d < rank)
                    .ok_or_else(|| bad(format!("axis {i} is out of range for a result of {rank} dimensions")));
            }
            names.iter().position(|n| n.as_deref() == Some(item)).ok_or_else(|| {
                bad(format!(
                    "'{item}' is not a dimension of the result (its dimensions: {})",
                    describe(names)
                ))
            })
        };
        let mut blocks = vec![1u64; rank];
        let mut dropped = vec![false; rank];
        match (&self.axis, &self.coarsen) {
            (Some(_), Some(_)) => return Err(bad("axis cannot be combined with coarsen".into())),
            (Some(axes), None) => {
                for item in axes {
                    let d = dim_of(item)?;
                    if dropped[d] {
                        return Err(bad(format!("axis {item} is given twice")));
                    }
                    dropped[d] = true;
                    blocks[d] = shape[d].max(1);
                }
            }
            (None, Some(items)) => {
                let named = items.iter().any(|i| i.contains(':'));
                if !named && items.len() != rank {
                    return Err(bad(format!(
                        "coarsen has {} factors but the result has {rank} dimensions",
                        items.len()
                    )));
                }
                for (i, item) in items.iter().enumerate() {
                    let (d, factor) = match item.split_once(':') {
                        Some((dim, f)) => (dim_of(dim)?, f),
                        None if named => {
                            return Err(bad(format!("coarsen item '{item}' must be DIM:F like the others")))
                        }
                        None => (i, item.as_str()),
                    };
                    let factor: u64 = factor
                        .trim()
                        .parse()
                        .ok()
                        .filter(|f| *f >= 1)
                        .ok_or_else(|| bad(format!("coarsen factor '{factor}' is not a positive integer")))?;
                    blocks[d] = factor;
                }
            }
            (None, None) => {
                dropped = vec![true; rank];
                blocks = shape.iter().map(|&n| n.max(1)).collect();
            }
        }
        Ok(Some(Reduction {
            op,
            blocks,
            dropped,
            input_shape: shape.to_vec(),
        }))
    }
}

fn describe(names: &[Option<String>]) -> String {
    names
        .iter()
        .enumerate()
        .map(|(i, n)| n.clone().unwrap_or_else(|| i.to_string()))
        .collect::<Vec<_>>()
        .join(", ")
}

impl Reduction {
    /// The output's length along each input dimension (coarsened or kept;
    /// 1 for dropped ones).
    fn out_lengths(&self) -> Vec<u64> {
        self.input_shape
            .iter()
            .zip(&self.blocks)
            .zip(&self.dropped)
            .map(|((&n, &b), &drop)| if drop { 1 } else { n / b })
            .collect()
    }

    /// The output shape (reduced axes removed).
    pub fn output_shape(&self) -> Vec<u64> {
        self.out_lengths()
            .into_iter()
            .zip(&self.dropped)
            .filter(|(_, d)| !**d)
            .map(|(n, _)| n)
            .collect()
    }

    /// Which input dimensions the output keeps.
    pub fn kept(&self) -> Vec<bool> {
        self.dropped.iter().map(|d| !d).collect()
    }

    /// Whether dimension `d` is coarsened (a block of more than one).
    pub fn coarsened(&self, d: usize) -> Option<u64> {
        (!self.dropped[d] && self.blocks[d] > 1).then_some(self.blocks[d])
    }

    /// The output's data type for input of `input`; 400 for input that
    /// cannot be reduced.
    pub fn output_type(&self, input: DataType) -> Result<DataType> {
        let kind = Kind::of(input).ok_or_else(|| {
            Error::InvalidRequest(format!(
                "reduce={} needs real numbers; the data type is {}",
                self.op.name(),
                input.name()
            ))
        })?;
        Ok(match (self.op, kind) {
            (Op::Min | Op::Max, _) => input,
            (Op::Sum, Kind::Signed) => DataType::Int64,
            (Op::Sum, Kind::Unsigned) => DataType::UInt64,
            (Op::Count, _) => DataType::UInt64,
            _ => DataType::Float64,
        })
    }
}

/// The kinds of real input.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// Signed integers and bool (NumPy sums bool as int64).
    Signed,
    Unsigned,
    Float,
}

impl Kind {
    fn of(data_type: DataType) -> Option<Self> {
        Some(match data_type {
            DataType::Bool | DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => Kind::Signed,
            DataType::UInt8 | DataType::UInt16 | DataType::UInt32 | DataType::UInt64 => Kind::Unsigned,
            DataType::Float16 | DataType::Float32 | DataType::Float64 => Kind::Float,
            _ => return None,
        })
    }
}

/// Per output cell accumulators.
#[derive(Debug, Clone)]
struct Cells {
    op: Op,
    float: bool,
    count: Vec<u64>,
    /// Float sums (Neumaier: sum and compensation), or Welford means.
    a: Vec<f64>,
    /// Compensations, or Welford M2.
    b: Vec<f64>,
    /// Exact integer sums, minima or maxima.
    int: Vec<i128>,
    /// Integer `std`: exact sums of each value less the cell's first
    /// value, and of their squares, while they fit (else the Welford
    /// state above answers).
    spread: Vec<Option<ExactSpread>>,
}

/// Exact sums for the variance of integers: `n` values `x`, shifted by
/// the first (the variance does not change), `s1 = Σ(x - shift)` and
/// `s2 = Σ(x - shift)²`.
#[derive(Debug, Clone, Copy, Default)]
struct ExactSpread {
    shift: Option<i128>,
    s1: i128,
    s2: i128,
}

impl ExactSpread {
    /// Add `v`; `None` once a sum would overflow.
    fn add(mut self, v: i128) -> Option<Self> {
        let shift = *self.shift.get_or_insert(v);
        let y = v.checked_sub(shift)?;
        self.s1 = self.s1.checked_add(y)?;
        self.s2 = self.s2.checked_add(y.checked_mul(y)?)?;
        Some(self)
    }

    /// The standard deviation of `n` values, rounded once:
    /// `sqrt((n·s2 - s1²) / n²)`; `None` if a product overflows.
    fn std(&self, n: u64) -> Option<f64> {
        let n = i128::from(n);
        let num = n.checked_mul(self.s2)?.checked_sub(self.s1.checked_mul(self.s1)?)?;
        let den = n.checked_mul(n)?;
        Some(exact::sqrt_ratio(u128::try_from(num).ok()?, den as u128))
    }
}

impl Cells {
    fn new(op: Op, float: bool, n: usize) -> Self {
        let (float_cells, int_cells) = match (op, float) {
            (Op::Count, _) => (0, 0),
            (Op::Sum | Op::Mean | Op::Min | Op::Max, false) => (0, n),
            _ => (n, 0),
        };
        let init = match op {
            Op::Min | Op::Max => f64::NAN,
            _ => 0.0,
        };
        let int_init = match op {
            Op::Min => i128::MAX,
            Op::Max => i128::MIN,
            _ => 0,
        };
        let spread_cells = if op == Op::Std && !float { n } else { 0 };
        Self {
            op,
            float,
            count: vec![0; n],
            a: vec![init; float_cells],
            b: vec![0.0; float_cells],
            int: vec![int_init; int_cells],
            spread: vec![Some(ExactSpread::default()); spread_cells],
        }
    }

    /// Fold one value into the minimum or maximum of `cell` (NaN skipped).
    #[inline]
    fn add_extreme(&mut self, cell: usize, v: f64) {
        if v.is_nan() {
            return;
        }
        self.count[cell] += 1;
        // The cell starts NaN: the first value always replaces it.
        let replace = match self.op {
            Op::Min => self.a[cell].is_nan() || v < self.a[cell],
            _ => self.a[cell].is_nan() || v > self.a[cell],
        };
        if replace {
            self.a[cell] = v;
        }
    }

    /// Fold a run of real values (at most [`PIECE`]) into `cell`: NaN
    /// skipped, the run summed in four lanes and added compensated, its
    /// spread merged by Chan's formula.
    fn add_floats(&mut self, cell: usize, values: impl ExactSizeIterator<Item = f64> + Clone) {
        match self.op {
            Op::Count => self.count[cell] += values.filter(|v| !v.is_nan()).count() as u64,
            Op::Min | Op::Max => {
                for v in values {
                    self.add_extreme(cell, v);
                }
            }
            Op::Sum | Op::Mean => {
                let (sum, n) = lane_sum(values);
                self.count[cell] += n;
                self.add_sum(cell, sum);
            }
            // Single values (a run across the reduced dimensions is often
            // one element): Welford's update, as NumPy's two passes would
            // overflow on the same extreme values.
            Op::Std if values.len() == 1 => {
                for v in values.filter(|v| !v.is_nan()) {
                    self.add_welford(cell, v);
                }
            }
            Op::Std => {
                let (sum, n) = lane_sum(values.clone());
                if n == 0 {
                    return;
                }
                let mean = sum / n as f64;
                let m2: f64 = values.filter(|v| !v.is_nan()).map(|v| (v - mean) * (v - mean)).sum();
                self.merge_spread(cell, n, mean, m2);
            }
        }
    }

    /// Fold a run of integers (at most [`PIECE`], so an `i64` sum of
    /// 32-bit values cannot overflow) into `cell`.
    fn add_ints<A>(&mut self, cell: usize, values: impl ExactSizeIterator<Item = A> + Clone)
    where
        A: Copy + Ord + std::iter::Sum<A> + Into<i128>,
    {
        match self.op {
            Op::Count => self.count[cell] += values.len() as u64,
            Op::Min => {
                if let Some(m) = values.clone().min() {
                    self.count[cell] += values.len() as u64;
                    self.int[cell] = self.int[cell].min(m.into());
                }
            }
            Op::Max => {
                if let Some(m) = values.clone().max() {
                    self.count[cell] += values.len() as u64;
                    self.int[cell] = self.int[cell].max(m.into());
                }
            }
            Op::Sum | Op::Mean => {
                self.count[cell] += values.len() as u64;
                let sum: A = values.sum();
                self.int[cell] = self.int[cell].wrapping_add(sum.into());
            }
            Op::Std if values.len() == 1 => {
                for v in values {
                    self.add_exact_spread(cell, v.into());
                    self.add_welford(cell, v.into() as f64);
                }
            }
            Op::Std => {
                for v in values.clone() {
                    self.add_exact_spread(cell, v.into());
                }
                let n = values.len() as u64;
                if n == 0 {
                    return;
                }
                let mean = values.clone().map(|v| v.into() as f64).sum::<f64>() / n as f64;
                let m2: f64 = values.map(|v| (v.into() as f64 - mean).powi(2)).sum();
                self.merge_spread(cell, n, mean, m2);
            }
        }
    }

    /// Add an integer to the exact sums of `cell`, while they fit.
    #[inline]
    fn add_exact_spread(&mut self, cell: usize, v: i128) {
        if let Some(spread) = self.spread[cell] {
            self.spread[cell] = spread.add(v);
        }
    }

    /// Welford's update of `cell` with one value.
    fn add_welford(&mut self, cell: usize, v: f64) {
        self.count[cell] += 1;
        let n = self.count[cell] as f64;
        let delta = v - self.a[cell];
        self.a[cell] += delta / n;
        self.b[cell] += delta * (v - self.a[cell]);
    }

    /// Add `v` to the Neumaier sum of `cell`.
    fn add_sum(&mut self, cell: usize, v: f64) {
        let (s, c) = (self.a[cell], self.b[cell]);
        let t = s + v;
        // No compensation past infinity (inf - inf would make it NaN).
        if t.is_finite() {
            self.b[cell] = if s.abs() >= v.abs() {
                c + ((s - t) + v)
            } else {
                c + ((v - t) + s)
            };
        }
        self.a[cell] = t;
    }

    /// Merge `n` values of mean `mean` and squared deviations `m2` into the
    /// Welford state of `cell` (Chan, Golub and LeVeque).
    fn merge_spread(&mut self, cell: usize, n: u64, mean: f64, m2: f64) {
        let had = self.count[cell];
        if had == 0 {
            // Not merged: delta² of extreme values would overflow, times 0.
            (self.count[cell], self.a[cell], self.b[cell]) = (n, mean, m2);
            return;
        }
        let total = had + n;
        let delta = mean - self.a[cell];
        self.a[cell] += delta * (n as f64 / total as f64);
        self.b[cell] += m2 + delta * delta * (had as f64 * n as f64 / total as f64);
        self.count[cell] = total;
    }

    /// The output elements, little-endian `out_type`.
    fn finish(&self, out_type: DataType, input: DataType) -> Result<Vec<u8>> {
        let n = self.count.len();
        let mut out = Vec::with_capacity(n * out_type.size());
        for cell in 0..n {
            let count = self.count[cell];
            let f = match (self.op, self.float) {
                (Op::Count, _) => {
                    out.extend(count.to_le_bytes());
                    continue;
                }
                (Op::Sum, false) => {
                    out.extend((self.int[cell] as i64).to_le_bytes());
                    continue;
                }
                (Op::Min | Op::Max, false) => {
                    if count == 0 {
                        return Err(Error::InvalidRequest(format!(
                            "reduce={} of no elements has no value for integer data",
                            self.op.name()
                        )));
                    }
                    out.extend(int_bytes(self.int[cell], input));
                    continue;
                }
                (Op::Mean, false) if count == 0 => f64::NAN,
                (Op::Mean, false) => exact::ratio(self.int[cell], u128::from(count)),
                (Op::Sum, true) => compensated(self.a[cell], self.b[cell]),
                (Op::Mean, true) if count == 0 => f64::NAN,
                (Op::Mean, true) => compensated(self.a[cell], self.b[cell]) / count as f64,
                (Op::Std, _) if count == 0 => f64::NAN,
                (Op::Std, false) => self.spread[cell]
                    .and_then(|s| s.std(count))
                    .unwrap_or_else(|| (self.b[cell] / count as f64).sqrt()),
                (Op::Std, _) => (self.b[cell] / count as f64).sqrt(),
                (Op::Min | Op::Max, true) => {
                    out.extend(float_bytes(self.a[cell], out_type));
                    continue;
                }
            };
            out.extend(f.to_le_bytes());
        }
        Ok(out)
    }
}

/// The sum of the non-NaN values in four lanes (a run is short, so plain
/// float64 sums lose nothing that matters), and their number.
fn lane_sum(values: impl Iterator<Item = f64>) -> (f64, u64) {
    let mut lanes = [0.0f64; 4];
    let mut n = 0u64;
    for (i, v) in values.enumerate() {
        let ok = !v.is_nan();
        lanes[i & 3] += if ok { v } else { 0.0 };
        n += u64::from(ok);
    }
    ((lanes[0] + lanes[1]) + (lanes[2] + lanes[3]), n)
}

/// A Neumaier sum and its compensation (an infinite sum stays as it is).
fn compensated(sum: f64, compensation: f64) -> f64 {
    if sum.is_finite() {
        sum + compensation
    } else {
        sum
    }
}

fn int_bytes(v: i128, data_type: DataType) -> Vec<u8> {
    let size = data_type.size();
    if data_type == DataType::Bool {
        return vec![u8::from(v != 0)];
    }
    (v as i64).to_le_bytes()[..size.min(8)].to_vec()
}

fn float_bytes(v: f64, data_type: DataType) -> Vec<u8> {
    match data_type {
        DataType::Float16 => half::f16::from_f64(v).to_le_bytes().to_vec(),
        DataType::Float32 => (v as f32).to_le_bytes().to_vec(),
        _ => v.to_le_bytes().to_vec(),
    }
}

/// Folds slabs of a result into the output cells.
struct Folder {
    reduction: Reduction,
    input: DataType,
    cells: Cells,
    /// Output strides over input dimensions (0 for dropped ones).
    out_strides: Vec<u64>,
    /// Trimmed extent: elements at or past it along a dimension are dropped.
    limits: Vec<u64>,
}

impl Folder {
    fn new(reduction: Reduction, input: DataType) -> Self {
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
    fn fold(&mut self, data: &[u8], shape: &[u64], origin: &[u64]) {
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

/// The longest run folded at once: float sums in plain float64 over it
/// stay far within 1e-9, and an `i64` sum of 32-bit values cannot overflow.
const PIECE: usize = 4096;

impl Dataset {
    /// Read `plan` (pinned to `versions`) folded by `reduction`; the
    /// output's little-endian elements. Each decoded chunk's part is folded
    /// on the decoding thread that decoded it, so no slab is assembled;
    /// points (a result built by position) are folded slab by slab.
    pub async fn read_reduced(&self, plan: &ReadPlan, reduction: &Reduction, versions: Versions) -> Result<Bytes> {
        let input = plan.data_type();
        let out_type = reduction.output_type(input)?;
        let folder = Folder::new(reduction.clone(), input);
        let folder = match plan.points {
            Some(_) => self.fold_slabs(plan, folder, versions).await?,
            None => self.fold_chunks(plan, folder, &versions).await?,
        };
        Ok(Bytes::from(folder.cells.finish(out_type, input)?))
    }

    /// Fold every decoded block as it comes, two slabs' reads at a time.
    async fn fold_chunks(&self, plan: &ReadPlan, folder: Folder, versions: &Versions) -> Result<Folder> {
        let sink = Arc::new(FoldSink {
            folder: Mutex::new(folder),
            kept: plan.dims.iter().map(|d| !d.dropped).collect(),
            cf: plan.cf.clone().map(|cf| (cf, plan.meta().data_type)),
        });
        let as_sink: Arc<dyn BlockSink> = sink.clone();
        futures::stream::iter(0..plan.slab_count())
            .map(|slab| {
                let as_sink = as_sink.clone();
                async move {
                    let ticket = self.resources.ticket();
                    self.read_slab(plan, slab, Some(versions), ticket, Some(&as_sink)).await
                }
            })
            .buffer_unordered(2)
            .try_for_each(|_| async { Ok(()) })
            .await?;
        drop(as_sink);
        let sink = Arc::into_inner(sink).expect("the reads are done");
        Ok(sink.folder.into_inner().expect("no fold panicked"))
    }

    /// Read `plan` slab by slab, folding each on the decoding threads while
    /// the next slab is read.
    async fn fold_slabs(&self, plan: &ReadPlan, mut folder: Folder, versions: Versions) -> Result<Folder> {
        let slab_dim = plan.slab_result_dim();
        let rank = plan.output_shape().len();
        let shapes: Vec<(Vec<u64>, u64)> = (0..plan.slab_count())
            .map(|s| (plan.slab_result_shape(s), plan.slab_result_start(s)))
            .collect();
        let mut slabs = std::pin::pin!(self.slab_stream(plan.clone(), versions));
        let mut next = 0;
        while let Some(slab) = slabs.next().await {
            let data = slab?;
            let (shape, start) = shapes[next].clone();
            next += 1;
            let mut origin = vec![0; rank];
            if let Some(d) = slab_dim {
                origin[d] = start;
            }
            let job = move || {
                folder.fold(&data, &shape, &origin);
                folder
            };
            folder = self
                .resources
                .decoders
                .run(self.resources.ticket(), job)
                .await
                .map_err(|panic| Error::Internal(format!("a reduction panicked: {panic}")))?;
        }
        Ok(folder)
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

/// Folds the blocks of a read as they are decoded, from any decoding thread.
struct FoldSink {
    folder: Mutex<Folder>,
    /// Which array dimensions the result keeps (a dropped one is an index).
    kept: Vec<bool>,
    /// CF decoding, of elements stored as this type.
    cf: Option<(Arc<MaskAndScale>, DataType)>,
}

impl BlockSink for FoldSink {
    fn take(&self, data: &[u8], shape: &[u64], origin: &[u64]) -> Result<()> {
        let in_result =
            |v: &[u64]| -> Vec<u64> { v.iter().zip(&self.kept).filter(|(_, k)| **k).map(|(x, _)| *x).collect() };
        let (shape, origin) = (in_result(shape), in_result(origin));
        let decoded;
        let data = match &self.cf {
            Some((cf, stored)) => {
                decoded = cf.decode(*stored, &Bytes::copy_from_slice(data))?;
                &decoded[..]
            }
            None => data,
        };
        self.folder
            .lock()
            .expect("no fold panicked")
            .fold(data, &shape, &origin);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reduce(
        op: &str,
        axis: Option<&[&str]>,
        coarsen: Option<&[&str]>,
        shape: &[u64],
        dt: DataType,
        data: &[u8],
    ) -> Result<Vec<u8>> {
        let request = ReduceRequest {
            op: Some(op.into()),
            axis: axis.map(|a| a.iter().map(|s| s.to_string()).collect()),
            coarsen: coarsen.map(|a| a.iter().map(|s| s.to_string()).collect()),
        };
        let names: Vec<Option<String>> = (0..shape.len()).map(|i| Some(format!("d{i}"))).collect();
        let r = request.resolve(shape, &names)?.unwrap();
        let out_type = r.output_type(dt)?;
        let mut f = Folder::new(r, dt);
        // Two slabs along the first dimension, as a stream would give them.
        let half = shape[0] / 2;
        let row: usize = shape[1..].iter().product::<u64>() as usize * dt.size();
        let mut first = shape.to_vec();
        first[0] = half;
        let mut second = shape.to_vec();
        second[0] = shape[0] - half;
        let mut origin = vec![0; shape.len()];
        f.fold(&data[..half as usize * row], &first, &origin);
        origin[0] = half;
        f.fold(&data[half as usize * row..], &second, &origin);
        f.cells.finish(out_type, dt)
    }

    fn f64s(b: &[u8]) -> Vec<f64> {
        b.chunks_exact(8)
            .map(|c| f64::from_le_bytes(c.try_into().unwrap()))
            .collect()
    }

    #[test]
    fn reductions_match_numpy() {
        // [[1, NaN, 3], [4, 5, NaN]] as float32.
        let v = [1.0f32, f32::NAN, 3.0, 4.0, 5.0, f32::NAN];
        let data: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
        let f32s = |b: Vec<u8>| {
            b.chunks_exact(4)
                .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
                .collect::<Vec<_>>()
        };
        let shape = [2, 3];
        assert_eq!(
            f64s(&reduce("sum", None, None, &shape, DataType::Float32, &data).unwrap()),
            [13.0]
        );
        assert_eq!(
            f64s(&reduce("mean", None, None, &shape, DataType::Float32, &data).unwrap()),
            [3.25]
        );
        assert_eq!(
            f32s(reduce("min", Some(&["0"]), None, &shape, DataType::Float32, &data).unwrap()),
            [1.0, 5.0, 3.0]
        );
        assert_eq!(
            f32s(reduce("max", Some(&["d1"]), None, &shape, DataType::Float32, &data).unwrap()),
            [3.0, 5.0]
        );
        let std = f64s(&reduce("std", Some(&["-1"]), None, &shape, DataType::Float32, &data).unwrap());
        assert!((std[0] - 1.0).abs() < 1e-12 && (std[1] - 0.5).abs() < 1e-12, "{std:?}");
        let count = reduce("count", None, None, &shape, DataType::Float32, &data).unwrap();
        assert_eq!(u64::from_le_bytes(count.try_into().unwrap()), 4);
        // All-NaN column: min NaN, sum 0, count 0.
        let nan = [f32::NAN; 4];
        let data: Vec<u8> = nan.iter().flat_map(|x| x.to_le_bytes()).collect();
        assert!(f32s(reduce("min", None, None, &[2, 2], DataType::Float32, &data).unwrap())[0].is_nan());
        assert_eq!(
            f64s(&reduce("sum", None, None, &[2, 2], DataType::Float32, &data).unwrap()),
            [0.0]
        );
    }

    #[test]
    fn integer_sums_are_exact_and_wrap_like_numpy() {
        let data: Vec<u8> = [i64::MAX, 1, 5, -5].iter().flat_map(|x| x.to_le_bytes()).collect();
        let out = reduce("sum", None, None, &[2, 2], DataType::Int64, &data).unwrap();
        assert_eq!(i64::from_le_bytes(out.try_into().unwrap()), i64::MIN);
        let data: Vec<u8> = [200u8, 100, 255, 1].to_vec();
        let out = reduce("sum", None, None, &[2, 2], DataType::UInt8, &data).unwrap();
        assert_eq!(u64::from_le_bytes(out.try_into().unwrap()), 556);
        let out = reduce("max", Some(&["1"]), None, &[2, 2], DataType::UInt8, &data).unwrap();
        assert_eq!(out, [200, 255]);
    }

    /// `mean` and `std` of 64-bit integers beyond 2^53 are the exact value
    /// rounded once: floats would round every sum (issue: 361.37 for 361.17).
    #[test]
    fn integer_mean_and_std_are_exact_beyond_2_to_53() {
        let ints = |v: &[i64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
        for centre in [9_000_000_000_000_000i64, 1 << 62, -(1 << 62), i64::MAX - 300] {
            // centre + k for k in -300..=300: std² = (601² - 1) / 12.
            let values: Vec<i64> = (-300..=300).map(|k| centre + k).collect();
            let n = values.len() as u64;
            let std = f64s(&reduce("std", None, None, &[n], DataType::Int64, &ints(&values)).unwrap())[0];
            assert_eq!(std, ((601.0f64 * 601.0 - 1.0) / 12.0).sqrt(), "centre {centre}");
            let mean = f64s(&reduce("mean", None, None, &[n], DataType::Int64, &ints(&values)).unwrap())[0];
            assert_eq!(mean, centre as f64, "centre {centre}");
        }
        // Split across rows and cells the same (single values and runs).
        let values: Vec<i64> = (0..40).map(|k| (1i64 << 60) + k * k).collect();
        let whole = reduce("std", Some(&["1"]), None, &[4, 10], DataType::Int64, &ints(&values)).unwrap();
        for (row, got) in f64s(&whole).into_iter().enumerate() {
            let ks: Vec<i128> = (row as i128 * 10..row as i128 * 10 + 10).map(|k| k * k).collect();
            let (s1, s2): (i128, i128) = (ks.iter().sum(), ks.iter().map(|k| k * k).sum());
            let want = exact::sqrt_ratio((10 * s2 - s1 * s1) as u128, 100);
            assert_eq!(got, want, "row {row}");
        }
        // A mean between two doubles (4 apart here) rounds to the nearer.
        let halfway = ints(&[(1 << 54) + 2, (1 << 54) + 4, (1 << 54) + 6, (1 << 54) + 8]);
        let mean = f64s(&reduce("mean", None, None, &[4], DataType::Int64, &halfway).unwrap())[0];
        assert_eq!(mean, ((1u64 << 54) + 4) as f64);
        // Unsigned values past i64::MAX.
        let big: Vec<u8> = [u64::MAX, u64::MAX - 2].iter().flat_map(|x| x.to_le_bytes()).collect();
        let std = f64s(&reduce("std", None, None, &[2], DataType::UInt64, &big).unwrap())[0];
        assert_eq!(std, 1.0);
    }

    /// Runs longer than a piece, blocks across piece boundaries, a slab
    /// boundary inside a block: against the plain definitions.
    #[test]
    fn long_rows_fold_like_the_definitions() {
        let (rows, cols) = (3usize, 9001usize);
        let values: Vec<f64> = (0..rows * cols)
            .map(|i| ((i * 7919) % 1013) as f64 * 0.37 - 150.0)
            .map(|v| if v.abs() < 0.5 { f64::NAN } else { v })
            .collect();
        let data: Vec<u8> = values.iter().flat_map(|v| v.to_le_bytes()).collect();
        let shape = [rows as u64, cols as u64];
        let stats = |xs: Vec<f64>| {
            let xs: Vec<f64> = xs.into_iter().filter(|v| !v.is_nan()).collect();
            let n = xs.len() as f64;
            let mean = xs.iter().sum::<f64>() / n;
            let std = (xs.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / n).sqrt();
            (mean, std)
        };
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        let (mean, std) = stats(values.clone());
        let got = f64s(&reduce("mean", None, None, &shape, DataType::Float64, &data).unwrap());
        assert!(close(got[0], mean), "{got:?} {mean}");
        let got = f64s(&reduce("std", None, None, &shape, DataType::Float64, &data).unwrap());
        assert!(close(got[0], std), "{got:?} {std}");
        // Blocks of 3 rows x 1000 columns: the last partial block is trimmed.
        let got = f64s(&reduce("std", None, Some(&["3", "1000"]), &shape, DataType::Float64, &data).unwrap());
        assert_eq!(got.len(), 9);
        for (b, g) in got.iter().enumerate() {
            let block = (0..rows)
                .flat_map(|r| values[r * cols + b * 1000..r * cols + (b + 1) * 1000].to_vec())
                .collect();
            assert!(close(*g, stats(block).1), "block {b}");
        }
        let ints: Vec<u8> = (0..rows * cols)
            .flat_map(|i| ((i % 65_536) as u16).to_le_bytes())
            .collect();
        let got = reduce("sum", Some(&["1"]), None, &shape, DataType::UInt16, &ints).unwrap();
        let want: Vec<u64> = (0..rows)
            .map(|r| (r * cols..(r + 1) * cols).map(|i| (i % 65_536) as u64).sum())
            .collect();
        let got: Vec<u64> = got
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes(c.try_into().unwrap()))
            .collect();
        assert_eq!(got, want);
    }

    #[test]
    fn coarsening_trims_partial_blocks() {
        // 3x5 of 0..15, blocks 2x2: one block row, two block columns.
        let data: Vec<u8> = (0..15).map(|x: i32| x as f64).flat_map(|x| x.to_le_bytes()).collect();
        let out = f64s(&reduce("mean", None, Some(&["2", "2"]), &[3, 5], DataType::Float64, &data).unwrap());
        assert_eq!(out, [(0.0 + 1.0 + 5.0 + 6.0) / 4.0, (2.0 + 3.0 + 7.0 + 8.0) / 4.0]);
        let out = f64s(&reduce("sum", None, Some(&["d1:5"]), &[3, 5], DataType::Float64, &data).unwrap());
        assert_eq!(out, [10.0, 35.0, 60.0]);
        let out = f64s(&reduce("mean", None, Some(&["9", "1"]), &[3, 5], DataType::Float64, &data).unwrap());
        assert!(out.is_empty());
    }

    #[test]
    fn bad_requests() {
        let shape = [2u64, 3];
        let names = vec![Some("y".to_string()), Some("x".to_string())];
        let req = |op: Option<&str>, axis: Option<&[&str]>, coarsen: Option<&[&str]>| ReduceRequest {
            op: op.map(str::to_string),
            axis: axis.map(|a| a.iter().map(|s| s.to_string()).collect()),
            coarsen: coarsen.map(|a| a.iter().map(|s| s.to_string()).collect()),
        };
        for r in [
            req(Some("median"), None, None),
            req(None, Some(&["0"]), None),
            req(Some("sum"), Some(&["0", "y"]), None),
            req(Some("sum"), Some(&["2"]), None),
            req(Some("sum"), Some(&["z"]), None),
            req(Some("sum"), Some(&["0"]), Some(&["1", "1"])),
            req(None, None, Some(&["1"])),
            req(None, None, Some(&["0", "1"])),
            req(None, None, Some(&["y:2", "3"])),
        ] {
            assert!(r.resolve(&shape, &names).is_err(), "{r:?}");
        }
        let r = req(Some("mean"), None, None).resolve(&shape, &names).unwrap().unwrap();
        assert!(r.output_type(DataType::Complex64).is_err() && r.output_type(DataType::String).is_err());
    }
}
