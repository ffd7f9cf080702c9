//! Array -> array codecs.

pub mod transpose;

use bytes::Bytes;
use serde_json::{Map, Value};

use super::ChunkRepr;
use crate::engine::error::Result;
use transpose::TransposeCodec;

/// An array -> array codec.
#[derive(Debug, Clone)]
pub(crate) enum ArrayToArrayCodec {
    /// `transpose`
    Transpose(TransposeCodec),
}

impl ArrayToArrayCodec {
    /// The codec named `name`, or `None` if it is not an array -> array codec.
    pub(crate) fn from_json(name: &str, config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Option<Self>> {
        Ok(match name {
            "transpose" => Some(Self::Transpose(TransposeCodec::from_json(config, repr.shape.len())?)),
            _ => None,
        })
    }

    /// The representation this codec produces from `repr`.
    pub(crate) fn encoded_repr(&self, repr: &ChunkRepr) -> ChunkRepr {
        match self {
            Self::Transpose(t) => t.encoded_repr(repr),
        }
    }

    /// Decode an encoded array into `decoded` (the representation before this codec).
    pub(crate) fn decode(&self, encoded: Bytes, decoded: &ChunkRepr) -> Result<Bytes> {
        match self {
            Self::Transpose(t) => Ok(t.decode(&encoded, decoded)),
        }
    }
}
