//! zfp, LLNL's compressed format for 1-D to 4-D arrays of 32- and 64-bit
//! integers and floats: a decoder and an encoder written from zfp's
//! documentation and libzfp 1.0's behaviour, bit for bit what it decodes
//! and encodes (`tests/fixtures/zfp` holds the known answers).
//!
//! Two codecs carry zfp streams:
//! - zarrs' `zfp` (also `zarrs.zfp`), an array -> bytes codec whose
//!   configuration names the mode (`fixed_rate`, `fixed_precision`,
//!   `fixed_accuracy`, `reversible`, `expert`) and whose chunks are streams
//!   without header: the field is the chunk. Spec:
//!   <https://codec.zarrs.dev/array_to_bytes/zfp>. zarrs stores 8- and
//!   16-bit integers promoted to `int32` (zfp's `zfp_promote_*`), unsigned
//!   32- and 64-bit integers and `numpy.datetime64`/`timedelta64` as signed
//!   ones.
//! - numcodecs' `zfpy` (v2 compressor, v3 `numcodecs.zfpy`), whose chunks
//!   are streams with zfp's full header (field and mode), as
//!   `zfpy.compress_numpy` writes them.
//!
//! zarrs 0.23 sizes a `fixed_rate` block as if every chunk were 3-D
//! (`rate * 64` bits a block); such a chunk is recognised by its length,
//! which a fixed rate determines.
//!
//! Encoding writes what zfp 1.0 writes, bit for bit; a `fixed_rate` chunk
//! is written as zarrs writes it (its block size for three dimensions), so
//! zarrs reads what zarr-serve writes. NaN and infinities have no lossy zfp
//! form: writing them outside reversible mode is refused.

mod block;
mod encode;
mod header;
mod order;
mod stream;

use serde_json::{Map, Value};

use self::block::{Scratch, MAX_BLOCK};
pub(crate) use self::header::{Field, Mode, Scalar};
use self::stream::{BitReader, BitWriter};
use super::ChunkRepr;
use crate::engine::error::{corrupt, Error, Result};
use crate::engine::format::data_type::DataType;

/// zarrs' `zfp` codec.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ZfpCodec {
    mode: Config,
}

/// A configured mode; a fixed rate becomes bits a block only once the
/// chunk's dimensions and scalar type are known.
#[derive(Debug, Clone, Copy, PartialEq)]
pub(crate) enum Config {
    FixedRate(f64),
    Mode(Mode),
}

impl Config {
    /// The mode numcodecs' `zfpy` configuration encodes with (`mode` 2
    /// fixed rate, 3 fixed precision, 4 fixed accuracy, 5 reversible; a
    /// negative parameter leaves zfpy in reversible mode), if any.
    pub(crate) fn of_zfpy(config: &Map<String, Value>) -> Option<Self> {
        let number = |key: &str| config.get(key).and_then(Value::as_f64).unwrap_or(-1.0);
        let or_reversible = |n: f64, mode: &dyn Fn(f64) -> Self| {
            if n >= 0.0 {
                mode(n)
            } else {
                Self::Mode(Mode::reversible())
            }
        };
        Some(match config.get("mode").and_then(Value::as_i64)? {
            2 => or_reversible(number("rate"), &Self::FixedRate),
            3 => or_reversible(number("precision"), &|p| {
                Self::Mode(Mode::fixed_precision(p.min(64.0) as u32))
            }),
            4 => or_reversible(number("tolerance"), &|t| Self::Mode(Mode::fixed_accuracy(t))),
            5 => Self::Mode(Mode::reversible()),
            _ => return None,
        })
    }

    /// Whether the mode loses precision (every mode but reversible).
    fn is_lossy(&self) -> bool {
        !matches!(self, Self::Mode(mode) if mode.is_reversible())
    }

    /// Whether encoding elements of `data_type` can refuse a value: NaN and
    /// infinities, which lossy zfp cannot hold.
    pub(crate) fn checks_values(&self, data_type: DataType) -> bool {
        self.is_lossy() && matches!(data_type, DataType::Float32 | DataType::Float64)
    }

    /// 400 if [`Config::checks_values`] and a value is NaN or infinite.
    pub(crate) fn check_values(&self, values: &[u8], data_type: DataType) -> Result<()> {
        match data_type {
            _ if !self.is_lossy() => Ok(()),
            DataType::Float32 => check_finite::<f32>(values, false),
            DataType::Float64 => check_finite::<f64>(values, false),
            _ => Ok(()),
        }
    }

    /// The mode for `field`; a fixed rate sized for `rate_dims` dimensions.
    pub(crate) fn mode(&self, field: &Field, rate_dims: usize) -> Mode {
        match *self {
            Self::Mode(mode) => mode,
            Self::FixedRate(rate) => Mode::fixed_rate(rate, field.scalar, rate_dims),
        }
    }
}

impl ZfpCodec {
    /// The codec a `zfp` configuration describes, for chunks of `repr`.
    pub(crate) fn from_json(config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Self> {
        scalar_of(repr.data_type)?;
        let empty = Map::new();
        let config = config.unwrap_or(&empty);
        let number = |key: &str| {
            config
                .get(key)
                .and_then(Value::as_f64)
                .ok_or_else(|| corrupt(format!("zfp configuration {config:?} has no number \"{key}\"")))
        };
        let integer = |key: &str| number(key).map(|n| n as i64);
        let mode = match config.get("mode").and_then(Value::as_str) {
            // Older zarrs wrote the names without underscores.
            Some("fixed_rate" | "fixedrate") => Config::FixedRate(number("rate")?),
            Some("fixed_precision" | "fixedprecision") => {
                Config::Mode(Mode::fixed_precision(integer("precision")?.clamp(0, 64) as u32))
            }
            Some("fixed_accuracy" | "fixedaccuracy") => Config::Mode(Mode::fixed_accuracy(number("tolerance")?)),
            Some("reversible") => Config::Mode(Mode::reversible()),
            Some("expert") => {
                let bits = |key: &str| integer(key).map(|n| n.clamp(0, i64::from(u32::MAX)) as u32);
                Config::Mode(Mode::expert(
                    bits("minbits")?,
                    bits("maxbits")?,
                    bits("maxprec")?,
                    integer("minexp")?.clamp(i64::from(i32::MIN), i64::from(i32::MAX)) as i32,
                )?)
            }
            other => {
                return Err(corrupt(format!(
                    "zfp mode {other:?} is none of fixed_rate, fixed_precision, fixed_accuracy, reversible, expert"
                )))
            }
        };
        Ok(Self { mode })
    }

    /// Decode a chunk of `repr` into its little-endian elements.
    pub(crate) fn decode(&self, encoded: &[u8], repr: &ChunkRepr) -> Result<Vec<u8>> {
        let field = Field::of_shape(scalar_of(repr.data_type)?, &repr.shape)?;
        let mode = match self.mode {
            Config::Mode(mode) => mode,
            Config::FixedRate(rate) => fixed_rate_of(rate, &field, encoded.len())?,
        };
        let values = decode_blocks(&mut BitReader::new(encoded), &field, &mode)?;
        Ok(demote(values, repr.data_type))
    }
}

impl ZfpCodec {
    /// The configured mode.
    pub(crate) fn config(&self) -> &Config {
        &self.mode
    }

    /// Encode little-endian elements of `repr` as a chunk.
    pub(crate) fn encode(&self, array: &[u8], repr: &ChunkRepr) -> Result<Vec<u8>> {
        let field = Field::of_shape(scalar_of(repr.data_type)?, &repr.shape)?;
        // zarrs sizes fixed-rate blocks for three dimensions.
        let mode = self.mode.mode(&field, 3);
        encode(&promote(array, repr.data_type), &field, &mode, false)
    }
}

/// The fixed-rate mode a chunk of `len` bytes was written with: `rate` in
/// blocks of the field's dimensions, or (zarrs 0.23) of three.
fn fixed_rate_of(rate: f64, field: &Field, len: usize) -> Result<Mode> {
    let dims = field.sizes.len();
    let size = |mode: &Mode| (field.blocks() as u64 * u64::from(mode.max_bits)).div_ceil(64) * 8;
    let exact = Mode::fixed_rate(rate, field.scalar, dims);
    let as_3d = Mode::fixed_rate(rate, field.scalar, 3);
    [exact, as_3d]
        .into_iter()
        .find(|mode| size(mode) == len as u64)
        .ok_or_else(|| {
            corrupt(format!(
                "zfp chunk of {len} bytes, but rate {rate} gives {} bytes",
                size(&exact)
            ))
        })
}

/// The zfp scalar that holds elements of `data_type` (zarrs' mapping).
fn scalar_of(data_type: DataType) -> Result<Scalar> {
    Ok(match data_type {
        DataType::Float32 => Scalar::Float,
        DataType::Float64 => Scalar::Double,
        DataType::Int8 | DataType::UInt8 | DataType::Int16 | DataType::UInt16 | DataType::Int32 | DataType::UInt32 => {
            Scalar::Int32
        }
        DataType::Int64 | DataType::UInt64 | DataType::DateTime64(_) | DataType::TimeDelta64(_) => Scalar::Int64,
        other => {
            return Err(Error::Unsupported(format!(
                "zfp of {} (zfp holds numbers only)",
                other.name()
            )))
        }
    })
}

/// The zfp scalars (little-endian) that hold elements of `data_type`:
/// zfp's `zfp_promote_*` for 8- and 16-bit integers, unsigned ones clamped
/// to the signed type's largest.
fn promote(values: &[u8], data_type: DataType) -> Vec<u8> {
    let to_int32 = |f: &dyn Fn(&[u8]) -> i32, size: usize| -> Vec<u8> {
        values.chunks_exact(size).flat_map(|b| f(b).to_le_bytes()).collect()
    };
    match data_type {
        DataType::Int8 => to_int32(&|b| i32::from(b[0] as i8) << 23, 1),
        DataType::UInt8 => to_int32(&|b| (i32::from(b[0]) - 0x80) << 23, 1),
        DataType::Int16 => to_int32(&|b| i32::from(i16::from_le_bytes([b[0], b[1]])) << 15, 2),
        DataType::UInt16 => to_int32(&|b| (i32::from(u16::from_le_bytes([b[0], b[1]])) - 0x8000) << 15, 2),
        DataType::UInt32 => to_int32(
            &|b| u32::from_le_bytes(b.try_into().expect("4 bytes")).min(i32::MAX as u32) as i32,
            4,
        ),
        DataType::UInt64 => values
            .chunks_exact(8)
            .flat_map(|b| {
                (u64::from_le_bytes(b.try_into().expect("8 bytes")).min(i64::MAX as u64) as i64).to_le_bytes()
            })
            .collect(),
        _ => values.to_vec(),
    }
}

/// Elements of `data_type` from the zfp scalars (little-endian) that hold
/// them: zfp's `zfp_demote_*` for 8- and 16-bit integers, unsigned ones
/// clamped at zero.
fn demote(values: Vec<u8>, data_type: DataType) -> Vec<u8> {
    let int32 = || {
        values
            .chunks_exact(4)
            .map(|b| i32::from_le_bytes(b.try_into().expect("4 bytes")))
    };
    match data_type {
        DataType::Int8 => int32().map(|i| (i >> 23).clamp(-0x80, 0x7f) as u8).collect(),
        DataType::UInt8 => int32().map(|i| ((i >> 23) + 0x80).clamp(0, 0xff) as u8).collect(),
        DataType::Int16 => int32()
            .flat_map(|i| ((i >> 15).clamp(-0x8000, 0x7fff) as i16).to_le_bytes())
            .collect(),
        DataType::UInt16 => int32()
            .flat_map(|i| (((i >> 15) + 0x8000).clamp(0, 0xffff) as u16).to_le_bytes())
            .collect(),
        DataType::UInt32 => int32().flat_map(|i| (i.max(0) as u32).to_le_bytes()).collect(),
        DataType::UInt64 => values
            .chunks_exact(8)
            .flat_map(|b| (i64::from_le_bytes(b.try_into().expect("8 bytes")).max(0) as u64).to_le_bytes())
            .collect(),
        _ => values,
    }
}

/// The values of a stream that starts with zfp's full header (zfpy's
/// form), after `check` accepts the field the header describes.
pub(crate) fn decode_with_header(encoded: &[u8], check: impl FnOnce(&Field) -> Result<()>) -> Result<Vec<u8>> {
    let mut stream = BitReader::new(encoded);
    let (field, mode) = header::read(&mut stream)?;
    check(&field)?;
    decode_blocks(&mut stream, &field, &mode)
}

/// A zfp stream of `values` (little-endian scalars of `field`, C order),
/// after zfp's full header when `header` (zfpy's form).
pub(crate) fn encode(values: &[u8], field: &Field, mode: &Mode, header: bool) -> Result<Vec<u8>> {
    let mut stream = BitWriter::default();
    if header {
        header::write(&mut stream, field, mode)?;
    }
    let limits = (mode.min_bits, mode.max_bits, mode.max_prec);
    let reversible = mode.is_reversible();
    match field.scalar {
        Scalar::Float => {
            check_finite::<f32>(values, reversible)?;
            let mut scratch = Scratch::new();
            gather::<f32>(values, field, |d, b| {
                encode::encode_floats(&mut stream, d, mode, &mut scratch, b)
            });
        }
        Scalar::Double => {
            check_finite::<f64>(values, reversible)?;
            let mut scratch = Scratch::new();
            gather::<f64>(values, field, |d, b| {
                encode::encode_floats(&mut stream, d, mode, &mut scratch, b)
            });
        }
        Scalar::Int32 => {
            let mut scratch = Scratch::<i32>::new();
            gather::<i32>(values, field, |d, b| {
                encode::encode_ints(&mut stream, d, limits, reversible, &mut scratch.planes[..b.len()], b);
            });
        }
        Scalar::Int64 => {
            let mut scratch = Scratch::<i64>::new();
            gather::<i64>(values, field, |d, b| {
                encode::encode_ints(&mut stream, d, limits, reversible, &mut scratch.planes[..b.len()], b);
            });
        }
    }
    Ok(stream.finish())
}

/// Lossy zfp has no NaN or infinity: refuse them before writing anything.
fn check_finite<F: block::Float + LeBytes>(values: &[u8], reversible: bool) -> Result<()> {
    if reversible || values.chunks_exact(F::SIZE).all(|b| F::read_le(b).is_finite_number()) {
        return Ok(());
    }
    Err(Error::InvalidRequest(
        "zfp cannot encode NaN or infinity except in reversible mode".into(),
    ))
}

/// Gather each block of `field` from `values` (padded at the far edges as
/// zfp pads), the `x` axis fastest, and hand it to `encode`.
fn gather<T: LeBytes + Copy + Default>(values: &[u8], field: &Field, mut encode: impl FnMut(usize, &mut [T])) {
    let dims = field.sizes.len();
    let mut block = [T::default(); MAX_BLOCK];
    let block = &mut block[..1 << (2 * dims)];
    walk_blocks(field, |rows, extent| {
        for &(start, to) in rows {
            let start = start * T::SIZE;
            for (place, bytes) in block[to..to + extent[0]]
                .iter_mut()
                .zip(values[start..].chunks_exact(T::SIZE))
            {
                *place = T::read_le(bytes);
            }
        }
        if extent[..dims].iter().any(|&e| e < 4) {
            encode::pad(block, dims, extent);
        }
        encode(dims, block);
    });
}

/// Visit the blocks of a field in zfp's order (`x` fastest): for each, its
/// rows along `x` (where each starts in the field, in elements, and in the
/// block) and how many of its values lie in the field along each axis.
fn walk_blocks(field: &Field, mut visit: impl FnMut(&[(usize, usize)], [usize; 4])) {
    let dims = field.sizes.len();
    let mut sizes = [1usize; 4];
    sizes[..dims].copy_from_slice(&field.sizes);
    let mut origin = [0usize; 4];
    let mut rows = Vec::with_capacity(64);
    for _ in 0..field.blocks() {
        let extent: [usize; 4] = std::array::from_fn(|d| if d < dims { (sizes[d] - origin[d]).min(4) } else { 1 });
        rows.clear();
        for w in 0..extent[3] {
            for z in 0..extent[2] {
                for y in 0..extent[1] {
                    let row = ((origin[3] + w) * sizes[2] + origin[2] + z) * sizes[1] + origin[1] + y;
                    rows.push((row * sizes[0] + origin[0], 64 * w + 16 * z + 4 * y));
                }
            }
        }
        visit(&rows, extent);
        for d in 0..dims {
            origin[d] += 4;
            if origin[d] < sizes[d] {
                break;
            }
            origin[d] = 0;
        }
    }
}

/// Decode every block of `field`, the `x` axis fastest, into the field's
/// little-endian scalars in C order.
fn decode_blocks(stream: &mut BitReader<'_>, field: &Field, mode: &Mode) -> Result<Vec<u8>> {
    let limits = (mode.min_bits, mode.max_bits, mode.max_prec);
    let reversible = mode.is_reversible();
    let values = match field.scalar {
        Scalar::Float => {
            let mut scratch = Scratch::new();
            blocks::<f32>(stream, field, |s, d, b| {
                block::decode_floats(s, d, mode, &mut scratch, b)
            })
        }
        Scalar::Double => {
            let mut scratch = Scratch::new();
            blocks::<f64>(stream, field, |s, d, b| {
                block::decode_floats(s, d, mode, &mut scratch, b)
            })
        }
        Scalar::Int32 => {
            let mut scratch = Scratch::new();
            blocks::<i32>(stream, field, |s, d, b| {
                scratch.ints(s, d, limits, reversible, b);
            })
        }
        Scalar::Int64 => {
            let mut scratch = Scratch::new();
            blocks::<i64>(stream, field, |s, d, b| {
                scratch.ints(s, d, limits, reversible, b);
            })
        }
    };
    if stream.overran() {
        return Err(corrupt(format!(
            "zfp stream ends before its {} blocks of {}",
            field.blocks(),
            field.scalar.name()
        )));
    }
    Ok(values)
}

/// Decode the blocks of `field` with `decode`, writing each block's values
/// (partial at the field's far edges) little-endian into a C-order array.
fn blocks<T: LeBytes + Copy + Default>(
    stream: &mut BitReader<'_>,
    field: &Field,
    mut decode: impl FnMut(&mut BitReader<'_>, usize, &mut [T]),
) -> Vec<u8> {
    let dims = field.sizes.len();
    let mut out = vec![0u8; field.len() * T::SIZE];
    let mut block = [T::default(); MAX_BLOCK];
    let block = &mut block[..1 << (2 * dims)];
    walk_blocks(field, |rows, extent| {
        decode(stream, dims, block);
        for &(start, from) in rows {
            let values = &block[from..from + extent[0]];
            for (value, place) in values.iter().zip(out[start * T::SIZE..].chunks_exact_mut(T::SIZE)) {
                value.write_le(place);
            }
        }
    });
    out
}

/// Numbers written little-endian into place, and read back.
trait LeBytes {
    const SIZE: usize;
    fn write_le(&self, place: &mut [u8]);
    fn read_le(bytes: &[u8]) -> Self;
}

macro_rules! le_bytes {
    ($($t:ty),*) => {$(
        impl LeBytes for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn write_le(&self, place: &mut [u8]) {
                place.copy_from_slice(&self.to_le_bytes());
            }
            fn read_le(bytes: &[u8]) -> Self {
                <$t>::from_le_bytes(bytes.try_into().expect("element size"))
            }
        }
    )*};
}

le_bytes!(i32, i64, f32, f64);

#[cfg(test)]
mod tests;
