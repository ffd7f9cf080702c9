//! The numcodecs side of Zarr v2 chunks: the array's `filters` and its
//! dtype's byte order, as one array -> bytes step of the codec chain.
//!
//! Spec: <https://zarr-specs.readthedocs.io/en/latest/v2/v2.0.html#filters>.
//! A v2 chunk is encoded as `compressor.encode(filters[n-1].encode(...
//! filters[0].encode(array bytes in the dtype's byte order and the array's
//! order)))`. The chain built for a v2 array (`CodecChain::from_v2`) is
//! `transpose` (order `F`), then this step, then the compressor as a
//! bytes -> bytes codec: decoding runs the filters in reverse, then turns
//! the dtype's byte order into little-endian.

pub(crate) mod filters;
pub(crate) mod num;

use bytes::Bytes;
use serde_json::Value;

use self::filters::Filter;
use super::array_to_bytes::bytes::{BytesCodec, Endian};
use super::array_to_bytes::vlen::VlenCodec;
use super::ChunkRepr;
use crate::engine::error::{corrupt, Error, Result};
use crate::engine::json::numcodecs_id;

/// A v2 array's filters and byte order.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct FilterStack {
    /// In the order written (applied in reverse when decoding).
    filters: Vec<Filter>,
    /// The dtype's byte order.
    bytes: BytesCodec,
    /// For object arrays, the first filter: `vlen-utf8` or `vlen-bytes`,
    /// which turns elements into bytes.
    vlen: Option<VlenCodec>,
}

impl FilterStack {
    /// The `filters` list (null or a list of numcodecs configurations) for
    /// elements of `repr` stored in `endian` byte order.
    pub(crate) fn from_json(filters: Option<&Value>, endian: Endian, repr: &ChunkRepr) -> Result<Self> {
        let mut list = match filters {
            None | Some(Value::Null) => &[][..],
            Some(Value::Array(list)) => &list[..],
            Some(other) => return Err(corrupt(format!("filters {other} is neither null nor a list"))),
        };
        let mut vlen = None;
        if repr.data_type.is_variable() {
            let first = list
                .first()
                .ok_or_else(|| Error::Unsupported("dtype \"|O\" without an object codec filter".into()))?;
            vlen = Some(VlenCodec::new(numcodecs_id(first, "filter")?.0, repr)?);
            list = &list[1..];
        }
        Ok(Self {
            filters: list.iter().map(Filter::from_json).collect::<Result<_>>()?,
            bytes: BytesCodec::new(endian, repr),
            vlen,
        })
    }

    /// Whether the filters leave the size of the data as it is (so the
    /// compressor's output size is known).
    pub(crate) fn keeps_size(&self) -> bool {
        self.vlen.is_none()
            && self.filters.iter().all(|f| {
            matches!(f, Filter::Identity | Filter::Shuffle { .. })
                || matches!(f, Filter::Delta { dtype, astype } if dtype.data_type.size() == astype.data_type.size())
                || matches!(f, Filter::FixedScaleOffset { dtype, astype, .. } if dtype.data_type.size() == astype.data_type.size())
                || matches!(f, Filter::Cast { from, to, .. } if from.data_type.size() == to.data_type.size())
        })
    }

    /// Decode into C-order (of the encoded layout) little-endian elements of `repr`.
    pub(crate) fn decode(&self, encoded: Bytes, repr: &ChunkRepr) -> Result<Bytes> {
        let mut data = encoded;
        for filter in self.filters.iter().rev() {
            data = Bytes::from(filter.decode(&data)?);
        }
        match &self.vlen {
            Some(vlen) => vlen.decode(data, repr),
            None => self.bytes.decode(data, repr),
        }
    }
}
