//! Array -> array codecs.

pub(crate) mod cast_value;
pub(crate) mod numcodecs;
mod scalar;
pub(crate) mod scale_offset;
pub mod transpose;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::ChunkRepr;
use crate::engine::error::Result;
use crate::engine::format::codec::cannot_write;
use crate::engine::format::data_type::DataType;
use crate::engine::format::vlen;
use cast_value::CastValueCodec;
use numcodecs::NumcodecsFilter;
use scale_offset::ScaleOffsetCodec;
use transpose::TransposeCodec;

/// An array -> array codec.
#[derive(Debug, Clone)]
pub(crate) enum ArrayToArrayCodec {
    /// `transpose`
    Transpose(TransposeCodec),
    /// A numcodecs element filter (`numcodecs.delta`, ...), and
    /// zarr-extensions' `bitround` (decoded as it is, like numcodecs')
    Numcodecs(NumcodecsFilter),
    /// `scale_offset`
    ScaleOffset(ScaleOffsetCodec),
    /// `cast_value`
    CastValue(CastValueCodec),
}

impl ArrayToArrayCodec {
    /// The codec named `name`, or `None` if it is not an array -> array codec.
    pub(crate) fn from_json(name: &str, config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Option<Self>> {
        Ok(match name {
            "transpose" => Some(Self::Transpose(TransposeCodec::from_json(config, repr.shape.len())?)),
            "bitround" => Some(Self::numcodecs("bitround", config, repr)?),
            "scale_offset" => Some(Self::ScaleOffset(ScaleOffsetCodec::from_json(config, repr)?)),
            "cast_value" => Some(Self::CastValue(CastValueCodec::from_json(config, repr)?)),
            _ => None,
        })
    }

    /// The numcodecs element filter `id` (a v3 `numcodecs.<id>` codec).
    pub(crate) fn numcodecs(id: &str, config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Self> {
        NumcodecsFilter::new(id, config, repr).map(Self::Numcodecs)
    }

    /// The representation this codec produces from `repr`.
    pub(crate) fn encoded_repr(&self, repr: &ChunkRepr) -> ChunkRepr {
        match self {
            Self::Transpose(t) => t.encoded_repr(repr),
            Self::Numcodecs(f) => f.encoded_repr(repr),
            Self::ScaleOffset(s) => ChunkRepr::new(repr.shape.clone(), repr.data_type, s.encoded_fill(repr)),
            Self::CastValue(c) => c.encoded_repr(repr),
        }
    }

    /// 501 unless [`ArrayToArrayCodec::encode`] can encode arrays of `decoded`.
    pub(crate) fn check_writable(&self, decoded: &ChunkRepr) -> Result<()> {
        match self {
            Self::Transpose(_) if !decoded.data_type.is_variable() => Ok(()),
            Self::Transpose(_) => Err(cannot_write(&format!("transpose of {}", decoded.data_type.name()))),
            Self::Numcodecs(f) => f.check_writable(decoded),
            Self::ScaleOffset(_) | Self::CastValue(_) => Ok(()),
        }
    }

    /// Whether encoding can refuse a value (a range check).
    pub(crate) fn checks_values(&self) -> bool {
        matches!(self, Self::ScaleOffset(_) | Self::CastValue(_))
    }

    /// Whether this is `transpose` (which moves elements, never changes them).
    pub(crate) fn is_transpose(&self) -> bool {
        matches!(self, Self::Transpose(_))
    }

    /// Encode an array of `decoded` (the representation before this codec).
    pub(crate) fn encode(&self, array: Bytes, decoded: &ChunkRepr) -> Result<Bytes> {
        match self {
            Self::Transpose(t) if !decoded.data_type.is_variable() => Ok(t.encode(&array, decoded)),
            Self::Transpose(_) => Err(cannot_write(&format!("transpose of {}", decoded.data_type.name()))),
            Self::Numcodecs(f) => f.encode(&array, decoded),
            Self::ScaleOffset(s) => s.encode(&array, decoded).map(Bytes::from),
            Self::CastValue(c) => c.encode(&array, decoded).map(Bytes::from),
        }
    }

    /// Decode an encoded array into `decoded` (the representation before this codec).
    pub(crate) fn decode(&self, encoded: Bytes, decoded: &ChunkRepr) -> Result<Bytes> {
        match self {
            Self::Transpose(t) if decoded.data_type.is_variable() => {
                // Transpose the elements' indices, then reorder the elements.
                let count = decoded.num_elements();
                let indices: Vec<u8> = (0..count).flat_map(u64::to_le_bytes).collect();
                let as_indices = ChunkRepr::new(decoded.shape.clone(), DataType::UInt64, vec![0; 8]);
                let order = t.decode(&indices, &as_indices);
                let order = order
                    .chunks_exact(8)
                    .map(|i| u64::from_le_bytes(i.try_into().expect("8 bytes")) as usize);
                vlen::permute(&encoded, order, count as usize)
            }
            Self::Transpose(t) => Ok(t.decode(&encoded, decoded)),
            Self::Numcodecs(f) => f.decode(&encoded, decoded),
            Self::ScaleOffset(s) => s.decode(&encoded, decoded).map(Bytes::from),
            Self::CastValue(c) => c.decode(&encoded, decoded).map(Bytes::from),
        }
    }
}
