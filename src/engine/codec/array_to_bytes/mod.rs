//! Array -> bytes codecs.

pub mod bytes;
pub mod sharding;

use ::bytes::Bytes;
use serde_json::{Map, Value};

use self::bytes::BytesCodec;
use self::sharding::ShardingCodec;
use super::numcodecs::FilterStack;
use super::ChunkRepr;
use crate::engine::error::Result;

/// An array -> bytes codec.
#[derive(Debug, Clone)]
pub(crate) enum ArrayToBytesCodec {
    /// `bytes`
    Bytes(BytesCodec),
    /// `sharding_indexed`
    Sharding(Box<ShardingCodec>),
    /// A Zarr v2 array's numcodecs filters and byte order.
    Numcodecs(FilterStack),
}

impl ArrayToBytesCodec {
    /// The codec named `name`, or `None` if it is not an array -> bytes codec.
    pub(crate) fn from_json(name: &str, config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Option<Self>> {
        Ok(match name {
            "bytes" | "endian" => Some(Self::Bytes(BytesCodec::from_json(config, repr)?)),
            "sharding_indexed" => Some(Self::Sharding(Box::new(ShardingCodec::from_json(config, repr)?))),
            _ => None,
        })
    }

    /// The encoded size, when it is fixed.
    pub(crate) fn encoded_size(&self, repr: &ChunkRepr) -> Option<usize> {
        match self {
            Self::Bytes(_) => Some(repr.size_bytes()),
            Self::Numcodecs(f) => f.keeps_size().then(|| repr.size_bytes()),
            Self::Sharding(_) => None,
        }
    }

    /// Decode into C-order little-endian elements of `repr`.
    pub(crate) fn decode(&self, encoded: Bytes, repr: &ChunkRepr) -> Result<Bytes> {
        match self {
            Self::Bytes(b) => b.decode(encoded, repr),
            Self::Sharding(s) => s.decode(encoded, repr),
            Self::Numcodecs(f) => f.decode(encoded, repr),
        }
    }
}
