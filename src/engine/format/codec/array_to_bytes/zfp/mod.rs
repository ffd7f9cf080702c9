//! zfp, LLNL's compressed format for 1-D to 4-D arrays of 32- and 64-bit
//! integers and floats: a decoder written from its documentation, bit for
//! bit what zfp 1.0 decodes.
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
//! Only decoding is implemented: writing to a zfp array answers 501.

mod block;
mod header;
mod order;
mod stream;

use serde_json::{Map, Value};

use self::block::{Scratch, MAX_BLOCK};
pub(crate) use self::header::{Field, Mode, Scalar};
use self::stream::BitReader;
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
enum Config {
    FixedRate(f64),
    Mode(Mode),
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
            Some("fixed_rate") => Config::FixedRate(number("rate")?),
            Some("fixed_precision") => Config::Mode(Mode::fixed_precision(integer("precision")?.clamp(0, 64) as u32)),
            Some("fixed_accuracy") => Config::Mode(Mode::fixed_accuracy(number("tolerance")?)),
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
    let mut sizes = [1usize; 4];
    sizes[..dims].copy_from_slice(&field.sizes);
    let mut out = vec![0u8; field.len() * T::SIZE];
    let mut block = [T::default(); MAX_BLOCK];
    let block = &mut block[..1 << (2 * dims)];
    let mut origin = [0usize; 4];
    for _ in 0..field.blocks() {
        decode(stream, dims, block);
        let extent: [usize; 4] = std::array::from_fn(|d| if d < dims { (sizes[d] - origin[d]).min(4) } else { 1 });
        for w in 0..extent[3] {
            for z in 0..extent[2] {
                for y in 0..extent[1] {
                    let row = ((origin[3] + w) * sizes[2] + origin[2] + z) * sizes[1] + origin[1] + y;
                    let start = (row * sizes[0] + origin[0]) * T::SIZE;
                    let from = 64 * w + 16 * z + 4 * y;
                    let values = &block[from..from + extent[0]];
                    for (value, place) in values.iter().zip(out[start..].chunks_exact_mut(T::SIZE)) {
                        value.write_le(place);
                    }
                }
            }
        }
        // The next block: x first.
        for d in 0..dims {
            origin[d] += 4;
            if origin[d] < sizes[d] {
                break;
            }
            origin[d] = 0;
        }
    }
    out
}

/// Numbers written little-endian into place.
trait LeBytes {
    const SIZE: usize;
    fn write_le(&self, place: &mut [u8]);
}

macro_rules! le_bytes {
    ($($t:ty),*) => {$(
        impl LeBytes for $t {
            const SIZE: usize = std::mem::size_of::<$t>();
            fn write_le(&self, place: &mut [u8]) {
                place.copy_from_slice(&self.to_le_bytes());
            }
        }
    )*};
}

le_bytes!(i32, i64, f32, f64);

#[cfg(test)]
mod tests;
