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

mod cells;
mod fold;
mod read;

use crate::engine::error::{Error, Result};
use crate::engine::format::data_type::DataType;

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

    /// Whether the reduction's values keep the units and packing of its
    /// input (min, max, mean), so packing attributes still apply.
    pub fn keeps_packing(&self) -> bool {
        matches!(self.op, Op::Min | Op::Max | Op::Mean)
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

#[cfg(test)]
mod tests {
    use super::fold::Folder;
    use super::*;
    use crate::engine::compute::exact;

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
