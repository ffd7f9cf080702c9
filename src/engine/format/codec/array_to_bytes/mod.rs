//! Array -> bytes codecs.

pub mod bytes;
pub(crate) mod elements;
pub(crate) mod packbits;
pub mod sharding;
pub(crate) mod vlen;
pub(crate) mod zfp;

use ::bytes::Bytes;
use serde_json::{Map, Value};

use self::bytes::BytesCodec;
use self::elements::ElementsCodec;
use self::packbits::PackBitsCodec;
use self::sharding::ShardingCodec;
use self::vlen::VlenCodec;
use self::zfp::ZfpCodec;
use super::ChunkRepr;
use crate::engine::error::Result;

/// An array -> bytes codec.
#[derive(Debug, Clone)]
pub(crate) enum ArrayToBytesCodec {
    /// `bytes`
    Bytes(BytesCodec),
    /// `sharding_indexed`
    Sharding(Box<ShardingCodec>),
    /// `numcodecs.pcodec`, `numcodecs.zfpy`
    Elements(ElementsCodec),
    /// zarrs' `zfp`
    Zfp(ZfpCodec),
    /// `packbits` (zarr-extensions)
    PackBits(PackBitsCodec),
    /// `vlen-utf8` and `vlen-bytes`
    Vlen(VlenCodec),
}

impl ArrayToBytesCodec {
    /// The codec named `name`, or `None` if it is not an array -> bytes codec.
    pub(crate) fn from_json(name: &str, config: Option<&Map<String, Value>>, repr: &ChunkRepr) -> Result<Option<Self>> {
        Ok(match name {
            "bytes" | "endian" => Some(Self::Bytes(BytesCodec::from_json(config, repr)?)),
            "sharding_indexed" => Some(Self::Sharding(Box::new(ShardingCodec::from_json(config, repr)?))),
            "vlen-utf8" | "vlen-bytes" => Some(Self::Vlen(VlenCodec::new(name, repr)?)),
            "packbits" => Some(Self::PackBits(PackBitsCodec::from_json(config, repr)?)),
            "pcodec" => Some(Self::Elements(ElementsCodec::from_numcodecs("pcodec", &Map::new())?)),
            "zfp" | "zarrs.zfp" | "https://codec.zarrs.dev/array_to_bytes/zfp" => {
                Some(Self::Zfp(ZfpCodec::from_json(config, repr)?))
            }
            _ => None,
        })
    }

    /// The encoded size, when it is fixed.
    pub(crate) fn encoded_size(&self, repr: &ChunkRepr) -> Option<usize> {
        match self {
            Self::Bytes(_) => Some(repr.size_bytes()),
            Self::PackBits(p) => Some(p.encoded_size(repr)),
            Self::Sharding(_) | Self::Vlen(_) | Self::Elements(_) | Self::Zfp(_) => None,
        }
    }

    /// The zfp mode a zfp or zfpy codec encodes with.
    pub(crate) fn zfp_config(&self) -> Option<&self::zfp::Config> {
        match self {
            Self::Zfp(z) => Some(z.config()),
            Self::Elements(e) => e.zfp_config(),
            _ => None,
        }
    }

    /// 501 unless [`ArrayToBytesCodec::encode`] can encode chunks (a
    /// sharded array is written by inner chunk, strings included).
    pub(crate) fn check_writable(&self) -> Result<()> {
        match self {
            Self::Bytes(_) | Self::PackBits(_) | Self::Vlen(_) | Self::Zfp(_) => Ok(()),
            Self::Elements(e) => e.check_writable(),
            Self::Sharding(s) => s.inner_codecs().check_writable(),
        }
    }

    /// Encode C-order little-endian elements of `repr`.
    pub(crate) fn encode(&self, array: Bytes, repr: &ChunkRepr) -> Result<Bytes> {
        match self {
            Self::Bytes(b) => Ok(b.encode(array, repr)),
            Self::Sharding(s) => s.encode(&array, repr).map(Bytes::from),
            Self::PackBits(p) => Ok(Bytes::from(p.encode(&array, repr))),
            Self::Elements(e) => e.encode(&array, repr.data_type, &repr.shape).map(Bytes::from),
            Self::Vlen(v) => v.encode(&array, repr),
            Self::Zfp(z) => z.encode(&array, repr).map(Bytes::from),
        }
    }

    /// Decode into C-order little-endian elements of `repr`.
    pub(crate) fn decode(&self, encoded: Bytes, repr: &ChunkRepr) -> Result<Bytes> {
        match self {
            Self::Bytes(b) => b.decode(encoded, repr),
            Self::PackBits(p) => p.decode(encoded, repr),
            Self::Sharding(s) => s.decode(encoded, repr),
            Self::Elements(e) => e
                .decode(&encoded, repr.data_type, Some(repr.num_elements() as usize))
                .map(::bytes::Bytes::from),
            Self::Vlen(v) => v.decode(encoded, repr),
            Self::Zfp(z) => z.decode(&encoded, repr).map(::bytes::Bytes::from),
        }
    }
}
