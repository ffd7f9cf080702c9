//! OPeNDAP DAP2's data encoding (XDR, RFC 4506, as libdap writes it): the
//! DAP2 base type of each Zarr data type and its elements big-endian.
//!
//! An array is its element count twice (once for `String` arrays), then its
//! elements: `Byte` one byte each and the whole padded to 4 bytes, `Int16`
//! and `UInt16` widened to 4 bytes, `String` a 4-byte length, the bytes and
//! padding to 4. A scalar is its one element (a `Byte` scalar is an XDR int:
//! 4 bytes, the value last). Datetimes are `Float64` counts of a CF unit
//! since 1970-01-01 (NaT is NaN); 64-bit integers are `Float64`.

use std::sync::Arc;

use bytes::Bytes;

use super::Encoder;
use crate::buffer_pool::BufferPool;
use crate::engine::{values, DataType};

/// A DAP2 base type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DapType {
    /// Unsigned 8-bit.
    Byte,
    /// Signed 16-bit (sent as 32).
    Int16,
    /// Unsigned 16-bit (sent as 32).
    UInt16,
    /// Signed 32-bit.
    Int32,
    /// Unsigned 32-bit.
    UInt32,
    /// IEEE single.
    Float32,
    /// IEEE double.
    Float64,
    /// Text.
    String,
}

impl DapType {
    /// The DAP2 type of elements of `data_type`, if DAP2 can carry them
    /// (bytes, complex and raw elements cannot; nor durations in calendar
    /// years or months).
    pub fn of(data_type: DataType) -> Option<Self> {
        use crate::engine::Unit;
        Some(match data_type {
            DataType::Bool | DataType::UInt8 => Self::Byte,
            DataType::Int8 | DataType::Int16 => Self::Int16,
            DataType::UInt16 => Self::UInt16,
            DataType::Int32 => Self::Int32,
            DataType::UInt32 => Self::UInt32,
            DataType::Float16 | DataType::Float32 => Self::Float32,
            DataType::Float64 | DataType::Int64 | DataType::UInt64 | DataType::DateTime64(_) => Self::Float64,
            DataType::TimeDelta64(u) if !matches!(u.unit, Unit::Year | Unit::Month) => Self::Float64,
            DataType::String | DataType::FixedUtf32(_) => Self::String,
            _ => return None,
        })
    }

    /// The type's name in a DDS or DAS.
    pub fn name(self) -> &'static str {
        match self {
            Self::Byte => "Byte",
            Self::Int16 => "Int16",
            Self::UInt16 => "UInt16",
            Self::Int32 => "Int32",
            Self::UInt32 => "UInt32",
            Self::Float32 => "Float32",
            Self::Float64 => "Float64",
            Self::String => "String",
        }
    }

    /// Bytes of one element inside an array (`None` for strings, whose
    /// size depends on their text).
    pub fn element_bytes(self) -> Option<u64> {
        match self {
            Self::Byte => Some(1),
            Self::Float64 => Some(8),
            Self::String => None,
            _ => Some(4),
        }
    }

    /// Bytes of an array of `count` elements, lengths and padding
    /// included (`None` for strings).
    pub fn array_bytes(self, count: u64) -> Option<u64> {
        let values = self.element_bytes()? * count;
        Some(8 + values.next_multiple_of(4))
    }

    /// Bytes of a scalar (`None` for a string).
    pub fn scalar_bytes(self) -> Option<u64> {
        match self {
            Self::String => None,
            Self::Float64 => Some(8),
            _ => Some(4),
        }
    }
}

/// Whether XDR sends elements of `data_type` as their own bytes made
/// big-endian (so a read can give them so, with nothing left to encode).
pub fn sent_as_stored(data_type: DataType) -> bool {
    matches!(
        data_type,
        DataType::UInt8 | DataType::Int32 | DataType::UInt32 | DataType::Float32 | DataType::Float64
    )
}

/// What comes before an array's elements: its length twice (once for
/// strings).
pub fn array_header(dap: DapType, count: u64) -> Vec<u8> {
    let n = u32::try_from(count).unwrap_or(u32::MAX).to_be_bytes();
    match dap {
        DapType::String => n.to_vec(),
        _ => [n, n].concat(),
    }
}

/// What comes after an array's elements: `Byte` arrays are padded to 4.
pub fn array_trailer(dap: DapType, count: u64) -> &'static [u8] {
    match dap {
        DapType::Byte => &[0, 0, 0][..((4 - count % 4) % 4) as usize],
        _ => &[],
    }
}

/// Append the elements of `data` (little-endian `data_type`, or the
/// engine's layout of text) to `out` as the elements of a DAP2 array.
/// Damaged text is an error naming what is wrong.
pub fn append_elements(data_type: DataType, data: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    macro_rules! map {
        ($n:literal, |$b:ident| $e:expr) => {{
            let start = out.len();
            let count = data.len() / $n;
            let wide = DapType::of(data_type).and_then(DapType::element_bytes).unwrap_or(1) as usize;
            out.resize(start + count * wide, 0);
            for (o, $b) in out[start..].chunks_exact_mut(wide).zip(data.chunks_exact($n)) {
                o.copy_from_slice(&$e);
            }
        }};
    }
    let le = |b: &[u8]| -> [u8; 8] { b.try_into().expect("8 bytes") };
    match data_type {
        DataType::Bool => out.extend(data.iter().map(|&b| u8::from(b != 0))),
        DataType::UInt8 => out.extend_from_slice(data),
        DataType::Int8 => map!(1, |b| i32::from(b[0] as i8).to_be_bytes()),
        DataType::Int16 => map!(2, |b| i32::from(i16::from_le_bytes([b[0], b[1]])).to_be_bytes()),
        DataType::UInt16 => map!(2, |b| u32::from(u16::from_le_bytes([b[0], b[1]])).to_be_bytes()),
        DataType::Int32 | DataType::UInt32 | DataType::Float32 => {
            map!(4, |b| [b[3], b[2], b[1], b[0]])
        }
        DataType::Float16 => map!(2, |b| half::f16::from_le_bytes([b[0], b[1]]).to_f32().to_be_bytes()),
        DataType::Float64 => map!(8, |b| u64::from_le_bytes(le(b)).to_be_bytes()),
        DataType::Int64 => map!(8, |b| (i64::from_le_bytes(le(b)) as f64).to_be_bytes()),
        DataType::UInt64 => map!(8, |b| (u64::from_le_bytes(le(b)) as f64).to_be_bytes()),
        DataType::DateTime64(unit) | DataType::TimeDelta64(unit) => {
            let instant = matches!(data_type, DataType::DateTime64(_));
            map!(8, |b| unit
                .cf_count(i64::from_le_bytes(le(b)), instant)
                .unwrap_or(f64::NAN)
                .to_be_bytes())
        }
        DataType::String | DataType::FixedUtf32(_) => {
            let texts = values::text_values(data_type, data)
                .expect("text types have text values")
                .map_err(|e| e.to_string())?;
            for text in texts {
                append_string(text.as_bytes(), out);
            }
        }
        other => return Err(format!("{} elements have no DAP2 type", other.name())),
    }
    Ok(())
}

/// Append one element as a scalar.
pub fn append_scalar(data_type: DataType, data: &[u8], out: &mut Vec<u8>) -> Result<(), String> {
    let start = out.len();
    append_elements(data_type, data, out)?;
    if DapType::of(data_type) == Some(DapType::Byte) {
        // An XDR int: the byte last.
        let byte = out.pop().unwrap_or(0);
        out.truncate(start);
        out.extend_from_slice(&[0, 0, 0, byte]);
    }
    Ok(())
}

/// One array of a `.dods` answer: its length (twice; once for strings),
/// its elements, padding; or a scalar's one element.
pub struct XdrArray {
    data_type: DataType,
    dap: DapType,
    /// Elements (1 for a scalar).
    count: u64,
    scalar: bool,
    /// The read gives the elements big-endian already: sent as they are.
    big_endian: bool,
    buffers: Arc<BufferPool>,
}

impl XdrArray {
    /// An array of `count` elements of DAP2 type `dap` (a scalar when
    /// `scalar`); `big_endian` when its read swaps the elements itself
    /// ([`sent_as_stored`]).
    pub fn new(
        data_type: DataType,
        dap: DapType,
        count: u64,
        scalar: bool,
        big_endian: bool,
        buffers: Arc<BufferPool>,
    ) -> Self {
        Self {
            data_type,
            dap,
            count,
            scalar,
            big_endian,
            buffers,
        }
    }
}

impl Encoder for XdrArray {
    fn head(&self) -> Bytes {
        match self.scalar {
            true => Bytes::new(),
            false => Bytes::from(array_header(self.dap, self.count)),
        }
    }

    fn elements(&self, _start: u64, data: Bytes) -> Result<Bytes, String> {
        if self.big_endian {
            return Ok(data);
        }
        let wide = self.dap.element_bytes().unwrap_or(4) as usize;
        let mut out = self
            .buffers
            .take_empty((data.len() / self.data_type.size().max(1)) * wide + 4);
        match self.scalar {
            true => append_scalar(self.data_type, &data, &mut out),
            false => append_elements(self.data_type, &data, &mut out),
        }?;
        Ok(BufferPool::into_bytes(&self.buffers, out))
    }

    fn tail(&self) -> Bytes {
        match self.scalar {
            true => Bytes::new(),
            false => Bytes::from_static(array_trailer(self.dap, self.count)),
        }
    }

    fn length(&self) -> Option<u64> {
        match self.scalar {
            true => self.dap.scalar_bytes(),
            false => self.dap.array_bytes(self.count),
        }
    }

    /// Elements that must be converted (widened, swapped, made counts of
    /// a CF unit) go in pieces off the async workers; big-endian reads and
    /// strings (whose elements vary in size) as they are.
    fn piece_elements(&self) -> Option<u64> {
        let converts = !self.big_endian && !self.scalar && self.dap != DapType::String;
        converts.then_some(1 << 18)
    }
}

/// One string: its length, its bytes, padding to 4.
fn append_string(bytes: &[u8], out: &mut Vec<u8>) {
    out.extend_from_slice(&(bytes.len() as u32).to_be_bytes());
    out.extend_from_slice(bytes);
    out.resize(out.len() + (4 - bytes.len() % 4) % 4, 0);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::TimeUnit;

    fn encoded(data_type: DataType, data: &[u8]) -> Vec<u8> {
        let mut out = Vec::new();
        append_elements(data_type, data, &mut out).unwrap();
        out
    }

    #[test]
    fn widens_small_integers_and_swaps_bytes() {
        assert_eq!(encoded(DataType::Int8, &[0xff]), [0xff, 0xff, 0xff, 0xff]);
        assert_eq!(encoded(DataType::Int16, &[0xfe, 0xff]), (-2i32).to_be_bytes());
        assert_eq!(encoded(DataType::UInt16, &[0xfe, 0xff]), 65534u32.to_be_bytes());
        assert_eq!(encoded(DataType::Float32, &1.5f32.to_le_bytes()), 1.5f32.to_be_bytes());
        assert_eq!(
            encoded(DataType::Int64, &(-3i64).to_le_bytes()),
            (-3.0f64).to_be_bytes()
        );
        assert_eq!(
            encoded(DataType::Float16, &half::f16::from_f32(0.5).to_le_bytes()),
            0.5f32.to_be_bytes()
        );
        assert_eq!(encoded(DataType::Bool, &[0, 7]), [0, 1]);
    }

    #[test]
    fn arrays_carry_lengths_and_padding() {
        assert_eq!(array_header(DapType::Int32, 3), [0, 0, 0, 3, 0, 0, 0, 3]);
        assert_eq!(array_header(DapType::String, 3), [0, 0, 0, 3]);
        assert_eq!(array_trailer(DapType::Byte, 5), [0, 0, 0]);
        assert_eq!(array_trailer(DapType::Byte, 8), [0u8; 0]);
        assert_eq!(DapType::Byte.array_bytes(5), Some(16));
        assert_eq!(DapType::Int16.array_bytes(3), Some(20));
        assert_eq!(DapType::String.array_bytes(3), None);
    }

    #[test]
    fn strings_are_padded_and_byte_scalars_are_ints() {
        let mut vlen = Vec::new();
        for s in ["ab", "", "héé"] {
            vlen.extend((s.len() as u32).to_le_bytes());
            vlen.extend(s.as_bytes());
        }
        let out = encoded(DataType::String, &vlen);
        assert_eq!(&out[..8], [0, 0, 0, 2, b'a', b'b', 0, 0]);
        assert_eq!(&out[8..12], [0, 0, 0, 0]);
        assert_eq!(&out[12..16], [0, 0, 0, 5]);
        assert_eq!(out.len(), 24);
        let mut scalar = Vec::new();
        append_scalar(DataType::UInt8, &[9], &mut scalar).unwrap();
        assert_eq!(scalar, [0, 0, 0, 9]);
    }

    #[test]
    fn datetimes_are_cf_counts() {
        let unit = TimeUnit::parse("s").unwrap();
        let data = [5i64, crate::engine::NAT].map(i64::to_le_bytes).concat();
        let out = encoded(DataType::DateTime64(unit), &data);
        assert_eq!(&out[..8], 5.0f64.to_be_bytes());
        assert!(f64::from_be_bytes(out[8..].try_into().unwrap()).is_nan());
        assert!(DapType::of(DataType::Complex64).is_none());
        assert!(DapType::of(DataType::TimeDelta64(TimeUnit::parse("M").unwrap())).is_none());
    }
}
