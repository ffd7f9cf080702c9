//! The accumulators of a reduction, one per output cell: compensated
//! (Neumaier) float sums, exact integer sums, extremes, and Welford or
//! exact-integer spreads, finished into the output's elements.

use super::Op;
use crate::engine::compute::exact;
use crate::engine::error::{Error, Result};
use crate::engine::format::data_type::DataType;

/// Per output cell accumulators.
#[derive(Debug, Clone)]
pub(super) struct Cells {
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
    pub(super) fn new(op: Op, float: bool, n: usize) -> Self {
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
    pub(super) fn add_floats(&mut self, cell: usize, values: impl ExactSizeIterator<Item = f64> + Clone) {
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
    pub(super) fn add_ints<A>(&mut self, cell: usize, values: impl ExactSizeIterator<Item = A> + Clone)
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
    pub(super) fn finish(&self, out_type: DataType, input: DataType) -> Result<Vec<u8>> {
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

/// The longest run folded at once: float sums in plain float64 over it
/// stay far within 1e-9, and an `i64` sum of 32-bit values cannot overflow.
pub(super) const PIECE: usize = 4096;
