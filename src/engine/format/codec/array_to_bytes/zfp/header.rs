//! What a zfp stream needs to be decoded: its field (scalar type and
//! dimensions) and its mode (the four parameters every zfp mode sets),
//! read from the optional stream header or from a codec's configuration.
//!
//! Format: <https://zfp.readthedocs.io/en/release1.0.1/modes.html> and
//! `zfp_write_header` in <https://zfp.readthedocs.io/en/release1.0.1/high-level-api.html>:
//! the magic `zfp` and codec version 5 (8 bits each), 52 bits of field
//! metadata (scalar type, dimensionality, then each size less one, `x`
//! first) and the mode in 12 bits, or in 64 when its short form is 4095.

use super::stream::{BitReader, BitWriter};
use crate::engine::error::{corrupt, Error, Result};

/// The codec version zfp 1.0 writes and reads.
const CODEC_VERSION: u64 = 5;
/// Bounds of zfp's parameters (`ZFP_MIN_BITS`, ... in `zfp.h`).
pub(super) const MIN_BITS: u32 = 1;
pub(super) const MAX_BITS: u32 = 16658;
pub(super) const MAX_PREC: u32 = 64;
pub(super) const MIN_EXP: i32 = -1074;
/// The largest mode in the 12-bit short form.
const MODE_SHORT_MAX: u64 = (1 << 12) - 2;

/// The numbers zfp compresses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Scalar {
    Int32,
    Int64,
    Float,
    Double,
}

impl Scalar {
    /// zfp's `zfp_type` less one, as the header stores it.
    fn from_code(code: u64) -> Self {
        match code {
            0 => Self::Int32,
            1 => Self::Int64,
            2 => Self::Float,
            _ => Self::Double,
        }
    }

    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::Int32 => "int32",
            Self::Int64 => "int64",
            Self::Float => "float32",
            Self::Double => "float64",
        }
    }
}

/// An array as zfp sees it: scalars, and 1 to 4 sizes, `x` (the fastest
/// varying, NumPy's last axis) first.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Field {
    pub(crate) scalar: Scalar,
    pub(crate) sizes: Vec<usize>,
}

impl Field {
    /// The field of a C-order array of `shape` (1 to 4 dimensions).
    pub(crate) fn of_shape(scalar: Scalar, shape: &[u64]) -> Result<Self> {
        if shape.is_empty() || shape.len() > 4 {
            return Err(Error::Unsupported(format!(
                "zfp of {}-dimensional chunks (zfp has 1 to 4 dimensions)",
                shape.len()
            )));
        }
        Ok(Self {
            scalar,
            sizes: shape.iter().rev().map(|&n| n as usize).collect(),
        })
    }

    pub(crate) fn len(&self) -> usize {
        self.sizes.iter().product()
    }

    pub(crate) fn blocks(&self) -> usize {
        self.sizes.iter().map(|n| n.div_ceil(4)).product()
    }
}

/// zfp's four compression parameters; every mode is a setting of them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Mode {
    /// Bits every block takes at least, and at most.
    pub(crate) min_bits: u32,
    pub(crate) max_bits: u32,
    /// Bit planes coded at most.
    pub(crate) max_prec: u32,
    /// The smallest exponent coded; below `MIN_EXP` means reversible.
    pub(crate) min_exp: i32,
}

impl Mode {
    /// Fixed rate: `rate` bits a value in blocks of `dims` dimensions
    /// (`zfp_stream_set_rate` without word alignment).
    pub(crate) fn fixed_rate(rate: f64, scalar: Scalar, dims: usize) -> Self {
        let values = (1u32 << (2 * dims)) as f64;
        let mut bits = (values * rate + 0.5).floor().clamp(0.0, MAX_BITS as f64) as u32;
        bits = match scalar {
            Scalar::Float => bits.max(1 + 8),
            Scalar::Double => bits.max(1 + 11),
            Scalar::Int32 | Scalar::Int64 => bits,
        };
        Self {
            min_bits: bits,
            max_bits: bits,
            max_prec: MAX_PREC,
            min_exp: MIN_EXP,
        }
    }

    pub(crate) fn fixed_precision(precision: u32) -> Self {
        Self {
            min_bits: MIN_BITS,
            max_bits: MAX_BITS,
            max_prec: if precision == 0 {
                MAX_PREC
            } else {
                precision.min(MAX_PREC)
            },
            min_exp: MIN_EXP,
        }
    }

    /// Fixed accuracy: errors at most `tolerance`, which zfp rounds down
    /// to a power of two.
    pub(crate) fn fixed_accuracy(tolerance: f64) -> Self {
        Self {
            min_bits: MIN_BITS,
            max_bits: MAX_BITS,
            max_prec: MAX_PREC,
            min_exp: if tolerance > 0.0 {
                floor_log2(tolerance)
            } else {
                MIN_EXP
            },
        }
    }

    pub(crate) fn reversible() -> Self {
        Self {
            min_bits: MIN_BITS,
            max_bits: MAX_BITS,
            max_prec: MAX_PREC,
            min_exp: MIN_EXP - 1,
        }
    }

    /// Expert mode, checked as `zfp_stream_set_params` checks it.
    pub(crate) fn expert(min_bits: u32, max_bits: u32, max_prec: u32, min_exp: i32) -> Result<Self> {
        if min_bits > max_bits || !(1..=MAX_PREC).contains(&max_prec) {
            return Err(corrupt(format!(
                "zfp parameters minbits {min_bits}, maxbits {max_bits}, maxprec {max_prec} are inconsistent"
            )));
        }
        Ok(Self {
            min_bits,
            max_bits,
            max_prec,
            min_exp,
        })
    }

    pub(crate) fn is_reversible(&self) -> bool {
        self.min_exp < MIN_EXP
    }

    /// The mode's code in a header (`zfp_stream_mode`): the 12-bit short
    /// form for the usual settings of the four named modes, else the long
    /// form (the four parameters, then 4095 in the low 12 bits).
    fn code(&self) -> u64 {
        let Self {
            min_bits,
            max_bits,
            max_prec,
            min_exp,
        } = *self;
        let valid = min_bits <= max_bits && (1..=MAX_PREC).contains(&max_prec);
        let default = (min_bits, max_bits, max_prec, min_exp) == (MIN_BITS, MAX_BITS, MAX_PREC, MIN_EXP);
        let unbounded = min_bits <= MIN_BITS && max_bits >= MAX_BITS;
        if valid && !default {
            if min_bits == max_bits && (1..=MAX_BITS).contains(&max_bits) && max_prec >= MAX_PREC && min_exp == MIN_EXP
            {
                if max_bits <= 2048 {
                    return u64::from(max_bits - 1);
                }
            } else if unbounded && min_exp == MIN_EXP {
                if max_prec <= 128 {
                    return u64::from(max_prec - 1) + 2048;
                }
            } else if unbounded && max_prec >= MAX_PREC && min_exp >= MIN_EXP {
                if min_exp <= 843 {
                    return (min_exp - MIN_EXP) as u64 + 2177;
                }
            } else if unbounded && max_prec >= MAX_PREC {
                return 2176;
            }
        }
        let field = |value: u32, bits: u32| u64::from(value.clamp(1, 1 << bits) - 1);
        let min_exp = (i64::from(min_exp) + 16495).clamp(0, 0x7fff) as u64;
        ((((min_exp << 7 | field(max_prec, 7)) << 15 | field(max_bits, 15)) << 15 | field(min_bits, 15)) << 12) | 0xfff
    }

    /// The mode a header stores, in its short or long form.
    fn from_code(code: u64) -> Result<Self> {
        if code > MODE_SHORT_MAX {
            let field = |shift: u32, bits: u32| ((code >> shift) & ((1 << bits) - 1)) as u32;
            return Self::expert(
                field(12, 15) + 1,
                field(27, 15) + 1,
                field(42, 7) + 1,
                field(49, 15) as i32 - 16495,
            );
        }
        Ok(match code {
            0..2048 => Self {
                min_bits: code as u32 + 1,
                max_bits: code as u32 + 1,
                max_prec: MAX_PREC,
                min_exp: MIN_EXP,
            },
            2048..2176 => Self::fixed_precision(code as u32 - 2047),
            2176 => Self::reversible(),
            _ => Self {
                min_bits: MIN_BITS,
                max_bits: MAX_BITS,
                max_prec: MAX_PREC,
                min_exp: (code as i32) + MIN_EXP - 2177,
            },
        })
    }
}

/// `floor(log2(x))` for a positive finite `x`, exactly (as `frexp` gives it).
fn floor_log2(x: f64) -> i32 {
    let bits = x.to_bits();
    let exponent = ((bits >> 52) & 0x7ff) as i32;
    if exponent == 0 {
        // Subnormal: the value is mantissa * 2^-1074.
        let mantissa = bits & ((1 << 52) - 1);
        return 63 - mantissa.leading_zeros() as i32 - 1074;
    }
    exponent - 1023
}

/// Bits a header gives each size of a field of `dims` dimensions.
fn size_bits(dims: usize) -> u32 {
    [48, 24, 16, 12][dims - 1]
}

/// Write a full header (magic, field, mode), as `zfp_write_header` does.
pub(super) fn write(stream: &mut BitWriter, field: &Field, mode: &Mode) -> Result<()> {
    let dims = field.sizes.len();
    let width = size_bits(dims);
    if field.sizes.iter().any(|&n| n == 0 || (n as u64 - 1) >> width != 0) {
        return Err(Error::Unsupported(format!(
            "zfpy of a chunk of {:?} (zfp's header has {width} bits a dimension)",
            field.sizes
        )));
    }
    let sizes = field
        .sizes
        .iter()
        .enumerate()
        .fold(0u64, |meta, (i, &n)| meta | (n as u64 - 1) << (width * i as u32));
    let scalar = match field.scalar {
        Scalar::Int32 => 0,
        Scalar::Int64 => 1,
        Scalar::Float => 2,
        Scalar::Double => 3,
    };
    for byte in [b'z', b'f', b'p'] {
        stream.bits(u64::from(byte), 8);
    }
    stream.bits(CODEC_VERSION, 8);
    stream.bits(sizes << 4 | (dims as u64 - 1) << 2 | scalar, 52);
    let code = mode.code();
    if code > MODE_SHORT_MAX {
        stream.bits(code, 64);
    } else {
        stream.bits(code, 12);
    }
    Ok(())
}

/// Read a full header (magic, field, mode) from the start of a stream.
pub(super) fn read(stream: &mut BitReader<'_>) -> Result<(Field, Mode)> {
    let magic = [stream.bits(8), stream.bits(8), stream.bits(8)];
    if magic != [b'z', b'f', b'p'].map(u64::from) {
        return Err(corrupt("zfp stream does not start with the zfp header"));
    }
    let version = stream.bits(8);
    if version != CODEC_VERSION {
        return Err(Error::Unsupported(format!(
            "zfp codec version {version} (zfp 1.0 streams, version {CODEC_VERSION}, are read)"
        )));
    }
    let meta = stream.bits(52);
    let scalar = Scalar::from_code(meta & 3);
    let dims = ((meta >> 2) & 3) as usize + 1;
    let sizes = meta >> 4;
    let width = size_bits(dims);
    let size_mask = (1u64 << width) - 1;
    let sizes = (0..dims)
        .map(|i| ((sizes >> (width * i as u32)) & size_mask) as usize + 1)
        .collect();
    let mut code = stream.bits(12);
    if code > MODE_SHORT_MAX {
        code += stream.bits(52) << 12;
    }
    let mode = Mode::from_code(code)?;
    if stream.overran() {
        return Err(corrupt("zfp stream ends inside its header"));
    }
    Ok((Field { scalar, sizes }, mode))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_zfps_parameters() {
        // zfp_stream_set_rate(16, float, 2 dims): 16 values * 16 bits.
        assert_eq!(Mode::fixed_rate(16.0, Scalar::Float, 2).max_bits, 256);
        assert_eq!(Mode::fixed_rate(0.1, Scalar::Double, 1).max_bits, 12);
        assert_eq!(Mode::fixed_rate(2.5, Scalar::Int32, 3).min_bits, 160);
        // 0.01 = 0.64 * 2^-6, so zfp's minexp is -7.
        assert_eq!(Mode::fixed_accuracy(0.01).min_exp, -7);
        assert_eq!(Mode::fixed_accuracy(1.0).min_exp, 0);
        assert_eq!(Mode::fixed_accuracy(0.05).min_exp, -5);
        assert_eq!(Mode::fixed_accuracy(f64::from_bits(1)).min_exp, -1074);
        assert!(Mode::reversible().is_reversible());
        assert!(!Mode::fixed_precision(20).is_reversible());
        // The short codes of zfp_stream_mode.
        assert_eq!(Mode::from_code(255).unwrap(), Mode::fixed_rate(16.0, Scalar::Float, 2));
        assert_eq!(Mode::from_code(2048 + 19).unwrap(), Mode::fixed_precision(20));
        assert_eq!(Mode::from_code(2176).unwrap(), Mode::reversible());
        assert_eq!(Mode::from_code(2177 + 1067).unwrap(), Mode::fixed_accuracy(0.01));
        // The long form: minexp, maxprec, maxbits, minbits over 0xfff.
        let code = ((((16495u64 - 3) << 7 | 18) << 15 | 999) << 15 | 9) << 12 | 0xfff;
        assert_eq!(Mode::from_code(code).unwrap(), Mode::expert(10, 1000, 19, -3).unwrap());
        assert!(Mode::expert(10, 9, 19, 0).is_err());
        // Codes go both ways.
        for mode in [
            Mode::fixed_rate(16.0, Scalar::Float, 2),
            Mode::fixed_rate(12.5, Scalar::Double, 4),
            Mode::fixed_precision(20),
            Mode::fixed_precision(64),
            Mode::fixed_accuracy(0.01),
            Mode::reversible(),
            Mode::expert(10, 1000, 19, -3).unwrap(),
        ] {
            assert_eq!(Mode::from_code(mode.code()).unwrap(), mode, "{mode:?}");
        }
        assert_eq!(Mode::fixed_precision(20).code(), 2048 + 19);
        assert!(Mode::fixed_rate(12.5, Scalar::Double, 4).code() > MODE_SHORT_MAX);
        assert!(Mode::expert(1, 9, 65, 0).is_err());
    }
}
