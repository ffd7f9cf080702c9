//! One number of a real data type, read from and written to little-endian
//! bytes, and converted between types under the `cast_value` rules
//! (rounding mode, out-of-range handling). Shared by `scale_offset` and
//! `cast_value`.

use serde_json::Value;

use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::data_type::DataType;

/// A number: an exact integer or a float.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Scalar {
    Int(i128),
    Float(f64),
}

/// How a value between two representable ones is rounded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Rounding {
    NearestEven,
    TowardsZero,
    TowardsPositive,
    TowardsNegative,
    NearestAway,
}

/// What happens to a value outside the target's range.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum OutOfRange {
    /// An error (the default).
    Error,
    Clamp,
    /// Modulo 2^bits (integer targets).
    Wrap,
}

impl Rounding {
    pub(crate) fn parse(value: Option<&Value>) -> Result<Self> {
        Ok(match value.and_then(Value::as_str) {
            None if value.is_none_or(Value::is_null) => Self::NearestEven,
            Some("nearest-even") => Self::NearestEven,
            Some("towards-zero") => Self::TowardsZero,
            Some("towards-positive") => Self::TowardsPositive,
            Some("towards-negative") => Self::TowardsNegative,
            Some("nearest-away") => Self::NearestAway,
            _ => {
                return Err(corrupt(format!(
                    "cast_value rounding {}",
                    value.unwrap_or(&Value::Null)
                )))
            }
        })
    }

    /// `f` rounded to an integer.
    fn integer(self, f: f64) -> f64 {
        match self {
            Self::NearestEven => f.round_ties_even(),
            Self::TowardsZero => f.trunc(),
            Self::TowardsPositive => f.ceil(),
            Self::TowardsNegative => f.floor(),
            Self::NearestAway => f.round(),
        }
    }
}

impl OutOfRange {
    pub(crate) fn parse(value: Option<&Value>) -> Result<Self> {
        Ok(match value {
            None | Some(Value::Null) => Self::Error,
            Some(Value::String(s)) if s == "clamp" => Self::Clamp,
            Some(Value::String(s)) if s == "wrap" => Self::Wrap,
            Some(other) => return Err(corrupt(format!("cast_value out_of_range {other}"))),
        })
    }
}

/// Whether `data_type` is a real number type these codecs take.
pub(crate) fn is_real(data_type: DataType) -> bool {
    data_type.integer_range().is_some() || is_float(data_type)
}

fn is_float(data_type: DataType) -> bool {
    matches!(data_type, DataType::Float16 | DataType::Float32 | DataType::Float64)
}

impl Scalar {
    /// The element of `data_type` in `bytes` (little-endian).
    pub(crate) fn read(bytes: &[u8], data_type: DataType) -> Self {
        let mut le = [0u8; 8];
        le[..bytes.len()].copy_from_slice(bytes);
        let u = u64::from_le_bytes(le);
        match data_type {
            DataType::Float16 => Self::Float(half::f16::from_bits(u as u16).to_f64()),
            DataType::Float32 => Self::Float(f32::from_bits(u as u32).into()),
            DataType::Float64 => Self::Float(f64::from_bits(u)),
            DataType::Int8 => Self::Int((u as i8).into()),
            DataType::Int16 => Self::Int((u as i16).into()),
            DataType::Int32 => Self::Int((u as i32).into()),
            DataType::Int64 => Self::Int((u as i64).into()),
            _ => Self::Int(u.into()),
        }
    }

    /// A value written as a fill value of `data_type` (`"NaN"`, numbers...).
    pub(crate) fn from_json(value: &Value, data_type: DataType) -> Result<Self> {
        Ok(Self::read(&data_type.fill_value_from_json(value)?, data_type))
    }

    /// Little-endian bytes of `data_type`; the value must already be one
    /// of that type (see [`Scalar::cast`]).
    pub(crate) fn write(self, data_type: DataType, out: &mut Vec<u8>) {
        let n = data_type.size();
        match (self, data_type) {
            (Self::Float(f), DataType::Float16) => out.extend(half::f16::from_f64(f).to_le_bytes()),
            (Self::Float(f), DataType::Float32) => out.extend((f as f32).to_le_bytes()),
            (Self::Float(f), _) => out.extend(f.to_le_bytes()),
            (Self::Int(i), _) => out.extend(&i.to_le_bytes()[..n]),
        }
    }

    fn is_nan(self) -> bool {
        matches!(self, Self::Float(f) if f.is_nan())
    }

    /// Whether two values are the same key (NaN matches NaN).
    pub(crate) fn same(self, other: Self) -> bool {
        self == other || (self.is_nan() && other.is_nan())
    }

    /// This value as a `to`, rounded and kept in range as the rules say.
    pub(crate) fn cast(self, to: DataType, rounding: Rounding, range: OutOfRange) -> Result<Self> {
        match to.integer_range() {
            Some((min, max)) => {
                let i = match self {
                    Self::Int(i) => i,
                    Self::Float(f) if !f.is_finite() => {
                        return Err(corrupt(format!("cast_value: {f} has no {} value", to.name())))
                    }
                    // Saturating: anything past i128 is out of range anyway.
                    Self::Float(f) => rounding.integer(f) as i128,
                };
                if (min..=max).contains(&i) {
                    return Ok(Self::Int(i));
                }
                match range {
                    OutOfRange::Clamp => Ok(Self::Int(i.clamp(min, max))),
                    OutOfRange::Wrap => {
                        let modulus = max - min + 1;
                        Ok(Self::Int((i - min).rem_euclid(modulus) + min))
                    }
                    OutOfRange::Error => Err(corrupt(format!("cast_value: {i} is out of range of {}", to.name()))),
                }
            }
            None if is_float(to) => Ok(Self::Float(self.to_float(to, rounding, range)?)),
            None => Err(Error::Unsupported(format!("cast_value to {}", to.name()))),
        }
    }

    /// This value as a float of type `to`, rounded as `rounding` says.
    fn to_float(self, to: DataType, rounding: Rounding, range: OutOfRange) -> Result<f64> {
        let exact = |r: f64, v: Self| match v {
            Self::Int(i) => r.is_finite() && r.abs() < 2f64.powi(127) && r as i128 == i,
            Self::Float(f) => r == f || (r.is_nan() && f.is_nan()),
        };
        let value = match self {
            Self::Int(i) => i as f64,
            Self::Float(f) => f,
        };
        // Nearest-even first (two roundings, i128 -> f64 -> narrower, can
        // only differ from one where the f64 step itself was inexact, beyond
        // 2^53, which no narrower type resolves).
        let nearest = narrow(value, to);
        if exact(nearest, self) || !value.is_finite() {
            return Ok(nearest);
        }
        let (below, above) = if compare(nearest, self) == std::cmp::Ordering::Less {
            (nearest, step(nearest, to, true))
        } else {
            (step(nearest, to, false), nearest)
        };
        let chosen = match rounding {
            Rounding::NearestEven => nearest,
            Rounding::TowardsPositive => above,
            Rounding::TowardsNegative => below,
            Rounding::TowardsZero if value > 0.0 => below,
            Rounding::TowardsZero => above,
            Rounding::NearestAway => {
                let tie = (value - below) == (above - value);
                match (tie, value > 0.0) {
                    (true, true) => above,
                    (true, false) => below,
                    (false, _) => nearest,
                }
            }
        };
        if chosen.is_infinite() && value.is_finite() && range == OutOfRange::Error {
            return Err(corrupt(format!("cast_value: {value} is out of range of {}", to.name())));
        }
        if chosen.is_infinite() && value.is_finite() && range == OutOfRange::Clamp {
            return Ok(max_finite(to).copysign(value));
        }
        Ok(chosen)
    }
}

/// `f` rounded to the nearest value of float type `to`.
fn narrow(f: f64, to: DataType) -> f64 {
    match to {
        DataType::Float16 => half::f16::from_f64(f).to_f64(),
        DataType::Float32 => f64::from(f as f32),
        _ => f,
    }
}

fn max_finite(to: DataType) -> f64 {
    match to {
        DataType::Float16 => half::f16::MAX.to_f64(),
        DataType::Float32 => f32::MAX.into(),
        _ => f64::MAX,
    }
}

/// The next value of float type `to` above (`up`) or below `f`.
fn step(f: f64, to: DataType, up: bool) -> f64 {
    fn next(bits: i64, negative: bool, up: bool) -> i64 {
        // Magnitude grows when moving away from zero.
        if up != negative {
            bits + 1
        } else {
            bits - 1
        }
    }
    match to {
        DataType::Float16 => {
            let h = half::f16::from_f64(f);
            if h.to_bits() & 0x7fff == 0 {
                let tiny = half::f16::from_bits(1).to_f64();
                return if up { tiny } else { -tiny };
            }
            let bits = next(i64::from(h.to_bits()), h.is_sign_negative(), up) as u16;
            half::f16::from_bits(bits).to_f64()
        }
        DataType::Float32 => {
            let s = f as f32;
            if s == 0.0 {
                let tiny = f64::from(f32::from_bits(1));
                return if up { tiny } else { -tiny };
            }
            f64::from(f32::from_bits(next(i64::from(s.to_bits()), s < 0.0, up) as u32))
        }
        _ => {
            if f == 0.0 {
                let tiny = f64::from_bits(1);
                return if up { tiny } else { -tiny };
            }
            f64::from_bits(next(f.to_bits() as i64, f < 0.0, up) as u64)
        }
    }
}

/// `f` against the exact value of `v`.
fn compare(f: f64, v: Scalar) -> std::cmp::Ordering {
    match v {
        Scalar::Float(g) => f.partial_cmp(&g).unwrap_or(std::cmp::Ordering::Equal),
        Scalar::Int(i) if f.abs() < 2f64.powi(126) => {
            let whole = f.trunc() as i128;
            whole.cmp(&i).then(if f > f.trunc() {
                std::cmp::Ordering::Greater
            } else if f < f.trunc() {
                std::cmp::Ordering::Less
            } else {
                std::cmp::Ordering::Equal
            })
        }
        Scalar::Int(_) => f.partial_cmp(&0.0).unwrap_or(std::cmp::Ordering::Equal),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn integer_targets_round_and_keep_range() {
        let to_u8 = |f: f64, r, o| Scalar::Float(f).cast(DataType::UInt8, r, o);
        use OutOfRange::*;
        use Rounding::*;
        // The notes' vectors: [1.5, 2.5, -0.5, 300] to uint8.
        let got: Vec<_> = [1.5, 2.5, -0.5, 300.0]
            .iter()
            .map(|&f| to_u8(f, TowardsZero, Wrap).unwrap())
            .collect();
        assert_eq!(got, [1, 2, 0, 44].map(Scalar::Int));
        let got: Vec<_> = [1.5, 2.5, -0.5, 300.0]
            .iter()
            .map(|&f| to_u8(f, NearestEven, Clamp).unwrap())
            .collect();
        assert_eq!(got, [2, 2, 0, 255].map(Scalar::Int));
        assert_eq!(to_u8(2.5, NearestAway, Error).unwrap(), Scalar::Int(3));
        assert_eq!(to_u8(2.1, TowardsPositive, Error).unwrap(), Scalar::Int(3));
        assert!(to_u8(256.0, NearestEven, Error).is_err());
        assert!(to_u8(f64::NAN, NearestEven, Clamp).is_err());
        let i8 = Scalar::Int(200).cast(DataType::Int8, NearestEven, Wrap).unwrap();
        assert_eq!(i8, Scalar::Int(-56));
    }

    #[test]
    fn float_targets_round_by_mode() {
        use Rounding::*;
        let x = 1.0 + 2f64.powi(-30); // between two float32 values
        let f32s = |r| Scalar::Float(x).cast(DataType::Float32, r, OutOfRange::Error).unwrap();
        assert_eq!(f32s(NearestEven), Scalar::Float(1.0));
        assert_eq!(f32s(TowardsPositive), Scalar::Float(1.0 + 2f64.powi(-23)));
        assert_eq!(f32s(TowardsNegative), Scalar::Float(1.0));
        let neg = Scalar::Float(-x)
            .cast(DataType::Float32, TowardsZero, OutOfRange::Error)
            .unwrap();
        assert_eq!(neg, Scalar::Float(-1.0));
        // Integers exact in the target stay as they are; NaN propagates.
        assert_eq!(
            Scalar::Int(65535)
                .cast(DataType::Float32, TowardsZero, OutOfRange::Error)
                .unwrap(),
            Scalar::Float(65535.0)
        );
        let nan = Scalar::Float(f64::NAN)
            .cast(DataType::Float32, NearestEven, OutOfRange::Error)
            .unwrap();
        assert!(nan.is_nan());
        assert!(Scalar::Float(1e300)
            .cast(DataType::Float32, NearestEven, OutOfRange::Error)
            .is_err());
    }
}
